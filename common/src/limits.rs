//! Every size, count and time limit of the wire protocol and message model, in one place.
//!
//! Names carry their unit last (`_bytes`, `_ms`, `_count`). Values that RocketMQ 4.x clients rely on
//! are RocketMQ's own (`NettyDecoder`, `DefaultMQProducer`, `TopicValidator`); relationships between
//! limits are checked at compile time below.

/// Largest remoting frame, length word excluded (`com.rocketmq.remoting.frameMaxLength`, 16 MiB).
pub const FRAME_SIZE_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Room a Raft RPC frame keeps for all but its entries' payloads: the remoting header, the
/// AppendEntries envelope (vote, log ids, commit index) and each entry's own framing (at most
/// `RAFT_APPEND_ENTRIES_MAX_COUNT` of them).
pub const RAFT_RPC_ENVELOPE_MAX_BYTES: usize = 1024 * 1024;
/// Largest Raft entry (stored header + payload). One AppendEntries must be able to carry it alone:
/// a leader that stored a larger entry could never replicate it, and its group would stop
/// committing. Proposals above it are refused; a group-committed entry stays far below it.
pub const RAFT_ENTRY_MAX_BYTES: usize = FRAME_SIZE_MAX_BYTES - RAFT_RPC_ENVELOPE_MAX_BYTES;
/// Most entries one AppendEntries may carry (`max_payload_entries`), so their framing stays within
/// `RAFT_RPC_ENVELOPE_MAX_BYTES` (a few dozen bytes each).
pub const RAFT_APPEND_ENTRIES_MAX_COUNT: u64 = 8_192;
/// Largest snapshot (the retention manifest) a replica receives in chunks: bounds what a peer can
/// make it buffer. A million queues with long names take about 300 MB.
pub const RAFT_SNAPSHOT_MAX_BYTES: u64 = 1 << 30;
/// A snapshot received in part is dropped once no chunk came for this long (its sender gave up; a
/// retry starts from the first chunk). Each chunk is sent within openraft's snapshot timeout.
pub const RAFT_SNAPSHOT_CHUNK_IDLE_MAX_MS: u64 = 60_000;

/// Replicas an empty-store replica remembers from Introduce RPCs before it has decided (each names
/// its id and Raft address; a group is a handful of replicas, so more is a misbehaving peer).
pub const RAFT_INTRODUCED_PEERS_MAX_COUNT: usize = 16;
/// Longest Raft address an Introduce RPC may name (`host:port`).
pub const RAFT_ADDR_MAX_BYTES: usize = 1_024;
/// How often a leader (or candidate) introduces itself to one empty-store replica that refused it.
pub const RAFT_INTRODUCE_INTERVAL_MIN_MS: u64 = 1_000;

/// Largest header inside a frame: the 3-byte header-length field caps it at 2^24 - 1.
pub const HEADER_SIZE_MAX_BYTES: usize = (1 << 24) - 1;

/// Most `extFields` entries one header may carry (ours; Java sets none). RocketMQ's headers have a
/// few dozen at most; the cap bounds what a hostile header costs the linear `ExtFields` map
/// (256² / 2 short compares).
pub const EXT_FIELDS_MAX_COUNT: usize = 256;

/// Largest message body a producer may send (`maxMessageSize`, 4 MiB), before compression.
pub const MESSAGE_BODY_SIZE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Largest batch body (SEND_BATCH_MESSAGE): the whole batch must fit what one message may be.
pub const BATCH_BODY_SIZE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Message properties are stored behind an `i16` length (`PROPLEN`).
pub const PROPERTIES_SIZE_MAX_BYTES: usize = i16::MAX as usize;

/// Topic names: RocketMQ 4.x limit (`TopicValidator.TOPIC_MAX_LENGTH`); also what fits a v1 record's
/// one-byte topic length.
pub const TOPIC_NAME_LENGTH_MAX_CHARS: usize = 127;

/// Longest topic a broker stores data or offsets for: its ConsumeQueue directory is named after it,
/// and a file name holds at most 255 bytes. The broker's own `%RETRY%`/`%DLQ%` topics may pass
/// [`TOPIC_NAME_LENGTH_MAX_CHARS`]; a consumer group whose retry topic would pass this is refused.
pub const TOPIC_STORE_NAME_MAX_BYTES: usize = 255;

/// Consumer and producer group names (`Validators.CHARACTER_MAX_LENGTH`).
pub const GROUP_NAME_LENGTH_MAX_CHARS: usize = 255;

/// Largest body that decompressing a stored (zlib) body may produce: 4× what a producer may send, so a
/// broker with a raised `maxMessageSize` still decodes, and a zip bomb cannot exhaust memory.
pub const UNCOMPRESSED_BODY_SIZE_MAX_BYTES: usize = 4 * MESSAGE_BODY_SIZE_MAX_BYTES;

/// A client compresses bodies larger than this (`compressMsgBodyOverHowmuch`, 4 KiB).
pub const COMPRESS_BODY_OVER_BYTES: usize = 4 * 1024;

/// Default timeout of one remoting call made by our clients (`sendMsgTimeout`).
pub const RPC_TIMEOUT_DEFAULT_MS: u64 = 3_000;

/// How long a broker waits for a client it relays an admin request to (GET_CONSUMER_RUNNING_INFO):
/// shorter than the admin's own timeout, so the admin gets CONSUME_MSG_TIMEOUT, not a timeout.
pub const BROKER_CLIENT_CALL_TIMEOUT_MS: u64 = 2_000;
const _: () = assert!(BROKER_CLIENT_CALL_TIMEOUT_MS < RPC_TIMEOUT_DEFAULT_MS);

/// How often a client refreshes the routes of the topics it uses (`pollNameServerInterval`, 30 s).
pub const CLIENT_ROUTE_POLL_INTERVAL_DEFAULT_MS: u64 = 30_000;

/// Send attempts a producer may be configured for (`retryTimesWhenSendFailed` + 1): bounds the
/// retry loop whatever the configuration says.
pub const PRODUCER_SEND_ATTEMPTS_MAX_COUNT: u32 = 16;

/// How long a send waits for its answer before the producer asks whether its group's leader moved,
/// and then again at this interval. A crashed host answers nothing (no reset reaches the client),
/// so without the probe an in-flight send waits out the whole send timeout even after a new leader
/// took over; with it, the send goes again to the new leader (at-least-once: it may be stored twice).
pub const PRODUCER_SEND_STALL_PROBE_MS: u64 = 500;

/// Requests one connection may have waiting for a response before new calls are refused.
pub const CONNECTION_INFLIGHT_MAX_COUNT: usize = 65_536;

/// How long a graceful shutdown waits for in-flight requests before closing connections.
pub const SHUTDOWN_DRAIN_MAX_MS: u64 = 5_000;

