//! `SendHandles`: what the processors that store messages use (send, reply, consumer send-back,
//! end transaction): the store's read side, the replica's leader view, the record writer (group
//! commit with the put statistics), the boot and live config, and the few tables these paths
//! touch. Built once by the router; cheap to share.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::broker_config::BrokerConfig;
use crate::config::live_config::LiveConfig;
use crate::observability::metrics::BrokerMetrics;
use crate::services::client_manager::ClientManager;
use crate::services::group_commit::SendRequest;
use crate::services::group_commit::StoredRecord;
use crate::services::record_writer::RecordWriter;
use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::state::store::MessageStore;
use crate::state::transaction::TransactionState;

/// The handles of the message-storing processors.
#[derive(Debug)]
pub struct SendHandles {
    /// The config the broker booted with (names, addresses).
    pub config: Arc<BrokerConfig>,
    /// The runtime keys, as UPDATE_BROKER_CONFIG changed them.
    pub live: Arc<LiveConfig>,
    /// Leader view and proposals (topic and group creation).
    pub replica: Arc<Replica>,
    /// Topics, groups and the committed CommitLog.
    pub store: Arc<MessageStore>,
    /// Group commit of records, counted.
    pub writer: RecordWriter,
    /// Wakes NameServer registration (a topic was created).
    pub register_now: Arc<Notify>,
    /// STOREHOST (`brokerIP1:listenPort`).
    pub store_host: SocketAddr,
    /// Send latency and messages in.
    pub metrics: Arc<BrokerMetrics>,
    /// The plain ACL is on: a send-back must name its original topic.
    pub acl_enabled: bool,
    /// Producer connections a reply is pushed to.
    pub clients: Arc<ClientManager>,
    /// The leader's transaction bookkeeping (END_TRANSACTION claims).
    pub transactions: Arc<TransactionState>,
}

impl SendHandles {
    /// Stores message records through group commit and counts them ([`RecordWriter::store_records`]).
    pub async fn store_records(&self, request: SendRequest) -> Result<Vec<StoredRecord>, WriteError> {
        self.writer.store_records(request).await
    }
}
