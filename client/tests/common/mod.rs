//! Test harness: a real in-process NameServer and [`FakeBroker`]s, remoting servers that register
//! with it through REGISTER_BROKER (as namesrv's t10 tests do), record every request, and answer
//! send and admin calls in a scripted way ([`Behavior`]).
//!
//! Waiting: requests are counted through a `watch` channel, so a test waits for "n requests seen"
//! instead of sleeping; the wait is bounded by [`EVENTUALLY_MAX`].

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use raftmq_client::Producer;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::message::batch::decode_batch;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::register::body_crc32;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetResponseHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetResponseHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::RemotingServer;
use raftmq_common::remoting::processor_fn;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;
use tokio::sync::watch;

pub const CLUSTER: &str = "DefaultCluster";
pub const RPC_TIMEOUT: Duration = Duration::from_secs(3);
pub const EVENTUALLY_MAX: Duration = Duration::from_secs(10);

/// A NameServer on a free loopback port, no KV persistence.
pub async fn start_namesrv() -> Result<NameServer> {
    let config = NamesrvConfig {
        listen_port: 0,
        bind_address: "127.0.0.1".into(),
        scan_not_active_broker_interval: Duration::from_secs(10),
        broker_channel_expired_time: Duration::from_secs(120),
        kv_config_path: String::new(),
        ..NamesrvConfig::default()
    };
    Ok(NameServer::start(config).await?)
}

/// A started producer for `namesrv`, client IP pinned for stable ids.
pub async fn start_producer(
    namesrv: &str,
    configure: impl FnOnce(raftmq_client::ProducerBuilder) -> raftmq_client::ProducerBuilder,
) -> Result<Producer> {
    let builder =
        Producer::builder("TestProducerGroup").namesrv_addr(namesrv).client_ip("127.0.0.1".parse()?).instance_name("t");
    let producer = configure(builder).build()?;
    producer.start().await?;
    Ok(producer)
}

/// An address nothing listens on: bound, then released.
pub fn closed_addr() -> Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    drop(listener);
    Ok(addr.to_string())
}

/// How a fake broker answers.
#[derive(Debug, Clone)]
pub enum Behavior {
    /// SUCCESS with msgId/queueId/queueOffset (and canned admin answers).
    Succeed,
    /// This code and remark to every request.
    Fail(ResponseCode, String),
    /// No answer at all: the caller times out.
    Hang,
}

struct FakeState {
    behavior: Mutex<Behavior>,
    requests: Mutex<Vec<RemotingCommand>>,
    seen: watch::Sender<usize>,
    next_queue_offset: AtomicI64,
    next_commit_log_offset: AtomicI64,
    /// The address offsetMsgIds carry; set once the server is bound.
    store_host: OnceLock<SocketAddr>,
}

/// A scripted broker node.
pub struct FakeBroker {
    pub broker_name: String,
    pub broker_id: i64,
    pub addr: String,
    server: RemotingServer,
    state: Arc<FakeState>,
    /// Kept for the test's life: the NameServer drops a broker whose registering connection closes.
    namesrv_client: RemotingClient,
}

impl FakeBroker {
    /// Starts a broker node on a free port; it is not registered yet.
    pub async fn start(broker_name: &str, broker_id: i64) -> Result<FakeBroker> {
        let state = Arc::new(FakeState {
            behavior: Mutex::new(Behavior::Succeed),
            requests: Mutex::default(),
            seen: watch::channel(0).0,
            next_queue_offset: AtomicI64::new(0),
            next_commit_log_offset: AtomicI64::new(0),
            store_host: OnceLock::new(),
        });
        let handler = state.clone();
        let mut table = ProcessorTable::new();
        table.register_default(Arc::new(processor_fn(move |_ctx, request| {
            let state = handler.clone();
            async move { state.handle(request) }
        })));
        let server = RemotingServer::bind("127.0.0.1:0".parse()?, table).await?;
        // Requests cannot arrive before the address is known: nobody has it yet.
        let _ = state.store_host.set(server.local_addr());
        Ok(FakeBroker {
            broker_name: broker_name.to_owned(),
            broker_id,
            addr: server.local_addr().to_string(),
            server,
            state,
            namesrv_client: RemotingClient::new(),
        })
    }

    /// REGISTER_BROKER with `namesrv`: `(topic, queue count, perm)` per topic.
    pub async fn register(&self, namesrv: &str, topics: &[(&str, i32, i32)]) -> Result<()> {
        register_broker(&self.namesrv_client, namesrv, &self.broker_name, self.broker_id, &self.addr, topics).await
    }

    pub fn set_behavior(&self, behavior: Behavior) {
        *self.state.behavior.lock().unwrap() = behavior;
    }

    /// Every request received, in arrival order.
    pub fn requests(&self) -> Vec<RemotingCommand> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The send requests received (SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE).
    pub fn sends(&self) -> Vec<RemotingCommand> {
        self.requests()
            .into_iter()
            .filter(|r| matches!(r.request_code(), RequestCode::SendMessageV2 | RequestCode::SendBatchMessage))
            .collect()
    }

    pub fn request_count(&self) -> usize {
        *self.state.seen.borrow()
    }

