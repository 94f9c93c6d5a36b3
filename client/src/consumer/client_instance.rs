//! [`ClientInstance`]: what one consumer shares among its parts (RocketMQ's `MQClientInstance` +
//! `MQClientAPIImpl`, consumer half): the client id, the remoting client whose processor hears
//! NOTIFY_CONSUMER_IDS_CHANGED and RESET_CONSUMER_CLIENT_OFFSET, the route cache, and every
//! consumer-side broker call.
//!
//! ```text
//!  broker ──NOTIFY_CONSUMER_IDS_CHANGED (oneway)──► processor ──► rebalance_signal (Notify)
//!  broker ──RESET_CONSUMER_CLIENT_OFFSET (oneway)──► processor ──► offset_resets + rebalance_signal
//!  broker ──GET_CONSUMER_RUNNING_INFO──► processor ──► the consumer's running_info ──► answer
//!  broker ──CONSUME_MESSAGE_DIRECTLY (record)──► processor ──► the consumer's listener ──► answer
//!  broker ──GET_CONSUMER_STATUS_FROM_CLIENT──► processor ──► the offsets running_info holds ──► answer
//!  PushConsumer / PullConsumer ──► ClientInstance ──► HEART_BEAT, PULL_MESSAGE, offsets, locks, send-back
//! ```
//!
//! Invariants:
//! - Pulls and offset calls go to the address `find_broker_addr_in_subscribe` picks: the requested
//!   brokerId, else (not only-this-broker) any listed address of the group, as 4.x does; a group with
//!   no known address gets one route refresh before the call fails.
//! - Heartbeats go to **every** address of every group of the subscribed topics (followers too).
//! - A call that finds its group's leader gone (refused or dropped connection, timeout,
//!   SERVICE_NOT_AVAILABLE) refreshes the group's route at once (rate-limited, shared with the
//!   producer side's rules in [`crate::failover`]) and follows a leader hint; a read picks another
//!   replica of the group while its leader's address is suspect.
//! - Every call is bounded by a deadline; no lock is held across an `.await`.

use raftmq_common::protocol::acl::SessionCredentials;
use raftmq_common::protocol::body::heartbeat::CheckClientRequestBody;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;

use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::consume_directly::ConsumeMessageDirectlyResult;
use raftmq_common::protocol::body::consumer_list::ConsumerListBody;
use raftmq_common::protocol::body::consumer_running_info::ConsumerRunningInfo;
use raftmq_common::protocol::body::consumer_running_info::PROP_CLIENT_VERSION;
use raftmq_common::protocol::body::consumer_running_info::PROP_CONSUME_TYPE;
use raftmq_common::protocol::body::consumer_running_info::PROP_NAMESERVER_ADDR;
use raftmq_common::protocol::body::consumer_running_info::ProcessQueueInfo;
use raftmq_common::protocol::body::consumer_status::GetConsumerStatusBody;
use raftmq_common::protocol::body::heartbeat::ConsumeType;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use raftmq_common::protocol::body::lock_batch::LockBatchRequestBody;
use raftmq_common::protocol::body::lock_batch::LockBatchResponseBody;
use raftmq_common::protocol::body::lock_batch::UnlockBatchRequestBody;
use raftmq_common::protocol::body::reset_offset::ResetOffsetBody;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::header::admin::GetConsumerRunningInfoRequestHeader;
use raftmq_common::protocol::header::admin::ResetOffsetRequestHeader;
use raftmq_common::protocol::header::client::ConsumeMessageDirectlyResultRequestHeader;
use raftmq_common::protocol::header::client::ConsumerSendMsgBackRequestHeader;
use raftmq_common::protocol::header::client::GetConsumerListByGroupRequestHeader;
use raftmq_common::protocol::header::client::GetConsumerStatusRequestHeader;
use raftmq_common::protocol::header::client::NotifyConsumerIdsChangedRequestHeader;
use raftmq_common::protocol::header::client::UnregisterClientRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetResponseHeader;
use raftmq_common::protocol::header::offset::SearchOffsetRequestHeader;
use raftmq_common::protocol::header::offset::SearchOffsetResponseHeader;
use raftmq_common::protocol::header::offset::UpdateConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::remoting::ClientTls;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::processor_fn;
use tokio::sync::Notify;

use crate::consumer::subscription::EXPRESSION_TYPE_TAG;
use crate::consumer::topic_rates::TopicRates;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::failover::CallFailure;
use crate::failover::classify;
use crate::namesrv::NamesrvClient;
use crate::route::RouteConfig;
use crate::route::TopicRouteManager;
use crate::route::parse_leader_hint;

/// A broker address chosen for a subscribe-side call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FindBrokerResult {
    pub addr: String,
    /// Not brokerId 0: such a node must not be asked to store offsets (`clearCommitOffsetFlag`).
    pub slave: bool,
}

