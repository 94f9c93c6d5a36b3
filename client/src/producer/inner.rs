//! The producer's state: [`Producer`] (a cheap handle) over the [`ProducerInner`] its clones share,
//! its lifecycle states, and what the heartbeat task keeps. Every behaviour lives in the sibling
//! files; this one only says what a producer holds.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU8;

use raftmq_common::message::msg_id::UniqIdGenerator;
use raftmq_common::remoting::RemotingClient;
use tokio::time::Instant;

use crate::fault_strategy::MqFaultStrategy;
use crate::route::TopicRouteManager;
use crate::trace::TraceDispatcher;

use std::collections::BTreeSet;
use std::collections::HashSet;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::builder::ProducerBuilder;

pub(super) const STATE_CREATED: u8 = 0;
pub(super) const STATE_RUNNING: u8 = 1;
pub(super) const STATE_SHUTDOWN: u8 = 2;

/// The heartbeat task and what wakes it early.
#[derive(Default)]
pub(super) struct HeartbeatState {
    /// Topics whose route has already triggered a heartbeat.
    pub(super) topics: Mutex<HashSet<String>>,
    /// Woken when a topic's route is first used, so its brokers learn the group before any check.
    pub(super) wake: Arc<Notify>,
    /// Brokers a request has heartbeated before sending: they can push replies to this client.
    pub(super) request_ready: Mutex<BTreeSet<String>>,
    pub(super) task: Mutex<Option<JoinHandle<()>>>,
}

pub(super) struct ProducerInner {
    pub(super) config: ProducerBuilder,
    pub(super) client_id: String,
    pub(super) remoting: RemotingClient,
    pub(super) routes: TopicRouteManager,
    pub(super) fault: Mutex<MqFaultStrategy>,
    pub(super) uniq: Mutex<UniqIdGenerator>,
    pub(super) state: AtomicU8,
    /// Zero of the fault strategy's monotonic clock.
    pub(super) epoch: Instant,
    pub(super) heartbeat: HeartbeatState,
    /// The trace dispatcher, with `enable_msg_trace`.
    pub(super) trace: Option<Arc<TraceDispatcher>>,
}

/// A RocketMQ producer; clones share connections, routes and fault state.
#[derive(Clone)]
pub struct Producer {
    pub(super) inner: Arc<ProducerInner>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("producer_group", &self.inner.config.producer_group)
            .field("client_id", &self.inner.client_id)
            .finish()
    }
}
