//! `BrokerConfig`: what `raftmq broker` reads from its config file (`-c`) and `-D key=value` overrides.
//!
//! Keys are RocketMQ's camelCase names (`BrokerConfig`, `MessageStoreConfig`, `broker.conf`); unknown keys
//! fail at startup naming the key. A file named `*.toml` is TOML; any other is read as Java properties,
//! as RocketMQ reads its `broker.conf`, where the master/slave keys Raft replaces ([`JAVA_ONLY_KEYS`])
//! are skipped with a warning. Durations accept RocketMQ's plain milliseconds (`30000`) or a string
//! with a unit (`"30s"`, `"500ms"`, `"2m"`, `"1h"`). Layering: defaults < file < overrides.
//!
//! The Raft group is the RocketMQ broker group: `brokerName` names it, `raftPeers` lists its members and
//! `raftSelfId` says which one this process is (DLedger's `dLegerPeers` / `dLegerSelfId`):
//!
//! ```toml
//! brokerClusterName = "DefaultCluster"
//! brokerName = "broker-a"                  # = the Raft group
//! brokerIP1 = "10.0.0.1"                   # advertised to NameServers; default: host of our remotingAddr
//! listenPort = 10911
//! namesrvAddr = "10.0.0.9:9876;10.0.0.10:9876"
//! storePathRootDir = "/data/store"
//! raftSelfId = 0
//! adminPort = 8080                         # /livez, /readyz, /metrics, admin API (0: ephemeral)
//! adminToken = "…"                         # optional: Bearer token of every /api/v1/ call; without it adminPort is loopback only
//! grpcServerPort = 8081                    # optional: RocketMQ 5 gRPC MessagingService (0: off)
//! aclEnable = true                         # optional: plain ACL (RocketMQ's plain_acl.yml)
//! aclFile = "/etc/raftmq/plain_acl.yml"    # default <storePathRootDir>/config/plain_acl.yml
//! innerAccessKey = "groupPeers"            # an admin account of the ACL: signs this replica's calls
//! innerSecretKey = "…"                     #   to its peers (masked in GET_BROKER_CONFIG)
//! clusterSecretFile = "/etc/raftmq/cluster.secret"  # signs Raft RPCs and NameServer registrations;
//!                                          #   required when raftAddr or namesrvAddr is not loopback
//! "tls.server.mode" = "enforcing"          # client remoting TLS, RocketMQ's keys (docs/security.md):
//! "tls.server.certPath" = "/etc/raftmq/tls/broker.pem"  # disabled | permissive | enforcing;
//! "tls.server.keyPath" = "/etc/raftmq/tls/broker.key"   #   the pair is re-read when it changes
//! "tls.enable" = true                      # this broker's own calls (NameServers, peers) use TLS,
//! "tls.client.trustCertPath" = "/etc/raftmq/tls/ca.pem" #   checking servers against this CA
//! adminHttpsEnable = true                  # optional: the admin API over HTTPS (same certificate)
//!
//! [[raftPeers]]
//! id = 0
//! remotingAddr = "10.0.0.1:10911"          # what clients reach (brokerIP1:listenPort of that node)
//! raftAddr = "10.0.0.1:40911"              # Raft RPC port
//!
//! [[raftPeers]]
//! id = 1
//! remotingAddr = "10.0.0.2:10911"
//! raftAddr = "10.0.0.2:40911"
//! ```
//!
//! [`BrokerConfig::validate`] (`broker_config/validate.rs`) checks what serde cannot, and says which
//! invariants hold after it.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use raftmq_common::cluster_secret::ClusterSecret;
use raftmq_common::config_file;
use raftmq_common::config_file::FileError;
use raftmq_common::limits::DELAY_PROGRESS_BATCH_MAX_COUNT;
use raftmq_common::protocol::body::properties_text;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::tls_settings::ClientAuth;
use raftmq_common::tls_settings::TlsClientSettings;
use raftmq_common::tls_settings::TlsMode;
use raftmq_common::tls_settings::TlsServerSettings;
use raftmq_raft::RaftConfig;
use serde::Deserialize;
use serde::Serialize;
use thiserror::Error;

use crate::state::consume_queue::CQ_STORE_UNIT_SIZE_BYTES;
use crate::state::index_file::INDEX_ENTRY_DEFAULT_COUNT;
use crate::state::index_file::INDEX_SLOT_DEFAULT_COUNT;
use crate::state::index_file::IndexFileSizes;
use crate::state::pull::PullLimits;

/// RocketMQ's broker remoting port.
pub const LISTEN_PORT_DEFAULT: u16 = 10911;
/// Raft RPC port of the single default peer (DLedger's sample uses 40911–40913).
pub const RAFT_PORT_DEFAULT: u16 = 40911;
/// Admin HTTP port (health, metrics, admin API).
pub const ADMIN_PORT_DEFAULT: u16 = 8080;
/// `regionId` (`MixAll.DEFAULT_TRACE_REGION_ID`).
pub const REGION_ID_DEFAULT: &str = "DefaultRegion";
/// `mappedFileSizeCommitLog`: 1 GiB.
pub const MAPPED_FILE_SIZE_COMMIT_LOG_DEFAULT_BYTES: u64 = 1024 * 1024 * 1024;
/// `mappedFileSizeConsumeQueue`: 300,000 units of 20 bytes.
pub const MAPPED_FILE_SIZE_CONSUME_QUEUE_DEFAULT_BYTES: u64 = 300_000 * CQ_STORE_UNIT_SIZE_BYTES as u64;
/// `maxMessageSize`: 4 MiB.
pub const MAX_MESSAGE_SIZE_DEFAULT_BYTES: u32 = 4 * 1024 * 1024;
/// RocketMQ's delay levels (`messageDelayLevel`).
pub const MESSAGE_DELAY_LEVEL_DEFAULT: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
/// `timerMaxDelaySec`: 3 days, as RocketMQ 5.
pub const TIMER_MAX_DELAY_DEFAULT_SECS: u64 = 3 * 24 * 3600;
/// The longest `timerMaxDelaySec` accepted: 10 years, so a delivery time in ms never overflows.
pub const TIMER_MAX_DELAY_MAX_SECS: u64 = 10 * 366 * 24 * 3600;