/// The consumer's connection to the cluster; shared by its tasks through an `Arc`.
pub(crate) struct ClientInstance {
    pub client_id: String,
    pub group: String,
    pub remoting: RemotingClient,
    pub routes: TopicRouteManager,
    /// Woken by NOTIFY_CONSUMER_IDS_CHANGED for this group; a permit is kept when nobody waits, so
    /// a notification that arrives mid-rebalance triggers one more.
    pub rebalance_signal: Arc<Notify>,
    /// Offset resets the brokers pushed (RESET_CONSUMER_CLIENT_OFFSET) for this group, the latest
    /// per topic, until the consumer applies them (bounded by the topics).
    offset_resets: Arc<Mutex<BTreeMap<String, BTreeMap<MessageQueue, i64>>>>,
    /// Answers GET_CONSUMER_RUNNING_INFO; set once by the consumer that owns this instance.
    running_info: Arc<OnceLock<RunningInfoFn>>,
    /// Answers CONSUME_MESSAGE_DIRECTLY; set once by the consumer that owns this instance.
    direct_consume: Arc<OnceLock<DirectConsumeFn>>,
    pub rpc_timeout: Duration,
}

impl ClientInstance {
    /// A client for `group` asking `namesrv_addrs`.
    pub fn new(
        group: &str,
        client_id: String,
        namesrv_addrs: Vec<String>,
        route_config: RouteConfig,
        rpc_timeout: Duration,
        credentials: Option<Arc<SessionCredentials>>,
        tls: Option<ClientTls>,
    ) -> Result<Self> {
        let rebalance_signal = Arc::new(Notify::new());
        let offset_resets = Arc::new(Mutex::new(BTreeMap::new()));
        let running_info = Arc::new(OnceLock::new());
        let direct_consume = Arc::new(OnceLock::new());
        let mut table = ProcessorTable::new();
        table.register(
            RequestCode::ConsumeMessageDirectly,
            direct_consume_processor(group, Arc::clone(&direct_consume)),
        );
        table.register(RequestCode::GetConsumerRunningInfo, running_info_processor(group, Arc::clone(&running_info)));
        table.register(
            RequestCode::GetConsumerStatusFromClient,
            consumer_status_processor(group, Arc::clone(&running_info)),
        );
        table.register(
            RequestCode::ResetConsumerClientOffset,
            reset_offset_processor(group, Arc::clone(&offset_resets), Arc::clone(&rebalance_signal)),
        );
        let signal = rebalance_signal.clone();
        let my_group = group.to_owned();
        table.register(
            RequestCode::NotifyConsumerIdsChanged,
            Arc::new(processor_fn(move |ctx, request: RemotingCommand| {
                let signal = signal.clone();
                let my_group = my_group.clone();
                async move {
                    match request.decode_header::<NotifyConsumerIdsChangedRequestHeader>() {
                        Ok(h) if h.consumer_group == my_group => {
                            tracing::info!(group = %my_group, broker = %ctx.peer_addr(), "consumer ids changed; rebalancing");
                            signal.notify_one();
                        }
                        Ok(h) => tracing::debug!(group = %h.consumer_group, "ids-changed notice for another group"),
                        Err(e) => tracing::warn!(error = %e, "bad NOTIFY_CONSUMER_IDS_CHANGED header"),
                    }
                    None
                }
            })),
        );
        let remoting = RemotingClient::with_tls(table, false, credentials, tls);
        let namesrv = NamesrvClient::new(remoting.clone(), namesrv_addrs)?;
        let routes = TopicRouteManager::new(namesrv, route_config);
        Ok(ClientInstance {
            client_id,
            group: group.to_owned(),
            remoting,
            routes,
            rebalance_signal,
            offset_resets,
            running_info,
            direct_consume,
            rpc_timeout,
        })
    }

    /// Installs what answers CONSUME_MESSAGE_DIRECTLY (the first call wins): it gets the message
    /// and the name of the broker holding it.
    pub fn set_direct_consume(
        &self,
        f: impl Fn(MessageExt, String) -> BoxFuture<ConsumeMessageDirectlyResult> + Send + Sync + 'static,
    ) {
        if self.direct_consume.set(Box::new(f)).is_err() {
            tracing::debug!("direct consume handler already set");
        }
    }

