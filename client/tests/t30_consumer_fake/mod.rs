//! [`ConsumerBroker`]: a fake broker group master for consumer tests. It keeps queues of encoded
//! CommitLog records (common's `encode_record`) and answers PULL_MESSAGE (tag-code filtering like a
//! real broker, long-poll woken by appends), HEART_BEAT, UNREGISTER_CLIENT,
//! GET_CONSUMER_LIST_BY_GROUP, offsets, LOCK/UNLOCK_BATCH_MQ and CONSUMER_SEND_MSG_BACK; a membership
//! change sends NOTIFY_CONSUMER_IDS_CHANGED to every member's connection, as the broker does.
//!
//! Waiting: every handled request bumps a `watch` counter, so tests wait for a condition on the
//! broker's state ([`ConsumerBroker::wait_until`]) instead of sleeping.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Result;
use anyhow::bail;
use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::record::encode_record;
use raftmq_common::message::tag::tags_code;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::consumer_list::ConsumerListBody;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::body::lock_batch::LockBatchRequestBody;
use raftmq_common::protocol::body::lock_batch::LockBatchResponseBody;
use raftmq_common::protocol::body::lock_batch::UnlockBatchRequestBody;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::register::body_crc32;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::client::ConsumerSendMsgBackRequestHeader;
use raftmq_common::protocol::header::client::GetConsumerListByGroupRequestHeader;
use raftmq_common::protocol::header::client::NotifyConsumerIdsChangedRequestHeader;
use raftmq_common::protocol::header::client::UnregisterClientRequestHeader;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetResponseHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetResponseHeader;
use raftmq_common::protocol::header::offset::SearchOffsetResponseHeader;
use raftmq_common::protocol::header::offset::UpdateConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageResponseHeader;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use raftmq_common::remoting::Connection;
use raftmq_common::remoting::ConnectionContext;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::RemotingServer;
use raftmq_common::remoting::processor_fn;
use tokio::sync::Notify;
use tokio::sync::watch;

pub const WAIT_MAX: Duration = Duration::from_secs(20);
/// Longest the fake holds a suspended pull, whatever the client asks: keeps shutdowns quick.
const SUSPEND_CAP: Duration = Duration::from_millis(300);

/// One stored message.
#[derive(Debug, Clone)]
pub struct Stored {
    pub record: Bytes,
    pub tags_code: i64,
    pub commit_log_offset: i64,
}

#[derive(Default)]
pub struct Data {
    pub queues: HashMap<(String, i32), Vec<Stored>>,
    /// (group, topic, queueId) → offset.
    pub offsets: HashMap<(String, String, i32), i64>,
    /// group → clientId → connection.
    pub consumers: BTreeMap<String, BTreeMap<String, Connection>>,
    /// (group, topic) → subscription from the last heartbeat.
    pub subscriptions: HashMap<(String, String), SubscriptionData>,
    pub locks: HashMap<MessageQueue, String>,
    pub send_backs: Vec<ConsumerSendMsgBackRequestHeader>,
    pub pulls: Vec<PullMessageRequestHeader>,
    pub codes: Vec<RequestCode>,
    pub fail_send_back: bool,
    /// QUERY_CONSUMER_OFFSET requests still to refuse as a replica that lost leadership does.
    pub refuse_offset_queries: u32,
    next_commit_log_offset: i64,
}

pub struct State {
    data: Mutex<Data>,
    appended: Notify,
    seen: watch::Sender<u64>,
    store_host: OnceLock<SocketAddr>,
}

pub struct ConsumerBroker {
    pub broker_name: String,
    pub addr: String,
    pub state: Arc<State>,
    server: RemotingServer,
    namesrv_client: RemotingClient,
}

impl ConsumerBroker {
    pub async fn start(broker_name: &str) -> Result<Self> {
        let state = Arc::new(State {
            data: Mutex::default(),
            appended: Notify::new(),
            seen: watch::channel(0).0,
            store_host: OnceLock::new(),
        });
        let handler = state.clone();
        let mut table = ProcessorTable::new();
        table.register_default(Arc::new(processor_fn(move |ctx, request| {
            let state = handler.clone();
            async move {
                let response = state.handle(ctx, request).await;
                state.seen.send_modify(|n| *n += 1);
                response
            }
        })));
        let server = RemotingServer::bind("127.0.0.1:0".parse()?, table).await?;
        let _ = state.store_host.set(server.local_addr());
        Ok(ConsumerBroker {
            broker_name: broker_name.to_owned(),
            addr: server.local_addr().to_string(),
            state,
            server,
            namesrv_client: RemotingClient::new(),
        })
    }

