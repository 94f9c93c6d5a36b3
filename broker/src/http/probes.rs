//! Probes and documents: `GET /livez` (200 while the process serves HTTP), `GET /readyz` (200 when
//! this replica should get traffic, else 503 — machines read only the status), `GET /metrics`
//! (Prometheus text) and `GET /api/openapi.json` (this API, described).
//!
//! Ready means all of: not draining (shutdown sets the flag first), a member of the group (a node
//! that was removed, or was never added, gets no traffic), storage healthy (not damaged,
//! poisoned or failed in apply; `storage_faults` then says which and why), a leader known, and caught up — a leader has passed the readiness
//! gate (applied an entry of its term), a follower has applied all but
//! [`ADMIN_READY_APPLY_LAG_MAX_COUNT`] of the entries it knows are committed.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::get;
use raftmq_common::limits::ADMIN_READY_APPLY_LAG_MAX_COUNT;
use raftmq_raft::NodeStatus;
use raftmq_raft::Role;
use serde::Serialize;

use crate::http::Routes;
use crate::http::Shared;
use crate::services::disk_guard::disk_full_reason;
use crate::services::replica::Membership;
use crate::services::replica::Replica;
use crate::state::store::MessageStore;

/// The OpenAPI 3 document of the admin API.
pub const OPENAPI_JSON: &str = include_str!("openapi.json");

/// Routes of this module.
pub fn routes() -> Routes {
    Routes::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/openapi.json", get(openapi))
}

/// The readiness checks, each true when passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Readiness {
    /// Not shutting down.
    pub not_draining: bool,
    /// A voter or learner of the group's membership (not removed, not waiting to be added).
    pub member: bool,
    /// The store is neither damaged, poisoned nor failed.
    pub storage_ok: bool,
    /// A leader is known (this replica or another).
    pub leader_known: bool,
    /// Applied state caught up (see the module doc).
    pub caught_up: bool,
}

/// A storage fault that keeps this replica unready: what it is and why. A poisoned store (an
/// fsync or write failed) has stopped Raft while the process keeps running; a full disk refuses
/// writes until space is freed and then passes by itself; these say so in `/readyz`,
/// `/api/v1/status` and `/metrics` rather than only in a log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StorageFault {
    /// `damaged` (the store cannot be trusted: no vote, no lead), `poisoned` (a log write or fsync
    /// failed: Raft stopped), `apply_failed` (a ConsumeQueue write failed: Raft stopped) or
    /// `disk_full` (too full to take writes; appends and applies wait, and resume once space is
    /// freed, without a restart).
    pub kind: &'static str,
    /// The reason the store gave.
    pub reason: String,
}

/// Every storage fault of this replica now (empty when the storage is healthy).
pub fn storage_faults(status: &NodeStatus, store: &MessageStore) -> Vec<StorageFault> {
    [
        ("damaged", status.damaged.clone()),
        ("poisoned", status.poisoned.clone()),
        ("apply_failed", store.failure()),
        ("disk_full", disk_full_reason(status, store)),
    ]
    .into_iter()
    .filter_map(|(kind, reason)| reason.map(|reason| StorageFault { kind, reason }))
    .collect()
}

impl Readiness {
    /// Every check passed.
    pub fn ready(&self) -> bool {
        self.not_draining && self.member && self.storage_ok && self.leader_known && self.caught_up
    }

    /// The checks of this replica now.
    pub fn of(replica: &Replica, store: &MessageStore, draining: &AtomicBool) -> Readiness {
        let status = replica.node().status();
        let role = status.leadership.role;
        let applied = status.applied.map_or(0, |a| a.index);
        let committed = status.committed.map_or(0, |c| c.index);
        let caught_up = match role {
            Role::Leader => replica.ready_term().is_some(),
            _ => applied.saturating_add(ADMIN_READY_APPLY_LAG_MAX_COUNT) >= committed,
        };
        Readiness {
            not_draining: !draining.load(Ordering::Acquire),
            member: replica.membership() == Membership::Member,
            storage_ok: status.damaged.is_none()
                && status.poisoned.is_none()
                && store.failure().is_none()
                && disk_full_reason(&status, store).is_none(),
            leader_known: status.leadership.leader_id.is_some() && role != Role::Stopped,
            caught_up,
        }
    }
}

async fn livez() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn readyz(State(ctx): State<Shared>) -> Response {
    let checks = Readiness::of(&ctx.replica, &ctx.store, &ctx.draining);
    let faults = storage_faults(&ctx.replica.node().status(), &ctx.store);
    let status = if checks.ready() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = serde_json::json!({ "ready": checks.ready(), "checks": checks, "storage_faults": faults });
    (status, Json(body)).into_response()
}

async fn metrics(State(ctx): State<Shared>) -> Response {
    let text = ctx.metrics.render(&ctx.store, &ctx.replica);
    ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

async fn openapi() -> Response {
    ([(CONTENT_TYPE, "application/json")], OPENAPI_JSON).into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use raftmq_raft::Leadership;

    use super::*;
    use crate::config::broker_config::BrokerConfig;
    use crate::state::index_file::IndexFileSizes;
    use crate::state::store::StoreSettings;
    use crate::state::topic_config::SystemTopicOptions;

    /// Hole 6 of issue 31: a store poisoned by ENOSPC stopped Raft while the process kept running,
    /// unready, and only a log line said why. `/readyz` and `/api/v1/status` list each fault.
    #[test]
    fn hole6_storage_faults_name_each_fault_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let settings = StoreSettings {
            store_root: dir.path().to_path_buf(),
            cq_units_per_file: 8,
            segment_size: 1 << 20,
            delay_levels_ms: vec![1000],
            system_topics: SystemTopicOptions::from(&BrokerConfig::default()),
            index_sizes: IndexFileSizes { slot_count: 16, entry_count: 8 },
        };
        let store = MessageStore::open(settings, 0).unwrap();
        let mut status = NodeStatus {
            last_log_index: Some(9),
            voters: BTreeSet::from([1]),
            ..NodeStatus::new(1, Leadership { term: 3, leader_id: None, role: Role::Stopped })
        };
        assert_eq!(storage_faults(&status, &store), Vec::new());
        status.poisoned = Some("append: No space left on device (os error 28)".into());
        let faults = storage_faults(&status, &store);
        assert_eq!(
            faults,
            vec![StorageFault { kind: "poisoned", reason: "append: No space left on device (os error 28)".into() }]
        );
        let json = serde_json::to_value(&faults).unwrap();
        assert_eq!(json[0]["kind"], "poisoned");
    }
}