    /// The `properties` every consumer's running info starts with: its group and model, the
    /// NameServers, how it consumes, the client's version. Each consumer adds its own settings.
    pub fn running_properties(
        &self,
        model: MessageModel,
        namesrv_addrs: &[String],
        consume_type: ConsumeType,
    ) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("consumerGroup".to_owned(), self.group.clone()),
            ("messageModel".to_owned(), json_text(&model)),
            (PROP_NAMESERVER_ADDR.to_owned(), namesrv_addrs.join(";")),
            (PROP_CONSUME_TYPE.to_owned(), json_text(&consume_type)),
            (PROP_CLIENT_VERSION.to_owned(), raftmq_common::protocol::code::version::V4_9_8_DESC.to_owned()),
        ])
    }

    /// Installs what answers GET_CONSUMER_RUNNING_INFO (the first call wins).
    pub fn set_running_info(&self, f: impl Fn() -> ConsumerRunningInfo + Send + Sync + 'static) {
        if self.running_info.set(Box::new(f)).is_err() {
            tracing::debug!("running info source already set");
        }
    }

    /// The offset resets pushed since the last call, the latest per topic.
    pub fn take_offset_resets(&self) -> BTreeMap<String, BTreeMap<MessageQueue, i64>> {
        std::mem::take(&mut *self.offset_resets.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The readable queues of `topic`, from the cache or a fresh route.
    pub async fn subscribe_queues(&self, topic: &str) -> Result<BTreeSet<MessageQueue>> {
        if let Some(mqs) = self.routes.cached_subscribe_queues(topic) {
            return Ok(mqs);
        }
        self.routes.update_route(topic).await?;
        self.routes.cached_subscribe_queues(topic).ok_or_else(|| {
            ClientError::new(ErrorKind::NoRoute, "subscribe", "no route info of this topic")
                .with_context("topic", topic)
        })
    }

    /// `findBrokerAddressInSubscribe(brokerName, brokerId, onlyThisBroker)`.
    pub fn find_broker_addr_in_subscribe(
        &self,
        broker_name: &str,
        broker_id: i64,
        only_this_broker: bool,
    ) -> Option<FindBrokerResult> {
        let addrs = self.routes.broker_addrs(broker_name)?;
        pick_broker_addr(&addrs, broker_id, only_this_broker)
    }

    /// Like [`Self::find_broker_addr_in_subscribe`], refreshing `topic`'s route once on a miss; an
    /// address that refused or dropped a connection lately is avoided (unless `only_this_broker`)
    /// for the group's write address or, while that is suspect too, another replica.
    pub async fn broker_addr(
        &self,
        op: &'static str,
        mq: &MessageQueue,
        broker_id: i64,
        only_this_broker: bool,
    ) -> Result<FindBrokerResult> {
        if let Some(found) = self.find_broker_addr_in_subscribe(&mq.broker_name, broker_id, only_this_broker) {
            if !only_this_broker
                && self.routes.is_suspect(&found.addr)
                && let Some(target) = self.routes.write_target(&mq.broker_name, false)
            {
                return Ok(FindBrokerResult { addr: target.addr, slave: target.probing });
            }
            return Ok(found);
        }
        if let Err(e) = self.routes.update_route(&mq.topic).await {
            tracing::debug!(topic = %mq.topic, error = %e, "route refresh for a missing broker address failed");
        }
        self.find_broker_addr_in_subscribe(&mq.broker_name, broker_id, only_this_broker).ok_or_else(|| {
            ClientError::new(ErrorKind::NoRoute, op, format!("The broker[{}] not exist", mq.broker_name))
                .with_context("topic", &mq.topic)
                .with_context("broker", &mq.broker_name)
        })
    }

    /// A call to `addr` (of `mq`'s group) failed with `e`: when that says the group's leader moved
    /// or died, the route follows (a hint at once; else the address is suspected when unreachable
    /// and the group's route refreshed, rate-limited and shared). Returns whether it did: the
    /// caller may retry at once instead of backing off.
    pub async fn failover_after(&self, mq: &MessageQueue, addr: &str, e: &ClientError) -> bool {
        let name = &mq.broker_name;
        match classify(e, addr) {
            CallFailure::LeaderHint(leader) => {
                self.routes.clear_suspect(&leader);
                self.routes.apply_leader_hint(name, &leader);
                return true;
            }
            CallFailure::Other => return false,
            CallFailure::Unreachable => self.routes.report_unreachable(addr),
            CallFailure::Unavailable | CallFailure::Unanswered => {}
        }
        tracing::debug!(mq = ?mq, addr, error = %e, "refreshing the group's route after a failed call");
        self.routes.refresh_group(name, Some(&mq.topic), tokio::time::Instant::now()).await;
        true
    }

    /// Every address of every group serving `topics` (cached routes).
    pub fn broker_addrs_of(&self, topics: &[String]) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for topic in topics {
            let Some(route) = self.routes.cached_route(topic) else { continue };
            for bd in &route.broker_datas {
                if let Some(addrs) = self.routes.broker_addrs(&bd.broker_name) {
                    out.extend(addrs.into_values());
                }
            }
        }
        out
    }

    async fn call(
        &self,
        op: &'static str,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        self.remoting
            .invoke(addr, request, timeout)
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", addr))
    }

    async fn call_ok(&self, op: &'static str, addr: &str, request: RemotingCommand) -> Result<RemotingCommand> {
        let response = self.call(op, addr, request, self.rpc_timeout).await?;
        match response.response_code() {
            ResponseCode::Success => Ok(response),
            code => Err(ClientError::broker(op, code, response.remark).with_context("addr", addr)),
        }
    }

    /// HEART_BEAT to every address in `addrs`; returns how many answered SUCCESS.
    pub async fn send_heartbeat(&self, addrs: &BTreeSet<String>, data: &HeartbeatData) -> usize {
        let body = match data.encode() {
            Ok(body) => body,
            Err(e) => {
                tracing::error!(error = %e, "heartbeat body does not encode");
                return 0;
            }
        };
        let mut ok = 0;
        for addr in addrs {
            let request = RemotingCommand::request(RequestCode::HeartBeat).with_body(body.clone());
            match self.call_ok("heartbeat", addr, request).await {
                Ok(_) => ok += 1,
                Err(e) => {
                    tracing::warn!(addr = %addr, error = %e, "heartbeat failed");
                    if matches!(classify(&e, addr), CallFailure::Unreachable | CallFailure::Unanswered) {
                        self.routes.report_unreachable(addr);
                        if let Some(name) = self.routes.group_of_addr(addr) {
                            self.routes.refresh_group_soon(&name);
                        }
                    }
                }
            }
        }
        ok
    }

    /// CHECK_CLIENT_CONFIG (`checkClientInBroker`): every broker of each routed topic whose
    /// subscription is not a TAG expression must accept it, so a consumer whose brokers cannot filter
    /// by it fails at start instead of pulling errors forever. A topic without a route yet is checked
    /// by nobody (its pulls will say).
    pub async fn check_client_in_broker(&self, subscriptions: &BTreeMap<String, SubscriptionData>) -> Result<()> {
        for (topic, sub) in subscriptions {
            if sub.expression_type.is_empty() || sub.expression_type == EXPRESSION_TYPE_TAG {
                continue;
            }
            let body = CheckClientRequestBody {
                client_id: self.client_id.clone(),
                group: self.group.clone(),
                subscription_data: sub.clone(),
            }
            .encode()
            .map_err(|e| ClientError::invalid_argument("checkClientInBroker", e.to_string()))?;
            for addr in self.broker_addrs_of(std::slice::from_ref(topic)) {
                let request = RemotingCommand::request(RequestCode::CheckClientConfig).with_body(body.clone());
                self.call_ok("checkClientInBroker", &addr, request)
                    .await
                    .map_err(|e| e.with_context("topic", topic).with_context("expression", &sub.sub_string))?;
            }
        }
        Ok(())
    }

    /// UNREGISTER_CLIENT for the consumer group at every address in `addrs`; failures are logged.
    pub async fn unregister(&self, addrs: &BTreeSet<String>) {
        for addr in addrs {
            let header = UnregisterClientRequestHeader {
                client_id: self.client_id.clone(),
                producer_group: None,
                consumer_group: Some(self.group.clone()),
            };
            let request = RemotingCommand::request_with_header(RequestCode::UnregisterClient, &header);
            if let Err(e) = self.call_ok("unregisterClient", addr, request).await {
                tracing::warn!(addr = %addr, error = %e, "unregister failed");
            }
        }
    }

    /// GET_CONSUMER_LIST_BY_GROUP at one group serving `topic` (`findConsumerIdList`).
    pub async fn find_consumer_ids(&self, topic: &str) -> Result<Vec<String>> {
        let route = self.routes.cached_route(topic).ok_or_else(|| {
            ClientError::new(ErrorKind::NoRoute, "findConsumerIdList", "no route").with_context("topic", topic)
        })?;
        // Java picks a random group; any member's broker knows the whole group after heartbeats.
        let addr = route
            .broker_datas
            .iter()
            .find_map(|bd| self.find_broker_addr_in_subscribe(&bd.broker_name, MASTER_ID, false))
            .ok_or_else(|| {
                ClientError::new(ErrorKind::NoRoute, "findConsumerIdList", "no broker address")
                    .with_context("topic", topic)
            })?;
        let header = GetConsumerListByGroupRequestHeader { consumer_group: self.group.clone() };
        let request = RemotingCommand::request_with_header(RequestCode::GetConsumerListByGroup, &header);
        let response = self.call_ok("findConsumerIdList", &addr.addr, request).await?;
        ConsumerListBody::decode(&response.body).map(|b| b.consumer_id_list).map_err(|e| {
            ClientError::new(ErrorKind::Protocol, "findConsumerIdList", "bad consumer list body").with_source(e)
        })
    }

    /// PULL_MESSAGE of `mq` at `addr`; the raw response, whatever its code. A failed call that
    /// says the group's leader moved updates the route first ([`Self::failover_after`]).
    pub async fn pull(
        &self,
        mq: &MessageQueue,
        addr: &str,
        header: &PullMessageRequestHeader,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let request = RemotingCommand::request_with_header(RequestCode::PullMessage, header);
        let result = self.call("pullMessage", addr, request, timeout).await;
        if let Err(e) = &result {
            self.failover_after(mq, addr, e).await;
        }
        result
    }

    /// QUERY_CONSUMER_OFFSET at the group's master (any address if none); `None` on QUERY_NOT_FOUND.
    pub async fn query_consumer_offset(&self, mq: &MessageQueue) -> Result<Option<i64>> {
        let found = self.broker_addr("queryConsumerOffset", mq, MASTER_ID, false).await?;
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: self.group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            set_zero_if_not_found: None,
            bname: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::QueryConsumerOffset, &header);
        let response = self.call("queryConsumerOffset", &found.addr, request, self.rpc_timeout).await?;
        match response.response_code() {
            ResponseCode::Success => response
                .decode_header::<QueryConsumerOffsetResponseHeader>()
                .map(|h| Some(h.offset))
                .map_err(|e| protocol_error("queryConsumerOffset", e)),
            ResponseCode::QueryNotFound => Ok(None),
            code => {
                Err(ClientError::broker("queryConsumerOffset", code, response.remark).with_context("addr", &found.addr))
            }
        }
    }

    fn update_consumer_offset_request(&self, mq: &MessageQueue, offset: i64) -> RemotingCommand {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: self.group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            commit_offset: offset,
            bname: None,
        };
        RemotingCommand::request_with_header(RequestCode::UpdateConsumerOffset, &header)
    }

    /// UPDATE_CONSUMER_OFFSET, oneway as the 4.x client sends it: returns once the frame is queued,
    /// so it may be lost if the connection closes right after (the periodic persist only).
    pub async fn update_consumer_offset_oneway(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let found = self.broker_addr("updateConsumerOffset", mq, MASTER_ID, false).await?;
        let request = self.update_consumer_offset_request(mq, offset).into_oneway();
        self.remoting
            .invoke_oneway(&found.addr, request, self.rpc_timeout)
            .await
            .map_err(|e| ClientError::remoting("updateConsumerOffset", e).with_context("addr", &found.addr))
    }

    /// UPDATE_CONSUMER_OFFSET, two-way: `Ok` once the group has stored (replicated) the offset. A
    /// follower refuses it naming the leader: the update goes straight there. Any other failure
    /// refreshes the route and tries once more, since the leader it went to may have moved.
    pub async fn update_consumer_offset(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let first = self.update_consumer_offset_at_master(mq, offset).await;
        let Err(e) = first else { return Ok(()) };
        if let Some(leader) = e.remark().and_then(parse_leader_hint) {
            tracing::debug!(mq = ?mq, offset, leader, "offset update refused by a follower; sending it to the leader");
            let request = self.update_consumer_offset_request(mq, offset);
            return self.call_ok("updateConsumerOffset", leader, request).await.map(|_| ());
        }
        tracing::debug!(mq = ?mq, offset, error = %e, "offset update failed; refreshing the route and retrying");
        let addr = e.context.iter().find(|(k, _)| *k == "addr").map(|(_, v)| v.clone());
        if let Some(addr) = addr.filter(|a| classify(&e, a) == CallFailure::Unreachable) {
            self.routes.report_unreachable(&addr);
        }
        self.routes.refresh_group(&mq.broker_name, Some(&mq.topic), tokio::time::Instant::now()).await;
        self.update_consumer_offset_at_master(mq, offset).await
    }

    async fn update_consumer_offset_at_master(&self, mq: &MessageQueue, offset: i64) -> Result<()> {
        let found = self.broker_addr("updateConsumerOffset", mq, MASTER_ID, false).await?;
        let request = self.update_consumer_offset_request(mq, offset);
        self.call_ok("updateConsumerOffset", &found.addr, request).await.map(|_| ())
    }

    /// GET_MAX_OFFSET of `mq` at its master.
    pub async fn max_offset(&self, mq: &MessageQueue) -> Result<i64> {
        let found = self.broker_addr("maxOffset", mq, MASTER_ID, false).await?;
        let header = GetMaxOffsetRequestHeader { topic: mq.topic.clone(), queue_id: mq.queue_id, bname: None };
        let request = RemotingCommand::request_with_header(RequestCode::GetMaxOffset, &header);
        let response = self.call_ok("maxOffset", &found.addr, request).await?;
        response
            .decode_header::<GetMaxOffsetResponseHeader>()
            .map(|h| h.offset)
            .map_err(|e| protocol_error("maxOffset", e))
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP of `mq` at its master.
    pub async fn search_offset(&self, mq: &MessageQueue, timestamp_ms: i64) -> Result<i64> {
        let found = self.broker_addr("searchOffset", mq, MASTER_ID, false).await?;
        let header = SearchOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            timestamp: timestamp_ms,
            bname: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::SearchOffsetByTimestamp, &header);
        let response = self.call_ok("searchOffset", &found.addr, request).await?;
        response
            .decode_header::<SearchOffsetResponseHeader>()
            .map(|h| h.offset)
            .map_err(|e| protocol_error("searchOffset", e))
    }

    /// LOCK_BATCH_MQ at `broker_name`'s master; returns the queues now locked by this client. A
    /// failure that says the leader moved is retried once at the group's new leader.
    pub async fn lock_batch(&self, broker_name: &str, mqs: Vec<MessageQueue>) -> Result<BTreeSet<MessageQueue>> {
        let body =
            LockBatchRequestBody { client_id: self.client_id.clone(), consumer_group: self.group.clone(), mq_set: mqs };
        let body = body.encode().map_err(|e| protocol_error("lockBatchMQ", e))?;
        let response = self.call_master("lockBatchMQ", RequestCode::LockBatchMq, broker_name, body).await?;
        LockBatchResponseBody::decode(&response.body)
            .map(|b| b.lock_ok_mq_set.into_iter().collect())
            .map_err(|e| protocol_error("lockBatchMQ", e))
    }

    /// UNLOCK_BATCH_MQ at `broker_name`'s master, retried once at the group's new leader as
    /// [`Self::lock_batch`] is: an unlock lost in a leader change holds the queues from their next
    /// owner until the broker's lock expires (60 s).
    pub async fn unlock_batch(&self, broker_name: &str, mqs: Vec<MessageQueue>) -> Result<()> {
        let body = UnlockBatchRequestBody {
            client_id: self.client_id.clone(),
            consumer_group: self.group.clone(),
            mq_set: mqs,
        };
        let body = body.encode().map_err(|e| protocol_error("unlockBatchMQ", e))?;
        self.call_master("unlockBatchMQ", RequestCode::UnlockBatchMq, broker_name, body).await.map(|_| ())
    }

    /// `code` with `body` at `broker_name`'s master; a failure that says the leader moved (the route
    /// then follows it) is tried once more at the new leader.
    async fn call_master(
        &self,
        op: &'static str,
        code: RequestCode,
        broker_name: &str,
        body: Vec<u8>,
    ) -> Result<RemotingCommand> {
        let topic = self.routes.cached_topics().into_iter().find(|t| {
            self.routes.cached_route(t).is_some_and(|r| r.broker_datas.iter().any(|b| b.broker_name == broker_name))
        });
        let mut retried = false;
        loop {
            let Some(found) = self.find_broker_addr_in_subscribe(broker_name, MASTER_ID, true) else {
                let e =
                    ClientError::new(ErrorKind::NoRoute, op, "no master address").with_context("broker", broker_name);
                // Mid-election the route may name no leader yet: read it again once.
                let Some(topic) = topic.as_deref().filter(|_| !retried) else { return Err(e) };
                retried = true;
                if self.routes.update_route(topic).await.is_err() {
                    return Err(e);
                }
                continue;
            };
            let request = RemotingCommand::request(code).with_body(body.clone());
            match self.call_ok(op, &found.addr, request).await {
                Ok(response) => return Ok(response),
                Err(e) => {
                    let Some(topic) = topic.as_deref().filter(|_| !retried) else { return Err(e) };
                    let mq = MessageQueue::new(topic, broker_name, 0);
                    if !self.failover_after(&mq, &found.addr, &e).await {
                        return Err(e);
                    }
                    retried = true;
                }
            }
        }
    }

    /// CONSUMER_SEND_MSG_BACK of `msg` (read from `mq`) to the group's master, or to the message's
    /// store host when the group has no known master.
    pub async fn send_message_back(
        &self,
        msg: &MessageExt,
        mq: &MessageQueue,
        delay_level: i32,
        max_reconsume_times: i32,
    ) -> Result<()> {
        let addr = match self.routes.broker_addrs(&mq.broker_name).and_then(|a| a.get(&MASTER_ID).cloned()) {
            Some(addr) => addr,
            None => msg.store_host.to_string(),
        };
        let header = ConsumerSendMsgBackRequestHeader {
            offset: msg.commit_log_offset,
            group: self.group.clone(),
            delay_level,
            origin_msg_id: Some(msg.msg_id()),
            origin_topic: Some(msg.message.topic.to_string()),
            unit_mode: Some(false),
            max_reconsume_times: Some(max_reconsume_times),
            bname: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::ConsumerSendMsgBack, &header);
        self.call_ok("consumerSendMessageBack", &addr, request).await.map(|_| ())
    }
}

