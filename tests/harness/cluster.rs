//! Harness of the t40 acceptance tests: a NameServer and a Raft group of real `Broker`s over loopback
//! sockets, driven through the SDK only, plus a message collector for listeners.
//!
//! Each broker replica runs on its **own tokio runtime**, so a test can crash one: [`Cluster::kill`]
//! shuts that runtime down in the background, which drops every task and socket of the replica at
//! once — no Raft handover, no NameServer unregistration, no drained requests (a `kill -9` except
//! that the page cache survives). [`Cluster::stop`] is the graceful `Broker::shutdown`.
//!
//! Invariants: every wait is on state with a deadline (the deadline is a safety bound, never the
//! synchronisation); ports are chosen free at runtime.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use raftmq_broker::Broker;
use raftmq_broker::BrokerConfig;
use raftmq_broker::BrokerError;
use raftmq_broker::config::broker_config::RaftPeer;
use raftmq_client::Admin;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;
use tokio::runtime::Runtime;
use tokio::sync::watch;

pub const BROKER_NAME: &str = "broker-a";
/// Safety bound of every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(30);

/// Logs to the test output when `RUST_LOG` is set (for diagnosing a failure); idempotent.
pub fn init_logging() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _already_set = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// Cluster starts tried before a port race fails the test.
const START_ATTEMPTS_MAX: u32 = 3;
/// How recently a follower must have acknowledged the leader to count as live: the bound a
/// leadership transfer applies (`LEADER_TRANSFER_TARGET_ACK_AGE_MIN_MS`), halved for margin.
const FOLLOWER_ACK_AGE_LIVE_MAX_MS: u64 = 500;

fn is_bind_error(e: &anyhow::Error) -> bool {
    e.chain().any(|c| matches!(c.downcast_ref::<BrokerError>(), Some(BrokerError::Bind { .. })))
}

pub use super::ports::free_ports;

/// One replica and the runtime it runs on.
struct Node {
    /// `None` only once shut down; dropping a runtime inside async code panics, so it never is.
    runtime: Option<Runtime>,
    /// `None` while starting, or once a graceful stop took it.
    broker: Option<Broker>,
}