/// One member of the broker's Raft group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RaftPeer {
    /// Raft node id; never reused for a different disk (docs/raft-log.md#membership).
    pub id: u64,
    /// `host:port` RocketMQ clients reach that node at (its `brokerIP1:listenPort`).
    pub remoting_addr: String,
    /// `host:port` of that node's Raft RPC listener.
    pub raft_addr: String,
}

/// The broker's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BrokerConfig {
    /// Cluster the group registers under (default `DefaultCluster`).
    pub broker_cluster_name: String,
    /// The group's name, shared by every replica (default `broker-a`); it is the Raft group.
    pub broker_name: String,
    /// Advertised IP (default: host of our own peer's `remotingAddr`).
    #[serde(rename = "brokerIP1", skip_serializing_if = "Option::is_none")]
    pub broker_ip1: Option<String>,
    /// Remoting port (default 10911).
    pub listen_port: u16,
    /// NameServers, `host:port;host:port` (default empty: `NAMESRV_ADDR` or `-n` supply them).
    pub namesrv_addr: String,
    /// Root of the store (default `$HOME/store`).
    pub store_path_root_dir: PathBuf,
    /// CommitLog segment size (default 1 GiB).
    pub mapped_file_size_commit_log: u64,
    /// ConsumeQueue file size; rounded up to whole 20-byte units as RocketMQ does (default 6,000,000).
    pub mapped_file_size_consume_queue: u64,
    /// Largest message body accepted (default 4 MiB; at most `BROKER_MAX_MESSAGE_SIZE_MAX_BYTES`,
    /// about 14.9 MiB, so one message fits one Raft entry).
    pub max_message_size: u32,
    /// Create unknown topics from `TBW102` on first send (default true).
    pub auto_create_topic_enable: bool,
    /// Create unknown consumer groups on first use (default true).
    pub auto_create_subscription_group: bool,
    /// Queues of `TBW102`, hence the most an auto-created topic gets (default 8).
    pub default_topic_queue_nums: i32,
    /// Broker `PermName` bits (default 6 = read + write).
    pub broker_permission: i32,
    /// The broker-cluster-name topic is readable and writable (default true).
    pub cluster_topic_enable: bool,
    /// The broker-name topic is readable and writable (default true).
    pub broker_topic_enable: bool,
    /// Create the message-trace topic (default false).
    pub trace_topic_enable: bool,
    /// Name of the message-trace topic (default `RMQ_SYS_TRACE_TOPIC`).
    pub msg_trace_topic_name: String,
    /// The broker's region, answered with every SEND_OK (`MSG_REGION`) and written by traced
    /// producers into their records (default `DefaultRegion`).
    pub region_id: String,
    /// Whether traced clients record sends to this broker (`TRACE_ON` with every SEND_OK; default
    /// true): off, a producer with `enableMsgTrace` writes no Pub record of them.
    pub trace_on: bool,
    /// Store request/reply replies in `<cluster>_REPLY_TOPIC` before pushing them to the requester
    /// (default true, as in RocketMQ); off, a reply is only pushed.
    pub store_reply_message_enable: bool,
    /// Deadline of one REGISTER_BROKER call (default 6 s).
    #[serde(with = "raftmq_common::config_duration")]
    pub register_broker_timeout_mills: Duration,
    /// Period of NameServer registration (default 30 s; RocketMQ clamps it to 10–60 s).
    #[serde(with = "raftmq_common::config_duration")]
    pub register_name_server_period: Duration,
    /// Hours a sealed CommitLog segment is kept (default 72).
    pub file_reserved_time: u32,
    /// Hours of day (`"04"`, or `"03;04"`) when expired files are deleted (default `"04"`).
    pub delete_when: String,
    /// Disk usage (%) at or above which expired files are deleted at any hour (default 75; 10–95).
    pub disk_max_used_space_ratio: u32,
    /// Disk usage (%) at or above which the oldest sealed segments are deleted even when not expired
    /// (RocketMQ 5's `diskSpaceCleanForciblyRatio`, default 85; at least `diskMaxUsedSpaceRatio`).
    pub disk_space_clean_forcibly_ratio: u32,
    /// Whether `diskSpaceCleanForciblyRatio` deletes the oldest segments before `fileReservedTime`
    /// (RocketMQ's `cleanFileForciblyEnable`). Default false, unlike Java's true: raftmq never drops
    /// an acknowledged message nobody may have read to make room; a full disk refuses writes
    /// (`diskSpaceWarningLevelRatio`) until space is freed. Set true for RocketMQ's trade.
    pub clean_file_forcibly_enable: bool,
    /// Disk usage (%) at or above which sends are refused (SERVICE_NOT_AVAILABLE, "the broker's disk
    /// is full") until it drops again (RocketMQ 5's `diskSpaceWarningLevelRatio`, default 90; 10–99,
    /// at least `diskSpaceCleanForciblyRatio`).
    pub disk_space_warning_level_ratio: u32,
    /// Period of the retention task: disk check, purge decision (RocketMQ `cleanResourceInterval`,
    /// default 10 s).
    #[serde(with = "raftmq_common::config_duration")]
    pub clean_resource_interval: Duration,
    /// For tests: the reserved time in milliseconds, replacing `fileReservedTime` hours (default none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_reserved_time_ms: Option<u64>,
    /// For tests: a file holding the disk used ratio (a fraction, `0.95`) that the retention task reads
    /// instead of measuring the file system of `storePathRootDir` (default none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_used_ratio_file: Option<PathBuf>,
    /// Suspend pulls that find nothing (default true); off = short polling.
    pub long_polling_enable: bool,
    /// Followers' reads (`slaveReadEnable`, default false): a pull answer suggests a follower
    /// (the group's `whichBrokerWhenConsumeSlowly`) to a consumer reading past the tail kept in
    /// memory (`accessMessageInMemoryMaxRatio`), and the group's `brokerId` (0: the leader) to one
    /// that is not; off, every answer suggests the leader.
    pub slave_read_enable: bool,
    /// Wait of a suspended pull when long polling is off (default 1 s).
    #[serde(with = "raftmq_common::config_duration")]
    pub short_polling_time_mills: Duration,
    /// Bytes one pull returns when reading from memory (default 256 KiB, at most 8 MiB).
    pub max_transfer_bytes_on_message_in_memory: u32,
    /// Messages one pull returns when reading from memory (default 32).
    pub max_transfer_count_on_message_in_memory: u32,
    /// Bytes one pull returns when reading from disk (default 64 KiB, at most 8 MiB).
    pub max_transfer_bytes_on_message_in_disk: u32,
    /// Messages one pull returns when reading from disk (default 8).
    pub max_transfer_count_on_message_in_disk: u32,
    /// Percent of RAM assumed to cache the CommitLog tail; older messages count as on disk (default 40).
    pub access_message_in_memory_max_ratio: u32,
    /// Hash slots per IndexFile (default 5,000,000).
    pub max_hash_slot_num: u32,
    /// Entries per IndexFile (default 20,000,000; entry 0 is unused).
    pub max_index_num: u32,
    /// Delay levels, space separated (`1s 5s ... 2h`).
    pub message_delay_level: String,
    /// Longest delay a timer message may ask for, in seconds (`timerMaxDelaySec`, default 3 days).
    pub timer_max_delay_sec: u64,
    /// A half message younger than this is not checked back (`transactionTimeOut`, default 6 s).
    #[serde(with = "raftmq_common::config_duration")]
    pub transaction_time_out: Duration,
    /// Checks of one half message before it is given up to `TRANS_CHECK_MAX_TIME_TOPIC`
    /// (`transactionCheckMax`, default 15).
    pub transaction_check_max: u32,
    /// Period of the transaction check-back round (`transactionCheckInterval`, default 60 s).
    #[serde(with = "raftmq_common::config_duration")]
    pub transaction_check_interval: Duration,
    /// Refuse half messages with NO_PERMISSION (`rejectTransactionMessage`, default false).
    pub reject_transaction_message: bool,
    /// Serve SQL92 subscriptions (`enablePropertyFilter`, default false as in RocketMQ: a SQL92
    /// consumer is refused with "The broker does not support consumer to filter message by SQL92").
    pub enable_property_filter: bool,
    /// Admin HTTP port (default 8080; 0 binds an ephemeral port, see `Broker::admin_addr`).
    pub admin_port: u16,
    /// Bearer token every admin HTTP `/api/v1/` call needs (default none: the admin server then
    /// listens on loopback only, and under `aclEnable` the API is closed). With it the server
    /// listens on every interface; probes and `/metrics` need no token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<String>,
    /// Port of the RocketMQ 5 gRPC MessagingService (`grpcServerPort`, RocketMQ proxy's key;
    /// default 0: not served). Served by `raftmq-grpc` next to the broker, on every interface.
    pub grpc_server_port: u16,
    /// Check every remoting request against the plain ACL (`aclEnable`, default false): accounts
    /// signed with `AccessKey` / `Signature`, per-topic and per-group permissions (`crate::acl`).
    pub acl_enable: bool,
    /// The plain ACL file, RocketMQ's `plain_acl.yml` layout (default
    /// `<storePathRootDir>/config/plain_acl.yml`); read at boot, re-read when it changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acl_file: Option<PathBuf>,
    /// The account this replica signs its own requests to the group's other replicas with
    /// (leadership transfer, removal notices) when they check the ACL. Needs `innerSecretKey`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner_access_key: Option<String>,
    /// Secret of `innerAccessKey`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inner_secret_key: Option<String>,
    /// The cluster secret (`clusterSecret`), the same on every broker replica and NameServer: it
    /// signs this replica's Raft RPCs and NameServer registrations, and peers refuse RPCs without
    /// it. Masked in GET_BROKER_CONFIG; prefer `clusterSecretFile`. Needed when the Raft port or a
    /// NameServer is beyond loopback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_secret: Option<String>,
    /// A file holding the cluster secret (trailing newline dropped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_secret_file: Option<PathBuf>,
    /// Start without a cluster secret although the Raft port or a NameServer is beyond loopback:
    /// anyone who reaches the Raft port can then rewrite the group. For trusted test networks only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub insecure_cluster_without_secret: bool,
    /// `tls.server.mode` of the remoting port: disabled, permissive (default: TLS and plaintext on
    /// one port; TLS only with a certificate) or enforcing (TLS only). The Raft port is not TLS.
    #[serde(rename = "tls.server.mode")]
    pub tls_server_mode: TlsMode,
    /// `tls.server.certPath`: the certificate chain (PEM, leaf first); re-read when it changes.
    #[serde(rename = "tls.server.certPath", skip_serializing_if = "Option::is_none")]
    pub tls_server_cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: its private key (PEM, unencrypted).
    #[serde(rename = "tls.server.keyPath", skip_serializing_if = "Option::is_none")]
    pub tls_server_key_path: Option<PathBuf>,
    /// `tls.server.trustCertPath`: the CA client certificates are checked against.
    #[serde(rename = "tls.server.trustCertPath", skip_serializing_if = "Option::is_none")]
    pub tls_server_trust_cert_path: Option<PathBuf>,
    /// `tls.server.need.client.auth`: none (default), optional or require (mutual TLS).
    #[serde(rename = "tls.server.need.client.auth")]
    pub tls_server_need_client_auth: ClientAuth,
    /// `tls.enable`: this broker's own remoting calls (NameServer registration, its peers'
    /// remoting ports) use TLS (default false). Needed when the NameServers or peers enforce TLS.
    #[serde(rename = "tls.enable")]
    pub tls_enable: bool,
    /// `tls.client.trustCertPath`: the CA the servers' certificates are checked against.
    #[serde(rename = "tls.client.trustCertPath", skip_serializing_if = "Option::is_none")]
    pub tls_client_trust_cert_path: Option<PathBuf>,
    /// `tls.client.certPath`: a client certificate for servers that require one.
    #[serde(rename = "tls.client.certPath", skip_serializing_if = "Option::is_none")]
    pub tls_client_cert_path: Option<PathBuf>,
    /// `tls.client.keyPath`: its key.
    #[serde(rename = "tls.client.keyPath", skip_serializing_if = "Option::is_none")]
    pub tls_client_key_path: Option<PathBuf>,
    /// `tls.client.authServer`: check the servers' certificates (default true; false accepts any,
    /// as Java's default does: test networks only).
    #[serde(rename = "tls.client.authServer")]
    pub tls_client_auth_server: bool,
    /// Serve the admin HTTP API over HTTPS (default false), with `adminHttpsCertPath` and
    /// `adminHttpsKeyPath`, else the remoting certificate (`tls.server.certPath`/`keyPath`);
    /// re-read when it changes.
    pub admin_https_enable: bool,
    /// The admin HTTPS certificate chain (PEM); default `tls.server.certPath`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_https_cert_path: Option<PathBuf>,
    /// Its key (PEM); default `tls.server.keyPath`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_https_key_path: Option<PathBuf>,
    /// Raft heartbeat period in ms (default 150).
    pub raft_heartbeat_interval_ms: u64,
    /// Lower bound of openraft's election timeout in ms (default 200). A follower campaigns
    /// `raftElectionTimeoutMaxMs + rand[min, max]` after its last heartbeat: 1.2–2.0 s by default.
    pub raft_election_timeout_min_ms: u64,
    /// Upper bound of openraft's election timeout in ms, also the leader lease (default 1000).
    pub raft_election_timeout_max_ms: u64,
    /// How often a checkpoint of the applied state (ConsumeQueue and IndexFile writes synced,
    /// the replicated tables saved) is written, in ms, so a restart re-applies only the log after
    /// it (RocketMQ's `StoreCheckpoint`); one is also written at a graceful stop. 0 = never: a
    /// restart then re-applies every retained entry. Default 10000.
    pub raft_checkpoint_interval_ms: u64,
    /// CommitLog bytes behind the durable end a leader keeps in the page cache for consumers
    /// reading the tail; older bytes are handed back to the kernel and read from disk when asked
    /// for. 0 = never drop (the kernel decides). Default 1 GiB.
    pub raft_page_cache_leader_window_bytes: u64,
    /// The same for a follower, whose CommitLog is read by its own apply right after commit.
    /// 0 = never drop. Default 64 MiB.
    pub raft_page_cache_follower_window_bytes: u64,
    /// TEST ONLY: a file holding a wall-clock offset in ms that the broker adds to the system time
    /// (the jepsen `clock` nemesis); see `crate::state::clock`. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_clock_skew_file: Option<PathBuf>,
    /// TEST ONLY, LOSES DATA (`testOnlyUnsafeAckBeforeFsyncLosesData`): the Raft log reports
    /// appends durable before they are fsynced, so a send can be acknowledged before any replica
    /// made it durable (the jepsen self-test shows its checkers catch that). The name says what it
    /// does so no production file sets it by accident; the old key [`LEGACY_UNSAFE_ACK_KEY`] is
    /// refused. Default false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub test_only_unsafe_ack_before_fsync_loses_data: bool,
    /// TEST ONLY, BREAKS ORDERLY CONSUMPTION ACROSS FAILOVER (`testOnlyLocalQueueLocksUnsafe`): queue
    /// locks are kept in the leader's memory as RocketMQ's master keeps them, not replicated, so a
    /// new leader grants queues the old one had locked (the jepsen `order` self-test shows its
    /// checker catches that). Default false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub test_only_local_queue_locks_unsafe: bool,
    /// This node's Raft id (default 0).
    pub raft_self_id: u64,
    /// The Raft group (default: this broker alone, at `brokerIP1` (default 127.0.0.1):`listenPort`,
    /// Raft address 127.0.0.1:40911). Last, because TOML prints arrays of tables after plain keys.
    pub raft_peers: Vec<RaftPeer>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        BrokerConfig {
            broker_cluster_name: "DefaultCluster".to_owned(),
            broker_name: "broker-a".to_owned(),
            broker_ip1: None,
            listen_port: LISTEN_PORT_DEFAULT,
            namesrv_addr: String::new(),
            store_path_root_dir: home.join("store"),
            mapped_file_size_commit_log: MAPPED_FILE_SIZE_COMMIT_LOG_DEFAULT_BYTES,
            mapped_file_size_consume_queue: MAPPED_FILE_SIZE_CONSUME_QUEUE_DEFAULT_BYTES,
            max_message_size: MAX_MESSAGE_SIZE_DEFAULT_BYTES,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            default_topic_queue_nums: 8,
            broker_permission: perm::READ_WRITE,
            cluster_topic_enable: true,
            broker_topic_enable: true,
            trace_topic_enable: false,
            msg_trace_topic_name: "RMQ_SYS_TRACE_TOPIC".to_owned(),
            region_id: REGION_ID_DEFAULT.to_owned(),
            trace_on: true,
            store_reply_message_enable: true,
            register_broker_timeout_mills: Duration::from_secs(6),
            register_name_server_period: Duration::from_secs(30),
            file_reserved_time: 72,
            delete_when: "04".to_owned(),
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 85,
            clean_file_forcibly_enable: false,
            disk_space_warning_level_ratio: 90,
            clean_resource_interval: Duration::from_secs(10),
            file_reserved_time_ms: None,
            disk_used_ratio_file: None,
            long_polling_enable: true,
            slave_read_enable: false,
            short_polling_time_mills: Duration::from_secs(1),
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_disk: 64 * 1024,
            max_transfer_count_on_message_in_disk: 8,
            access_message_in_memory_max_ratio: 40,
            max_hash_slot_num: INDEX_SLOT_DEFAULT_COUNT,
            max_index_num: INDEX_ENTRY_DEFAULT_COUNT,
            message_delay_level: MESSAGE_DELAY_LEVEL_DEFAULT.to_owned(),
            timer_max_delay_sec: TIMER_MAX_DELAY_DEFAULT_SECS,
            transaction_time_out: Duration::from_secs(6),
            transaction_check_max: 15,
            transaction_check_interval: Duration::from_secs(60),
            reject_transaction_message: false,
            enable_property_filter: false,
            admin_port: ADMIN_PORT_DEFAULT,
            admin_token: None,
            grpc_server_port: 0,
            acl_enable: false,
            acl_file: None,
            inner_access_key: None,
            inner_secret_key: None,
            cluster_secret: None,
            cluster_secret_file: None,
            insecure_cluster_without_secret: false,
            tls_server_mode: TlsMode::default(),
            tls_server_cert_path: None,
            tls_server_key_path: None,
            tls_server_trust_cert_path: None,
            tls_server_need_client_auth: ClientAuth::None,
            tls_enable: false,
            tls_client_trust_cert_path: None,
            tls_client_cert_path: None,
            tls_client_key_path: None,
            tls_client_auth_server: true,
            admin_https_enable: false,
            admin_https_cert_path: None,
            admin_https_key_path: None,
            raft_heartbeat_interval_ms: RaftConfig::default().heartbeat_interval_ms,
            raft_election_timeout_min_ms: RaftConfig::default().election_timeout_min_ms,
            raft_election_timeout_max_ms: RaftConfig::default().election_timeout_max_ms,
            raft_checkpoint_interval_ms: RaftConfig::default().checkpoint_interval_ms,
            raft_page_cache_leader_window_bytes: RaftConfig::default().page_cache_leader_window_bytes,
            raft_page_cache_follower_window_bytes: RaftConfig::default().page_cache_follower_window_bytes,
            test_clock_skew_file: None,
            test_only_unsafe_ack_before_fsync_loses_data: false,
            test_only_local_queue_locks_unsafe: false,
            raft_self_id: 0,
            raft_peers: vec![RaftPeer {
                id: 0,
                remoting_addr: format!("127.0.0.1:{LISTEN_PORT_DEFAULT}"),
                raft_addr: format!("127.0.0.1:{RAFT_PORT_DEFAULT}"),
            }],
        }
    }
}

