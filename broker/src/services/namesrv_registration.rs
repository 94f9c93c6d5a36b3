//! Registration with the NameServers (RocketMQ's `BrokerController.registerBrokerAll` +
//! `DLedgerRoleChangeHandler`): every `registerNameServerPeriod` (30 s), at once when this node's Raft
//! role or term changes, when a leader passes the readiness gate, when topics change, and when
//! `brokerPermission` is updated at runtime; every NameServer is told independently (they never
//! talk to each other). The task wakes for leadership, applied-term and membership changes, never
//! for each applied entry (thousands a second, each a cross-thread wake-up on every replica).
//!
//! The group's leader registers as brokerId 0, every other replica as `raftNodeId + 1`; the Raft
//! extension fields (`raftTerm`, `raftRole`, `raftNodeId`) let a raftmq NameServer pick the writable
//! address by term. A leader that has not passed the readiness gate does not register yet: producers
//! would only be refused. At shutdown the node unregisters from every NameServer.
//!
//! With a cluster secret every call is cluster-signed ([`signed`]): a NameServer that has the
//! secret refuses REGISTER_BROKER, UNREGISTER_BROKER and QUERY_DATA_VERSION without it.
//!
//! Only members register: a node joining a group waits until the leader adds it to the membership,
//! and a node the group removed ([`Membership::Removed`]) unregisters once and never registers again
//! (the leader also unregisters it, [`unregister_member`], since a removed node may never learn it was).

use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits::REGISTER_BROKER_BODY_COMPRESS_ABOVE_BYTES;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::register::RegisterBodyError;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::register::body_crc32;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::cluster_signature::ClusterSigner;
use raftmq_common::protocol::cluster_signature::wall_clock_ms;
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::UnregisterBrokerRequestHeader;
use raftmq_common::remoting::RemotingClient;
use raftmq_raft::Role;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::info;
use tracing::warn;

use crate::config::broker_config::BrokerConfig;
use crate::config::live_config::LiveConfig;
use crate::services::replica::Membership;
use crate::services::replica::Replica;
use crate::state::store::MessageStore;

/// The brokerId a replica that is not the ready leader registers as: its Raft node id + 1.
pub fn follower_broker_id(node_id: u64) -> i64 {
    i64::try_from(node_id).unwrap_or(i64::MAX - 1).saturating_add(1)
}

/// What this node registers as now; `None` while it should not register (stopped, or a leader
/// that is not ready yet).
pub fn registration(replica: &Replica) -> Option<(i64, RaftRegistration)> {
    if replica.membership() != Membership::Member {
        return None;
    }
    let l = replica.leadership();
    let node_id = replica.node_id();
    let follower_id = follower_broker_id(node_id);
    let (broker_id, role) = match l.role {
        Role::Leader if replica.ready_term() == Some(l.term) => (0, RaftRole::Leader),
        Role::Leader | Role::Stopped => return None,
        Role::Follower => (follower_id, RaftRole::Follower),
        Role::Candidate => (follower_id, RaftRole::Candidate),
        Role::Learner => (follower_id, RaftRole::Learner),
    };
    Some((broker_id, RaftRegistration { term: l.term, role, node_id }))
}

/// What NameServer registration uses: the broker's identity and NameServer addresses, the Raft
/// role it registers, the topics it advertises, the live permission, and the wake-up for changes.
#[derive(Debug)]
pub struct RegistrationHandles {
    /// The config the broker booted with.
    pub config: BrokerConfig,
    /// The Raft group.
    pub replica: Arc<Replica>,
    /// The applied state (topics).
    pub store: Arc<MessageStore>,
    /// The config now (`brokerPermission`).
    pub live: Arc<LiveConfig>,
    /// Wakes the task (topics or permission changed).
    pub register_now: Arc<Notify>,
    /// Signs NameServer calls with the cluster secret (none configured: unsigned).
    pub cluster_signer: Option<Arc<ClusterSigner>>,
}