impl Drop for Node {
    fn drop(&mut self) {
        // Before `broker` is dropped: its tasks go first, as in a crash.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A NameServer and one broker group.
pub struct Cluster {
    pub namesrv: NameServer,
    pub namesrv_addr: String,
    pub configs: BTreeMap<u64, BrokerConfig>,
    nodes: BTreeMap<u64, Node>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts a NameServer and `n` replicas (ids 1..=n) of one group, each on its own runtime.
    /// Ports come from [`super::ports`], outside the ephemeral range; another process binding one
    /// explicitly before a replica does can still take it: then the whole cluster starts again on
    /// new ports.
    pub async fn start(n: u64) -> Result<Cluster> {
        Self::start_with(n, |_| {}).await
    }

    /// [`Self::start`] with `tweak` applied to every replica's config.
    pub async fn start_with(n: u64, tweak: impl Fn(&mut BrokerConfig)) -> Result<Cluster> {
        init_logging();
        let mut attempt = 1;
        loop {
            match Self::start_once(n, &tweak).await {
                Err(e) if attempt < START_ATTEMPTS_MAX && is_bind_error(&e) => {
                    eprintln!("cluster start attempt {attempt} lost a port race ({e:#}); retrying");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(n: u64, tweak: &impl Fn(&mut BrokerConfig)) -> Result<Cluster> {
        let namesrv = NameServer::start(NamesrvConfig {
            listen_port: 0,
            bind_address: "127.0.0.1".into(),
            kv_config_path: String::new(),
            ..NamesrvConfig::default()
        })
        .await?;
        let namesrv_addr = namesrv.local_addr().to_string();
        let dir = tempfile::tempdir()?;
        let ports = free_ports(2 * n as usize);
        let peers: Vec<RaftPeer> = (1..=n)
            .zip(ports.chunks(2))
            .map(|(id, pair)| RaftPeer {
                id,
                remoting_addr: format!("127.0.0.1:{}", pair[0]),
                raft_addr: format!("127.0.0.1:{}", pair[1]),
            })
            .collect();
        let mut configs = BTreeMap::new();
        for peer in &peers {
            let port: u16 = peer.remoting_addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).context("port")?;
            let mut config = BrokerConfig {
                broker_name: BROKER_NAME.into(),
                broker_ip1: Some("127.0.0.1".into()),
                listen_port: port,
                namesrv_addr: namesrv_addr.clone(),
                store_path_root_dir: dir.path().join(format!("node-{}", peer.id)),
                mapped_file_size_commit_log: 64 << 20,
                raft_self_id: peer.id,
                raft_peers: peers.clone(),
                // Ephemeral admin HTTP ports: replicas of parallel tests never collide on 8080.
                admin_port: 0,
                // Checkpoints within a test's lifetime: every restart here starts from one.
                raft_checkpoint_interval_ms: 500,
                ..BrokerConfig::default()
            };
            tweak(&mut config);
            configs.insert(peer.id, config);
        }
        let mut cluster = Cluster { namesrv, namesrv_addr, configs, nodes: BTreeMap::new(), _dir: dir };
        // All replicas start together: the group elects its first leader once a majority is up.
        let mut starting = Vec::new();
        for (id, config) in &cluster.configs {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(format!("broker-{id}"))
                .enable_all()
                .build()?;
            let handle = runtime.spawn(Broker::start(config.clone()));
            starting.push((*id, Node { runtime: Some(runtime), broker: None }, handle));
        }
        // On an early return the nodes left in `starting` drop, shutting their runtimes down.
        for (id, mut node, handle) in starting {
            node.broker = Some(handle.await?.with_context(|| format!("starting replica {id}"))?);
            cluster.nodes.insert(id, node);
        }
        cluster.wait_formed(WAIT).await?;
        Ok(cluster)
    }

    /// Waits until no running replica's vote guard restricts it any more: a new group is formed
    /// only once every replica has heard from enough of the others (`raft::vote_guard`), and a
    /// test that kills one before then leaves the others waiting for it, as an operator would.
    pub async fn wait_formed(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let guarded: Vec<(u64, String)> = self
                .nodes
                .iter()
                .filter_map(|(id, n)| n.broker.as_ref().and_then(|b| b.raft().vote_guard()).map(|g| (*id, g)))
                .collect();
            if guarded.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the group did not form within {within:?}: {guarded:?}");
            }
            // The guard is replica-internal state with no subscription API: poll it.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until the leader has heard from every other running voter recently and each has
    /// matched its whole log: a leadership transfer refuses a target it has not heard from yet,
    /// and a replica still starting may not have answered the first appends.
    pub async fn wait_followers_live(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let leader = self.wait_leader(within).await?;
            let status = self.broker(leader).expect("the leader runs").raft().status();
            let last = status.last_log_index;
            let lagging: Vec<u64> = self
                .running()
                .into_iter()
                .filter(|id| *id != leader && status.voters.contains(id))
                .filter(|id| {
                    status.followers.get(id).copied().flatten() != last
                        || status.follower_ack_age_ms.get(id).is_none_or(|age| *age > FOLLOWER_ACK_AGE_LIVE_MAX_MS)
                })
                .collect();
            if lagging.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("followers {lagging:?} not caught up with leader {leader} within {within:?}: {status:?}");
            }
            // Replication progress is leader-internal state with no subscription API: poll it.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Remoting address of replica `id`.
    pub fn addr(&self, id: u64) -> String {
        self.configs[&id].broker_addr()
    }

    /// Ids of the running replicas.
    pub fn running(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// The running replica `id`.
    pub fn broker(&self, id: u64) -> Option<&Broker> {
        self.nodes.get(&id).and_then(|n| n.broker.as_ref())
    }

    /// Waits until a running replica is a ready leader; its id.
    pub async fn wait_leader(&self, within: Duration) -> Result<u64> {
        let deadline = Instant::now() + within;
        loop {
            if let Some((id, _)) =
                self.nodes.iter().find(|(_, n)| n.broker.as_ref().is_some_and(Broker::is_ready_leader))
            {
                return Ok(*id);
            }
            if Instant::now() > deadline {
                bail!("no ready leader within {within:?}");
            }
            // Readiness is a replica-internal state with no subscription API: poll it.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Creates `topic` with `queues` read and write queues at the leader, then waits until the
    /// NameServer routes it (the leader re-registers at once when its topics change).
    pub async fn create_topic(&self, topic: &str, queues: i32) -> Result<()> {
        let leader = self.wait_leader(WAIT).await?;
        let admin = Admin::new(&self.namesrv_addr)?;
        let config = TopicConfig { read_queue_nums: queues, write_queue_nums: queues, ..TopicConfig::new(topic) };
        admin.create_topic(&self.addr(leader), &config).await?;
        let deadline = Instant::now() + WAIT;
        loop {
            match admin.topic_route(topic).await {
                Ok(route) if route.queue_datas.iter().any(|q| q.read_queue_nums == queues) => break,
                _ if Instant::now() > deadline => bail!("topic {topic} never appeared in the NameServer"),
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        admin.shutdown().await;
        Ok(())
    }

    /// Plans replica `id` joining the running group: free ports, a config whose `raftPeers` are the
    /// group's plus itself (its id is not the smallest, so it never initialises a group of its own).
    /// Start it with [`Self::start_replica`]; the leader adds it with `addNode`. Returns its peer.
    pub fn plan_replica(&mut self, id: u64) -> Result<RaftPeer> {
        let ports = free_ports(2);
        let peer = RaftPeer {
            id,
            remoting_addr: format!("127.0.0.1:{}", ports[0]),
            raft_addr: format!("127.0.0.1:{}", ports[1]),
        };
        let template = self.configs.values().next().context("the cluster has no replica")?.clone();
        let mut raft_peers = template.raft_peers.clone();
        raft_peers.push(peer.clone());
        let config = BrokerConfig {
            listen_port: ports[0],
            store_path_root_dir: self._dir.path().join(format!("node-{id}")),
            raft_self_id: id,
            raft_peers,
            ..template
        };
        self.configs.insert(id, config);
        Ok(peer)
    }

    /// Starts replica `id` (planned, or stopped before) on its own runtime.
    pub async fn start_replica(&mut self, id: u64) -> Result<()> {
        let config = self.configs.get(&id).with_context(|| format!("no config for replica {id}"))?.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(format!("broker-{id}"))
            .enable_all()
            .build()?;
        let mut node = Node { runtime: None, broker: None };
        let handle = runtime.spawn(Broker::start(config));
        node.runtime = Some(runtime);
        node.broker = Some(handle.await?.with_context(|| format!("starting replica {id}"))?);
        self.nodes.insert(id, node);
        Ok(())
    }

    /// Runs `future` on replica `id`'s runtime, so what it spawns (a server in front of the
    /// replica) crashes with it on [`Self::kill`]; `None` when the replica is not running.
    pub fn spawn_on<F>(&self, id: u64, future: F) -> Option<tokio::task::JoinHandle<F::Output>>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.nodes.get(&id).and_then(|n| n.runtime.as_ref()).map(|r| r.spawn(future))
    }

    /// Crashes replica `id`: its runtime is shut down without waiting, dropping every task and socket.
    pub fn kill(&mut self, id: u64) {
        drop(self.nodes.remove(&id));
    }

    /// Stops replica `id` gracefully.
    pub async fn stop(&mut self, id: u64) -> Result<()> {
        let Some(mut node) = self.nodes.remove(&id) else { return Ok(()) };
        if let (Some(runtime), Some(broker)) = (&node.runtime, node.broker.take()) {
            runtime.spawn(broker.shutdown()).await?;
        }
        Ok(())
    }

    /// Stops everything gracefully.
    pub async fn shutdown(mut self) -> Result<()> {
        for id in self.running() {
            self.stop(id).await?;
        }
        self.namesrv.shutdown().await;
        Ok(())
    }

    /// Tears the cluster down fast: every replica crashes, the NameServer stops. For the end of a
    /// test whose subject is not shutdown: a graceful `Broker::shutdown` spends ~10 s when consumers
    /// left long-polling pulls suspended (remoting drain deadline, then the wait for the Raft node).
    pub async fn crash_all(mut self) -> Result<()> {
        for id in self.running() {
            self.kill(id);
        }
        self.namesrv.shutdown().await;
        Ok(())
    }
}

/// One message as a listener saw it.
#[derive(Debug, Clone)]
pub struct Received {
    /// Which consumer (the label given to [`Collector::listener_label`]).
    pub consumer: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub body: String,
    pub tags: Option<String>,
    pub uniq_key: Option<String>,
}

impl Received {
    fn of(consumer: &str, m: &MessageExt) -> Received {
        Received {
            consumer: consumer.to_owned(),
            queue_id: m.queue_id,
            queue_offset: m.queue_offset,
            body: String::from_utf8_lossy(&m.message.body).into_owned(),
            tags: m.message.tags().map(str::to_owned),
            uniq_key: m.message.uniq_key().map(str::to_owned),
        }
    }
}

/// Every message the listeners of a test consumed, in the order they were handed over; waiters
/// are woken on each addition.
#[derive(Clone)]
pub struct Collector {
    received: Arc<Mutex<Vec<Received>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Default for Collector {
    fn default() -> Self {
        Collector { received: Arc::default(), count: Arc::new(watch::channel(0).0) }
    }
}

impl Collector {
    /// Records `msgs` as consumed by `consumer`.
    pub fn record(&self, consumer: &str, msgs: &[MessageExt]) {
        let n = {
            let mut received = self.received.lock().unwrap_or_else(|p| p.into_inner());
            received.extend(msgs.iter().map(|m| Received::of(consumer, m)));
            received.len()
        };
        self.count.send_replace(n);
    }

    /// A snapshot of everything consumed so far.
    pub fn all(&self) -> Vec<Received> {
        self.received.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The bodies consumed so far (with duplicates).
    pub fn bodies(&self) -> Vec<String> {
        self.all().into_iter().map(|r| r.body).collect()
    }

    /// Distinct bodies consumed so far.
    pub fn distinct_bodies(&self) -> BTreeSet<String> {
        self.all().into_iter().map(|r| r.body).collect()
    }

    /// Waits until `done` holds for the collected messages, re-checking on each addition.
    pub async fn wait_until(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Result<()> {
        let mut rx = self.count.subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            rx.borrow_and_update();
            if done(&self.all()) {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => bail!("collector closed while waiting for {what}"),
                Err(_) => bail!("timed out waiting for {what}; collected {}", self.all().len()),
            }
        }
    }

    /// Waits until every body in `want` has been consumed at least once.
    pub async fn wait_for_bodies(&self, want: &BTreeSet<String>) -> Result<()> {
        self.wait_until(&format!("{} messages", want.len()), |got| {
            let have: BTreeSet<&str> = got.iter().map(|r| r.body.as_str()).collect();
            want.iter().all(|b| have.contains(b.as_str()))
        })
        .await
    }
}

/// Waits until `rx` (a consumer's assignment watch) satisfies `done`.
pub async fn wait_assignment<T: std::fmt::Debug>(
    what: &str,
    rx: &mut watch::Receiver<T>,
    done: impl Fn(&T) -> bool,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if done(&rx.borrow_and_update()) {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => bail!("assignment watch closed while waiting for {what}"),
            Err(_) => bail!("timed out waiting for {what}; now {:?}", *rx.borrow()),
        }
    }
}

/// Wall-clock ms (the brokers' store-time clock).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Re-asks until `done` holds for the answer (state the broker learns from the clients' periodic
/// heartbeats and offset commits); each answer is a fresh RPC, so this waits on the broker, not on time.
pub async fn until<T, F, Fut>(what: &str, mut ask: F, done: impl Fn(&T) -> bool) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answer = ask().await?;
        if done(&answer) {
            return Ok(answer);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
