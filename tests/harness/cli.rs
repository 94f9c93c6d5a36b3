//! Harness of the `raftmq` client-command tests: an in-process NameServer, fake broker nodes that
//! register with it (REGISTER_BROKER with Raft fields, as raftmq brokers do) and answer what the
//! commands need, and a runner for the real binary.
//!
//! A fake node answers SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (queue offsets counting up),
//! UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG, DELETE_SUBSCRIPTIONGROUP, DELETE_TOPIC_IN_BROKER,
//! GET_ALL_TOPIC_CONFIG ([`TOPIC`], ordered), GET_MIN_OFFSET (5) and GET_MAX_OFFSET (100); every
//! other code gets REQUEST_CODE_NOT_SUPPORTED, as a broker that lacks the feature answers. Every
//! request is recorded.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Output;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use anyhow::bail;
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
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetResponseHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetResponseHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::RemotingServer;
use raftmq_common::remoting::processor_fn;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;

pub const CLUSTER: &str = "DefaultCluster";
pub const TOPIC: &str = "TopicTest";
/// Queues of [`TOPIC`] on each fake group.
pub const QUEUES: i32 = 4;
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a command of these tests may run: a hang fails the test instead of blocking it.
const COMMAND_MAX: Duration = Duration::from_secs(60);

/// A NameServer and one broker group: node 0 leads, node 1 follows.
pub struct Cluster {
    pub namesrv: NameServer,
    pub leader: FakeBroker,
    pub follower: FakeBroker,
}

impl Cluster {
    /// Starts the NameServer and registers both nodes of `broker-a` with [`TOPIC`].
    pub async fn start() -> Result<Cluster> {
        let config = NamesrvConfig {
            listen_port: 0,
            bind_address: "127.0.0.1".into(),
            scan_not_active_broker_interval: Duration::from_secs(10),
            broker_channel_expired_time: Duration::from_secs(120),
            kv_config_path: String::new(),
            ..NamesrvConfig::default()
        };
        let namesrv = NameServer::start(config).await?;
        let addr = namesrv.local_addr().to_string();
        let leader = FakeBroker::start("broker-a").await?;
        leader.register(&addr, RaftRole::Leader, 0).await?;
        let follower = FakeBroker::start("broker-a").await?;
        follower.register(&addr, RaftRole::Follower, 1).await?;
        Ok(Cluster { namesrv, leader, follower })
    }

    pub fn namesrv_addr(&self) -> String {
        self.namesrv.local_addr().to_string()
    }

    /// Runs `raftmq <args>` against this cluster's NameServer (via `NAMESRV_ADDR`, as scripts do).
    pub async fn raftmq(&self, args: &[&str]) -> Result<Run> {
        raftmq(&self.namesrv_addr(), args).await
    }

    pub async fn shutdown(&self) {
        self.leader.shutdown().await;
        self.follower.shutdown().await;
        self.namesrv.shutdown().await;
    }
}

