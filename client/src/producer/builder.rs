//! [`ProducerBuilder`]: a producer's options, with `DefaultMQProducer`'s names and defaults, checked
//! once by `build` (a built producer never meets an invalid option).

use std::time::Duration;

use raftmq_common::limits::MESSAGE_BODY_SIZE_MAX_BYTES;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::message::sys_flag;
use raftmq_common::message::validate::AUTO_CREATE_TOPIC_KEY_TOPIC;
use raftmq_common::protocol::SerializeType;

use crate::body_compression::BodyCompression;
use crate::client_config::ClientConfig;
use crate::client_config::client_config_setters;

/// `DefaultMQProducer.retryTimesWhenSendFailed` (and `…AsyncFailed`): 2 retries, 3 attempts.
pub const RETRY_TIMES_WHEN_SEND_FAILED_DEFAULT: u32 = 2;
/// `DefaultMQProducer.defaultTopicQueueNums`: queues a topic auto-created by a send gets per group.
pub const DEFAULT_TOPIC_QUEUE_NUMS_DEFAULT: i32 = 4;

/// Builds a [`Producer`]; options mirror `DefaultMQProducer`'s fields and defaults.
#[derive(Debug, Clone)]
pub struct ProducerBuilder {
    pub(super) producer_group: String,
    pub(super) client: ClientConfig,
    pub(super) send_timeout: Duration,
    pub(super) retry_times_when_send_failed: u32,
    pub(super) retry_times_when_send_async_failed: u32,
    pub(crate) compression: BodyCompression,
    pub(super) max_message_size_bytes: usize,
    pub(super) create_topic_key: String,
    pub(super) default_topic_queue_nums: i32,
    pub(super) send_latency_fault_enable: bool,
    pub(super) retry_another_broker_when_not_store_ok: bool,
    pub(super) serialize_type: SerializeType,
    /// Send HEART_BEAT to the groups' brokerId 0 (only the transaction producer turns it on).
    pub(super) heartbeat: bool,
}

impl ProducerBuilder {
    /// The TLS settings of `config`: a producer a client builds for itself (trace, send-back)
    /// reaches the same servers the same way.
    pub(crate) fn tls_of(mut self, config: &ClientConfig) -> Self {
        self.client.use_tls = config.use_tls;
        self.client.tls = config.tls.clone();
        self
    }

    /// A builder for `producer_group` with RocketMQ's defaults (3 s timeout, 2 retries, compress
    /// ≥ 4 KiB, 4 MiB max, TBW102 with 4 queues) and latency fault avoidance on.
    pub fn new(producer_group: impl Into<String>) -> Self {
        ProducerBuilder {
            producer_group: producer_group.into(),
            client: ClientConfig::default(),
            send_timeout: Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS),
            retry_times_when_send_failed: RETRY_TIMES_WHEN_SEND_FAILED_DEFAULT,
            retry_times_when_send_async_failed: RETRY_TIMES_WHEN_SEND_FAILED_DEFAULT,
            compression: BodyCompression::default(),
            max_message_size_bytes: MESSAGE_BODY_SIZE_MAX_BYTES,
            create_topic_key: AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
            default_topic_queue_nums: DEFAULT_TOPIC_QUEUE_NUMS_DEFAULT,
            send_latency_fault_enable: true,
            retry_another_broker_when_not_store_ok: false,
            serialize_type: SerializeType::RocketMq,
            heartbeat: true,
        }
    }

    // namesrv_addr(s), credentials, instance_name, client_ip, route_poll_interval, enable_msg_trace,
    // customized_trace_topic: the options every client shares.
    client_config_setters!(client);

    /// Deadline of one send, retries included (`sendMsgTimeout`, 3 s).
    pub fn send_timeout(mut self, timeout: Duration) -> Self {
        self.send_timeout = timeout;
        self
    }

    /// Extra attempts of a failed synchronous send (`retryTimesWhenSendFailed`, 2).
    pub fn retry_times_when_send_failed(mut self, retries: u32) -> Self {
        self.retry_times_when_send_failed = retries;
        self
    }

    /// Extra attempts of a failed asynchronous send (`retryTimesWhenSendAsyncFailed`, 2).
    pub fn retry_times_when_send_async_failed(mut self, retries: u32) -> Self {
        self.retry_times_when_send_async_failed = retries;
        self
    }

    /// Bodies of at least this many bytes are compressed (`compressMsgBodyOverHowmuch`, 4 KiB;
    /// the algorithm: [`ProducerBuilder::compress_type`]).
    pub fn compress_over_bytes(mut self, bytes: usize) -> Self {
        self.compression.over_bytes = bytes;
        self
    }

    /// The compression of large bodies (`compressType`: ZLIB by default, LZ4 or ZSTD as RocketMQ 5).
    pub fn compress_type(mut self, kind: sys_flag::CompressionType) -> Self {
        self.compression.kind = kind;
        self
    }

    /// The ZSTD level (`compressLevel`, 5).
    pub fn compress_level(mut self, level: i32) -> Self {
        self.compression.level = level;
        self
    }

    /// Largest body (or encoded batch) accepted (`maxMessageSize`, 4 MiB).
    pub fn max_message_size_bytes(mut self, bytes: usize) -> Self {
        self.max_message_size_bytes = bytes;
        self
    }

    /// The template topic for auto-creation (`createTopicKey`, `TBW102`).
    pub fn create_topic_key(mut self, topic: impl Into<String>) -> Self {
        self.create_topic_key = topic.into();
        self
    }

    /// Queues per group of a topic auto-created by a send (`defaultTopicQueueNums`, 4).
    pub fn default_topic_queue_nums(mut self, nums: i32) -> Self {
        self.default_topic_queue_nums = nums;
        self
    }

    /// Deadline of a NameServer call (`mqClientApiTimeout`, 3 s).
    pub fn namesrv_timeout(mut self, timeout: Duration) -> Self {
        self.client.route_config.rpc_timeout = timeout;
        self
    }

    /// Latency-based avoidance of slow or failed groups (`sendLatencyFaultEnable`; on here, off in Java).
    pub fn send_latency_fault_enable(mut self, enable: bool) -> Self {
        self.send_latency_fault_enable = enable;
        self
    }

    /// Retry on another group when a send is stored with a non-OK status (`retryAnotherBrokerWhenNotStoreOK`).
    pub fn retry_another_broker_when_not_store_ok(mut self, enable: bool) -> Self {
        self.retry_another_broker_when_not_store_ok = enable;
        self
    }

    /// How send requests' headers are encoded (Java's `rocketmq.serialize.type`): `ROCKETMQ`, the
    /// binary form, by default here; Java clients default to `JSON`. Every 4.x broker reads both,
    /// and answers in the request's form (a few early refusals of Apache brokers come back as JSON,
    /// which the client reads as well). A send header is a dozen fields, and JSON cost about
    /// 14 % of a broker's CPU and as much of a producer's at full rate (escaped properties,
    /// quoted numbers, one more pass over each value).
    pub fn serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// Whether the producer heartbeats its brokers with its group, as a Java producer does (on by
    /// default; see the module docs). Brokers list heartbeating producers in
    /// GET_PRODUCER_CONNECTION_LIST (`admin producerConnection`), and a transaction producer
    /// needs it to be asked about its halves.
    pub fn heartbeat(mut self, enable: bool) -> Self {
        self.heartbeat = enable;
        self
    }

    /// The producer group this builder is for.
    pub(crate) fn group(&self) -> &str {
        &self.producer_group
    }
}