/// How long a remoting client waits for a TCP connect (`connectTimeoutMillis`).
pub const CONNECT_TIMEOUT_MS: u64 = 3_000;

/// Encoded frames queued for one connection's writer task; a full queue makes senders wait.
pub const CONNECTION_WRITE_QUEUE_MAX_COUNT: usize = 4_096;

/// Frames the writer task takes from its queue before one flush (one syscall for a burst).
pub const CONNECTION_WRITE_BATCH_MAX_COUNT: usize = 128;

/// Requests received on one connection and processed at once; beyond it the peer gets SYSTEM_BUSY,
/// as RocketMQ answers when a processor's thread pool rejects a task.
pub const CONNECTION_CONCURRENT_REQUESTS_MAX_COUNT: usize = 4_096;

/// Connections a remoting server (broker, NameServer) holds at once; one more is closed at accept.
/// Java sets none; the bound keeps file descriptors for the replicas and the store.
pub const SERVER_CONNECTIONS_MAX_COUNT: usize = 16_384;
/// Connections a remoting server holds from one address: one host's leak or flood leaves room for
/// the others (a client process opens one per broker).
pub const SERVER_CONNECTIONS_PER_HOST_MAX_COUNT: usize = 4_096;
/// Response bytes queued on one server connection above which it stops reading the peer's requests
/// until its writer catches up: a peer that does not read its socket stops being served.
pub const SERVER_CONNECTION_READ_PAUSE_QUEUED_BYTES: usize = 4 * 1024 * 1024;
/// Response bytes queued on one server connection above which it is closed: what a peer that never
/// reads can make the server hold (room for two of the largest frames).
pub const SERVER_CONNECTION_QUEUED_MAX_BYTES: usize = 2 * FRAME_SIZE_MAX_BYTES;
/// A server connection that neither read nor wrote for this long, with no request in progress, is
/// closed (`serverChannelMaxIdleTimeSeconds`, 120 s; clients heartbeat every 30 s).
pub const SERVER_CONNECTION_IDLE_MAX_SECS: u64 = 120;

/// How long a closing connection may spend flushing frames already queued before it is dropped.
pub const CONNECTION_CLOSE_FLUSH_MAX_MS: u64 = 1_000;

/// Pending connections the kernel keeps for a remoting listener (`serverSocketBacklog`).
pub const SERVER_ACCEPT_BACKLOG_COUNT: u32 = 1_024;

/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop does not spin.
pub const SERVER_ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// Largest REGISTER_BROKER body after inflating its compressed form: bounds a zlib bomb. A broker
/// with 100,000 topics needs about 4 MiB.
pub const REGISTER_BROKER_BODY_INFLATED_SIZE_MAX_BYTES: usize = 32 * 1024 * 1024;
/// A broker registers with RocketMQ's compressed body (which drops a topic's order and sysFlag, as
/// Java's does) only when the plain JSON would be larger than this: it must fit one frame.
pub const REGISTER_BROKER_BODY_COMPRESS_ABOVE_BYTES: usize = 8 * 1024 * 1024;

/// Deepest nesting of arrays and objects accepted in a JSON body; serde_json's own recursion limit,
/// applied also by the fastjson key rewriter so neither can exhaust the stack.
pub const JSON_BODY_NESTING_MAX_LEVELS: usize = 128;

/// ConsumeQueue bytes one pull scans at least while filtering by tag (`DefaultMessageStore.getMessage`:
/// `max(16000, maxMsgNums * 20)`), so a selective subscription skips up to 800 units per pull.
pub const PULL_FILTER_SCAN_MIN_BYTES: usize = 16_000;

/// Longest SQL92 filter expression a subscription may carry (Java has no limit; an `IN` list of a
/// few thousand ids fits).
pub const SQL_FILTER_EXPRESSION_MAX_BYTES: usize = 64 * 1024;
/// Deepest nesting of a SQL92 filter (parentheses, prefix `NOT`/`-`/`+`, and the compiled tree),
/// so parsing, evaluating and dropping one recurse a bounded amount.
pub const SQL_FILTER_NESTING_MAX_LEVELS: usize = 64;
/// Values one `IN (...)` list of a SQL92 filter may hold.
pub const SQL_FILTER_IN_LIST_MAX_COUNT: usize = 4_096;

/// Read or write queues one topic (or retry queues one group) may have: every route, rebalance and
/// offset reset walks them, and an offset reset commits them all in one Raft entry.
pub const TOPIC_QUEUE_NUMS_MAX_COUNT: i32 = 1024;

/// How often a broker re-reads its test-only clock skew file (`testClockSkewFile`).
pub const CLOCK_SKEW_POLL_MS: u64 = 100;

/// Pull requests one broker keeps suspended (long polling) at once; beyond it a pull is answered at once.
pub const LONG_POLL_WAITERS_MAX_COUNT: usize = 65_536;

/// (topic, consumer group) pairs whose pull rate a broker keeps for GET_CONSUME_STATS; pairs idle for
/// a minute make room, and beyond it a new pair is not counted.
pub const STATS_KEYS_MAX_COUNT: usize = 16_384;

/// Compiled SQL92 expressions one broker keeps for its pulls; a full cache starts over, so a client
/// cycling through expressions costs compiles, never memory.
pub const SQL_FILTER_CACHE_MAX_COUNT: usize = 1_024;

/// Header fields (keys and values) plus remark of one PULL_MESSAGE: room for the longest SQL92
/// subscription and the usual fields. A pull is parked with its request; this bounds what the
/// [`LONG_POLL_WAITERS_MAX_COUNT`] parked pulls hold.
pub const PULL_REQUEST_HEADER_MAX_BYTES: usize = SQL_FILTER_EXPRESSION_MAX_BYTES + 4 * 1024;

/// Longest a pull may stay suspended, whatever `suspendTimeoutMillis` asks (push consumers ask 15 s).
pub const LONG_POLL_SUSPEND_MAX_MS: u64 = 300_000;

/// (topic, group, queue) offsets one replicated consumer-offset commit may carry.
pub const CONSUMER_OFFSET_BATCH_MAX_COUNT: usize = 65_536;

// ---- Broker plain ACL ----

/// How often the broker looks at `plain_acl.yml` for changes (Java's `AclFileWatchService`: 5 s).
pub const ACL_FILE_POLL_INTERVAL_MS: u64 = 5_000;
/// Largest `plain_acl.yml` the broker reads; a larger file is refused, not half-read.
pub const ACL_FILE_SIZE_MAX_BYTES: u64 = 1 << 20;
/// Deepest nesting of `plain_acl.yml` the broker accepts (RocketMQ's layout needs 4).
pub const ACL_FILE_DEPTH_MAX_COUNT: usize = 16;

// ---- Broker send path (group commit) ----