    /// REGISTER_BROKER as brokerId 0 with `(topic, queues)`.
    pub async fn register(&self, namesrv: &str, topics: &[(&str, i32)]) -> Result<()> {
        let mut wrapper = TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 1, timestamp: 1_700_000_000_000 },
            ..Default::default()
        };
        for (topic, queues) in topics {
            let config = TopicConfig {
                read_queue_nums: *queues,
                write_queue_nums: *queues,
                perm: perm::READ_WRITE,
                ..TopicConfig::new(*topic)
            };
            wrapper.topic_config_table.insert((*topic).to_owned(), config);
        }
        let body = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
            .encode_body(false)?;
        let header = RegisterBrokerRequestHeader {
            broker_name: self.broker_name.clone(),
            broker_addr: self.addr.clone(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: self.addr.clone(),
            broker_id: 0,
            heartbeat_timeout_millis: None,
            compressed: false,
            body_crc32: body_crc32(&body),
            raft: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
        let response = self.namesrv_client.invoke(namesrv, request, Duration::from_secs(3)).await?;
        if response.response_code() != ResponseCode::Success {
            bail!("REGISTER_BROKER failed: {:?}", response.remark);
        }
        Ok(())
    }

    pub fn data(&self) -> MutexGuard<'_, Data> {
        self.state.data()
    }

    /// Appends a message with `tags` and `keys` to a queue; returns its queue offset.
    pub fn append(&self, topic: &str, queue_id: i32, tags: Option<&str>, keys: &str) -> i64 {
        let mut message = Message::new(topic, Bytes::from(format!("{keys}-body")));
        if let Some(t) = tags {
            message.set_tags(t);
        }
        message.set_keys(keys);
        let store_host = self.state.store_host.get().copied().unwrap_or_else(|| "127.0.0.1:1".parse().unwrap());
        let mut data = self.data();
        let commit_log_offset = data.next_commit_log_offset;
        data.next_commit_log_offset += 1_000;
        let queue = data.queues.entry((topic.to_owned(), queue_id)).or_default();
        let queue_offset = queue.len() as i64;
        let ext = MessageExt {
            message,
            queue_id,
            queue_offset,
            commit_log_offset,
            born_timestamp: 1_700_000_000_000,
            born_host: "127.0.0.1:40000".parse().unwrap(),
            store_timestamp: 1_700_000_000_001,
            store_host,
            ..Default::default()
        };
        let record = encode_record(&ext).expect("record encodes").freeze();
        queue.push(Stored { record, tags_code: tags_code(tags), commit_log_offset });
        drop(data);
        self.state.appended.notify_waiters();
        queue_offset
    }

    /// Waits until `cond` holds on the broker's data (checked after every request).
    pub async fn wait_until(&self, what: &str, cond: impl Fn(&Data) -> bool) -> Result<()> {
        let mut rx = self.state.seen.subscribe();
        let result = tokio::time::timeout(WAIT_MAX, async {
            loop {
                if cond(&self.data()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        if result.is_err() {
            bail!("broker {}: timed out waiting for {what}", self.broker_name);
        }
        Ok(())
    }

    /// Sends NOTIFY_CONSUMER_IDS_CHANGED to every member of `group`.
    pub async fn notify_ids_changed(&self, group: &str) {
        self.state.notify_group(group).await;
    }

    pub async fn shutdown(&self) {
        self.namesrv_client.close().await;
        self.server.shutdown().await;
    }
}

impl State {
    fn data(&self) -> MutexGuard<'_, Data> {
        self.data.lock().unwrap()
    }

    async fn notify_group(&self, group: &str) {
        let conns: Vec<Connection> =
            self.data().consumers.get(group).map(|m| m.values().cloned().collect()).unwrap_or_default();
        for conn in conns {
            let header = NotifyConsumerIdsChangedRequestHeader { consumer_group: group.to_owned() };
            let request =
                RemotingCommand::request_with_header(RequestCode::NotifyConsumerIdsChanged, &header).into_oneway();
            let _ = conn.invoke_oneway(request, Duration::from_secs(3)).await;
        }
    }

    async fn handle(&self, ctx: ConnectionContext, request: RemotingCommand) -> Option<RemotingCommand> {
        let code = request.request_code();
        self.data().codes.push(code);
        let response = match code {
            RequestCode::PullMessage => self.pull(&request).await,
            RequestCode::HeartBeat => self.heartbeat(&ctx, &request).await,
            RequestCode::UnregisterClient => {
                let Ok(h) = request.decode_header::<UnregisterClientRequestHeader>() else { return bad() };
                let group = h.consumer_group.unwrap_or_default();
                let removed = self.data().consumers.get_mut(&group).and_then(|m| m.remove(&h.client_id)).is_some();
                if removed {
                    self.notify_group(&group).await;
                }
                RemotingCommand::success()
            }
            RequestCode::GetConsumerListByGroup => {
                let Ok(h) = request.decode_header::<GetConsumerListByGroupRequestHeader>() else { return bad() };
                let ids: Vec<String> = self
                    .data()
                    .consumers
                    .get(&h.consumer_group)
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default();
                if ids.is_empty() {
                    RemotingCommand::response(ResponseCode::SystemError, Some("no consumer".into()))
                } else {
                    RemotingCommand::success().with_body(ConsumerListBody { consumer_id_list: ids }.encode().ok()?)
                }
            }
            RequestCode::QueryConsumerOffset => {
                let Ok(h) = request.decode_header::<QueryConsumerOffsetRequestHeader>() else { return bad() };
                let mut data = self.data();
                if data.refuse_offset_queries > 0 {
                    data.refuse_offset_queries -= 1;
                    let remark = "broker is not the Raft leader; leader=unknown".to_owned();
                    return Some(RemotingCommand::response(ResponseCode::ServiceNotAvailable, Some(remark)));
                }
                match data.offsets.get(&(h.consumer_group, h.topic, h.queue_id)) {
                    Some(offset) => {
                        RemotingCommand::success().with_header(&QueryConsumerOffsetResponseHeader { offset: *offset })
                    }
                    None => RemotingCommand::response(ResponseCode::QueryNotFound, Some("Not found".into())),
                }
            }
            RequestCode::UpdateConsumerOffset => {
                let Ok(h) = request.decode_header::<UpdateConsumerOffsetRequestHeader>() else { return bad() };
                self.data().offsets.insert((h.consumer_group, h.topic, h.queue_id), h.commit_offset);
                RemotingCommand::success()
            }
            RequestCode::GetMaxOffset => {
                let Ok(h) = request.decode_header::<GetMaxOffsetRequestHeader>() else { return bad() };
                let offset = self.data().queues.get(&(h.topic, h.queue_id)).map(|q| q.len() as i64).unwrap_or(0);
                RemotingCommand::success().with_header(&GetMaxOffsetResponseHeader { offset })
            }
            RequestCode::GetMinOffset => {
                RemotingCommand::success().with_header(&GetMinOffsetResponseHeader { offset: 0 })
            }
            RequestCode::SearchOffsetByTimestamp => {
                RemotingCommand::success().with_header(&SearchOffsetResponseHeader { offset: 0 })
            }
            RequestCode::LockBatchMq => {
                let Ok(body) = LockBatchRequestBody::decode(&request.body) else { return bad() };
                let mut data = self.data();
                let mut ok = Vec::new();
                for mq in body.mq_set {
                    let owner = data.locks.entry(mq.clone()).or_insert_with(|| body.client_id.clone());
                    if *owner == body.client_id {
                        ok.push(mq);
                    }
                }
                RemotingCommand::success().with_body(LockBatchResponseBody { lock_ok_mq_set: ok }.encode().ok()?)
            }
            RequestCode::UnlockBatchMq => {
                let Ok(body) = UnlockBatchRequestBody::decode(&request.body) else { return bad() };
                let mut data = self.data();
                for mq in body.mq_set {
                    if data.locks.get(&mq) == Some(&body.client_id) {
                        data.locks.remove(&mq);
                    }
                }
                RemotingCommand::success()
            }
            RequestCode::ConsumerSendMsgBack => {
                let Ok(h) = request.decode_header::<ConsumerSendMsgBackRequestHeader>() else { return bad() };
                let mut data = self.data();
                data.send_backs.push(h);
                if data.fail_send_back {
                    RemotingCommand::response(ResponseCode::SystemError, Some("send-back refused".into()))
                } else {
                    RemotingCommand::success()
                }
            }
            _ => RemotingCommand::success(),
        };
        Some(response)
    }

    async fn heartbeat(&self, ctx: &ConnectionContext, request: &RemotingCommand) -> RemotingCommand {
        let Ok(hb) = HeartbeatData::decode(&request.body) else {
            return RemotingCommand::response(ResponseCode::SystemError, Some("bad heartbeat".into()));
        };
        let mut changed = Vec::new();
        {
            let mut data = self.data();
            for consumer in &hb.consumer_data_set {
                for sub in &consumer.subscription_data_set {
                    data.subscriptions.insert((consumer.group_name.clone(), sub.topic.clone()), sub.clone());
                }
                let members = data.consumers.entry(consumer.group_name.clone()).or_default();
                if members.insert(hb.client_id.clone(), ctx.connection().clone()).is_none() {
                    changed.push(consumer.group_name.clone());
                }
            }
        }
        for group in changed {
            self.notify_group(&group).await;
        }
        RemotingCommand::success()
    }

    async fn pull(&self, request: &RemotingCommand) -> RemotingCommand {
        let Ok(h) = request.decode_header::<PullMessageRequestHeader>() else {
            return RemotingCommand::response(ResponseCode::SystemError, Some("bad pull header".into()));
        };
        {
            let mut data = self.data();
            if pull_sys_flag::has_commit_offset(h.sys_flag) {
                // Forward only, as the real broker (`OffsetCommitter::commit_forward`): a pull read
                // before a consumer's final UPDATE_CONSUMER_OFFSET may be processed after it, and
                // must not take that commit back.
                let stored = data.offsets.entry((h.consumer_group.clone(), h.topic.clone(), h.queue_id)).or_insert(0);
                *stored = (*stored).max(h.commit_offset);
            }
            data.pulls.push(h.clone());
        }
        let suspend = pull_sys_flag::has_suspend(h.sys_flag);
        let notified = self.appended.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let first = self.try_pull(&h);
        if suspend && first.response_code() == ResponseCode::PullNotFound {
            let wait = Duration::from_millis(h.suspend_timeout_millis.max(0) as u64).min(SUSPEND_CAP);
            let _ = tokio::time::timeout(wait, notified).await;
            return self.try_pull(&h);
        }
        first
    }

    fn try_pull(&self, h: &PullMessageRequestHeader) -> RemotingCommand {
        let data = self.data();
        let empty = Vec::new();
        let queue = data.queues.get(&(h.topic.clone(), h.queue_id)).unwrap_or(&empty);
        let max = queue.len() as i64;
        let header = |next: i64| PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: next,
            min_offset: 0,
            max_offset: max,
        };
        if h.queue_offset < 0 || h.queue_offset > max {
            let next = if h.queue_offset < 0 { 0 } else { max };
            return RemotingCommand::response(ResponseCode::PullOffsetMoved, None).with_header(&header(next));
        }
        if h.queue_offset == max {
            return RemotingCommand::response(ResponseCode::PullNotFound, None).with_header(&header(max));
        }
        let codes: Option<Vec<i32>> = data
            .subscriptions
            .get(&(h.consumer_group.clone(), h.topic.clone()))
            .filter(|s| !s.is_sub_all())
            .map(|s| s.code_set.clone());
        let mut body = BytesMut::new();
        let mut found = 0;
        let mut next = h.queue_offset;
        for stored in &queue[h.queue_offset as usize..] {
            if found >= h.max_msg_nums {
                break;
            }
            next += 1;
            if codes.as_ref().is_none_or(|c| c.contains(&(stored.tags_code as i32))) {
                body.extend_from_slice(&stored.record);
                found += 1;
            }
        }
        if found == 0 {
            return RemotingCommand::response(ResponseCode::PullRetryImmediately, None).with_header(&header(next));
        }
        RemotingCommand::success().with_header(&header(next)).with_body(body.freeze())
    }
}

fn bad() -> Option<RemotingCommand> {
    Some(RemotingCommand::response(ResponseCode::SystemError, Some("bad request".into())))
}
