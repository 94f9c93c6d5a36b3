//! Topic routes on the client: fetching `TopicRouteData` from the NameServers, caching it per topic,
//! and turning it into the queues a producer writes ([`TopicPublishInfo`], RocketMQ's
//! `MQClientInstance.topicRouteData2TopicPublishInfo`) and a consumer reads ([`subscribe_queues`]).
//!
//! ```text
//!  NameServers ──GET_ROUTEINFO_BY_TOPIC──► TopicRouteManager ──► routes[topic]    (TopicRouteData)
//!     every poll interval, on a miss,        │                 ├► publish[topic]   (TopicPublishInfo)
//!     and on demand                          │                 └► broker_addrs[brokerName] {id → addr}
//!  broker: SERVICE_NOT_AVAILABLE "… leader=ip:port" ──apply_leader_hint──► broker_addrs[name][0] = ip:port
//! ```
//!
//! Invariants:
//! - A publish queue exists only for a writable `QueueData` whose group has a brokerId 0 address:
//!   writes go to brokerId 0, and a group without a known leader has none.
//! - Writes for a group go to `broker_addrs[name][0]`. A leader hint replaces that address at once
//!   and holds until the NameServer's view of the group changes, so a stale NameServer answer does
//!   not send the producer back to the old leader on every poll.
//! - No std lock is held across an `.await`; a group's refresh slot (a tokio mutex) is, so callers
//!   that saw the same failure share one NameServer query.
//! - After a failure, a group's route is asked for at most once per
//!   [`GROUP_REFRESH_INTERVAL_MIN`], and one answer updates every cached topic that names the group.
//! - A write address that refused or dropped a connection is suspect for a while
//!   ([`crate::failover::SUSPECT_HOLD`]): writes then go to the group's other replicas, which refuse
//!   them naming the leader (or, being the new leader, accept them).
//!
//! ## The leader hint convention
//! A broker that is not its group's Raft leader (or has no quorum) answers a send with
//! SERVICE_NOT_AVAILABLE (14), which every 4.x producer retries, and names the leader it knows in
//! the remark as `leader=<ip:port>` anywhere in the text (see [`format_leader_hint`]). Java clients
//! ignore the remark and retry elsewhere; this client moves the group's write address at once.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::route::BrokerData;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::body::route::TopicRouteData;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::sync::lock;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::failover::GROUP_REFRESH_INTERVAL_MIN;
use crate::failover::RefreshDecision;
use crate::failover::RefreshSlot;
use crate::failover::Suspects;
use crate::failover::next_replica;
use crate::namesrv::NamesrvClient;

pub use raftmq_common::protocol::leader_hint::LEADER_HINT_KEY;
pub use raftmq_common::protocol::leader_hint::format_leader_hint;
pub use raftmq_common::protocol::leader_hint::parse_leader_hint;

/// The queues a producer may write for one topic (`TopicPublishInfo`), with its round-robin index.
#[derive(Debug)]
pub struct TopicPublishInfo {
    topic: String,
    order_topic: bool,
    message_queues: Vec<MessageQueue>,
    /// Writable groups → their write queue count (`getQueueIdByBroker`).
    write_queue_nums: BTreeMap<String, i32>,
    send_which_queue: AtomicU32,
}