/// Why the configuration could not be built.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file or an override is not valid TOML for this config (unknown key, wrong type, ...).
    #[error("invalid broker config{origin}: {source}")]
    Parse {
        /// ` in <file>` or empty.
        origin: String,
        /// What toml reported (it names an unknown key).
        #[source]
        source: toml::de::Error,
    },
    /// An override is not `key=value`.
    #[error("invalid override {0:?}: expected key=value")]
    Override(String),
    /// A value is out of range or inconsistent with another.
    #[error("invalid broker config: {0}")]
    Invalid(String),
    /// UPDATE_BROKER_CONFIG named a key that cannot change while the broker runs.
    #[error(
        "{0} cannot be changed while the broker runs; change it in the config file and restart (keys \
         updateBrokerConfig can change: {keys})",
        keys = RUNTIME_UPDATABLE_KEYS.join(", ")
    )]
    NotRuntimeUpdatable(String),
}

fn invalid(msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(msg.into())
}

/// The old name of [`BrokerConfig::test_only_unsafe_ack_before_fsync_loses_data`]: refused with a
/// message naming the new key, so a config that set it fails to load instead of losing data.
pub const LEGACY_UNSAFE_ACK_KEY: &str = "unsafeAckBeforeFsync";

/// Refuses [`LEGACY_UNSAFE_ACK_KEY`] in a config table (file or overrides).
fn refuse_legacy_unsafe_ack(table: &toml::Table) -> Result<(), ConfigError> {
    if table.contains_key(LEGACY_UNSAFE_ACK_KEY) {
        return Err(invalid(format!(
            "{LEGACY_UNSAFE_ACK_KEY} is refused: it acknowledges sends before they are fsynced and loses \
             acknowledged messages on a crash; only the jepsen self-test may set \
             testOnlyUnsafeAckBeforeFsyncLosesData"
        )));
    }
    Ok(())
}

