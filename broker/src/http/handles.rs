//! `HttpHandles`: what the admin HTTP handlers use (the store's read side, the replica's leader
//! view and proposals, membership changes, the boot and live config, connected clients, metrics,
//! the ACL and the draining flag), built once by `Broker::start` and shared by every handler.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::Notify;

use crate::acl::Acl;
use crate::config::broker_config::BrokerConfig;
use crate::config::live_config::LiveConfig;
use crate::observability::metrics::BrokerMetrics;
use crate::services::client_manager::ClientManager;
use crate::services::membership::GroupMembership;
use crate::services::replica::Replica;
use crate::state::store::MessageStore;

/// The handles of the admin HTTP server.
#[derive(Debug)]
pub struct HttpHandles {
    /// The config the broker booted with (`adminToken`, names, addresses).
    pub config: Arc<BrokerConfig>,
    /// The config now; `PATCH /api/v1/config` changes it.
    pub live: Arc<LiveConfig>,
    /// Leader view and proposals.
    pub replica: Arc<Replica>,
    /// Topics, groups, offsets, queues and the CommitLog.
    pub store: Arc<MessageStore>,
    /// Connected consumers (reset-offset notices).
    pub clients: Arc<ClientManager>,
    /// Adding and removing nodes, leadership transfer.
    pub membership: Arc<GroupMembership>,
    /// Wakes NameServer registration (topics or permission changed).
    pub register_now: Arc<Notify>,
    /// Set first by `Broker::shutdown`: `/readyz` answers 503 and changes are refused.
    pub draining: Arc<AtomicBool>,
    /// This replica's Prometheus metrics (`/metrics`).
    pub metrics: Arc<BrokerMetrics>,
    /// The plain ACL (`aclEnable`): every `/api/v1/` call then needs the token.
    pub acl: Option<Arc<Acl>>,
}