/// What a finished command printed.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(out: Output) -> Run {
        Run {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Fails with both streams when the command did not exit 0.
    pub fn ok(self) -> Result<Run> {
        if !self.success {
            bail!("raftmq failed\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        }
        Ok(self)
    }

    /// stdout parsed as one JSON document.
    pub fn json(&self) -> Result<serde_json::Value> {
        serde_json::from_str(self.stdout.trim())
            .map_err(|e| anyhow::anyhow!("stdout is not one JSON document ({e}):\n{}", self.stdout))
    }
}

/// Runs the binary with `NAMESRV_ADDR` set, stdin closed and logs quiet.
pub async fn raftmq(namesrv: &str, args: &[&str]) -> Result<Run> {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(args)
        .env("NAMESRV_ADDR", namesrv)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(COMMAND_MAX, child).await??;
    Ok(Run::from(out))
}

struct FakeState {
    requests: Mutex<Vec<RemotingCommand>>,
    next_queue_offset: AtomicI64,
    next_commit_log_offset: AtomicI64,
    store_host: OnceLock<SocketAddr>,
}

/// A scripted broker node.
pub struct FakeBroker {
    pub broker_name: String,
    pub addr: String,
    server: RemotingServer,
    state: Arc<FakeState>,
    /// Kept for the test's life: the NameServer drops a broker whose registering connection closes.
    namesrv_client: RemotingClient,
}

impl FakeBroker {
    pub async fn start(broker_name: &str) -> Result<FakeBroker> {
        let state = Arc::new(FakeState {
            requests: Mutex::default(),
            next_queue_offset: AtomicI64::new(0),
            next_commit_log_offset: AtomicI64::new(0),
            store_host: OnceLock::new(),
        });
        let handler = state.clone();
        let mut table = ProcessorTable::new();
        table.register_default(Arc::new(processor_fn(move |_ctx, request| {
            let state = handler.clone();
            async move { Some(state.handle(request)) }
        })));
        let server = RemotingServer::bind("127.0.0.1:0".parse()?, table).await?;
        // Nobody knows the address before this line, so no request can need it earlier.
        let _ = state.store_host.set(server.local_addr());
        Ok(FakeBroker {
            broker_name: broker_name.to_owned(),
            addr: server.local_addr().to_string(),
            server,
            state,
            namesrv_client: RemotingClient::new(),
        })
    }

    /// REGISTER_BROKER as Raft node `node_id` in `role`, term 1, serving [`TOPIC`].
    pub async fn register(&self, namesrv: &str, role: RaftRole, node_id: u64) -> Result<()> {
        let mut wrapper = TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 1, timestamp: 1_700_000_000_000 },
            ..Default::default()
        };
        let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(TOPIC) };
        wrapper.topic_config_table.insert(TOPIC.to_owned(), config);
        let body = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
            .encode_body(false)?;
        let header = RegisterBrokerRequestHeader {
            broker_name: self.broker_name.clone(),
            broker_addr: self.addr.clone(),
            cluster_name: CLUSTER.into(),
            ha_server_addr: self.addr.clone(),
            broker_id: 0,
            heartbeat_timeout_millis: None,
            compressed: false,
            body_crc32: body_crc32(&body),
            raft: Some(RaftRegistration { term: 1, role, node_id }),
        };
        let request = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header).with_body(body);
        let response = self.namesrv_client.invoke(namesrv, request, RPC_TIMEOUT).await?;
        if response.response_code() != ResponseCode::Success {
            bail!("REGISTER_BROKER failed: {} {:?}", response.response_code(), response.remark);
        }
        Ok(())
    }

    /// Every request received, in arrival order.
    pub fn requests(&self) -> Vec<RemotingCommand> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The requests with `code`.
    pub fn requests_of(&self, code: RequestCode) -> Vec<RemotingCommand> {
        self.requests().into_iter().filter(|r| r.request_code() == code).collect()
    }

    pub async fn shutdown(&self) {
        self.namesrv_client.close().await;
        self.server.shutdown().await;
    }
}

impl FakeState {
    fn handle(&self, request: RemotingCommand) -> RemotingCommand {
        self.requests.lock().unwrap().push(request.clone());
        match request.request_code() {
            RequestCode::SendMessageV2 | RequestCode::SendBatchMessage | RequestCode::SendMessage => {
                self.stored(&request)
            }
            RequestCode::UpdateAndCreateTopic
            | RequestCode::UpdateBrokerConfig
            | RequestCode::DeleteSubscriptiongroup
            | RequestCode::DeleteTopicInBroker => RemotingCommand::success(),
            RequestCode::GetAllTopicConfig => {
                let mut wrapper = TopicConfigSerializeWrapper::default();
                let config = TopicConfig {
                    read_queue_nums: QUEUES,
                    write_queue_nums: QUEUES,
                    order: true,
                    ..TopicConfig::new(TOPIC)
                };
                wrapper.topic_config_table.insert(TOPIC.to_owned(), config);
                match wrapper.encode() {
                    Ok(body) => RemotingCommand::success().with_body(body),
                    Err(e) => RemotingCommand::response(ResponseCode::SystemError, Some(e.to_string())),
                }
            }
            RequestCode::GetMaxOffset => {
                RemotingCommand::success().with_header(&GetMaxOffsetResponseHeader { offset: 100 })
            }
            RequestCode::GetMinOffset => {
                RemotingCommand::success().with_header(&GetMinOffsetResponseHeader { offset: 5 })
            }
            code => RemotingCommand::response(
                ResponseCode::RequestCodeNotSupported,
                Some(format!("{code} request type not supported")),
            ),
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
        let queue_offset = self.next_queue_offset.fetch_add(i64::try_from(count).unwrap_or(0), Ordering::SeqCst);
        let host = self.store_host.get().copied().unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let ids: Vec<String> = (0..count)
            .map(|_| OffsetMsgId::new(host, self.next_commit_log_offset.fetch_add(100, Ordering::SeqCst)).to_string())
            .collect();
        RemotingCommand::success().with_header(&SendMessageResponseHeader {
            msg_id: ids.join(","),
            queue_id: header.queue_id,
            queue_offset,
            transaction_id: None,
        })
    }
}