/// Send requests queued for group commit; beyond it a send is answered SYSTEM_BUSY (flow control).
pub const BROKER_SEND_QUEUE_MAX_COUNT: usize = 16_384;
/// Messages one group-committed Raft entry carries at most.
pub const BROKER_GROUP_COMMIT_MAX_COUNT: usize = 1_024;
/// Record bytes one group-committed Raft entry carries at most (one larger message still travels alone).
pub const BROKER_GROUP_COMMIT_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Group-committed entries proposed but not yet applied; more requests wait and join larger entries.
pub const BROKER_SEND_INFLIGHT_ENTRIES_MAX_COUNT: usize = 64;
/// Consumer-offset updates queued for replication; beyond it an update is answered SYSTEM_BUSY.
pub const BROKER_OFFSET_QUEUE_MAX_COUNT: usize = 65_536;
/// Encoded bytes of offset updates one replicated batch carries at most (names are long enough
/// that `CONSUMER_OFFSET_BATCH_MAX_COUNT` of them alone could outgrow a Raft entry).
pub const BROKER_OFFSET_BATCH_MAX_BYTES: usize = 4 * 1024 * 1024;
/// How long consumer-offset updates are collected into one replicated batch.
pub const BROKER_OFFSET_COMMIT_LINGER_MS: u64 = 20;

// ---- Broker mapped files ----

/// Disk blocks a ConsumeQueue file allocates at a time ahead of its written end (`posix_fallocate`), so
/// a full disk is an error and never a SIGBUS in a store through the mapping.
pub const CONSUME_QUEUE_RESERVE_STEP_BYTES: u64 = 1024 * 1024;
/// The same for an IndexFile: its header when it is created, then its slots and entries as keys are put.
pub const INDEX_FILE_RESERVE_STEP_BYTES: u64 = 4 * 1024 * 1024;
/// A client channel silent this long is dropped (`ClientHousekeepingService`, 120 s).
pub const BROKER_CLIENT_CHANNEL_EXPIRED_MS: u64 = 120_000;
/// Largest `maxTransferBytesOnMessageIn{Memory,Disk}` a broker takes. A pull body holds at most
/// that many bytes, or one message however large (at most `BROKER_MAX_MESSAGE_SIZE_MAX_BYTES` of
/// body), and must fit one frame with its header. Java takes any value; past a frame, pulls at that
/// offset would fail every time.
pub const BROKER_PULL_TRANSFER_MAX_BYTES: u32 = 8 * 1024 * 1024;
/// Largest `maxMessageSize` a broker takes: one message alone (its body, properties, topic and fixed
/// fields) must fit one Raft entry, or every send of it would be refused as too large.
pub const BROKER_MAX_MESSAGE_SIZE_MAX_BYTES: usize =
    RAFT_ENTRY_MAX_BYTES - PROPERTIES_SIZE_MAX_BYTES - HEADER_ROOM_BYTES;
/// What a stored record or a response holds besides a body and properties, rounded up generously
/// (a record's fixed fields and topic are a few hundred bytes, a pull response header less).
const HEADER_ROOM_BYTES: usize = 64 * 1024;
/// Longest remark a heartbeat refusal carries (it names the refused consumer groups).
pub const HEARTBEAT_REFUSAL_REMARK_MAX_BYTES: usize = 1024;
/// A queue lock not renewed this long is free again (`RebalanceLockManager`, 60 s,
/// `rocketmq.broker.rebalance.lockMaxLiveTime`), measured on the replicated lock table's clock.
pub const BROKER_REBALANCE_LOCK_MAX_LIVE_MS: u64 = 60_000;
/// Most queues one LOCK_BATCH_MQ / UNLOCK_BATCH_MQ may name (a client asks for the queues it was
/// allocated on one broker; the Raft entry of a batch stays far below `RAFT_ENTRY_MAX_BYTES`).
pub const BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT: usize = 1_024;
/// Most queue locks the replicated lock table holds over all groups; past it, after expired locks
/// are purged, a new lock is refused (a renewal never is).
pub const BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT: usize = 65_536;
/// Longest `clientId` a queue lock records.
pub const BROKER_REBALANCE_LOCK_CLIENT_ID_MAX_BYTES: usize = 255;
/// Longest `brokerName` a queue lock records.
pub const BROKER_NAME_MAX_BYTES: usize = 255;

const _: () = assert!(BROKER_GROUP_COMMIT_MAX_COUNT <= BROKER_SEND_QUEUE_MAX_COUNT);
// A lock batch (names of at most 255 bytes each) fits one Raft entry.
const _: () = assert!(
    BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT * (2 * 2 + TOPIC_STORE_NAME_MAX_BYTES + BROKER_NAME_MAX_BYTES + 4)
        < RAFT_ENTRY_MAX_BYTES / 4
);
// A client trusts its lock for less time than the broker keeps it: the margin that absorbs a
// renewal in flight and the lock clock's lag after a leader change (docs/broker.md#queue-locks).
const _: () = assert!(CONSUMER_LOCK_MAX_LIVE_MS < BROKER_REBALANCE_LOCK_MAX_LIVE_MS);
const _: () = assert!(BROKER_GROUP_COMMIT_MAX_COUNT <= CONSUMER_OFFSET_BATCH_MAX_COUNT);
const _: () = assert!(BROKER_GROUP_COMMIT_MAX_BYTES < RAFT_ENTRY_MAX_BYTES);
const _: () = assert!(BROKER_OFFSET_BATCH_MAX_BYTES < RAFT_ENTRY_MAX_BYTES);
const _: () = assert!(MESSAGE_BODY_SIZE_MAX_BYTES <= BROKER_MAX_MESSAGE_SIZE_MAX_BYTES);
const _: () =
    assert!(BROKER_MAX_MESSAGE_SIZE_MAX_BYTES + PROPERTIES_SIZE_MAX_BYTES + HEADER_ROOM_BYTES < FRAME_SIZE_MAX_BYTES);
const _: () = assert!(RAFT_APPEND_ENTRIES_MAX_COUNT * 64 <= RAFT_RPC_ENVELOPE_MAX_BYTES as u64);

// ---- Broker delay queue (`SCHEDULE_TOPIC_XXXX` delivery) ----

/// Delay levels one replicated delivery-progress entry carries; also the most levels served.
pub const DELAY_PROGRESS_BATCH_MAX_COUNT: usize = 1_024;
/// Due messages of one level re-proposed per round (one group-commit request).
pub const SCHEDULE_DELIVER_BATCH_MAX_COUNT: usize = 256;
/// Longest the delivery service sleeps between rounds (`ScheduleMessageService` DELAY_FOR_A_WHILE).
pub const SCHEDULE_DELIVER_POLL_INTERVAL_MS: u64 = 100;
/// Pause of a level after a failed re-proposal (Java waits DELAY_FOR_A_PERIOD, 10 s).
pub const SCHEDULE_DELIVER_RETRY_BACKOFF_MS: u64 = 1_000;
/// Hops of the longest delay level a timer message may make (each writes it again): with the
/// default levels (2 h) a timer of up to about 5 days, past the default `timerMaxDelaySec` of 3.
pub const TIMER_HOPS_MAX_COUNT: u64 = 64;