/// The address choice of `findBrokerAddressInSubscribe`: the wanted id; for a replica id, the next
/// id too; then, unless `only_this_broker`, the lowest listed id.
pub(crate) fn pick_broker_addr(
    addrs: &BTreeMap<i64, String>,
    broker_id: i64,
    only_this_broker: bool,
) -> Option<FindBrokerResult> {
    if let Some(addr) = addrs.get(&broker_id) {
        return Some(FindBrokerResult { addr: addr.clone(), slave: broker_id != MASTER_ID });
    }
    if broker_id != MASTER_ID
        && let Some(addr) = addrs.get(&(broker_id + 1))
    {
        return Some(FindBrokerResult { addr: addr.clone(), slave: true });
    }
    if only_this_broker {
        return None;
    }
    // A follower was asked for (a broker's `suggestWhichBrokerId`): raftmq's followers register as
    // their Raft node id + 1, so Java's "1, else 2" may name none of them; any follower serves it.
    if broker_id != MASTER_ID
        && let Some((id, addr)) = addrs.iter().find(|(id, _)| **id != MASTER_ID)
    {
        return Some(FindBrokerResult { addr: addr.clone(), slave: *id != MASTER_ID });
    }
    addrs.iter().next().map(|(id, addr)| FindBrokerResult { addr: addr.clone(), slave: *id != MASTER_ID })
}

