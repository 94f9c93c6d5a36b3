//! Registration with the NameServers (RocketMQ's `BrokerController.registerBrokerAll` +
//! `DLedgerRoleChangeHandler`): every `registerNameServerPeriod` (30 s), at once when this node's Raft
//! role or term changes, when a leader passes the readiness gate, and when topics change; every
//! NameServer is told independently (they never talk to each other).
//!
//! The group's leader registers as brokerId 0, every other replica as `raftNodeId + 1`; the Raft
//! extension fields (`raftTerm`, `raftRole`, `raftNodeId`) let a raftmq NameServer pick the writable
//! address by term. A leader that has not passed the readiness gate does not register yet: producers
//! would only be refused. At shutdown the node unregisters from every NameServer.
//!
//! Only members register: a node joining a group waits until the leader adds it to the membership,
//! and a node the group removed ([`Membership::Removed`]) unregisters once and never registers again
//! (the leader also unregisters it, [`unregister_member`], since a removed node may never learn it was).

use std::sync::Arc;
use std::time::Duration;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::body_crc32;
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::UnregisterBrokerRequestHeader;
use raftmq_common::remoting::RemotingClient;
use raftmq_raft::Role;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::info;
use tracing::warn;

use crate::processor::BrokerContext;
use crate::replica::Membership;

/// The brokerId a replica that is not the ready leader registers as: its Raft node id + 1.
pub fn follower_broker_id(node_id: u64) -> i64 {
    i64::try_from(node_id).unwrap_or(i64::MAX - 1).saturating_add(1)
}

/// What this node registers as now; `None` while it should not register (stopped, or a leader
/// that is not ready yet).
pub fn registration(ctx: &BrokerContext) -> Option<(i64, RaftRegistration)> {
    if ctx.replica.membership() != Membership::Member {
        return None;
    }
    let l = ctx.replica.leadership();
    let node_id = ctx.replica.node_id();
    let follower_id = follower_broker_id(node_id);
    let (broker_id, role) = match l.role {
        Role::Leader if ctx.replica.ready_term() == Some(l.term) => (0, RaftRole::Leader),
        Role::Leader | Role::Stopped => return None,
        Role::Follower => (follower_id, RaftRole::Follower),
        Role::Candidate => (follower_id, RaftRole::Candidate),
        Role::Learner => (follower_id, RaftRole::Learner),
    };
    Some((broker_id, RaftRegistration { term: l.term, role, node_id }))
}

/// Starts the registration task.
pub fn spawn(ctx: Arc<BrokerContext>, client: RemotingClient, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(run(ctx, client, cancel))
}

async fn run(ctx: Arc<BrokerContext>, client: RemotingClient, cancel: CancellationToken) {
    let mut leadership = ctx.replica.leadership_watch();
    let mut applied = ctx.store.applied();
    let mut interval = tokio::time::interval(ctx.config.register_name_server_period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<(i64, RaftRegistration)> = None;
    loop {
        let force = tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            _ = interval.tick() => true,
            _ = ctx.register_now.notified() => true,
            changed = leadership.changed() => {
                if changed.is_err() {
                    break;
                }
                false
            }
            changed = applied.changed() => {
                if changed.is_err() {
                    break;
                }
                false
            }
        };
        let now = registration(&ctx);
        if now.is_none()
            && let Some((broker_id, _)) = last
            && ctx.replica.membership() == Membership::Removed
        {
            info!(broker_id, "removed from the raft group; unregistering from the NameServers");
            unregister_member(&ctx, &client, &ctx.config.broker_addr(), broker_id).await;
            last = None;
            continue;
        }
        if now.is_some() && (force || now != last) {
            if let Some((broker_id, raft)) = &now {
                register_all(&ctx, &client, *broker_id, raft).await;
            }
            last = now;
        }
    }
}

/// REGISTER_BROKER to every NameServer, concurrently.
pub async fn register_all(ctx: &BrokerContext, client: &RemotingClient, broker_id: i64, raft: &RaftRegistration) {
    let body = RegisterBrokerBody {
        filter_server_list: Vec::new(),
        topic_config_serialize_wrapper: ctx.store.metadata().topics.to_wrapper(),
    };
    let body = match body.encode_body(false) {
        Ok(b) => b,
        Err(e) => {
            warn!(error = %e, "cannot encode the REGISTER_BROKER body");
            return;
        }
    };
    let header = RegisterBrokerRequestHeader {
        broker_name: ctx.config.broker_name.clone(),
        broker_addr: ctx.config.broker_addr(),
        cluster_name: ctx.config.broker_cluster_name.clone(),
        ha_server_addr: ctx.config.self_peer().map(|p| p.raft_addr.clone()).unwrap_or_default(),
        broker_id,
        heartbeat_timeout_millis: None,
        compressed: false,
        body_crc32: body_crc32(&body),
        raft: Some(*raft),
    };
    let request = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
    let timeout = ctx.config.register_broker_timeout_mills;
    let calls = ctx.config.namesrv_addrs().map(|addr| {
        let request = request.clone();
        async move { (addr, client.invoke(addr, request, timeout).await) }
    });
    for (addr, result) in futures::future::join_all(calls).await {
        match result {
            Ok(r) if r.response_code() == ResponseCode::Success => {
                debug!(namesrv = addr, broker_id, term = raft.term, role = ?raft.role, "registered");
            }
            Ok(r) => warn!(namesrv = addr, code = r.code, remark = ?r.remark, "REGISTER_BROKER refused"),
            Err(e) => warn!(namesrv = addr, error = %e, "REGISTER_BROKER failed"),
        }
    }
}

/// UNREGISTER_BROKER from every NameServer (shutdown); bounded by the registration timeout.
pub async fn unregister_all(ctx: &BrokerContext, client: &RemotingClient) {
    let broker_id = registration(ctx)
        .map_or_else(|| i64::try_from(ctx.replica.node_id()).unwrap_or(i64::MAX - 1).saturating_add(1), |(id, _)| id);
    unregister_member(ctx, client, &ctx.config.broker_addr(), broker_id).await;
}

/// UNREGISTER_BROKER of one member of this group (`broker_addr`, this node or one the leader
/// removed) from every NameServer; bounded by the registration timeout.
pub async fn unregister_member(ctx: &BrokerContext, client: &RemotingClient, broker_addr: &str, broker_id: i64) {
    let header = UnregisterBrokerRequestHeader {
        broker_name: ctx.config.broker_name.clone(),
        broker_addr: broker_addr.to_owned(),
        cluster_name: ctx.config.broker_cluster_name.clone(),
        broker_id,
    };
    let request = RemotingCommand::request_with_header(RequestCode::UnregisterBroker, &header);
    let timeout: Duration = ctx.config.register_broker_timeout_mills;
    let calls = ctx.config.namesrv_addrs().map(|addr| {
        let request = request.clone();
        async move { (addr, client.invoke(addr, request, timeout).await) }
    });
    for (addr, result) in futures::future::join_all(calls).await {
        match result {
            Ok(_) => info!(namesrv = addr, broker_addr, "unregistered"),
            Err(e) => warn!(namesrv = addr, error = %e, "UNREGISTER_BROKER failed"),
        }
    }
}
