//! raftmq-broker: a broker replica. The pure core — configuration, the replicated command codec,
//! ConsumeQueue files, and the RocketMQ decisions (pull outcome, offsets, topic/group tables,
//! long-poll wake-ups) as functions and state machines — and the async shell that drives it: the
//! store raft applies to, group commit, the remoting processors, NameServer registration and the
//! [`broker::Broker`] that wires them.
//!
//! Modules in data-flow order:
//! - [`config`]: `BrokerConfig` (RocketMQ keys + the Raft group).
//! - [`live_config`]: the keys UPDATE_BROKER_CONFIG changes while the broker runs, persisted.
//! - [`topic_config`], [`subscription_group`]: topic and consumer-group tables, auto-create decisions.
//! - [`queue_offset`]: the leader's queue offsets, assigned before a send is proposed.
//! - [`entry`]: the replicated commands (Raft entry payloads by tag) and the PHYSICALOFFSET patcher.
//! - [`dispatch`]: apply of a MESSAGES entry: accept or reject, then ConsumeQueue units.
//! - [`consume_queue`]: ConsumeQueue files and the lazily opened store of them.
//! - [`offsets`]: committed consumer offsets.
//! - [`index_file`]: IndexFile lookups by message key and UNIQ_KEY.
//! - [`pull`]: `getMessage` + `PullMessageProcessor` outcome.
//! - [`long_poll`]: suspended pulls and their wake-ups.
//! - [`commit_log`]: reads of the committed CommitLog.
//! - [`store`]: `MessageStore`, what raft applies to (the `ApplyHandler`) and the payload patcher.
//! - [`replica`]: leadership, the leader-readiness gate, proposals, refusals with the leader hint.
//! - [`membership`]: adding and removing nodes, leadership transfer, each member's view of the group.
//! - [`group_commit`], [`offset_commit`]: sends and consumer offsets batched into Raft entries.
//! - [`offset_reset`]: a group's offsets moved to a time, committed and pushed to its consumers.
//! - [`retention`]: fileReservedTime / deleteWhen / disk watermarks, purge through Raft, the snapshot manifest.
//! - [`schedule`]: delayed messages (`SCHEDULE_TOPIC_XXXX`) re-proposed by the leader when due.
//! - [`timer`]: timer messages (5.x arbitrary delays) hopping through the delay levels.
//! - [`transaction`]: transactional half messages, END_TRANSACTION and the check-back service.
//! - [`client_manager`]: connected producers/consumers, subscriptions, queue locks.
//! - [`acl`]: the plain ACL (`aclEnable`, `plain_acl.yml`) every request is checked against.
//! - [`processor`] and [`send_processor`], [`pull_processor`], [`client_manage_processor`],
//!   [`admin_processor`], [`acl_processor`], [`query_processor`], [`send_back`]: the remoting
//!   request handlers.
//! - [`namesrv_registration`]: REGISTER_BROKER / UNREGISTER_BROKER with the Raft role.
//! - [`metrics`], [`http`]: Prometheus metrics and the admin HTTP server (probes, admin API).
//! - [`stats`]: per-minute pull rates by topic and group (`consumeTps` of GET_CONSUME_STATS).
//! - [`broker`]: `Broker::start` / `shutdown`.

pub mod acl;
pub mod clock;
pub mod config;
pub mod consume_queue;
pub mod disk_space;
pub mod dispatch;
pub mod entry;
pub mod index_file;
pub mod live_config;
pub mod long_poll;
pub mod offsets;
pub mod pull;
pub mod queue_offset;
pub mod subscription_group;
pub mod topic_config;

pub mod checkpoint;
pub mod commit_log;
pub mod store;

pub mod group_commit;
pub mod membership;
pub mod offset_commit;
pub mod offset_reset;
pub mod replica;
pub mod retention;
pub mod schedule;
pub mod timer;
// END_TRANSACTION's handlers return `Result<response, refusal>`, as the processors below do.
#[allow(clippy::result_large_err)]
pub mod transaction;

// Handlers return `Result<response, refusal>` where both are the response frame: boxing the refusal
// would only add an allocation to every refused request.
#[allow(clippy::result_large_err)]
pub mod acl_processor;
#[allow(clippy::result_large_err)]
pub mod admin_processor;
#[allow(clippy::result_large_err)]
pub mod client_manage_processor;
pub mod client_manager;
pub mod processor;
#[allow(clippy::result_large_err)]
pub mod pull_processor;
#[allow(clippy::result_large_err)]
pub mod query_processor;
pub mod reply_processor;
#[allow(clippy::result_large_err)]
pub mod send_back;
#[allow(clippy::result_large_err)]
pub mod send_processor;

pub mod broker;
pub mod http;
pub mod metrics;
pub mod namesrv_registration;
pub mod stats;

pub use broker::Broker;
pub use broker::BrokerError;
pub use config::BrokerConfig;