const _: () = assert!(SCHEDULE_DELIVER_BATCH_MAX_COUNT <= BROKER_GROUP_COMMIT_MAX_COUNT);

/// Half messages one transaction check round looks at (one group-commit request of copies at most).
pub const TRANSACTION_CHECK_BATCH_MAX_COUNT: usize = 256;
/// Op (`RMQ_SYS_TRANS_OP_HALF_TOPIC`) records read per look at the op queue.
pub const TRANSACTION_OP_READ_BATCH_MAX_COUNT: usize = 4_096;
/// Ops a leader keeps in memory while their half messages are ahead of the check progress; past it,
/// reading stops until the progress catches up (a check of a half whose op was not read yet is a
/// duplicate check, never a loss).
pub const TRANSACTION_OP_PENDING_MAX_COUNT: usize = 1 << 20;
/// How long after becoming leader a transaction check round waits at a due half whose producer
/// group has no connection here, instead of spending one of the half's checks on nobody: two client
/// heartbeat intervals, in which every live producer has heartbeaten the new leader.
pub const TRANSACTION_NO_PRODUCER_GRACE_MS: u64 = 2 * CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS;
/// Ended half offsets a leader remembers (to answer a repeated END_TRANSACTION without writing, and
/// to pass ended chains in the check round), ahead of the check progress and as many behind it;
/// the earliest named behind it are forgotten first.
pub const TRANSACTION_ENDED_MEMORY_MAX_COUNT: usize = 1 << 18;
/// Pause of the check round after a failed write (the round retries from the same progress).
pub const TRANSACTION_CHECK_RETRY_BACKOFF_MS: u64 = 1_000;

const _: () = assert!(TRANSACTION_CHECK_BATCH_MAX_COUNT <= BROKER_GROUP_COMMIT_MAX_COUNT);

// ---- Broker admin HTTP API and Prometheus metrics (`broker/src/http/`, `broker/src/metrics.rs`) ----

/// Request body an admin HTTP call may send; beyond it the call is answered 413.
pub const ADMIN_HTTP_BODY_MAX_BYTES: usize = 64 * 1024;
/// Shortest `adminToken` a broker takes (16 bytes: 128 bits written as hex would be 32).
pub const ADMIN_TOKEN_MIN_BYTES: usize = 16;
/// Admin HTTP connections open at once; one more is closed at accept. The API serves operators and
/// probes, a handful of callers.
pub const ADMIN_HTTP_CONNECTIONS_MAX_COUNT: usize = 256;
/// Admin HTTP connections from one address: a slow or hostile client holds at most this share.
pub const ADMIN_HTTP_CONNECTIONS_PER_HOST_MAX_COUNT: usize = 32;
/// Longest an admin HTTP request head (or the wait for the next one on a kept-alive connection)
/// may take to arrive: a slow-loris client is closed after it.
pub const ADMIN_HTTP_HEADER_READ_TIMEOUT_MS: u64 = 5_000;
/// Longest an admin HTTP connection lives; then it finishes its call and closes.
pub const ADMIN_HTTP_CONNECTION_MAX_MS: u64 = 60_000;
/// Deadline of one admin HTTP call (a replicated change included); beyond it the call is answered 504.
pub const ADMIN_HTTP_REQUEST_TIMEOUT_MS: u64 = 10_000;
/// Longest wait for the admin HTTP server's connections to close at shutdown.
pub const ADMIN_HTTP_SHUTDOWN_MAX_MS: u64 = ADMIN_HTTP_REQUEST_TIMEOUT_MS + 1_000;
/// Messages a by-key query answers when the caller gives no `max` (`mqadmin queryMsgByKey -m`).
pub const ADMIN_QUERY_MESSAGE_DEFAULT_COUNT: i32 = 64;
/// Body bytes of one message shown in an admin HTTP answer; the rest is cut (`body_truncated`).
pub const ADMIN_MESSAGE_BODY_SHOWN_MAX_BYTES: usize = 64 * 1024;
/// Queue rows of one consumer-progress answer.
pub const ADMIN_PROGRESS_QUEUES_MAX_COUNT: usize = 65_536;
/// A follower is ready (`/readyz`) once it has applied all but this many committed entries.
pub const ADMIN_READY_APPLY_LAG_MAX_COUNT: u64 = 1_000;
/// `rocketmq_consumer_lag` series one scrape renders; the rest are dropped (and counted).
pub const METRICS_CONSUMER_LAG_SERIES_MAX_COUNT: usize = 10_000;
/// How often a broker's metric histograms are drained when nobody scrapes them.
pub const METRICS_UPKEEP_INTERVAL_MS: u64 = 5_000;

const _: () = assert!(ADMIN_HTTP_SHUTDOWN_MAX_MS > ADMIN_HTTP_REQUEST_TIMEOUT_MS);
const _: () = assert!(ADMIN_HTTP_CONNECTIONS_PER_HOST_MAX_COUNT < ADMIN_HTTP_CONNECTIONS_MAX_COUNT);
const _: () = assert!(ADMIN_HTTP_HEADER_READ_TIMEOUT_MS < ADMIN_HTTP_CONNECTION_MAX_MS);
const _: () = assert!(ADMIN_PROGRESS_QUEUES_MAX_COUNT <= CONSUMER_OFFSET_BATCH_MAX_COUNT);

// ---- Web console (`console/`) ----