/// Keys UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`) may change while the broker runs. Each
/// is read from `LiveConfig` where it is used, on every use, so a change takes effect at once:
/// - `brokerPermission`: sends, send-backs and pulls; and the topic perm the replica registers with
///   (re-registered at once, as Java does);
/// - `maxMessageSize`, `autoCreateTopicEnable`, `rejectTransactionMessage`: sends;
/// - `autoCreateSubscriptionGroup`, `enablePropertyFilter`, `longPollingEnable`,
///   `shortPollingTimeMills`, `slaveReadEnable`: pulls, heartbeats and send-backs;
/// - `fileReservedTime`, `deleteWhen` and the three disk ratios: the retention task's next round;
/// - `transactionTimeOut`, `transactionCheckMax`: the transaction check's next round;
/// - `regionId`, `traceOn`: the next SEND_OK (its MSG_REGION and TRACE_ON).
///
/// `autoCreateTopicEnable` behaves as Java's: turning it off stops auto-creation at once, turning
/// it on needs the `TBW102` topic, which is created at boot only when the key was on.
///
/// Every other key sizes a file, a table, a port or a task at boot; changing it takes a restart.
/// Unlike Java, which ignores a key it does not know, such a key is refused by name.
pub const RUNTIME_UPDATABLE_KEYS: &[&str] = &[
    "brokerPermission",
    "maxMessageSize",
    "autoCreateTopicEnable",
    "rejectTransactionMessage",
    "autoCreateSubscriptionGroup",
    "enablePropertyFilter",
    "longPollingEnable",
    "shortPollingTimeMills",
    "slaveReadEnable",
    "fileReservedTime",
    "deleteWhen",
    "diskMaxUsedSpaceRatio",
    "diskSpaceCleanForciblyRatio",
    "cleanFileForciblyEnable",
    "diskSpaceWarningLevelRatio",
    "transactionTimeOut",
    "transactionCheckMax",
    "storeReplyMessageEnable",
    "regionId",
    "traceOn",
    "timerMaxDelaySec",
];