impl TopicPublishInfo {
    /// Builds the publish queues of `topic` from its route: from `orderTopicConf`
    /// (`brokerName:queueNums;…`) when set, else writable queue data of groups with a brokerId 0
    /// address, groups in brokerName order. `start_index` seeds the round-robin.
    pub fn from_route(topic: &str, route: &TopicRouteData, start_index: u32) -> Self {
        let mut message_queues = Vec::new();
        let mut write_queue_nums = BTreeMap::new();
        let order_conf = route.order_topic_conf.as_deref().filter(|c| !c.is_empty());
        if let Some(conf) = order_conf {
            for (broker, nums) in conf.split(';').filter_map(|item| item.split_once(':')) {
                // A malformed entry is skipped; Java would throw and lose the whole route.
                let Ok(nums) = nums.trim().parse::<i32>() else { continue };
                message_queues.extend((0..nums.max(0)).map(|q| MessageQueue::new(topic, broker.trim(), q)));
            }
        } else {
            let mut queue_datas: Vec<_> = route.queue_datas.iter().collect();
            queue_datas.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
            for qd in queue_datas.into_iter().filter(|qd| perm::is_writeable(qd.perm)) {
                let has_master = route
                    .broker_datas
                    .iter()
                    .find(|bd| bd.broker_name == qd.broker_name)
                    .is_some_and(|bd| bd.broker_addrs.contains_key(&MASTER_ID));
                if !has_master {
                    continue;
                }
                write_queue_nums.insert(qd.broker_name.clone(), qd.write_queue_nums);
                message_queues
                    .extend((0..qd.write_queue_nums.max(0)).map(|q| MessageQueue::new(topic, &qd.broker_name, q)));
            }
        }
        TopicPublishInfo {
            topic: topic.to_owned(),
            order_topic: order_conf.is_some(),
            message_queues,
            write_queue_nums,
            send_which_queue: AtomicU32::new(start_index),
        }
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Whether there is at least one queue to write.
    pub fn is_ok(&self) -> bool {
        !self.message_queues.is_empty()
    }

    /// Whether the queues came from `orderTopicConf`.
    pub fn is_order_topic(&self) -> bool {
        self.order_topic
    }

    /// The writable queues, grouped by brokerName in name order.
    pub fn message_queues(&self) -> &[MessageQueue] {
        &self.message_queues
    }

    /// The write queue count of a writable group.
    pub fn write_queue_nums_of(&self, broker_name: &str) -> Option<i32> {
        self.write_queue_nums.get(broker_name).copied()
    }

    /// The next round-robin position (`sendWhichQueue.incrementAndGet()`).
    pub fn next_index(&self) -> u32 {
        self.send_which_queue.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
    }
}

/// The queues a consumer may read (`topicRouteData2TopicSubscribeInfo`): readable queue data only.
pub fn subscribe_queues(topic: &str, route: &TopicRouteData) -> BTreeSet<MessageQueue> {
    route
        .queue_datas
        .iter()
        .filter(|qd| perm::is_readable(qd.perm))
        .flat_map(|qd| (0..qd.read_queue_nums.max(0)).map(|q| MessageQueue::new(topic, &qd.broker_name, q)))
        .collect()
}

/// The default topic's route as the publish route of a topic that does not exist yet
/// (`updateTopicRouteInfoFromNameServer(topic, isDefault=true, ..)`): each group's queue counts are
/// capped at the producer's `defaultTopicQueueNums`, so the broker auto-creates that many.
pub fn default_topic_route(mut route: TopicRouteData, default_topic_queue_nums: i32) -> TopicRouteData {
    for qd in &mut route.queue_datas {
        let nums = default_topic_queue_nums.min(qd.read_queue_nums);
        qd.read_queue_nums = nums;
        qd.write_queue_nums = nums;
    }
    route
}

/// What [`TopicRouteManager`] needs to know.
#[derive(Debug, Clone)]
pub struct RouteConfig {
    /// Deadline of one GET_ROUTEINFO_BY_TOPIC call, failover included (`mqClientApiTimeout`).
    pub rpc_timeout: Duration,
    /// How often cached topics are refreshed (`pollNameServerInterval`, 30 s).
    pub poll_interval: Duration,
}

impl Default for RouteConfig {
    fn default() -> Self {
        RouteConfig {
            rpc_timeout: Duration::from_millis(raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS),
            poll_interval: Duration::from_millis(raftmq_common::limits::CLIENT_ROUTE_POLL_INTERVAL_DEFAULT_MS),
        }
    }
}

#[derive(Debug, Default)]
struct RouteState {
    routes: HashMap<String, TopicRouteData>,
    publish: HashMap<String, Arc<TopicPublishInfo>>,
    /// Effective write/read addresses per group, leader hints applied.
    broker_addrs: HashMap<String, BTreeMap<i64, String>>,
    /// The addresses the NameServers last reported per group, to tell a real change from a hint.
    reported_addrs: HashMap<String, BTreeMap<i64, String>>,
    /// Addresses that refused or dropped a connection lately (here, so a write takes one lock).
    suspects: Suspects,
}

struct RouteInner {
    namesrv: NamesrvClient,
    config: RouteConfig,
    state: Mutex<RouteState>,
    poll_task: Mutex<Option<JoinHandle<()>>>,
    /// Per group (or per topic without groups): when its route was last asked for after a failure.
    refresh_slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<RefreshSlot>>>>,
    /// Which replica a suspect group's next write asks.
    probe_cursor: AtomicUsize,
}

/// Where a write for a group goes now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTarget {
    /// `ip:port`.
    pub addr: String,
    /// A replica asked because the write address is suspect (or refused without a hint): it refuses
    /// naming the leader, or, being the leader, takes the write.
    pub probing: bool,
}