/// Deadline of one call the console makes to a broker's admin API, a NameServer or a broker's
/// remoting port: a broker that is down shows as an error on the page, not as a page that hangs.
pub const CONSOLE_UPSTREAM_TIMEOUT_MS: u64 = 3_000;
/// Deadline of a change the console relays (leader transfer, adding a node): the broker's own
/// request deadline plus the way there and back.
pub const CONSOLE_CHANGE_TIMEOUT_MS: u64 = ADMIN_HTTP_REQUEST_TIMEOUT_MS + 2_000;
/// Largest answer the console reads from a broker's admin API (a consumer progress of
/// `ADMIN_PROGRESS_QUEUES_MAX_COUNT` rows stays below it).
pub const CONSOLE_UPSTREAM_ANSWER_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Request body the console takes from the page.
pub const CONSOLE_BODY_MAX_BYTES: usize = 16 * 1024;
/// How often the console samples topic offsets and consumer lag for its charts.
pub const CONSOLE_SAMPLE_INTERVAL_MS: u64 = 5_000;
/// Samples one chart keeps (at `CONSOLE_SAMPLE_INTERVAL_MS`: the last 10 minutes).
pub const CONSOLE_HISTORY_SAMPLES_MAX_COUNT: usize = 120;
/// Topics and consumer groups the sampler follows; the rest have no chart.
pub const CONSOLE_SAMPLED_SERIES_MAX_COUNT: usize = 512;
/// Logged-in browser sessions kept at once; a new login beyond it ends the oldest.
pub const CONSOLE_SESSIONS_MAX_COUNT: usize = 64;
/// How long a console login lasts.
pub const CONSOLE_SESSION_TTL_MS: u64 = 12 * 60 * 60 * 1_000;
/// Messages of one queue a time-range search or a DLQ listing reads.
pub const CONSOLE_MESSAGES_PER_QUEUE_MAX_COUNT: i32 = 32;
/// Messages one console search answers in all.
pub const CONSOLE_MESSAGES_LISTED_MAX_COUNT: usize = 256;
/// Deadline of one call to the console (a page's data gathered from every group, or a relayed
/// change); beyond it the call is answered 504.
pub const CONSOLE_REQUEST_TIMEOUT_MS: u64 = CONSOLE_CHANGE_TIMEOUT_MS + 1_000;

const _: () = assert!(CONSOLE_CHANGE_TIMEOUT_MS > ADMIN_HTTP_REQUEST_TIMEOUT_MS);

// ---- Message trace (client SDK; `AsyncTraceDispatcher` defaults) ----

/// Trace contexts a client holds before it drops new ones (`queueSize`, 2048): tracing never slows
/// or blocks the sends and listeners it records.
pub const TRACE_QUEUE_MAX_COUNT: usize = 2_048;
/// Contexts the dispatcher takes at once (`batchSize`, 100).
pub const TRACE_BATCH_MAX_COUNT: usize = 100;
/// Body bytes after which a trace message is sent and the next begins (`maxMsgSize`, 128,000).
pub const TRACE_MESSAGE_BODY_MAX_BYTES: usize = 128_000;
/// KEYS bytes after which a trace message is sent and the next begins (raftmq's: a message's
/// properties must stay under [`PROPERTIES_SIZE_MAX_BYTES`], and every traced id is a key).
pub const TRACE_MESSAGE_KEYS_MAX_BYTES: usize = 12 * 1024;
/// Largest inflated trace message body the admin HTTP trace query reads (twice what a dispatcher
/// writes: one record may exceed the packing limit); larger ones are not trace messages.
pub const ADMIN_TRACE_BODY_MAX_BYTES: usize = 2 * TRACE_MESSAGE_BODY_MAX_BYTES;
/// Most trace records one admin HTTP trace query answers.
pub const ADMIN_TRACE_RECORDS_MAX_COUNT: usize = 1_024;
/// Deadline of one trace message send (Java's 5 s).
pub const TRACE_SEND_TIMEOUT_MS: u64 = 5_000;
/// How long a shutdown waits for the dispatcher to send what it holds.
pub const TRACE_FLUSH_MAX_MS: u64 = 2 * TRACE_SEND_TIMEOUT_MS;

// ---- Consumers (client SDK; `DefaultMQPushConsumer` / `DefaultLitePullConsumer` defaults) ----