/// `request` signed by `signer` when there is one (the cluster secret), else as it is.
pub fn signed(mut request: RemotingCommand, signer: Option<&ClusterSigner>) -> RemotingCommand {
    if let Some(signer) = signer {
        signer.sign(&mut request, wall_clock_ms());
    }
    request
}

/// Starts the registration task.
pub fn spawn(ctx: Arc<RegistrationHandles>, client: RemotingClient, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(run(ctx, client, cancel))
}

async fn run(ctx: Arc<RegistrationHandles>, client: RemotingClient, cancel: CancellationToken) {
    let mut leadership = ctx.replica.leadership_watch();
    // What `registration` reads besides leadership: the applied term (a new leader registers once
    // its first entry applies) and the membership. Not every applied entry: that woke this task
    // thousands of times a second on every replica.
    let mut applied_term = ctx.store.applied_term();
    let mut membership = ctx.replica.node().membership_watch();
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
            changed = applied_term.changed() => {
                if changed.is_err() {
                    break;
                }
                false
            }
            changed = membership.changed() => {
                if changed.is_err() {
                    break;
                }
                false
            }
        };
        let now = registration(&ctx.replica);
        if now.is_none()
            && let Some((broker_id, _)) = last
            && ctx.replica.membership() == Membership::Removed
        {
            info!(broker_id, "removed from the raft group; unregistering from the NameServers");
            let signer = ctx.cluster_signer.as_deref();
            unregister_member(&ctx.config, &client, signer, &ctx.config.broker_addr(), broker_id).await;
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

/// The REGISTER_BROKER body and whether it is compressed: plain JSON, as a Java broker sends by
/// default, unless that is larger than `compress_above_bytes`; then RocketMQ's compressed form, since
/// a body too large for one frame would drop the broker out of every route.
fn encode_register_body(
    body: &RegisterBrokerBody,
    compress_above_bytes: usize,
) -> Result<(Vec<u8>, bool), RegisterBodyError> {
    let plain = body.encode_body(false)?;
    if plain.len() > compress_above_bytes { Ok((body.encode_body(true)?, true)) } else { Ok((plain, false)) }
}

/// REGISTER_BROKER to every NameServer, concurrently.
pub async fn register_all(ctx: &RegistrationHandles, client: &RemotingClient, broker_id: i64, raft: &RaftRegistration) {
    let topics = ctx.store.metadata().topics.to_wrapper();
    let live = ctx.live.snapshot();
    let body = RegisterBrokerBody {
        filter_server_list: Vec::new(),
        topic_config_serialize_wrapper: advertised_topics(topics, live.config.broker_permission, live.perm_version),
    };
    let (body, compressed) = match encode_register_body(&body, REGISTER_BROKER_BODY_COMPRESS_ABOVE_BYTES) {
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
        compressed,
        body_crc32: body_crc32(&body),
        raft: Some(*raft),
    };
    let request = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
    let request = signed(request, ctx.cluster_signer.as_deref());
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

/// The topic table as registered: Java's `registerBrokerAll` gives every topic the broker's
/// `brokerPermission` when that is not read + write, so producers skip a replica drained with
/// `updateBrokerConfig -k brokerPermission -v 4`. The NameServer re-reads a table only when its
/// `DataVersion` changes, so the version registered moves with `perm_version` (the updates that
/// named `brokerPermission`) as well: the counters add up (both only grow within a boot) and the
/// newer timestamp wins (a restart's boot time is newer than what was registered before it,
/// unless the topic table's own timestamp, a leader's clock, is ahead; then the counters differ
/// whenever the permission changed before the restart).
pub fn advertised_topics(
    mut topics: TopicConfigSerializeWrapper,
    broker_permission: i32,
    perm_version: DataVersion,
) -> TopicConfigSerializeWrapper {
    if !perm::is_writeable(broker_permission) || !perm::is_readable(broker_permission) {
        for config in topics.topic_config_table.values_mut() {
            config.perm = broker_permission;
        }
    }
    topics.data_version = DataVersion {
        counter: topics.data_version.counter.saturating_add(perm_version.counter),
        timestamp: topics.data_version.timestamp.max(perm_version.timestamp),
    };
    topics
}

/// UNREGISTER_BROKER from every NameServer (shutdown); bounded by the registration timeout.
pub async fn unregister_all(
    replica: &Replica,
    config: &BrokerConfig,
    client: &RemotingClient,
    signer: Option<&ClusterSigner>,
) {
    let broker_id = registration(replica)
        .map_or_else(|| i64::try_from(replica.node_id()).unwrap_or(i64::MAX - 1).saturating_add(1), |(id, _)| id);
    unregister_member(config, client, signer, &config.broker_addr(), broker_id).await;
}

/// UNREGISTER_BROKER of one member of this group (`broker_addr`, this node or one the leader
/// removed) from every NameServer; bounded by the registration timeout.
pub async fn unregister_member(
    config: &BrokerConfig,
    client: &RemotingClient,
    signer: Option<&ClusterSigner>,
    broker_addr: &str,
    broker_id: i64,
) {
    let header = UnregisterBrokerRequestHeader {
        broker_name: config.broker_name.clone(),
        broker_addr: broker_addr.to_owned(),
        cluster_name: config.broker_cluster_name.clone(),
        broker_id,
    };
    let request = signed(RemotingCommand::request_with_header(RequestCode::UnregisterBroker, &header), signer);
    let timeout: Duration = config.register_broker_timeout_mills;
    let calls = config.namesrv_addrs().map(|addr| {
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

#[cfg(test)]
mod tests {
    use raftmq_common::protocol::body::topic::TopicConfig;

    use super::*;

    fn table() -> TopicConfigSerializeWrapper {
        let mut t = TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 5, timestamp: 100 },
            ..TopicConfigSerializeWrapper::default()
        };
        for (name, p) in [("A", perm::READ_WRITE), ("TBW102", perm::INHERIT | perm::READ_WRITE)] {
            t.topic_config_table.insert(name.to_owned(), TopicConfig { perm: p, ..TopicConfig::new(name) });
        }
        t
    }

    #[test]
    fn a_read_only_broker_registers_its_topics_read_only_under_a_new_version() {
        let boot = DataVersion { counter: 0, timestamp: 50 };
        let rw = advertised_topics(table(), perm::READ_WRITE, boot);
        assert_eq!(rw.topic_config_table, table().topic_config_table);
        assert_eq!(rw.data_version, DataVersion { counter: 5, timestamp: 100 });

        let drained = advertised_topics(table(), perm::READ, DataVersion { counter: 1, timestamp: 200 });
        assert!(drained.topic_config_table.values().all(|c| c.perm == perm::READ));
        assert_ne!(drained.data_version, rw.data_version);
        // Back to read + write: the topics' own perms, under yet another version.
        let back = advertised_topics(table(), perm::READ_WRITE, DataVersion { counter: 2, timestamp: 300 });
        assert_eq!(back.topic_config_table, table().topic_config_table);
        assert_eq!(back.data_version, DataVersion { counter: 7, timestamp: 300 });
    }

    #[test]
    fn a_topic_table_too_large_for_plain_json_registers_compressed() {
        let body = RegisterBrokerBody { filter_server_list: Vec::new(), topic_config_serialize_wrapper: table() };
        let (plain, compressed) = encode_register_body(&body, usize::MAX).unwrap();
        assert!(!compressed);
        let decoded = RegisterBrokerBody::decode_body(&plain, false).unwrap();
        assert_eq!(decoded.topic_config_serialize_wrapper.topic_config_table, table().topic_config_table);

        let (small, compressed) = encode_register_body(&body, plain.len() - 1).unwrap();
        assert!(compressed);
        assert!(small.len() < plain.len());
        let decoded = RegisterBrokerBody::decode_body(&small, true).unwrap();
        let names: Vec<&String> = decoded.topic_config_serialize_wrapper.topic_config_table.keys().collect();
        assert_eq!(names, ["A", "TBW102"]);
        assert_eq!(decoded.topic_config_serialize_wrapper.data_version, table().data_version);
    }
}