/// The client's route cache (`MQClientInstance.topicRouteTable` + `brokerAddrTable`); clones share it.
#[derive(Clone)]
pub struct TopicRouteManager {
    inner: Arc<RouteInner>,
}

impl std::fmt::Debug for TopicRouteManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let topics: Vec<String> = self.state().routes.keys().cloned().collect();
        f.debug_struct("TopicRouteManager").field("topics", &topics).finish()
    }
}

impl TopicRouteManager {
    /// A cache that asks `namesrv`.
    pub fn new(namesrv: NamesrvClient, config: RouteConfig) -> Self {
        TopicRouteManager {
            inner: Arc::new(RouteInner {
                namesrv,
                config,
                state: Mutex::default(),
                poll_task: Mutex::new(None),
                refresh_slots: Mutex::default(),
                probe_cursor: AtomicUsize::new(0),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, RouteState> {
        lock(&self.inner.state)
    }

    /// Asks a NameServer for `topic`'s route; `Ok(None)` when it answers TOPIC_NOT_EXIST.
    pub async fn fetch_route(&self, topic: &str) -> Result<Option<TopicRouteData>> {
        let header = GetRouteInfoRequestHeader { topic: topic.to_owned(), accept_standard_json_only: Some(true) };
        let request = RemotingCommand::request_with_header(RequestCode::GetRouteinfoByTopic, &header);
        let response = self.inner.namesrv.invoke("route", request, self.inner.config.rpc_timeout).await?;
        match response.response_code() {
            ResponseCode::Success => TopicRouteData::decode(&response.body).map(Some).map_err(|e| {
                ClientError::new(ErrorKind::Protocol, "route", "bad TopicRouteData body")
                    .with_context("topic", topic)
                    .with_source(e)
            }),
            ResponseCode::TopicNotExist => Ok(None),
            code => Err(ClientError::broker("route", code, response.remark).with_context("topic", topic)),
        }
    }

    /// Fetches and caches `topic`'s route. `Ok(false)` when the NameServers do not know the topic
    /// (a cached route is then kept, as the Java client keeps it).
    pub async fn update_route(&self, topic: &str) -> Result<bool> {
        match self.fetch_route(topic).await? {
            Some(route) => {
                self.apply_route(topic, route);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Caches the default topic's route (capped at `queue_nums` queues per group) as `topic`'s
    /// publish route, for sends that make the broker auto-create `topic`.
    pub async fn update_route_from_default(&self, topic: &str, default_topic: &str, queue_nums: i32) -> Result<bool> {
        match self.fetch_route(default_topic).await? {
            Some(route) => {
                self.apply_route(topic, default_topic_route(route, queue_nums));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Stores `route` for `topic`: rebuilds the publish info when the route changed and takes new
    /// group addresses, keeping a leader hint while the NameServer's view of its group is unchanged.
    pub fn apply_route(&self, topic: &str, mut route: TopicRouteData) {
        route.queue_datas.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
        route.broker_datas.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
        let mut state = self.state();
        for bd in &route.broker_datas {
            let reported_changed = state.reported_addrs.get(&bd.broker_name) != Some(&bd.broker_addrs);
            if reported_changed {
                state.reported_addrs.insert(bd.broker_name.clone(), bd.broker_addrs.clone());
                state.broker_addrs.insert(bd.broker_name.clone(), bd.broker_addrs.clone());
            }
        }
        let unchanged = state.routes.get(topic) == Some(&route) && state.publish.contains_key(topic);
        if unchanged {
            return;
        }
        tracing::info!(topic, route = ?route, "topic route changed");
        let info = TopicPublishInfo::from_route(topic, &route, rand::random::<u32>());
        state.publish.insert(topic.to_owned(), Arc::new(info));
        state.routes.insert(topic.to_owned(), route);
    }

    /// The publish info of `topic` (`tryToFindTopicPublishInfo`): the cache when it has queues;
    /// else a fresh route; else, with `default` = (default topic, queue count), the default topic's
    /// route so the broker auto-creates `topic`. Fails with [`ErrorKind::NoRoute`] when nothing
    /// writable is found.
    pub async fn publish_info(&self, topic: &str, default: Option<(&str, i32)>) -> Result<Arc<TopicPublishInfo>> {
        if let Some(info) = self.cached_publish_info(topic).filter(|i| i.is_ok()) {
            return Ok(info);
        }
        // A known topic without a writable queue: its groups have no leader right now (a failover
        // under way). Asked again at the groups' refresh rate, not once per send.
        if let Some(route) = self.cached_route(topic) {
            let key = route.broker_datas.first().map_or_else(|| topic.to_owned(), |bd| bd.broker_name.clone());
            self.refresh_keyed(&key, topic, Instant::now()).await;
            return self.cached_publish_info(topic).filter(|i| i.is_ok()).ok_or_else(|| {
                ClientError::new(ErrorKind::NoRoute, "route", "no writable route info of this topic (no leader)")
                    .with_context("topic", topic)
            });
        }
        let fetched = self.update_route(topic).await;
        let cached = self.cached_publish_info(topic);
        let have_route = matches!(fetched, Ok(true)) || cached.is_some();
        match (&cached, default) {
            (Some(info), _) if info.is_ok() => return Ok(info.clone()),
            // Java uses the default route only when the topic has no route at all; a topic whose
            // groups are all read-only or leaderless must not be auto-created elsewhere.
            (_, Some((default_topic, queue_nums))) if !have_route => {
                if let Err(e) = &fetched {
                    tracing::debug!(topic, error = %e, "route lookup failed; trying the default topic route");
                }
                self.update_route_from_default(topic, default_topic, queue_nums).await?;
            }
            _ => fetched.map(|_| ())?,
        }
        self.cached_publish_info(topic).filter(|i| i.is_ok()).ok_or_else(|| {
            ClientError::new(ErrorKind::NoRoute, "route", "no writable route info of this topic")
                .with_context("topic", topic)
        })
    }

    /// The cached publish info of `topic`.
    pub fn cached_publish_info(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        self.state().publish.get(topic).cloned()
    }

    /// The cached route of `topic`.
    pub fn cached_route(&self, topic: &str) -> Option<TopicRouteData> {
        self.state().routes.get(topic).cloned()
    }

    /// The readable queues of `topic` from the cached route.
    pub fn cached_subscribe_queues(&self, topic: &str) -> Option<BTreeSet<MessageQueue>> {
        self.state().routes.get(topic).map(|route| subscribe_queues(topic, route))
    }

    /// Topics in the cache.
    pub fn cached_topics(&self) -> Vec<String> {
        self.state().routes.keys().cloned().collect()
    }

    /// Where writes for `broker_name` go: its brokerId 0 address (`findBrokerAddressInPublish`).
    pub fn broker_addr_in_publish(&self, broker_name: &str) -> Option<String> {
        self.state().broker_addrs.get(broker_name).and_then(|addrs| addrs.get(&MASTER_ID)).cloned()
    }

    /// Every known address of `broker_name`, by brokerId.
    pub fn broker_addrs(&self, broker_name: &str) -> Option<BTreeMap<i64, String>> {
        self.state().broker_addrs.get(broker_name).cloned()
    }

    /// Makes `leader_addr` the write address of `broker_name` at once. Returns whether it changed.
    pub fn apply_leader_hint(&self, broker_name: &str, leader_addr: &str) -> bool {
        let mut state = self.state();
        let addrs = state.broker_addrs.entry(broker_name.to_owned()).or_default();
        let previous = addrs.insert(MASTER_ID, leader_addr.to_owned());
        let changed = previous.as_deref() != Some(leader_addr);
        if changed {
            tracing::info!(broker_name, leader = leader_addr, previous = ?previous, "leader hint applied");
        }
        changed
    }

    /// Where a write for `broker_name` goes now (`probe`: ask a replica even if the write address is
    /// not suspect): its write address, else, when that is suspect or `probe`, the next replica of
    /// the group that is not; the write address when there is no other. `None` without a write
    /// address and without a replica to ask.
    pub fn write_target(&self, broker_name: &str, probe: bool) -> Option<WriteTarget> {
        let now = Instant::now();
        let state = self.state();
        let addrs = state.broker_addrs.get(broker_name)?;
        let master = addrs.get(&MASTER_ID);
        if let Some(master) = master.filter(|m| !probe && !state.suspects.is_suspect(m, now)) {
            return Some(WriteTarget { addr: master.clone(), probing: false });
        }
        let cursor = self.inner.probe_cursor.fetch_add(1, Ordering::Relaxed);
        match next_replica(addrs, |a| state.suspects.is_suspect(a, now), cursor) {
            Some(addr) => Some(WriteTarget { addr, probing: true }),
            None => master.map(|m| WriteTarget { addr: m.clone(), probing: false }),
        }
    }

    /// The group `addr` belongs to, as far as the cached routes (hints included) say.
    pub fn group_of_addr(&self, addr: &str) -> Option<String> {
        let state = self.state();
        let mut names = state.broker_addrs.iter().chain(state.reported_addrs.iter());
        names.find(|(_, addrs)| addrs.values().any(|a| a == addr)).map(|(name, _)| name.clone())
    }

    /// Whether `addr` refused or dropped a connection lately.
    pub fn is_suspect(&self, addr: &str) -> bool {
        self.state().suspects.is_suspect(addr, Instant::now())
    }

    /// `addr` refused or dropped a connection: writes skip it for a while.
    pub fn report_unreachable(&self, addr: &str) {
        let mut state = self.state();
        if !state.suspects.is_suspect(addr, Instant::now()) {
            tracing::info!(addr, "broker address unreachable; asking the group's other replicas and the NameServers");
        }
        state.suspects.mark(addr, Instant::now());
    }

    /// Trusts `addr` again (a replica names it as the leader).
    pub fn clear_suspect(&self, addr: &str) {
        self.state().suspects.clear(addr);
    }

    /// A replica asked for `broker_name` took a leader-only request: it leads the group now.
    pub fn report_leader_answered(&self, broker_name: &str, addr: &str) {
        self.state().suspects.clear(addr);
        self.apply_leader_hint(broker_name, addr);
    }

    /// Refreshes `broker_name`'s route after a failure seen at `failed_at`, rate-limited and shared
    /// (see [`RefreshSlot::decide`]): asks for `topic` when it names the group, else for a cached
    /// topic that does, and spreads the group's new addresses to every cached topic naming it.
    pub async fn refresh_group(&self, broker_name: &str, topic: Option<&str>, failed_at: Instant) {
        let names_group = |t: &str| {
            self.state().routes.get(t).is_some_and(|r| r.broker_datas.iter().any(|bd| bd.broker_name == broker_name))
        };
        let topic = match topic.filter(|t| names_group(t)) {
            Some(t) => t.to_owned(),
            None => {
                let mut topics = self.cached_topics();
                topics.sort();
                match topics.into_iter().find(|t| names_group(t)) {
                    Some(t) => t,
                    None => return,
                }
            }
        };
        self.refresh_keyed(broker_name, &topic, failed_at).await;
    }

    /// [`Self::refresh_group`] in the background, for callers that go on at once (heartbeats, a
    /// send that ended outcome-unknown). Needs a tokio runtime.
    pub fn refresh_group_soon(&self, broker_name: &str) {
        let (me, name, at) = (self.clone(), broker_name.to_owned(), Instant::now());
        tokio::spawn(async move { me.refresh_group(&name, None, at).await });
    }

    /// One rate-limited refresh of `topic` under slot `key`.
    async fn refresh_keyed(&self, key: &str, topic: &str, failed_at: Instant) {
        let slot = lock(&self.inner.refresh_slots).entry(key.to_owned()).or_default().clone();
        let mut slot = slot.lock().await;
        loop {
            match slot.decide(failed_at, Instant::now()) {
                RefreshDecision::AlreadyFresh => return,
                RefreshDecision::WaitUntil(at) => tokio::time::sleep_until(at).await,
                RefreshDecision::Now => break,
            }
        }
        slot.start(Instant::now());
        match self.fetch_route(topic).await {
            Ok(Some(route)) => {
                let groups = route.broker_datas.clone();
                self.apply_route(topic, route);
                for bd in &groups {
                    self.spread_group(topic, bd);
                }
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(topic, key, error = %e, "route refresh after a failure failed"),
        }
        slot.finish(Instant::now());
        tracing::debug!(topic, key, interval = ?GROUP_REFRESH_INTERVAL_MIN, "route refreshed after a failure");
    }

    /// Puts `bd` (fresh from the NameServers for `from_topic`) into every other cached route that
    /// names its group, rebuilding their publish queues.
    fn spread_group(&self, from_topic: &str, bd: &BrokerData) {
        let stale: Vec<(String, TopicRouteData)> = {
            let state = self.state();
            state
                .routes
                .iter()
                .filter(|(t, _)| t.as_str() != from_topic)
                .filter_map(|(t, r)| {
                    let mut r = r.clone();
                    replace_group(&mut r, bd).then(|| (t.clone(), r))
                })
                .collect()
        };
        for (topic, route) in stale {
            self.apply_route(&topic, route);
        }
    }

    /// Refreshes every cached topic once; failures are logged and the old routes kept.
    pub async fn refresh_all(&self) {
        for topic in self.cached_topics() {
            if let Err(e) = self.update_route(&topic).await {
                tracing::warn!(topic, error = %e, "route refresh failed; keeping the cached route");
            }
        }
    }

    /// Starts refreshing cached topics every `poll_interval` (idempotent).
    pub fn start_polling(&self) {
        let mut task = lock(&self.inner.poll_task);
        if task.is_some() {
            return;
        }
        // The task holds a weak reference so a dropped manager stops it.
        let weak = Arc::downgrade(&self.inner);
        let period = self.inner.config.poll_interval;
        *task = Some(tokio::spawn(async move {
            let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                TopicRouteManager { inner }.refresh_all().await;
            }
        }));
    }

    /// Stops the refresh task.
    pub fn stop_polling(&self) {
        if let Some(task) = lock(&self.inner.poll_task).take() {
            task.abort();
        }
    }
}

/// Replaces the group of `bd` in `route` by `bd`; whether `route` named it with other addresses.
fn replace_group(route: &mut TopicRouteData, bd: &BrokerData) -> bool {
    match route.broker_datas.iter_mut().find(|old| old.broker_name == bd.broker_name) {
        Some(old) if old.broker_addrs != bd.broker_addrs => {
            *old = bd.clone();
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use raftmq_common::protocol::body::route::BrokerData;
    use raftmq_common::protocol::body::route::QueueData;
    use raftmq_common::remoting::RemotingClient;

    use super::*;

    fn group(name: &str, ids: &[i64], perm: i32, write: i32) -> (QueueData, BrokerData) {
        let qd = QueueData {
            broker_name: name.into(),
            perm,
            read_queue_nums: write + 1,
            topic_sys_flag: 0,
            write_queue_nums: write,
        };
        let bd = BrokerData {
            broker_addrs: ids.iter().map(|id| (*id, format!("10.0.0.{id}:10911"))).collect(),
            broker_name: name.into(),
            cluster: "C".into(),
            enable_acting_master: false,
        };
        (qd, bd)
    }

    fn route(groups: &[(QueueData, BrokerData)]) -> TopicRouteData {
        TopicRouteData {
            queue_datas: groups.iter().map(|g| g.0.clone()).collect(),
            broker_datas: groups.iter().map(|g| g.1.clone()).collect(),
            ..Default::default()
        }
    }

    fn queues(info: &TopicPublishInfo) -> Vec<(String, i32)> {
        info.message_queues().iter().map(|q| (q.broker_name.clone(), q.queue_id)).collect()
    }

    #[test]
    fn publish_queues_need_write_perm_and_a_broker_id_0() {
        let r = route(&[
            group("b", &[0, 1], perm::READ_WRITE, 2),
            group("a", &[0], perm::READ_WRITE, 1),
            group("c-leaderless", &[1, 2], perm::READ_WRITE, 3),
            group("d-readonly", &[0], perm::READ, 3),
        ]);
        let info = TopicPublishInfo::from_route("T", &r, 0);
        assert_eq!(queues(&info), vec![("a".into(), 0), ("b".into(), 0), ("b".into(), 1)]);
        assert!(info.is_ok() && !info.is_order_topic());
        assert_eq!(info.write_queue_nums_of("b"), Some(2));
        assert_eq!(info.write_queue_nums_of("c-leaderless"), None);
        let sub = subscribe_queues("T", &r);
        // Readable groups all count, leaderless ones too: consumers may read from followers.
        assert_eq!(sub.len(), 3 + 2 + 4 + 4);
    }

    #[test]
    fn order_topic_conf_defines_the_queues() {
        let mut r = route(&[group("a", &[0], perm::READ_WRITE, 8)]);
        r.order_topic_conf = Some("a:2;b:1;bad;c:x".into());
        let info = TopicPublishInfo::from_route("T", &r, 0);
        assert!(info.is_order_topic());
        assert_eq!(queues(&info), vec![("a".into(), 0), ("a".into(), 1), ("b".into(), 0)]);
    }

    #[test]
    fn default_route_is_capped_at_default_queue_nums() {
        let r = default_topic_route(route(&[group("a", &[0], perm::READ_WRITE, 8), group("b", &[0], 6, 1)]), 4);
        let nums: Vec<_> = r.queue_datas.iter().map(|q| (q.read_queue_nums, q.write_queue_nums)).collect();
        assert_eq!(nums, vec![(4, 4), (2, 2)]);
    }

    #[test]
    fn round_robin_index_wraps() {
        let info = TopicPublishInfo::from_route("T", &route(&[group("a", &[0], 6, 1)]), u32::MAX - 1);
        assert_eq!(info.next_index(), u32::MAX);
        assert_eq!(info.next_index(), 0);
    }

    #[test]
    fn leader_hints_are_parsed_from_remarks() {
        let cases: &[(&str, Option<&str>)] = &[
            ("leader=10.0.0.2:10911", Some("10.0.0.2:10911")),
            ("not leader of broker-a; leader=10.0.0.2:10911", Some("10.0.0.2:10911")),
            ("[NOT_LEADER] term 7, leader=host-b:10911, retry", Some("host-b:10911")),
            ("(leader=[::1]:10911)", Some("[::1]:10911")),
            ("no leader known", None),
            ("leader=", None),
            ("leader=10.0.0.2", None),
            ("leader=10.0.0.2:0", None),
            ("leader=10.0.0.2:99999", None),
            ("oldleader=10.0.0.9:1 leader=10.0.0.2:2", Some("10.0.0.2:2")),
            ("", None),
        ];
        for (remark, want) in cases {
            assert_eq!(parse_leader_hint(remark), *want, "{remark:?}");
        }
        assert_eq!(parse_leader_hint(&format_leader_hint("1.2.3.4:5")), Some("1.2.3.4:5"));
    }

    #[test]
    fn leader_hint_holds_until_the_namesrv_view_changes() {
        let namesrv = NamesrvClient::new(RemotingClient::new(), vec!["127.0.0.1:1".into()]).unwrap();
        let cache = TopicRouteManager::new(namesrv, RouteConfig::default());
        let r = route(&[group("a", &[0, 1], 6, 2)]);
        cache.apply_route("T", r.clone());
        assert_eq!(cache.broker_addr_in_publish("a").as_deref(), Some("10.0.0.0:10911"));
        assert!(cache.apply_leader_hint("a", "10.0.0.1:10911"));
        assert!(!cache.apply_leader_hint("a", "10.0.0.1:10911"));
        // The same (stale) NameServer answer keeps the hint, for this topic and for others.
        cache.apply_route("T", r.clone());
        cache.apply_route("U", r.clone());
        assert_eq!(cache.broker_addr_in_publish("a").as_deref(), Some("10.0.0.1:10911"));
        // A changed view replaces it.
        cache.apply_route("T", route(&[group("a", &[0, 2], 6, 2)]));
        assert_eq!(cache.broker_addr_in_publish("a").as_deref(), Some("10.0.0.0:10911"));
        assert_eq!(cache.broker_addrs("a").map(|m| m.len()), Some(2));
    }
    #[test]
    fn writes_skip_a_suspect_leader_and_ask_the_replicas() {
        let namesrv = NamesrvClient::new(RemotingClient::new(), vec!["127.0.0.1:1".into()]).unwrap();
        let cache = TopicRouteManager::new(namesrv, RouteConfig::default());
        cache.apply_route("T", route(&[group("a", &[0, 2, 3], 6, 2)]));
        let target = |probe| cache.write_target("a", probe).map(|t| (t.addr, t.probing));
        assert_eq!(target(false), Some(("10.0.0.0:10911".into(), false)));
        cache.report_unreachable("10.0.0.0:10911");
        let asked: BTreeSet<_> = (0..4).filter_map(|_| target(false)).collect();
        let replicas = [("10.0.0.2:10911".to_owned(), true), ("10.0.0.3:10911".to_owned(), true)];
        assert_eq!(asked, replicas.into_iter().collect());
        // The replica that took the write leads now.
        cache.report_leader_answered("a", "10.0.0.3:10911");
        assert_eq!(target(false), Some(("10.0.0.3:10911".into(), false)));
        // A probe asks another replica even when the write address is not suspect.
        assert_eq!(target(true).map(|t| t.1), Some(true));
        assert_eq!(cache.write_target("nope", false), None);
    }

    #[test]
    fn a_group_change_replaces_it_in_other_routes() {
        let mut r = route(&[group("a", &[0, 1], 6, 2), group("b", &[0], 6, 2)]);
        let (_, fresh) = group("a", &[2, 3], 6, 2);
        assert!(replace_group(&mut r, &fresh));
        assert!(!replace_group(&mut r, &fresh), "already current");
        assert_eq!(r.broker_datas[0].broker_addrs.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
        let (_, other) = group("c", &[0], 6, 2);
        assert!(!replace_group(&mut r, &other), "a group the route does not name");
    }
}