/// Messages asked for by one PULL_MESSAGE (`pullBatchSize`, 32).
pub const CONSUMER_PULL_BATCH_SIZE_DEFAULT_COUNT: u32 = 32;
/// Largest `pullBatchSize` a consumer accepts (`Validators`: 1..=1024).
pub const CONSUMER_PULL_BATCH_SIZE_MAX_COUNT: u32 = 1_024;
/// Cached messages per queue above which a consumer stops pulling it (`pullThresholdForQueue`, 1000).
pub const CONSUMER_PULL_THRESHOLD_FOR_QUEUE_DEFAULT_COUNT: u64 = 1_000;
/// Cached body bytes per queue above which a consumer stops pulling it (`pullThresholdSizeForQueue`, 100 MiB).
pub const CONSUMER_PULL_THRESHOLD_FOR_QUEUE_DEFAULT_BYTES: u64 = 100 * 1024 * 1024;
/// Offset span of the cached messages of one queue above which a concurrent consumer stops pulling
/// it (`consumeConcurrentlyMaxSpan`, 2000).
pub const CONSUMER_CONSUME_CONCURRENTLY_MAX_SPAN_DEFAULT_COUNT: i64 = 2_000;
/// Listener calls a push consumer runs at once (`consumeThreadMax`, 20).
pub const CONSUMER_CONSUME_THREADS_DEFAULT_COUNT: usize = 20;
/// Upper bound on `consumeThreadMax`.
pub const CONSUMER_CONSUME_THREADS_MAX_COUNT: usize = 1_000;
/// How long a broker may hold a push consumer's pull (`brokerSuspendMaxTimeMillis`, 15 s).
pub const CONSUMER_BROKER_SUSPEND_MAX_MS: u64 = 15_000;
/// Deadline of a suspended pull (`consumerTimeoutMillisWhenSuspend`, 30 s).
pub const CONSUMER_PULL_TIMEOUT_WHEN_SUSPEND_MS: u64 = 30_000;
/// Pause after a failed pull before the next one (`pullTimeDelayMillsWhenException`, 3 s).
pub const CONSUMER_PULL_DELAY_WHEN_EXCEPTION_MS: u64 = 3_000;
/// How often a client heartbeats every broker of its routes (`heartbeatBrokerInterval`, 30 s).
pub const CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS: u64 = 30_000;
/// How often a heartbeating producer looks for a change of its groups' leader addresses (a
/// failover): a new leader hears from it within this period, not a whole heartbeat interval later.
pub const PRODUCER_HEARTBEAT_ROUTE_CHECK_MS: u64 = 1_000;
/// How often consumer offsets are persisted (`persistConsumerOffsetInterval`, 5 s).
pub const CONSUMER_OFFSET_PERSIST_INTERVAL_DEFAULT_MS: u64 = 5_000;
/// How often a consumer rebalances without a notification (`rocketmq.client.rebalance.waitInterval`, 20 s).
pub const CONSUMER_REBALANCE_INTERVAL_DEFAULT_MS: u64 = 20_000;
/// How often an orderly consumer renews its queue locks (`REBALANCE_LOCK_INTERVAL`, 20 s).
pub const CONSUMER_LOCK_RENEW_INTERVAL_DEFAULT_MS: u64 = 20_000;
/// How long a client trusts a queue lock since its last renewal (`REBALANCE_LOCK_MAX_LIVE_TIME`, 30 s).
pub const CONSUMER_LOCK_MAX_LIVE_MS: u64 = 30_000;
/// Pause before messages whose send-back failed are consumed again locally (5 s in Java).
pub const CONSUMER_RECONSUME_LOCAL_DELAY_DEFAULT_MS: u64 = 5_000;
/// Default `maxReconsumeTimes` of a concurrent consumer (-1 means 16).
pub const CONSUMER_MAX_RECONSUME_TIMES_DEFAULT_COUNT: i32 = 16;
/// Messages a lite pull consumer keeps fetched but not yet polled (`pullThresholdForAll`, 10,000).
pub const LITE_PULL_THRESHOLD_FOR_ALL_DEFAULT_COUNT: usize = 10_000;
/// Concurrent senders (or in-flight async sends) `raftmq bench produce` accepts: every one may hold
/// a request on the same connection, which refuses more than [`CONNECTION_INFLIGHT_MAX_COUNT`].
pub const BENCH_CONCURRENCY_MAX_COUNT: usize = 4_096;
/// Messages per SEND_BATCH_MESSAGE in `raftmq bench produce --batch`.
pub const BENCH_BATCH_MAX_COUNT: usize = 1_024;
/// ConsumeQueue units one QUERY_CONSUME_QUEUE answer lists at most (`mqadmin queryCq -c`; Java
/// stops at the end of the unit's mapped file, 300,000 units by default).
pub const QUERY_CONSUME_QUEUE_MAX_COUNT: i32 = 10_000;
/// Units `raftmq admin queryCq` asks for without `-c` (mqadmin's default).
pub const QUERY_CONSUME_QUEUE_DEFAULT_COUNT: i32 = 10;
/// Messages one QUERY_MESSAGE may ask a broker for (`mqadmin queryMsgByKey -m`, default 64).
pub const QUERY_MESSAGE_MAX_COUNT: i32 = 2_048;
/// Record bytes one QUERY_MESSAGE answer carries (the first match is always sent); stays well under
/// the frame limit so the header fits beside it.
pub const QUERY_MESSAGE_BODY_MAX_BYTES: usize = 8 * 1024 * 1024;
/// A learner is caught up (and may be promoted to voter) once its matched index is within this many
/// entries of the leader's last index.
pub const LEARNER_CATCH_UP_LAG_MAX_ENTRIES: u64 = 256;
/// Longest wait for a new learner to catch up before `addNode` gives up (the learner stays; a retry
/// with the same id resumes).
pub const LEARNER_CATCH_UP_MAX_MS: u64 = 60_000;
/// How often a replica's disk guard looks whether its disk is full and, leading, hands leadership
/// over (`broker/src/services/disk_guard.rs`).
pub const DISK_GUARD_INTERVAL_MS: u64 = 500;
/// How often a leader's replication watch looks at its followers' matched indexes
/// (`broker/src/services/replication_watch.rs`).
pub const REPLICATION_WATCH_INTERVAL_MS: u64 = 1_000;
/// A follower behind the leader whose matched index has not moved for this long is reported (once
/// per episode): 25 heartbeats at the default interval, far beyond any healthy pause.
pub const REPLICATION_STALL_WARN_MS: u64 = 5_000;
/// Longest wait for a leadership transfer: until the target leads and has passed its readiness gate.
pub const LEADER_TRANSFER_MAX_MS: u64 = 10_000;
/// A leadership transfer goes only to a voter that acknowledged the leader this recently (or within
/// four heartbeat intervals, if longer): matched indexes alone cannot tell a dead voter of an idle
/// group from a live one.
pub const LEADER_TRANSFER_TARGET_ACK_AGE_MIN_MS: u64 = 1_000;
/// Deadline of one membership admin call on the client side: the longest server-side wait plus room
/// for the two membership entries to commit.
pub const MEMBERSHIP_CHANGE_TIMEOUT_MS: u64 = LEARNER_CATCH_UP_MAX_MS + 15_000;
/// How often every replica looks for a voter change left joint, which its ready leader then finishes
/// (`broker/src/services/membership.rs`): until it does, the group refuses every other change.
pub const JOINT_MEMBERSHIP_CHECK_INTERVAL_MS: u64 = 500;
/// Node ids one replicated node-id record may carry (a broker group is a handful of replicas).
pub const RAFT_NODE_IDS_MAX_COUNT: usize = 1_024;
/// Retention rounds after DELETE_EXPIRED_COMMITLOG (`mqadmin deleteExpiredCommitLog`) that delete
/// expired segments whatever the hour (RocketMQ's `MAX_MANUAL_DELETE_FILE_TIMES`).
pub const RETENTION_MANUAL_DELETE_ROUNDS_COUNT: u32 = 20;
/// CommitLog segments one retention round purges at most (RocketMQ's `DELETE_FILES_BATCH_MAX`).
pub const RETENTION_SEGMENTS_PER_ROUND_MAX_COUNT: usize = 10;
/// How soon the retention task looks again while a boundary waits for its snapshot and purge.
pub const RETENTION_SNAPSHOT_POLL_MS: u64 = 200;
/// A boundary whose snapshot has not purged the log this long after it was requested is requested
/// again (a request refused while openraft was busy is not retried by openraft).
pub const RETENTION_SNAPSHOT_RETRIGGER_MS: u64 = 5_000;
/// Topic-queues one retention manifest may list (decoding never allocates beyond the bytes either).
pub const RETENTION_MANIFEST_QUEUES_MAX_COUNT: usize = 1_000_000;

const _: () = assert!(RETENTION_SNAPSHOT_POLL_MS < RETENTION_SNAPSHOT_RETRIGGER_MS);
const _: () = assert!(LEADER_TRANSFER_MAX_MS < MEMBERSHIP_CHANGE_TIMEOUT_MS);
const _: () = assert!(LEARNER_CATCH_UP_MAX_MS < MEMBERSHIP_CHANGE_TIMEOUT_MS);

const _: () = assert!(CONSUMER_PULL_BATCH_SIZE_DEFAULT_COUNT <= CONSUMER_PULL_BATCH_SIZE_MAX_COUNT);
const _: () = assert!((BROKER_PULL_TRANSFER_MAX_BYTES as usize) + HEADER_ROOM_BYTES < FRAME_SIZE_MAX_BYTES);
const _: () = assert!(CONSUMER_BROKER_SUSPEND_MAX_MS < CONSUMER_PULL_TIMEOUT_WHEN_SUSPEND_MS);
const _: () = assert!(CONSUMER_BROKER_SUSPEND_MAX_MS <= LONG_POLL_SUSPEND_MAX_MS);
const _: () = assert!(CONSUMER_LOCK_RENEW_INTERVAL_DEFAULT_MS < CONSUMER_LOCK_MAX_LIVE_MS);
const _: () = assert!(CONSUMER_CONSUME_THREADS_DEFAULT_COUNT <= CONSUMER_CONSUME_THREADS_MAX_COUNT);

