//! This replica's config over HTTP, the counterpart of GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG:
//!
//! - `GET /api/v1/config`: the config now (RocketMQ's key names, values as text, secrets masked),
//!   its version (updates since boot) and the keys that can change while the broker runs.
//! - `PATCH /api/v1/config {"brokerPermission": 4, ...}`: changes runtime keys of this replica, all
//!   or none ([`crate::config::live_config::LiveConfig::update`]): persisted, in effect at once. A key that
//!   cannot change at runtime, or a bad value, is 400 INVALID_ARGUMENT naming the key; `{}` changes
//!   nothing. Any replica takes it, leader or not: a config is per replica, as in RocketMQ.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use raftmq_common::protocol::body::topic::DataVersion;
use serde::Serialize;

use crate::config::broker_config::RUNTIME_UPDATABLE_KEYS;
use crate::config::live_config::Snapshot;
use crate::config::live_config::UpdateError;
use crate::http::Routes;
use crate::http::Shared;
use crate::http::error::ApiError;
use crate::http::error::ApiJson;
use crate::http::error::ApiResult;
use crate::http::error::code;

/// Routes of this module.
pub fn routes() -> Routes {
    Routes::new().route("/api/v1/config", get(current).patch(update))
}

/// The answer of both calls.
#[derive(Debug, Serialize)]
pub struct ConfigView {
    /// Updates since boot (`counter`) and when the last one was made (`timestamp`, ms).
    pub version: DataVersion,
    /// Every key with its value as text, as `mqadmin getBrokerConfig` shows it.
    pub config: BTreeMap<String, String>,
    /// The keys a PATCH may change.
    pub runtime_updatable_keys: &'static [&'static str],
}

fn view(now: &Snapshot) -> ApiResult<Json<ConfigView>> {
    let config = now.config.to_properties().map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::UNAVAILABLE,
            format!("the config cannot be written out: {e}"),
        )
    })?;
    Ok(Json(ConfigView { version: now.version, config, runtime_updatable_keys: RUNTIME_UPDATABLE_KEYS }))
}

async fn current(State(ctx): State<Shared>) -> ApiResult<Json<ConfigView>> {
    view(&ctx.live.snapshot())
}

async fn update(
    State(ctx): State<Shared>,
    ApiJson(body): ApiJson<BTreeMap<String, serde_json::Value>>,
) -> ApiResult<Json<ConfigView>> {
    let mut updates = BTreeMap::new();
    for (key, value) in body {
        let text = match value {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            other => {
                return Err(ApiError::invalid(format!("{key}: a value is a string, number or boolean, not {other}")));
            }
        };
        updates.insert(key, text);
    }
    // The answer is the config this update made, not a later one's.
    let after = ctx.update_config(&updates).map_err(|e| match e {
        UpdateError::Config(e) => ApiError::invalid(e.to_string()),
        e @ UpdateError::Persist { .. } => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code::UNAVAILABLE, e.to_string())
        }
    })?;
    view(&after)
}