/// Keys whose values a config read-out (GET_BROKER_CONFIG) masks.
pub const SECRET_KEYS: &[&str] = &["adminToken", "innerSecretKey", "clusterSecret"];
/// Keys holding durations: a config read-out shows them in whole milliseconds, as Java's config
/// holds them (ours reads `6s` or `6000`).
const DURATION_KEYS: &[&str] = &[
    "registerBrokerTimeoutMills",
    "registerNameServerPeriod",
    "shortPollingTimeMills",
    "transactionTimeOut",
    "transactionCheckInterval",
    "cleanResourceInterval",
];
/// What a masked value reads as.
pub const SECRET_MASK: &str = "******";

impl From<FileError> for ConfigError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Read { path, source } => ConfigError::Read { path, source },
            FileError::Toml { origin, source } => ConfigError::Parse { origin, source },
            properties @ FileError::Properties { .. } => ConfigError::Invalid(properties.to_string()),
        }
    }
}

impl BrokerConfig {
    /// The config as RocketMQ's `getBrokerConfig` shows it: every key (RocketMQ's names) with its
    /// value as text, plain values as TOML writes them, durations in milliseconds, the Raft group
    /// as JSON, secrets ([`SECRET_KEYS`]) masked.
    pub fn to_properties(&self) -> Result<BTreeMap<String, String>, toml::ser::Error> {
        let Some(table) = config_file::table_of(self)? else {
            return Ok(BTreeMap::new());
        };
        Ok(table
            .into_iter()
            .map(|(key, value)| {
                let text = if SECRET_KEYS.contains(&key.as_str()) {
                    SECRET_MASK.to_owned()
                } else {
                    config_file::property_text(value, DURATION_KEYS.contains(&key.as_str()))
                };
                (key, text)
            })
            .collect())
    }