/// Largest gap between a cluster-signed request's timestamp and the receiver's wall clock, either
/// way: older requests are refused as replays, and this bounds the clock skew a group tolerates.
pub const CLUSTER_AUTH_CLOCK_SKEW_MAX_MS: u64 = 30_000;
/// How far below the highest sequence number seen in a signer's session a signed request may
/// still arrive (pipelined RPCs overtake each other); each number is accepted once.
pub const CLUSTER_AUTH_REPLAY_WINDOW_COUNT: u64 = 1_024;
/// Signer sessions one receiver remembers at once (a session is one process's signer: a group
/// restarts a handful a day); a new session past it is refused until idle ones are forgotten.
pub const CLUSTER_AUTH_SESSIONS_MAX_COUNT: usize = 4_096;
/// A signer session not heard from for this long is forgotten: every request it could still
/// replay is older than [`CLUSTER_AUTH_CLOCK_SKEW_MAX_MS`] by then.
pub const CLUSTER_AUTH_SESSION_IDLE_MAX_MS: u64 = 3 * CLUSTER_AUTH_CLOCK_SKEW_MAX_MS;
/// Shortest cluster secret accepted (bytes of the configured text): 128 bits of randomness as hex
/// is 32 characters; 16 is the floor for a passphrase-like secret.
pub const CLUSTER_SECRET_MIN_BYTES: usize = 16;
/// Longest cluster secret accepted (a secret file is read whole).
pub const CLUSTER_SECRET_MAX_BYTES: usize = 4_096;

/// How far beyond this replica's own term a Raft RPC's term may be. Terms grow by one per
/// election that passed pre-vote, so a real leader is never this far ahead; a larger one is a
/// forged or corrupt vote (openraft computes `term + 1`, which would wrap at `u64::MAX`).
pub const RAFT_TERM_AHEAD_MAX_COUNT: u64 = 1 << 20;
/// Largest term a Raft RPC may carry at all, whatever this replica's term: far from the wrap.
pub const RAFT_TERM_MAX: u64 = u64::MAX / 4;

/// Longest name a broker or NameServer turns into one file or directory name (a file name holds
/// at most 255 bytes); see `message::validate::is_safe_path_component`.
pub const PATH_COMPONENT_MAX_BYTES: usize = 255;

/// PUT_KV_CONFIG: longest namespace and key.
pub const KV_CONFIG_NAME_MAX_BYTES: usize = 255;
/// PUT_KV_CONFIG: longest value (RocketMQ's values are a broker list such as `broker-a:8;broker-b:8`).
pub const KV_CONFIG_VALUE_MAX_BYTES: usize = 16 * 1024;
/// Most keys the KV config holds over all namespaces: with the value limit, bounds the file each
/// change rewrites and fsyncs.
pub const KV_CONFIG_ENTRIES_MAX_COUNT: usize = 4_096;
/// Largest KV config as stored (namespaces, keys and values added up): each change rewrites the
/// whole file, so this bounds the bytes one PUT_KV_CONFIG writes and fsyncs.
pub const KV_CONFIG_TOTAL_MAX_BYTES: usize = 4 * 1024 * 1024;

const _: () = assert!(MESSAGE_BODY_SIZE_MAX_BYTES < FRAME_SIZE_MAX_BYTES);
const _: () = assert!(TRACE_MESSAGE_BODY_MAX_BYTES < MESSAGE_BODY_SIZE_MAX_BYTES);
const _: () = assert!(TRACE_MESSAGE_KEYS_MAX_BYTES < PROPERTIES_SIZE_MAX_BYTES / 2);
const _: () = assert!(TRACE_BATCH_MAX_COUNT <= TRACE_QUEUE_MAX_COUNT);
const _: () = assert!(QUERY_MESSAGE_BODY_MAX_BYTES + MESSAGE_BODY_SIZE_MAX_BYTES < FRAME_SIZE_MAX_BYTES);
const _: () = assert!(BATCH_BODY_SIZE_MAX_BYTES < FRAME_SIZE_MAX_BYTES);
const _: () = assert!(TOPIC_NAME_LENGTH_MAX_CHARS <= i8::MAX as usize);
const _: () = assert!(TOPIC_NAME_LENGTH_MAX_CHARS <= TOPIC_STORE_NAME_MAX_BYTES);
const _: () = assert!(HEADER_SIZE_MAX_BYTES < FRAME_SIZE_MAX_BYTES);
const _: () = assert!(CONNECTION_WRITE_BATCH_MAX_COUNT <= CONNECTION_WRITE_QUEUE_MAX_COUNT);
const _: () = assert!(SERVER_CONNECTIONS_PER_HOST_MAX_COUNT <= SERVER_CONNECTIONS_MAX_COUNT);
const _: () = assert!(SERVER_CONNECTION_READ_PAUSE_QUEUED_BYTES < SERVER_CONNECTION_QUEUED_MAX_BYTES);
const _: () = assert!(FRAME_SIZE_MAX_BYTES < SERVER_CONNECTION_QUEUED_MAX_BYTES);
const _: () = assert!(CONNECTION_CONCURRENT_REQUESTS_MAX_COUNT <= CONNECTION_INFLIGHT_MAX_COUNT);
const _: () = assert!(BENCH_CONCURRENCY_MAX_COUNT <= CONNECTION_CONCURRENT_REQUESTS_MAX_COUNT);
const _: () = assert!(CONNECT_TIMEOUT_MS <= RPC_TIMEOUT_DEFAULT_MS);
const _: () = assert!(UNCOMPRESSED_BODY_SIZE_MAX_BYTES >= MESSAGE_BODY_SIZE_MAX_BYTES);
const _: () = assert!(PULL_FILTER_SCAN_MIN_BYTES.is_multiple_of(20));
const _: () = assert!(CLUSTER_AUTH_SESSION_IDLE_MAX_MS >= 2 * CLUSTER_AUTH_CLOCK_SKEW_MAX_MS);
const _: () = assert!(CLUSTER_SECRET_MIN_BYTES <= CLUSTER_SECRET_MAX_BYTES);
const _: () = assert!(RAFT_TERM_AHEAD_MAX_COUNT < RAFT_TERM_MAX);
const _: () = assert!(TOPIC_STORE_NAME_MAX_BYTES <= PATH_COMPONENT_MAX_BYTES);
const _: () = assert!(KV_CONFIG_VALUE_MAX_BYTES <= KV_CONFIG_TOTAL_MAX_BYTES);