/// An enum's wire name (its JSON string), e.g. `CLUSTERING`.
pub(crate) fn json_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn protocol_error(op: &'static str, e: impl std::error::Error + Send + Sync + 'static) -> ClientError {
    ClientError::new(ErrorKind::Protocol, op, e.to_string()).with_source(e)
}

/// SYSTEM_ERROR with `remark`, as Java's client refuses a broker's request.
fn refuse(remark: String) -> RemotingCommand {
    RemotingCommand::response(ResponseCode::SystemError, Some(remark))
}

/// Java's answer to a request for a group this client does not consume for.
fn not_this_group(group: &str) -> RemotingCommand {
    refuse(format!("The Consumer Group <{group}> not exist in this consumer"))
}

/// SUCCESS with `body`.
fn answer<B: JsonBody>(body: &B) -> RemotingCommand {
    match body.encode() {
        Ok(bytes) => RemotingCommand::success().with_body(bytes),
        Err(e) => refuse(e.to_string()),
    }
}

/// What a consumer reports about itself.
type RunningInfoFn = Box<dyn Fn() -> ConsumerRunningInfo + Send + Sync>;

/// A boxed future, as a handler stored in the instance returns it.
pub(crate) type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// Hands one message (and its broker's name) to the consumer's listener.
type DirectConsumeFn = Box<dyn Fn(MessageExt, String) -> BoxFuture<ConsumeMessageDirectlyResult> + Send + Sync>;