    /// Waits until at least `n` requests arrived.
    pub async fn wait_for_requests(&self, n: usize) -> Result<()> {
        let mut rx = self.state.seen.subscribe();
        tokio::time::timeout(EVENTUALLY_MAX, rx.wait_for(|seen| *seen >= n))
            .await
            .with_context(|| format!("{} did not receive {n} requests", self.addr))??;
        Ok(())
    }

    pub async fn shutdown(&self) {
        self.namesrv_client.close().await;
        self.server.shutdown().await;
    }
}

/// The typed send header of a recorded request.
pub fn send_header(request: &RemotingCommand) -> Result<SendMessageRequestHeader> {
    Ok(SendMessageRequestHeader::read_request(request)?)
}

impl FakeState {
    fn handle(&self, request: RemotingCommand) -> Option<RemotingCommand> {
        // Producers heartbeat from a task of their own, at times no test controls: answered, and
        // left out of what the tests count and inspect.
        if request.request_code() == RequestCode::HeartBeat {
            return Some(RemotingCommand::success());
        }
        self.requests.lock().unwrap().push(request.clone());
        self.seen.send_modify(|n| *n += 1);
        let behavior = self.behavior.lock().unwrap().clone();
        match behavior {
            Behavior::Hang => None,
            Behavior::Fail(code, remark) => Some(RemotingCommand::response(code, Some(remark))),
            Behavior::Succeed => Some(self.succeed(&request)),
        }
    }

    fn succeed(&self, request: &RemotingCommand) -> RemotingCommand {
        match request.request_code() {
            RequestCode::SendMessageV2 | RequestCode::SendBatchMessage => self.stored(request),
            RequestCode::GetAllTopicConfig => {
                let mut wrapper = TopicConfigSerializeWrapper::default();
                wrapper.topic_config_table.insert("TopicA".into(), TopicConfig::new("TopicA"));
                RemotingCommand::success().with_body(wrapper.encode().unwrap_or_default())
            }
            RequestCode::GetMaxOffset => {
                RemotingCommand::success().with_header(&GetMaxOffsetResponseHeader { offset: 100 })
            }
            RequestCode::GetMinOffset => {
                RemotingCommand::success().with_header(&GetMinOffsetResponseHeader { offset: 5 })
            }
            RequestCode::QueryConsumerOffset => match request.decode_header::<QueryConsumerOffsetRequestHeader>() {
                Ok(h) if h.queue_id == 0 => {
                    RemotingCommand::success().with_header(&QueryConsumerOffsetResponseHeader { offset: 42 })
                }
                _ => RemotingCommand::response(ResponseCode::QueryNotFound, Some("Not found".into())),
            },
            _ => RemotingCommand::success(),
        }
    }

    /// SUCCESS for a send: one offsetMsgId per stored message, queue offsets counting up.
    fn stored(&self, request: &RemotingCommand) -> RemotingCommand {
        let Ok(header) = SendMessageRequestHeader::read_request(request) else {
            return RemotingCommand::response(ResponseCode::SystemError, Some("bad send header".into()));
        };
        let count = if header.is_batch() {
            decode_batch(&request.body, &header.topic).map(|m| m.len()).unwrap_or(0)
        } else {
            1
        };
        let count_i64 = i64::try_from(count).unwrap_or(0);
        let queue_offset = self.next_queue_offset.fetch_add(count_i64, Ordering::SeqCst);
        let ids: Vec<String> = (0..count)
            .map(|_| {
                let offset = self.next_commit_log_offset.fetch_add(100, Ordering::SeqCst);
                let host = self.store_host.get().copied().unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
                OffsetMsgId::new(host, offset).to_string()
            })
            .collect();
        RemotingCommand::success().with_header(&SendMessageResponseHeader {
            msg_id: ids.join(","),
            queue_id: header.queue_id,
            queue_offset,
            transaction_id: None,
        })
    }
}

/// REGISTER_BROKER of a fake broker `broker_name`/`broker_id` at `addr` with `namesrv`:
/// `(topic, queue count, perm)` per topic.
pub async fn register_broker(
    namesrv_client: &RemotingClient,
    namesrv: &str,
    broker_name: &str,
    broker_id: i64,
    addr: &str,
    topics: &[(&str, i32, i32)],
) -> Result<()> {
    let mut wrapper = TopicConfigSerializeWrapper {
        data_version: DataVersion { counter: 1, timestamp: 1_700_000_000_000 },
        ..Default::default()
    };
    for (topic, queues, perm) in topics {
        let config = TopicConfig {
            read_queue_nums: *queues,
            write_queue_nums: *queues,
            perm: *perm,
            ..TopicConfig::new(*topic)
        };
        wrapper.topic_config_table.insert((*topic).to_owned(), config);
    }
    let body = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
        .encode_body(false)?;
    let header = RegisterBrokerRequestHeader {
        broker_name: broker_name.to_owned(),
        broker_addr: addr.to_owned(),
        cluster_name: CLUSTER.into(),
        ha_server_addr: addr.to_owned(),
        broker_id,
        heartbeat_timeout_millis: None,
        compressed: false,
        body_crc32: body_crc32(&body),
        raft: None,
    };
    let request = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
    let response = namesrv_client.invoke(namesrv, request, RPC_TIMEOUT).await?;
    if response.response_code() != ResponseCode::Success {
        bail!("REGISTER_BROKER failed: {} {:?}", response.response_code(), response.remark);
    }
    Ok(())
}