    /// Defaults, then the file at `path` (if any), then `overrides` as `(key, value)` pairs. A file
    /// named `*.toml` is TOML; any other (RocketMQ's `broker.conf`) is read as Java properties,
    /// `key=value` lines (see [`JAVA_ONLY_KEYS`] for the master/slave keys it may carry).
    /// Properties values and overrides are typed by the key: a text key takes the text as it is
    /// (`deleteWhen=04`); any other value is read as TOML when it parses, else as a string, so
    /// `10912`, `true`, `30s` and `[{id=0, remotingAddr="..", raftAddr=".."}]` all work. The result is
    /// validated.
    pub fn load(path: Option<&Path>, overrides: &[(String, String)]) -> Result<Self, ConfigError> {
        let text_keys = text_keys();
        let (mut table, origin) = config_file::read_table(path, |text| properties_table(text, &text_keys))?;
        config_file::apply(&mut table, overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())), |k, raw| {
            config_file::typed_value(k, raw, &text_keys)
        });
        refuse_legacy_unsafe_ack(&table)?;
        let peers_given = table.contains_key("raftPeers");
        let mut config: BrokerConfig =
            toml::Value::Table(table).try_into().map_err(|source| ConfigError::Parse { origin, source })?;
        if !peers_given && config.raft_self_id == 0 {
            // A group of one needs no member list: it is this broker, at its advertised address.
            // Its Raft port talks to no one, so it stays on loopback (as the default's did).
            let host = config.broker_ip1.clone().unwrap_or_else(|| "127.0.0.1".to_owned());
            config.raft_peers = vec![RaftPeer {
                id: 0,
                remoting_addr: format!("{host}:{}", config.listen_port),
                raft_addr: format!("127.0.0.1:{RAFT_PORT_DEFAULT}"),
            }];
        }
        config.validate()?;
        Ok(config)
    }

    /// This config with `updates` applied (UPDATE_BROKER_CONFIG's properties: camelCase keys, values
    /// read as [`Self::load`] reads `-D` overrides), validated as a whole. Every key must be one of
    /// [`RUNTIME_UPDATABLE_KEYS`]; on any error nothing is applied.
    pub fn with_updates(&self, updates: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        if let Some(key) = updates.keys().find(|k| !RUNTIME_UPDATABLE_KEYS.contains(&k.as_str())) {
            return Err(ConfigError::NotRuntimeUpdatable(key.clone()));
        }
        // A line break in a value would read back as a second key from the updates file.
        if let Some((key, _)) = updates.iter().find(|(_, v)| v.chars().any(char::is_control)) {
            return Err(invalid(format!("{key}: a value must not contain a control character")));
        }
        self.with_values(updates.iter().map(|(k, v)| (k.as_str(), v.as_str())), " update")
    }

    /// This config with `-D` overrides applied to any key (values read as [`Self::with_updates`]
    /// reads them), validated as a whole; `raftmq dev` applies them to every replica.
    pub fn with_overrides(&self, overrides: &[(String, String)]) -> Result<Self, ConfigError> {
        self.with_values(overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())), " -D override")
    }

    fn with_values<'a>(
        &self,
        values: impl IntoIterator<Item = (&'a str, &'a str)>,
        origin: &str,
    ) -> Result<Self, ConfigError> {
        let toml::Value::Table(mut table) =
            toml::Value::try_from(self).map_err(|e| invalid(format!("the config cannot be written out: {e}")))?
        else {
            return Err(invalid("the config is not a table"));
        };
        let text_keys = text_keys();
        // Text keys take the text as it is: `deleteWhen=4` is the hour "4", not an integer.
        config_file::apply(&mut table, values, |k, raw| config_file::typed_value(k, raw, &text_keys));
        refuse_legacy_unsafe_ack(&table)?;
        let config: BrokerConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|source| ConfigError::Parse { origin: origin.to_owned(), source })?;
        config.validate()?;
        Ok(config)
    }

    /// Parses a TOML document (no overrides) and validates it.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let table: toml::Table =
            toml::from_str(text).map_err(|source| ConfigError::Parse { origin: String::new(), source })?;
        refuse_legacy_unsafe_ack(&table)?;
        let config: BrokerConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|source| ConfigError::Parse { origin: String::new(), source })?;
        config.validate()?;
        Ok(config)
    }

    /// Splits `key=value` flag arguments (`-D`) into pairs for [`Self::load`].
    pub fn parse_overrides<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Vec<(String, String)>, ConfigError> {
        config_file::split_overrides(args).map_err(ConfigError::Override)
    }

    /// The `tls.server.*` keys as one value.
    pub fn tls_server(&self) -> TlsServerSettings {
        TlsServerSettings {
            mode: self.tls_server_mode,
            cert_path: self.tls_server_cert_path.clone(),
            key_path: self.tls_server_key_path.clone(),
            trust_cert_path: self.tls_server_trust_cert_path.clone(),
            need_client_auth: self.tls_server_need_client_auth,
        }
    }

    /// The `tls.client.*` keys when `tls.enable` is on.
    pub fn tls_client(&self) -> Option<TlsClientSettings> {
        self.tls_enable.then(|| TlsClientSettings {
            trust_cert_path: self.tls_client_trust_cert_path.clone(),
            cert_path: self.tls_client_cert_path.clone(),
            key_path: self.tls_client_key_path.clone(),
            auth_server: self.tls_client_auth_server,
        })
    }

    /// The admin HTTPS certificate and key files when `adminHttpsEnable` is on.
    pub fn admin_https_files(&self) -> Option<(PathBuf, PathBuf)> {
        if !self.admin_https_enable {
            return None;
        }
        let cert = self.admin_https_cert_path.clone().or_else(|| self.tls_server_cert_path.clone())?;
        let key = self.admin_https_key_path.clone().or_else(|| self.tls_server_key_path.clone())?;
        Some((cert, key))
    }

    /// The plain ACL file (`aclFile`, or `<storePathRootDir>/config/plain_acl.yml`).
    pub fn acl_file_path(&self) -> PathBuf {
        self.acl_file.clone().unwrap_or_else(|| self.store_path_root_dir.join("config").join("plain_acl.yml"))
    }

    /// The cluster secret (`clusterSecret`, or read from `clusterSecretFile`); `None` when neither.
    pub fn load_cluster_secret(&self) -> Result<Option<ClusterSecret>, ConfigError> {
        let file = self.cluster_secret_file.as_ref().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        ClusterSecret::from_config(self.cluster_secret.as_deref().unwrap_or_default(), &file)
            .map_err(|e| invalid(e.to_string()))
    }

    /// The credentials of `innerAccessKey` / `innerSecretKey` (both or neither).
    pub fn inner_credentials(&self) -> Result<Option<raftmq_common::protocol::acl::SessionCredentials>, ConfigError> {
        match (&self.inner_access_key, &self.inner_secret_key) {
            (None, None) => Ok(None),
            (Some(ak), Some(sk)) => raftmq_common::protocol::acl::SessionCredentials::new(ak.as_str(), sk.as_str())
                .map(Some)
                .map_err(|e| invalid(format!("innerAccessKey / innerSecretKey: {e}"))),
            _ => Err(invalid("innerAccessKey and innerSecretKey go together")),
        }
    }

    /// The Raft replica settings these keys describe.
    pub fn raft_config(&self) -> RaftConfig {
        RaftConfig {
            segment_size_bytes: self.mapped_file_size_commit_log,
            heartbeat_interval_ms: self.raft_heartbeat_interval_ms,
            election_timeout_min_ms: self.raft_election_timeout_min_ms,
            election_timeout_max_ms: self.raft_election_timeout_max_ms,
            checkpoint_interval_ms: self.raft_checkpoint_interval_ms,
            page_cache_leader_window_bytes: self.raft_page_cache_leader_window_bytes,
            page_cache_follower_window_bytes: self.raft_page_cache_follower_window_bytes,
            unsafe_ack_before_fsync: self.test_only_unsafe_ack_before_fsync_loses_data,
            ..RaftConfig::default()
        }
    }

    /// The transfer limits of one pull these keys describe. The tail assumed cached is
    /// `accessMessageInMemoryMaxRatio` percent of `total_memory_bytes`, the machine's RAM (Java:
    /// `TOTAL_PHYSICAL_MEMORY_SIZE * ratio / 100`): a consumer further behind reads "from disk"
    /// (smaller pulls) and, with `slaveReadEnable`, is sent to `whichBrokerWhenConsumeSlowly`.
    pub fn pull_limits(&self, total_memory_bytes: u64) -> PullLimits {
        let tail = u128::from(total_memory_bytes) * u128::from(self.access_message_in_memory_max_ratio) / 100;
        PullLimits {
            max_transfer_bytes_in_memory: u64::from(self.max_transfer_bytes_on_message_in_memory),
            max_transfer_count_in_memory: u64::from(self.max_transfer_count_on_message_in_memory),
            max_transfer_bytes_in_disk: u64::from(self.max_transfer_bytes_on_message_in_disk),
            max_transfer_count_in_disk: u64::from(self.max_transfer_count_on_message_in_disk),
            memory_bytes: i64::try_from(tail).unwrap_or(i64::MAX),
        }
    }

    /// Our own entry of `raftPeers`.
    pub fn self_peer(&self) -> Option<&RaftPeer> {
        self.raft_peers.iter().find(|p| p.id == self.raft_self_id)
    }

    /// The advertised IP: `brokerIP1`, else the host of our own peer's `remotingAddr`.
    pub fn broker_ip(&self) -> String {
        if let Some(ip) = &self.broker_ip1 {
            return ip.clone();
        }
        self.self_peer()
            .and_then(|p| p.remoting_addr.rsplit_once(':').map(|(host, _)| host.to_owned()))
            .unwrap_or_else(|| "127.0.0.1".to_owned())
    }

    /// `brokerIP1:listenPort`, the address registered with NameServers and written as STOREHOST.
    pub fn broker_addr(&self) -> String {
        format!("{}:{}", self.broker_ip(), self.listen_port)
    }

    /// STOREHOST as a socket address, when the advertised IP is a literal IP.
    pub fn store_host(&self) -> Option<SocketAddr> {
        self.broker_ip().parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, self.listen_port))
    }

    /// NameServer addresses from `namesrvAddr`.
    pub fn namesrv_addrs(&self) -> impl Iterator<Item = &str> {
        self.namesrv_addr.split(';').map(str::trim).filter(|s| !s.is_empty())
    }

    /// ConsumeQueue units per file: `mappedFileSizeConsumeQueue` rounded up to whole units (RocketMQ's getter).
    pub fn consume_queue_units_per_file(&self) -> u64 {
        self.mapped_file_size_consume_queue.div_ceil(CQ_STORE_UNIT_SIZE_BYTES as u64)
    }

    /// IndexFile sizes from `maxHashSlotNum` / `maxIndexNum`.
    pub fn index_file_sizes(&self) -> IndexFileSizes {
        IndexFileSizes { slot_count: self.max_hash_slot_num, entry_count: self.max_index_num }
    }

    /// `deleteWhen` as hours of day.
    pub fn delete_when_hours(&self) -> Result<Vec<u8>, ConfigError> {
        self.delete_when
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|h| match h.parse::<u8>() {
                Ok(hour) if hour < 24 => Ok(hour),
                _ => Err(invalid(format!("deleteWhen entry {h:?} is not an hour 00..23"))),
            })
            .collect::<Result<Vec<_>, _>>()
            .and_then(|v| if v.is_empty() { Err(invalid("deleteWhen lists no hour")) } else { Ok(v) })
    }

    /// `messageDelayLevel` as milliseconds; level `n` (1-based) waits `levels[n - 1]`.
    pub fn message_delay_levels_ms(&self) -> Result<Vec<u64>, ConfigError> {
        let levels = self
            .message_delay_level
            .split_whitespace()
            .map(|level| {
                parse_delay_level(level)
                    .ok_or_else(|| invalid(format!("messageDelayLevel entry {level:?} is not e.g. 1s, 5m, 2h, 1d")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if levels.is_empty() {
            return Err(invalid("messageDelayLevel lists no level"));
        }
        if levels.len() > DELAY_PROGRESS_BATCH_MAX_COUNT {
            return Err(invalid(format!("messageDelayLevel lists more than {DELAY_PROGRESS_BATCH_MAX_COUNT} levels")));
        }
        Ok(levels)
    }

    /// `fileReservedTime` as a duration (`fileReservedTimeMs` when set, for tests).
    pub fn file_reserved(&self) -> Duration {
        match self.file_reserved_time_ms {
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_secs(u64::from(self.file_reserved_time) * 3600),
        }
    }

    /// The merged configuration as TOML (`-p/--printConfigItem`).
    pub fn to_toml_string(&self) -> String {
        // Strings, integers, booleans, durations and an array of tables: serialization cannot fail.
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot print config: {e}\n"))
    }
}

/// `ScheduleMessageService.parseDelayLevel` units: s, m, h, d.
fn parse_delay_level(level: &str) -> Option<u64> {
    let (number, unit) = level.split_at(level.len().checked_sub(1)?);
    let ms_per_unit: u64 = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    number.parse::<u64>().ok().filter(|n| *n > 0)?.checked_mul(ms_per_unit)
}

/// Keys of RocketMQ's master/slave `broker.conf` that a Raft group has no use for: a properties file
/// may carry them, and each is skipped with a warning saying why. Any other unknown key is refused
/// by name, as in TOML.
pub const JAVA_ONLY_KEYS: &[(&str, &str)] = &[
    ("brokerId", "leaders are elected; raftSelfId names the replica"),
    ("brokerRole", "roles come from Raft elections"),
    ("flushDiskType", "a send is acknowledged once a quorum has fsynced it"),
    ("enableDLegerCommitLog", "the CommitLog is always the Raft log"),
    ("dLegerGroup", "brokerName names the Raft group"),
];

/// Keys whose value is text, whatever it looks like (`deleteWhen=04`, `adminToken=1234`).
fn text_keys() -> BTreeSet<String> {
    let mut keys: BTreeSet<String> = match toml::Value::try_from(BrokerConfig::default()) {
        Ok(toml::Value::Table(t)) => t.into_iter().filter(|(_, v)| v.is_str()).map(|(k, _)| k).collect::<BTreeSet<_>>(),
        _ => BTreeSet::new(),
    };
    // Optional text keys, absent from the defaults.
    for k in [
        "brokerIP1",
        "diskUsedRatioFile",
        "adminToken",
        "aclFile",
        "innerAccessKey",
        "innerSecretKey",
        "clusterSecret",
        "clusterSecretFile",
        "testClockSkewFile",
        "tls.server.certPath",
        "tls.server.keyPath",
        "tls.server.trustCertPath",
        "tls.client.trustCertPath",
        "tls.client.certPath",
        "tls.client.keyPath",
        "adminHttpsCertPath",
        "adminHttpsKeyPath",
    ] {
        keys.insert(k.to_owned());
    }
    keys.retain(|k| !DURATION_KEYS.contains(&k.as_str()));
    keys
}

/// A Java properties file (RocketMQ's `broker.conf`) as a TOML table of typed values.
fn properties_table(text: &str, text_keys: &BTreeSet<String>) -> Result<toml::Table, String> {
    let toml_hint = "only a file named *.toml is read as TOML; this one is read as Java properties, RocketMQ's \
                     broker.conf";
    let mut table = toml::Table::new();
    for (key, raw) in properties_text::decode(text) {
        let raw = raw.trim_end();
        if key.starts_with('[') {
            return Err(format!("{key:?} is a TOML table header: {toml_hint}"));
        }
        if let Some((_, why)) = JAVA_ONLY_KEYS.iter().find(|(k, _)| *k == key) {
            // A slave of a master/slave pair is a replica of its master's group here: loading it
            // alone would start a second group under the same brokerName.
            let slave = (key == "brokerId" && raw != "0") || (key == "brokerRole" && raw.eq_ignore_ascii_case("SLAVE"));
            if slave {
                return Err(format!(
                    "{key}={raw}: a slave is a replica of its master's Raft group here; list the group's members \
                     with raftPeers=[...] in each replica's file and name this one with raftSelfId"
                ));
            }
            tracing::warn!(key = %key, value = %raw, "broker config key of a master/slave RocketMQ broker ignored: {why}");
            continue;
        }
        if matches!(key.as_str(), "dLegerPeers" | "dLegerSelfId") {
            return Err(format!(
                "{key}: a DLedger key; name the group's members with raftPeers=[{{id=0, remotingAddr=\"host:port\", \
                 raftAddr=\"host:port\"}}, ...] and this replica with raftSelfId=<id>"
            ));
        }
        if text_keys.contains(&key) && raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
            return Err(format!(
                "{key} = {raw}: a quoted value is TOML; {toml_hint} (write {key}={})",
                &raw[1..raw.len() - 1]
            ));
        }
        let value = config_file::typed_value(&key, raw, text_keys);
        table.insert(key, value);
    }
    Ok(table)
}

mod validate;

#[cfg(test)]
mod tests;