/// CONSUME_MESSAGE_DIRECTLY for `group` (`ClientRemotingProcessor.consumeMessageDirectly`): the
/// stored record in the body goes to the listener; the answer is how it went, or Java's
/// SYSTEM_ERROR for another group, before the consumer exists, or for a body that is no record.
fn direct_consume_processor(
    group: &str,
    handler: Arc<OnceLock<DirectConsumeFn>>,
) -> Arc<impl raftmq_common::remoting::processor::RequestProcessor> {
    let my_group = group.to_owned();
    Arc::new(processor_fn(move |_ctx, request: RemotingCommand| {
        let handler = Arc::clone(&handler);
        let my_group = my_group.clone();
        async move {
            let header = match request.decode_header::<ConsumeMessageDirectlyResultRequestHeader>() {
                Ok(h) => h,
                Err(e) => return Some(refuse(format!("the request header is invalid: {e}"))),
            };
            let Some(consume) = handler.get().filter(|_| header.consumer_group == my_group) else {
                return Some(not_this_group(&header.consumer_group));
            };
            let msg = match crate::consumer::pull_api::decode_one_stored(&request.body) {
                Ok(m) => m,
                Err(e) => return Some(refuse(format!("the message in the request is invalid: {e}"))),
            };
            Some(answer(&consume(msg, header.broker_name.unwrap_or_default()).await))
        }
    }))
}

