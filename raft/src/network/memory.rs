//! [`MemRouter`]: an in-process network for tests and simulation. Nodes register their
//! [`RaftService`] by id; links can be cut (both ways or one way) or a node isolated; each
//! message waits a delay drawn from a seeded RNG, in the order the calls are made, on tokio
//! time. On a current-thread runtime with paused time (`tests/t50_sim.rs`) the calls come in a
//! fixed order, so a seed fixes every delay and the whole interleaving; on a real runtime it
//! fixes only the sequence of delays. Nothing here depends on hash order.
//!
//! A request over a cut link is `Unreachable` (not delivered); a reply over a link cut while the
//! request was in flight is lost (`Timeout`: processed, outcome unknown), like a real partition.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::service::RaftService;
use super::transport::{RpcKind, Transport, TransportError};
use crate::type_config::NodeId;

struct State {
    services: BTreeMap<NodeId, RaftService>,
    cut: BTreeSet<(NodeId, NodeId)>,
    isolated: BTreeSet<NodeId>,
    rng: StdRng,
    delay_max_us: u64,
}

impl State {
    fn linked(&self, from: NodeId, to: NodeId) -> bool {
        !self.cut.contains(&(from, to)) && !self.isolated.contains(&from) && !self.isolated.contains(&to)
    }
}

/// The in-memory network. Cheap to clone; clones share links and services.
#[derive(Clone)]
pub struct MemRouter {
    state: Arc<Mutex<State>>,
    /// Fixed at construction: openraft asks once per replication stream.
    pipelined: bool,
}

impl MemRouter {
    /// A router whose message delays come from `seed`; no delay until [`Self::set_delay_max`].
    /// Replication is pipelined (several AppendEntries of a stream in flight, each with its own
    /// delay, so they arrive out of order and the receiver must restore the order).
    pub fn new(seed: u64) -> Self {
        Self::with_pipelining(seed, true)
    }

    /// [`Self::new`], choosing whether replication is pipelined.
    pub fn with_pipelining(seed: u64, pipelined: bool) -> Self {
        let state = State {
            services: BTreeMap::new(),
            cut: BTreeSet::new(),
            isolated: BTreeSet::new(),
            rng: StdRng::seed_from_u64(seed),
            delay_max_us: 0,
        };
        Self { state: Arc::new(Mutex::new(state)), pipelined }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every message is delayed uniformly in `[0, max]`.
    pub fn set_delay_max(&self, max: Duration) {
        self.lock().delay_max_us = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
    }

    /// Route messages for `service.id()` to `service` (replacing a previous incarnation).
    pub fn register(&self, service: RaftService) {
        self.lock().services.insert(service.id(), service);
    }

    /// Stop delivering to `id` (crashed node): calls to it are unreachable.
    pub fn unregister(&self, id: NodeId) {
        self.lock().services.remove(&id);
    }

    /// Cut the link between `a` and `b` in both directions.
    pub fn cut(&self, a: NodeId, b: NodeId) {
        let mut st = self.lock();
        st.cut.insert((a, b));
        st.cut.insert((b, a));
    }

    /// Cut only messages from `from` to `to`.
    pub fn cut_one_way(&self, from: NodeId, to: NodeId) {
        self.lock().cut.insert((from, to));
    }

    /// Cut every link of `id`.
    pub fn isolate(&self, id: NodeId) {
        self.lock().isolated.insert(id);
    }

    /// Restore every link.
    pub fn heal(&self) {
        let mut st = self.lock();
        st.cut.clear();
        st.isolated.clear();
    }
}

impl Transport for MemRouter {
    async fn call(
        &self,
        from: NodeId,
        target: NodeId,
        _addr: &str,
        kind: RpcKind,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, TransportError> {
        let (service, delay) = {
            let mut st = self.lock();
            if !st.linked(from, target) {
                return Err(TransportError::Unreachable(format!("link {from} -> {target} is cut")));
            }
            let service = st
                .services
                .get(&target)
                .cloned()
                .ok_or_else(|| TransportError::Unreachable(format!("node {target} is down")))?;
            let max = st.delay_max_us;
            let delay = if max == 0 { 0 } else { st.rng.random_range(0..=max) };
            (service, Duration::from_micros(delay))
        };
        let exchange = async {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let reply = service.handle(kind, &body).await;
            if self.lock().linked(target, from) { Ok(reply) } else { Err(TransportError::Timeout(timeout)) }
        };
        tokio::time::timeout(timeout, exchange).await.unwrap_or(Err(TransportError::Timeout(timeout)))
    }

    fn pipelined(&self) -> bool {
        self.pipelined
    }
}
