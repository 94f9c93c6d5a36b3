//! `BrokerContext`: the handles of one running replica (config, the store, the Raft group, group
//! and offset commit, connected clients, ACL, statistics, metrics, transaction bookkeeping), built
//! by [`crate::broker`]. The router builds each processor family's handles from it once; services
//! and the admin HTTP server get their own handles too, so nothing below the broker takes it whole.
//! It imports only the layers below it (state, services' handles, observability, config).

use std::net::SocketAddr;
use std::sync::Arc;

use raftmq_common::remoting::RemotingClient;
use tokio::sync::Notify;

use crate::config::broker_config::BrokerConfig;
use crate::services::client_manager::ClientManager;
use crate::services::group_commit::GroupCommit;
use crate::services::membership::GroupMembership;
use crate::services::offset_commit::OffsetCommitter;
use crate::services::rebalance_lock::RebalanceLocks;
use crate::services::record_writer::RecordWriter;
use crate::services::replica::Replica;
use crate::state::pull::PullLimits;
use crate::state::store::MessageStore;

/// What every processor shares.
#[derive(Debug)]
pub struct BrokerContext {
    /// The validated config the broker booted with. The keys UPDATE_BROKER_CONFIG changes
    /// ([`crate::config::broker_config::RUNTIME_UPDATABLE_KEYS`]) are read from `live` instead.
    pub config: Arc<BrokerConfig>,
    /// The config now, as UPDATE_BROKER_CONFIG changed it.
    pub live: Arc<crate::config::live_config::LiveConfig>,
    /// The Raft group.
    pub replica: Arc<Replica>,
    /// The applied state.
    pub store: Arc<MessageStore>,
    /// Group commit of sends.
    pub group_commit: GroupCommit,
    /// Group commit with the put statistics: what every path that stores records uses.
    pub writer: RecordWriter,
    /// Replication of consumer offsets.
    pub offsets: OffsetCommitter,
    /// Adding and removing nodes, leadership transfer, the group's status.
    pub membership: Arc<GroupMembership>,
    /// Connected clients.
    pub clients: Arc<ClientManager>,
    /// Orderly consumers' queue locks, through Raft.
    pub locks: Arc<RebalanceLocks>,
    /// POP consumption (the leader side), through Raft.
    pub pop: Arc<crate::services::pop::PopService>,
    /// STOREHOST (`brokerIP1:listenPort`).
    pub store_host: SocketAddr,
    /// Client for requests a follower relays to the leader: unsigned, so a relayed request keeps
    /// its client's own `AccessKey` and `Signature` for the leader's ACL check.
    pub forwarder: RemotingClient,
    /// Client for this replica's own calls to the group's other replicas (leadership transfer,
    /// removal notices), signed with `innerAccessKey` when set.
    pub peer_client: RemotingClient,
    /// The plain ACL every request is checked against (`aclEnable`).
    pub acl: Option<Arc<crate::acl::Acl>>,
    /// Wakes the NameServer registration task (topics changed).
    pub register_now: Arc<Notify>,
    /// Transfer limits of one pull.
    pub pull_limits: PullLimits,
    /// Messages sent and pulled since boot (GET_BROKER_RUNTIME_INFO).
    pub broker_totals: Arc<crate::observability::stats::BrokerTotals>,
    /// Messages pulled per topic and group by the minute (GET_CONSUME_STATS `consumeTps`).
    pub group_get_stats: Arc<crate::observability::stats::GroupGetStats>,
    /// Java's `StatsItem`s by statistic and key (VIEW_BROKER_STATS_DATA).
    pub stats: Arc<crate::observability::stats::StatsTable>,
    /// SQL92 subscriptions compiled once for all pulls.
    pub sql_filters: Arc<crate::state::pull::SqlFilterCache>,
    /// This replica's Prometheus metrics.
    pub metrics: Arc<crate::observability::metrics::BrokerMetrics>,
    /// The leader's transaction bookkeeping (ended halves, check progress).
    pub transactions: Arc<crate::state::transaction::TransactionState>,
    /// Retention rounds left that delete expired CommitLog segments whatever the hour
    /// (DELETE_EXPIRED_COMMITLOG; `crate::services::retention`).
    pub manual_purge_rounds: Arc<std::sync::atomic::AtomicU32>,
    /// Set first by `Broker::shutdown`: `/readyz` answers 503 and admin changes are refused.
    pub draining: Arc<std::sync::atomic::AtomicBool>,
}