/// GET_CONSUMER_RUNNING_INFO for `group` (`ClientRemotingProcessor.getConsumerRunningInfo`):
/// the consumer's report, or Java's SYSTEM_ERROR for another group or before the consumer exists.
fn running_info_processor(
    group: &str,
    source: Arc<OnceLock<RunningInfoFn>>,
) -> Arc<impl raftmq_common::remoting::processor::RequestProcessor> {
    let my_group = group.to_owned();
    Arc::new(processor_fn(move |_ctx, request: RemotingCommand| {
        let source = Arc::clone(&source);
        let my_group = my_group.clone();
        async move {
            let header = match request.decode_header::<GetConsumerRunningInfoRequestHeader>() {
                Ok(h) => h,
                Err(e) => return Some(refuse(format!("the request header is invalid: {e}"))),
            };
            let Some(info) = source.get().filter(|_| header.consumer_group == my_group) else {
                return Some(not_this_group(&header.consumer_group));
            };
            Some(answer(&info()))
        }
    }))
}

/// GET_CONSUMER_STATUS_FROM_CLIENT (`mqadmin getConsumerStatus`, through the broker): the offsets
/// of the topic this consumer holds in memory, from the same report as GET_CONSUMER_RUNNING_INFO.
/// As Java's `MQClientInstance.getConsumerStatus`, another group's request gets an empty table.
fn consumer_status_processor(
    group: &str,
    source: Arc<OnceLock<RunningInfoFn>>,
) -> Arc<impl raftmq_common::remoting::processor::RequestProcessor> {
    let my_group = group.to_owned();
    Arc::new(processor_fn(move |_ctx, request: RemotingCommand| {
        let source = Arc::clone(&source);
        let my_group = my_group.clone();
        async move {
            let header = match request.decode_header::<GetConsumerStatusRequestHeader>() {
                Ok(h) => h,
                Err(e) => return Some(refuse(format!("the request header is invalid: {e}"))),
            };
            let info = source.get().filter(|_| header.group == my_group).map(|info| info()).unwrap_or_default();
            Some(answer(&GetConsumerStatusBody {
                message_queue_table: held_offsets(&info, &header.topic),
                ..GetConsumerStatusBody::default()
            }))
        }
    }))
}