/// Longest a TLS handshake may take once its first byte arrived (Netty's `SslHandler`
/// `handshakeTimeoutMillis`, 10 s): a peer that starts one and never finishes is closed, its
/// admission slot counted meanwhile. A client's handshake is bounded by its connect deadline too.
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// Largest first frame a TLS-enforcing server reads from a plaintext client in order to answer it
/// with an error naming the mode (a heartbeat or a send header fits); a larger one is just closed.
pub const TLS_PLAINTEXT_REFUSAL_FRAME_MAX_BYTES: usize = 64 * 1024;
/// Most requests a TLS-enforcing server answers on one plaintext connection before closing it
/// (a client pipelines a few on a new connection: a route lookup, a heartbeat).
pub const TLS_PLAINTEXT_REFUSAL_REQUESTS_MAX: usize = 16;
/// How often the certificate and key files of a TLS server are checked for a change (Java's
/// `FileWatchService` polls every 500 ms): a rotated certificate is served to the next connection.
pub const TLS_CERT_RELOAD_POLL_MS: u64 = 500;
/// Largest certificate or key file read (a chain of a few certificates is a few KiB).
pub const TLS_PEM_FILE_MAX_BYTES: u64 = 1024 * 1024;

const _: () = assert!(TLS_HANDSHAKE_TIMEOUT_MS < SERVER_CONNECTION_IDLE_MAX_SECS * 1_000);
const _: () = assert!(TLS_PLAINTEXT_REFUSAL_FRAME_MAX_BYTES < FRAME_SIZE_MAX_BYTES);

// ---- gRPC MessagingService (grpc/) ----

/// Longest one unary gRPC call may take on the server (a send waits for commit and apply, or a
/// relay to the leader); past it the call is answered DEADLINE_EXCEEDED, never left hanging.
pub const GRPC_REQUEST_TIMEOUT_MS: u64 = 10_000;
/// Largest gRPC message the server decodes: a send carries at most a frame's worth.
pub const GRPC_DECODING_MESSAGE_MAX_BYTES: usize = FRAME_SIZE_MAX_BYTES;
/// Longest a request bridged from gRPC waits for its replica to know a ready leader (an election
/// or a new leader's catch-up running) before it is refused; the clients of 5.x do not retry
/// EndTransaction, so a refusal there leaves the half to the check-back.
pub const BRIDGE_LEADER_WAIT_MAX_MS: u64 = 3_000;
/// How often a bridged request looks again for a ready leader while it waits.
pub const BRIDGE_LEADER_POLL_MS: u64 = 20;
/// Messages one SendMessage request may carry (each is stored as one remoting send).
pub const GRPC_SEND_MESSAGES_MAX_COUNT: usize = 1_024;
/// Concurrent gRPC streams (calls) on one client connection.
pub const GRPC_STREAMS_PER_CONNECTION_MAX_COUNT: u32 = 1_024;
/// Bytes of the user properties of one message sent over gRPC (RocketMQ proxy's
/// `maxUserPropertySize`, 16 KiB).
pub const GRPC_USER_PROPERTIES_MAX_BYTES: usize = 16 * 1024;
/// Longest message group (`__SHARDINGKEY`), as RocketMQ proxy's `maxMessageGroupSize`.
pub const GRPC_MESSAGE_GROUP_MAX_BYTES: usize = 64;
/// Longest client-assigned message id (`UNIQ_KEY`) accepted over gRPC.
pub const GRPC_MESSAGE_ID_MAX_BYTES: usize = 128;
/// Commands queued for one client's Telemetry stream (settings answers, transaction checks); a
/// check that finds it full is not delivered and the half is checked again in a later round.
pub const GRPC_TELEMETRY_OUTBOX_MAX_COUNT: usize = 64;
/// Longest a gRPC receive waits for messages (the proxy's `grpcClientConsumerMaxLongPollingTimeoutMillis`);
/// also what a receive naming no time waits, and the time the consumers' settings announce.
pub const GRPC_LONG_POLLING_MAX_MS: u64 = 20_000;
/// Invisible time of a receive that names none because its client renews it (`auto_renew`; the
/// proxy's `defaultInvisibleTimeMills`).
pub const GRPC_RECEIVE_INVISIBLE_DEFAULT_MS: u64 = 60_000;

const _: () = assert!(GRPC_DECODING_MESSAGE_MAX_BYTES >= MESSAGE_BODY_SIZE_MAX_BYTES);
// A bridged send may wait for a leader and then be relayed; both fit in one call's deadline.
const _: () = assert!(BRIDGE_LEADER_WAIT_MAX_MS + RPC_TIMEOUT_DEFAULT_MS < GRPC_REQUEST_TIMEOUT_MS);
const _: () = assert!(GRPC_USER_PROPERTIES_MAX_BYTES < PROPERTIES_SIZE_MAX_BYTES);

// POP consumption (RocketMQ 5's POP_MESSAGE / ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME and the
// gRPC ReceiveMessage that rides on them; docs/broker.md#pop).

/// Most messages one pop may return (`PopMessageProcessor`: "pop message's num is greater than 32").
pub const POP_BATCH_MAX_COUNT: usize = 32;
/// Shortest invisible time a pop or change may ask for: below it a consumer could not even ack
/// before its message came back.
pub const POP_INVISIBLE_MIN_MS: i64 = 1_000;
/// Longest invisible time (the proxy's `maxInvisibleTimeMills`, 12 h).
pub const POP_INVISIBLE_MAX_MS: i64 = 12 * 3_600 * 1_000;
/// Messages the replicated POP table holds in flight (received, neither acked nor revived) over
/// all groups of a broker group; past it a pop finds nothing until acks or revives free room, so
/// a group that never acks cannot grow the replicated state without bound.
pub const POP_IN_FLIGHT_MAX_COUNT: usize = 262_144;
/// Longest receipt (`extraInfo`) a request may carry: eight numbers and a broker name.
pub const POP_RECEIPT_HANDLE_MAX_BYTES: usize = 8 * 20 + BROKER_NAME_MAX_BYTES;
/// How often the leader looks for popped messages whose invisible time has ended.
pub const POP_REVIVE_INTERVAL_MS: u64 = 1_000;
/// Most expired messages one revive pass re-puts into retry topics (the rest wait for the next).
pub const POP_REVIVE_BATCH_MAX_COUNT: usize = 256;
/// Longest a pop may be held waiting for messages (`pollTime`), bounded like a pull's suspension.
pub const POP_POLL_TIME_MAX_MS: i64 = 60_000;
/// Most acks one POP entry carries (acks of many requests are batched into one entry).
pub const POP_ACK_BATCH_MAX_COUNT: usize = 1_024;
/// Times a pop is planned again after apply refused its entry (another write changed a queue
/// between the plan and the apply: an ack, a change, a refused pop before it); then it answers
/// what it has.
pub const POP_PLAN_ATTEMPTS_MAX: usize = 4;
/// Queues (group, topic, queue) the replicated POP table keeps a cursor for; a pop of a queue
/// beyond it is refused until a group is deleted.
pub const POP_QUEUES_MAX_COUNT: usize = 1 << 20;