/// The offsets of `topic` a running-info report holds (a queue with none yet is left out).
fn held_offsets(info: &ConsumerRunningInfo, topic: &str) -> BTreeMap<MessageQueue, i64> {
    info.mq_table
        .iter()
        .filter(|(mq, q)| mq.topic == topic && q.commit_offset >= 0)
        .map(|(mq, q)| (mq.clone(), q.commit_offset))
        .collect()
}

/// RESET_CONSUMER_CLIENT_OFFSET for `group`: keeps the table (the latest per topic) and wakes the
/// rebalance task, which applies it (`MQClientInstance.resetOffset`). Oneway: no answer.
fn reset_offset_processor(
    group: &str,
    resets: Arc<Mutex<BTreeMap<String, BTreeMap<MessageQueue, i64>>>>,
    signal: Arc<Notify>,
) -> Arc<impl raftmq_common::remoting::processor::RequestProcessor> {
    let my_group = group.to_owned();
    Arc::new(processor_fn(move |ctx, request: RemotingCommand| {
        let resets = Arc::clone(&resets);
        let signal = Arc::clone(&signal);
        let my_group = my_group.clone();
        async move {
            let header = match request.decode_header::<ResetOffsetRequestHeader>() {
                Ok(h) => h,
                Err(e) => {
                    tracing::warn!(broker = %ctx.peer_addr(), error = %e, "bad RESET_CONSUMER_CLIENT_OFFSET header; dropped");
                    return None;
                }
            };
            if header.group != my_group {
                tracing::debug!(group = %header.group, "offset reset for another group");
                return None;
            }
            match ResetOffsetBody::decode(&request.body) {
                Ok(body) => {
                    tracing::info!(group = %my_group, topic = %header.topic, timestamp = header.timestamp,
                        queues = body.offset_table.len(), broker = %ctx.peer_addr(), "offset reset pushed by the broker");
                    resets
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(header.topic)
                        .or_default()
                        .extend(body.offset_table);
                    signal.notify_one();
                }
                Err(e) => {
                    tracing::warn!(broker = %ctx.peer_addr(), error = %e, "bad RESET_CONSUMER_CLIENT_OFFSET body; dropped")
                }
            }
            None
        }
    }))
}

/// GET_CONSUMER_RUNNING_INFO's answer from a consumer's parts: its properties (from
/// [`ClientInstance::running_properties`] plus its own settings), its queues, its per-topic rates
/// as of now (stamped in seconds since `rates_epoch`) and its subscriptions.
pub(crate) fn running_info(
    properties: BTreeMap<String, String>,
    mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
    rates: &TopicRates,
    rates_epoch: tokio::time::Instant,
    subscriptions: &BTreeMap<String, SubscriptionData>,
) -> ConsumerRunningInfo {
    ConsumerRunningInfo {
        jstack: None,
        mq_table,
        properties,
        status_table: rates.status_table(rates_epoch.elapsed().as_secs()).into_iter().collect(),
        subscription_set: subscriptions.values().cloned().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_address_choice_follows_find_broker_address_in_subscribe() {
        let addrs: BTreeMap<i64, String> = [(0, "m".to_owned()), (1, "s1".to_owned())].into_iter().collect();
        let pick = |id, only| pick_broker_addr(&addrs, id, only).map(|f| (f.addr, f.slave));
        assert_eq!(pick(0, true), Some(("m".into(), false)));
        assert_eq!(pick(1, true), Some(("s1".into(), true)));
        assert_eq!(pick(5, true), None);
        assert_eq!(pick(5, false), Some(("s1".into(), true)), "a follower was asked for: any follower");
        // raftmq's followers register as node id + 1: node 1 leads, 2 and 3 follow as 3 and 4.
        let raft: BTreeMap<i64, String> = [(0, "m".to_owned()), (3, "s3".to_owned()), (4, "s4".to_owned())].into();
        assert_eq!(pick_broker_addr(&raft, 1, false).map(|f| (f.addr, f.slave)), Some(("s3".into(), true)));
        assert_eq!(pick_broker_addr(&raft, 0, false).map(|f| (f.addr, f.slave)), Some(("m".into(), false)));
        let leaderless: BTreeMap<i64, String> = [(2, "s2".to_owned()), (3, "s3".to_owned())].into_iter().collect();
        assert_eq!(pick_broker_addr(&leaderless, 0, true), None);
        assert_eq!(pick_broker_addr(&leaderless, 0, false).map(|f| (f.addr, f.slave)), Some(("s2".into(), true)));
        assert_eq!(pick_broker_addr(&leaderless, 1, true).map(|f| f.addr), Some("s2".into()));
    }
}
