//! The pull decision: RocketMQ 4.9.8's `DefaultMessageStore.getMessage` (which units to return, the
//! `GetMessageStatus`, nextBeginOffset/min/max) and `PullMessageProcessor`'s mapping of that status to a
//! response code, long-poll suspension and the offset-moved case. No I/O of its own: the ConsumeQueue
//! and CommitLog are read through [`QueueUnits`] and [`CommitLogReader`].
//!
//! ```text
//! offset range        status                 nextBeginOffset (offset_check)   response code
//! max == 0            NO_MESSAGE_IN_QUEUE    0                                 PULL_NOT_FOUND if offset == 0, else PULL_OFFSET_MOVED
//! offset < min        OFFSET_TOO_SMALL       min                               PULL_OFFSET_MOVED
//! offset == max       OFFSET_OVERFLOW_ONE    offset                            PULL_NOT_FOUND (long-poll)
//! offset > max        OFFSET_OVERFLOW_BADLY  max                               PULL_OFFSET_MOVED
//! [min, max), file gone  OFFSET_FOUND_NULL   start of the next CQ file         PULL_NOT_FOUND (long-poll)
//! [min, max)          FOUND                  offset + units scanned            SUCCESS
//!                     NO_MATCHED_MESSAGE     offset + units scanned            PULL_RETRY_IMMEDIATELY
//!                     MESSAGE_WAS_REMOVING   offset + units scanned            PULL_RETRY_IMMEDIATELY
//! ```
//!
//! [`OffsetCheck`] is RocketMQ's "master, or `offsetCheckInSlave`", split by direction: a correction
//! forward (to the minimum, to the next ConsumeQueue file) is safe from any leader, since a queue's
//! minimum only grows and a stale one is lower; a correction backward (to the maximum, to 0 for an
//! empty queue) needs a leader whose applied state covers everything any replica may have served.
//! Where a correction is not allowed the client keeps its offset: PULL_OFFSET_MOVED becomes
//! PULL_RETRY_IMMEDIATELY, because a replica that is merely behind must never move a consumer
//! backwards (redelivery, seen by jepsen).
//!
//! Differences from 4.9.8, deliberate: the tag of each record read is re-checked exactly
//! ([`MessageFilter::matches_tag`]) so hash collisions are dropped here rather than by the client (same
//! consumer-visible result, same nextBeginOffset); `suggestWhichBrokerId` follows Java's
//! `slaveReadEnable` rule on every replica (a follower serves pulls whatever the key says: it holds
//! only committed data);
//! a record that could not be read now (EIO, EMFILE: [`CommitLogReader::try_read`] fails) ends the
//! scan before it, so nextBeginOffset never passes it (NO_MATCHED_MESSAGE when nothing was read:
//! the consumer asks again), where 4.9.8 would treat it as a removed segment and skip it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;

use bytes::Bytes;
use raftmq_common::filter::FilterError;
use raftmq_common::filter::SqlFilter;
use raftmq_common::java::string_hash_code;
use raftmq_common::limits::LONG_POLL_SUSPEND_MAX_MS;
use raftmq_common::limits::PULL_FILTER_SCAN_MIN_BYTES;
use raftmq_common::limits::SQL_FILTER_CACHE_MAX_COUNT;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::properties::property_of;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::parse_record;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::heartbeat::SUB_ALL;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use tracing::warn;

use crate::state::consume_queue::CQ_STORE_UNIT_SIZE_BYTES;
use crate::state::consume_queue::ConsumeQueue;
use crate::state::consume_queue::CqUnits;

/// A ConsumeQueue as the pull path reads it.
pub trait QueueUnits {
    /// First readable offset.
    fn min_offset(&self) -> u64;
    /// Offset after the last unit.
    fn max_offset(&self) -> u64;
    /// Up to `max_count` units from `from` within `from`'s file; `None` if that file is gone.
    fn read(&self, from: u64, max_count: usize) -> Option<CqUnits<'_>>;
    /// First offset of the next file (`rollNextFile`).
    fn roll_next_file(&self, offset: u64) -> u64;
}

impl QueueUnits for ConsumeQueue {
    fn min_offset(&self) -> u64 {
        ConsumeQueue::min_offset(self)
    }

    fn max_offset(&self) -> u64 {
        ConsumeQueue::max_offset(self)
    }

    fn read(&self, from: u64, max_count: usize) -> Option<CqUnits<'_>> {
        ConsumeQueue::read(self, from, max_count)
    }

    fn roll_next_file(&self, offset: u64) -> u64 {
        ConsumeQueue::roll_next_file(self, offset)
    }
}

/// The committed CommitLog as the pull path reads it.
pub trait CommitLogReader {
    /// Committed end (`getMaxOffset`): reads never pass it.
    fn max_offset(&self) -> i64;
    /// The record of `size` bytes at `phy_offset`, or `None` when its segment was deleted (or it
    /// could not be read: [`Self::try_read`] tells the two apart).
    fn read(&self, phy_offset: i64, size: i32) -> Option<Bytes>;
    /// As [`Self::read`], but a read that failed (EIO, EMFILE, ...) is an error, not `None`:
    /// `Ok(None)` means the bytes are not there (beyond the committed end, segment deleted).
    fn try_read(&self, phy_offset: i64, size: i32) -> std::io::Result<Option<Bytes>> {
        Ok(self.read(phy_offset, size))
    }
    /// Start of the segment after the one holding `phy_offset` (`rollNextFile`).
    fn roll_next_file(&self, phy_offset: i64) -> i64;
}

/// RocketMQ's `GetMessageStatus` (the response remark is its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GetMessageStatus {
    /// At least one message returned.
    Found,
    /// Units scanned, none matched the filter.
    NoMatchedMessage,
    /// The first candidate's CommitLog segment was deleted.
    MessageWasRemoving,
    /// The ConsumeQueue file for the offset is gone.
    OffsetFoundNull,
    /// Offset beyond max.
    OffsetOverflowBadly,
    /// Offset == max: nothing new yet.
    OffsetOverflowOne,
    /// Offset below min.
    OffsetTooSmall,
    /// The queue has never held a message.
    NoMessageInQueue,
}

impl GetMessageStatus {
    /// The Java enum constant name.
    pub fn as_str(self) -> &'static str {
        match self {
            GetMessageStatus::Found => "FOUND",
            GetMessageStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            GetMessageStatus::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            GetMessageStatus::OffsetFoundNull => "OFFSET_FOUND_NULL",
            GetMessageStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            GetMessageStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            GetMessageStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
            GetMessageStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

/// A subscription's filter (`ExpressionMessageFilter`): TAG by hash code in the ConsumeQueue and
/// exactly on the record, or SQL92 ([`SqlFilter`]) on the record's properties (no ConsumeQueue
/// pre-filter: RocketMQ's bloom-filter bit map is optional and off by default).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MessageFilter {
    /// Everything matches (`*`, class-filter mode, or no subscription).
    pub all: bool,
    /// Tag hash codes (`codeSet`).
    pub codes: Vec<i32>,
    /// Tags (`tagsSet`), for the exact re-check.
    pub tags: Vec<String>,
    /// A SQL92 subscription's compiled expression; then `codes` and `tags` are unused.
    pub sql: Option<Arc<SqlFilter>>,
}

impl MessageFilter {
    /// Matches every message.
    pub fn all() -> Self {
        MessageFilter { all: true, ..MessageFilter::default() }
    }

    /// The filter of a TAG subscription (a SQL92 one is built by [`MessageFilter::sql`]).
    pub fn from_subscription(sub: &SubscriptionData) -> Self {
        if sub.class_filter_mode || sub.is_sub_all() {
            return MessageFilter::all();
        }
        let mut codes = sub.code_set.clone();
        codes.sort_unstable();
        codes.dedup();
        MessageFilter { all: false, codes, tags: sub.tags_set.clone(), sql: None }
    }

    /// A SQL92 subscription's filter.
    pub fn sql(filter: SqlFilter) -> Self {
        MessageFilter::sql_shared(Arc::new(filter))
    }

    /// A SQL92 subscription's filter compiled once for every pull (see [`SqlFilterCache`]).
    pub fn sql_shared(filter: Arc<SqlFilter>) -> Self {
        MessageFilter { all: false, codes: Vec::new(), tags: Vec::new(), sql: Some(filter) }
    }

    /// `isMatchedByConsumeQueue`: the unit's tags code truncated to `int`, as Java's `intValue()`.
    /// A SQL92 filter needs the record, so every unit passes here.
    pub fn matches_code(&self, tags_code: i64) -> bool {
        self.all || self.sql.is_some() || self.codes.binary_search(&(tags_code as i32)).is_ok()
    }

    /// Whether a message that just arrived can wake a suspended pull with this filter: the tags code
    /// for TAG, the properties (wire form) for SQL92.
    pub fn matches_arrival(&self, tags_code: i64, properties: &str) -> bool {
        match &self.sql {
            Some(sql) if !self.all => sql.matches_properties(&Properties::from_wire_str(properties)),
            _ => self.matches_code(tags_code),
        }
    }

    /// `isMatchedByCommitLog` for a record that passed [`Self::matches_code`].
    fn matches_record(&self, record: &[u8]) -> bool {
        if self.all {
            return true;
        }
        match parse_record(record, DecodeOptions::default()) {
            Ok(view) => match &self.sql {
                Some(sql) => sql.matches_properties(&Properties::from_wire_str(view.properties)),
                None => self.matches_tag(property_of(view.properties, properties::TAGS)),
            },
            Err(e) => {
                // A unit pointing at something that is not a record: never send it to a client.
                warn!(error = %e, "ConsumeQueue unit points at an unreadable record; skipped");
                false
            }
        }
    }

    /// The exact check a 4.x client applies (`PullAPIWrapper.processPullResult`): a message without tag
    /// matches only an empty tag set.
    pub fn matches_tag(&self, tag: Option<&str>) -> bool {
        self.all || self.tags.is_empty() || tag.is_some_and(|t| self.tags.iter().any(|s| s == t))
    }
}

/// Compiled SQL92 expressions by their text, so a consumer's every pull does not parse its
/// subscription again (RocketMQ keeps them in `ConsumerFilterManager` per topic and group). At most
/// [`SQL_FILTER_CACHE_MAX_COUNT`] entries; a full cache is emptied. Expressions that fail to compile
/// are not kept: they are refused, and a client does not keep pulling with them.
#[derive(Debug, Default)]
pub struct SqlFilterCache {
    compiled: Mutex<HashMap<Box<str>, Arc<SqlFilter>>>,
}

impl SqlFilterCache {
    /// The compiled `expression`, compiling it on first use.
    pub fn get_or_compile(&self, expression: &str) -> Result<Arc<SqlFilter>, FilterError> {
        if let Some(hit) = self.lock().get(expression) {
            return Ok(Arc::clone(hit));
        }
        // Compiled outside the lock: a long expression must not stall every other pull.
        let filter = Arc::new(SqlFilter::compile(expression)?);
        let mut compiled = self.lock();
        if compiled.len() >= SQL_FILTER_CACHE_MAX_COUNT {
            compiled.clear();
        }
        compiled.insert(expression.into(), Arc::clone(&filter));
        Ok(filter)
    }

    /// Expressions held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Box<str>, Arc<SqlFilter>>> {
        self.compiled.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `FilterAPI.buildSubscriptionData` for expression type TAG: `*` (or empty) subscribes to every tag,
/// otherwise `a || b` lists tags (trimmed, empty ones skipped) with their Java hash codes.
pub fn build_subscription(topic: &str, sub_string: &str) -> Result<SubscriptionData, String> {
    let mut sub = SubscriptionData { topic: topic.to_owned(), ..SubscriptionData::default() };
    let trimmed = sub_string.trim();
    if trimmed.is_empty() || trimmed == SUB_ALL {
        sub.sub_string = SUB_ALL.to_owned();
        return Ok(sub);
    }
    sub.sub_string = sub_string.to_owned();
    for tag in sub_string.split("||").map(str::trim).filter(|t| !t.is_empty()) {
        sub.tags_set.push(tag.to_owned());
        sub.code_set.push(string_hash_code(tag));
    }
    if sub.tags_set.is_empty() {
        return Err(format!("subString split error: {sub_string:?}"));
    }
    Ok(sub)
}

/// Transfer limits of one pull (`MessageStoreConfig.maxTransfer*`, `accessMessageInMemoryMaxRatio`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullLimits {
    /// Bytes per pull when reading recent (cached) messages (256 KiB).
    pub max_transfer_bytes_in_memory: u64,
    /// Messages per pull when reading recent messages (32).
    pub max_transfer_count_in_memory: u64,
    /// Bytes per pull when reading old messages (64 KiB).
    pub max_transfer_bytes_in_disk: u64,
    /// Messages per pull when reading old messages (8).
    pub max_transfer_count_in_disk: u64,
    /// A message further than this behind the CommitLog end counts as on disk (40 % of RAM).
    pub memory_bytes: i64,
}

impl Default for PullLimits {
    fn default() -> Self {
        PullLimits {
            max_transfer_bytes_in_memory: 256 * 1024,
            max_transfer_count_in_memory: 32,
            max_transfer_bytes_in_disk: 64 * 1024,
            max_transfer_count_in_disk: 8,
            memory_bytes: 4 * 1024 * 1024 * 1024,
        }
    }
}

/// What `getMessage` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetMessageResult {
    /// The outcome.
    pub status: GetMessageStatus,
    /// Offset to pull from next.
    pub next_begin_offset: i64,
    /// Queue min offset.
    pub min_offset: i64,
    /// Queue max offset.
    pub max_offset: i64,
    /// Records, byte for byte as stored; the PULL body is their concatenation.
    pub messages: Vec<Bytes>,
    /// Total bytes of `messages`.
    pub buffer_total_size: u64,
    /// The consumer reads far behind the CommitLog end.
    pub suggest_pulling_from_slave: bool,
}

/// Which offset corrections this replica may make (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetCheck {
    /// A follower, or a leader not holding its lease: the client's offset is kept.
    Keep,
    /// A leader holding its lease whose apply may trail its log: only forward corrections.
    ForwardOnly,
    /// A leader holding its lease whose applied state covers its whole log: every correction.
    All,
}

impl OffsetCheck {
    /// May a result with `status` move the consumer's offset?
    pub fn allows(self, status: GetMessageStatus) -> bool {
        match self {
            Self::Keep => false,
            Self::ForwardOnly => matches!(status, GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetFoundNull),
            Self::All => true,
        }
    }
}

/// One pull request as `getMessage` sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GetMessageRequest<'f> {
    /// Requested queue offset (may be anything the client sends).
    pub offset: i64,
    /// `maxMsgNums`.
    pub max_msg_nums: i32,
    /// The subscription's filter.
    pub filter: &'f MessageFilter,
    /// Which corrections of the client's offset this replica may make.
    pub offset_check: OffsetCheck,
}

/// Where `slaveReadEnable` sends a group's consumers (`SubscriptionGroupConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlaveRead {
    /// `whichBrokerWhenConsumeSlowly` (default 1: the SDK then takes the first follower).
    pub when_slow: i64,
    /// `brokerId` (default 0: the leader).
    pub otherwise: i64,
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// `DefaultMessageStore.getMessage` for a queue (`None`: never written, read as empty, as RocketMQ's
/// `findConsumeQueue` creates it).
pub fn get_message(
    queue: Option<&impl QueueUnits>,
    request: &GetMessageRequest<'_>,
    log: &impl CommitLogReader,
    limits: &PullLimits,
) -> GetMessageResult {
    let offset = request.offset;
    let correct =
        |status: GetMessageStatus, new: i64| (status, if request.offset_check.allows(status) { new } else { offset });
    let (min, max) = queue.map_or((0, 0), |q| (to_i64(q.min_offset()), to_i64(q.max_offset())));
    let mut result = GetMessageResult {
        status: GetMessageStatus::NoMessageInQueue,
        next_begin_offset: offset,
        min_offset: min,
        max_offset: max,
        messages: Vec::new(),
        buffer_total_size: 0,
        suggest_pulling_from_slave: false,
    };
    let (status, next) = if max == 0 {
        correct(GetMessageStatus::NoMessageInQueue, 0)
    } else if offset < min {
        correct(GetMessageStatus::OffsetTooSmall, min)
    } else if offset == max {
        (GetMessageStatus::OffsetOverflowOne, offset)
    } else if offset > max {
        correct(GetMessageStatus::OffsetOverflowBadly, max)
    } else {
        // min <= offset < max, so the queue exists and offset is non-negative.
        let Some(queue) = queue else { return result };
        let from = offset as u64;
        match queue.read(from, scan_units_max(request.max_msg_nums)) {
            None => correct(GetMessageStatus::OffsetFoundNull, to_i64(queue.roll_next_file(from))),
            Some(units) => {
                let (status, scanned) = collect(units, request, log, limits, &mut result);
                (status, offset + scanned as i64)
            }
        }
    };
    result.status = status;
    result.next_begin_offset = next;
    result
}

/// Units one pull may scan: `max(16000, maxMsgNums × 20)` bytes of ConsumeQueue.
fn scan_units_max(max_msg_nums: i32) -> usize {
    let by_request = usize::try_from(max_msg_nums).unwrap_or(0).saturating_mul(CQ_STORE_UNIT_SIZE_BYTES);
    PULL_FILTER_SCAN_MIN_BYTES.max(by_request) / CQ_STORE_UNIT_SIZE_BYTES
}

/// The scan loop of `getMessage`; returns the status and how many units it consumed.
fn collect(
    units: CqUnits<'_>,
    request: &GetMessageRequest<'_>,
    log: &impl CommitLogReader,
    limits: &PullLimits,
    result: &mut GetMessageResult,
) -> (GetMessageStatus, usize) {
    let max_offset_py = log.max_offset();
    let mut status = GetMessageStatus::NoMatchedMessage;
    let mut next_phy_file_start = i64::MIN;
    let mut max_phy_offset_pulling = 0i64;
    let mut scanned = 0usize;
    for (_, unit) in units.iter() {
        max_phy_offset_pulling = unit.phy_offset;
        if next_phy_file_start != i64::MIN && unit.phy_offset < next_phy_file_start {
            scanned += 1;
            continue;
        }
        let in_disk = max_offset_py.saturating_sub(unit.phy_offset) > limits.memory_bytes;
        if is_batch_full(unit.size, request.max_msg_nums, result, in_disk, limits) {
            break;
        }
        scanned += 1;
        if !request.filter.matches_code(unit.tags_code) {
            if result.buffer_total_size == 0 {
                status = GetMessageStatus::NoMatchedMessage;
            }
            continue;
        }
        let record = match log.try_read(unit.phy_offset, unit.size) {
            Ok(Some(record)) => record,
            Ok(None) => {
                if result.buffer_total_size == 0 {
                    status = GetMessageStatus::MessageWasRemoving;
                }
                next_phy_file_start = log.roll_next_file(unit.phy_offset);
                continue;
            }
            Err(_) => {
                // Could not be read now (logged and counted by the reader): the pull ends before
                // this unit, so the consumer asks for it again instead of moving past it.
                scanned -= 1;
                break;
            }
        };
        if !request.filter.matches_record(&record) {
            if result.buffer_total_size == 0 {
                status = GetMessageStatus::NoMatchedMessage;
            }
            continue;
        }
        result.buffer_total_size += record.len() as u64;
        result.messages.push(record);
        status = GetMessageStatus::Found;
        next_phy_file_start = i64::MIN;
    }
    result.suggest_pulling_from_slave = max_offset_py.saturating_sub(max_phy_offset_pulling) > limits.memory_bytes;
    (status, scanned)
}

/// `DefaultMessageStore.isTheBatchFull`: the first message always fits.
fn is_batch_full(size: i32, max_msg_nums: i32, result: &GetMessageResult, in_disk: bool, limits: &PullLimits) -> bool {
    let total = result.buffer_total_size;
    let count = result.messages.len() as u64;
    if total == 0 || count == 0 {
        return false;
    }
    if i64::from(max_msg_nums) <= count as i64 {
        return true;
    }
    let (bytes_max, count_max) = if in_disk {
        (limits.max_transfer_bytes_in_disk, limits.max_transfer_count_in_disk)
    } else {
        (limits.max_transfer_bytes_in_memory, limits.max_transfer_count_in_memory)
    };
    total.saturating_add(u64::try_from(size).unwrap_or(0)) > bytes_max || count > count_max.saturating_sub(1)
}

/// How the broker answers a pull (`PullMessageProcessor.processRequest` after `getMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullOutcome {
    /// Response code (when not suspended).
    pub code: ResponseCode,
    /// Remark: the status name.
    pub remark: &'static str,
    /// Response header `suggestWhichBrokerId`.
    pub suggest_which_broker_id: i64,
    /// Response header `nextBeginOffset`.
    pub next_begin_offset: i64,
    /// Response header `minOffset`.
    pub min_offset: i64,
    /// Response header `maxOffset`.
    pub max_offset: i64,
    /// Hold the request (long polling) for this long instead of answering now.
    pub suspend_ms: Option<u64>,
    /// The leader should publish an OFFSET_MOVED_EVENT (PULL_OFFSET_MOVED on the leader).
    pub offset_moved_event: bool,
}

/// Broker-side switches of the pull processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullPolicy {
    /// False when re-running a request woken from long polling (`brokerAllowSuspend`).
    pub broker_allow_suspend: bool,
    /// `longPollingEnable`.
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills`.
    pub short_polling_ms: u64,
    /// Which corrections of the client's offset this replica may make.
    pub offset_check: OffsetCheck,
    /// `slaveReadEnable` with the group's `whichBrokerWhenConsumeSlowly` and `brokerId`: the
    /// brokerIds to suggest to a lagging and to a caught-up consumer; `None`: always the leader.
    pub slave_read: Option<SlaveRead>,
}

/// Maps a `getMessage` result to the response (`PullMessageProcessor`, 4.9.8).
pub fn pull_outcome(
    result: &GetMessageResult,
    request_offset: i64,
    request_sys_flag: i32,
    suspend_timeout_ms: i64,
    policy: &PullPolicy,
) -> PullOutcome {
    let mut code = match result.status {
        GetMessageStatus::Found => ResponseCode::Success,
        GetMessageStatus::MessageWasRemoving | GetMessageStatus::NoMatchedMessage => ResponseCode::PullRetryImmediately,
        GetMessageStatus::NoMessageInQueue if request_offset != 0 => ResponseCode::PullOffsetMoved,
        GetMessageStatus::NoMessageInQueue => ResponseCode::PullNotFound,
        GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => ResponseCode::PullNotFound,
        GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => ResponseCode::PullOffsetMoved,
    };
    let mut offset_moved_event = false;
    if code == ResponseCode::PullOffsetMoved {
        if policy.offset_check.allows(result.status) {
            offset_moved_event = true;
        } else {
            code = ResponseCode::PullRetryImmediately;
        }
    }
    let suspend_ms = (code == ResponseCode::PullNotFound
        && policy.broker_allow_suspend
        && pull_sys_flag::has_suspend(request_sys_flag))
    .then(|| {
        let ms = if policy.long_polling_enable {
            u64::try_from(suspend_timeout_ms).unwrap_or(0)
        } else {
            policy.short_polling_ms
        };
        ms.min(LONG_POLL_SUSPEND_MAX_MS)
    });
    PullOutcome {
        code,
        remark: result.status.as_str(),
        // `PullMessageProcessor`: with slaveReadEnable a consumer reading past the tail kept in
        // memory is sent to a follower, one at the tail to the group's brokerId; else the leader.
        suggest_which_broker_id: match policy.slave_read {
            Some(s) if result.suggest_pulling_from_slave => s.when_slow,
            Some(s) => s.otherwise,
            None => 0,
        },
        next_begin_offset: result.next_begin_offset,
        min_offset: result.min_offset,
        max_offset: result.max_offset,
        suspend_ms,
        offset_moved_event,
    }
}

/// Whether the request's `commitOffset` is stored (`storeOffsetEnable`): only by the leader, only for a
/// request that may suspend (not a long-poll re-run), only with the commit-offset bit.
pub fn should_store_offset(broker_allow_suspend: bool, request_sys_flag: i32, is_leader: bool) -> bool {
    broker_allow_suspend && pull_sys_flag::has_commit_offset(request_sys_flag) && is_leader
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    use raftmq_common::message::Message;
    use raftmq_common::message::MessageExt;
    use raftmq_common::message::record::encode_record;
    use raftmq_common::message::tag::tags_code;

    use super::*;
    use crate::state::consume_queue::CqUnit;

    /// A ConsumeQueue in memory: units `[min, max)` with `per_file` units per file; `gone_files` lists
    /// file indexes whose file was deleted.
    struct FakeQueue {
        min: u64,
        bytes: Vec<u8>,
        base: u64,
        per_file: u64,
        gone_files: Vec<u64>,
    }

    impl FakeQueue {
        fn new(min: u64, units: &[CqUnit], per_file: u64) -> Self {
            let base = min - min % per_file;
            let mut bytes = vec![0u8; ((min - base) as usize) * CQ_STORE_UNIT_SIZE_BYTES];
            for u in units {
                bytes.extend_from_slice(&u.encode());
            }
            FakeQueue { min, bytes, base, per_file, gone_files: Vec::new() }
        }
    }

    impl QueueUnits for FakeQueue {
        fn min_offset(&self) -> u64 {
            self.min
        }
        fn max_offset(&self) -> u64 {
            self.base + (self.bytes.len() / CQ_STORE_UNIT_SIZE_BYTES) as u64
        }
        fn read(&self, from: u64, max_count: usize) -> Option<CqUnits<'_>> {
            if self.gone_files.contains(&(from / self.per_file)) {
                return None;
            }
            let end = (from - from % self.per_file + self.per_file).min(self.max_offset()).min(from + max_count as u64);
            let s = (from - self.base) as usize * CQ_STORE_UNIT_SIZE_BYTES;
            let e = (end - self.base) as usize * CQ_STORE_UNIT_SIZE_BYTES;
            Some(CqUnits::from_bytes(from, &self.bytes[s..e]))
        }
        fn roll_next_file(&self, offset: u64) -> u64 {
            offset + self.per_file - offset % self.per_file
        }
    }

    /// A CommitLog in memory: records by phy offset; segments of `segment` bytes below `min_phy` are
    /// gone; reads at or above `failing_from` fail with an I/O error.
    struct FakeLog {
        records: BTreeMap<i64, Bytes>,
        max: i64,
        min_phy: i64,
        segment: i64,
        failing_from: i64,
    }

    impl CommitLogReader for FakeLog {
        fn max_offset(&self) -> i64 {
            self.max
        }
        fn read(&self, phy: i64, size: i32) -> Option<Bytes> {
            self.try_read(phy, size).ok().flatten()
        }
        fn try_read(&self, phy: i64, size: i32) -> std::io::Result<Option<Bytes>> {
            if phy >= self.failing_from {
                return Err(std::io::Error::other("injected EIO"));
            }
            if phy < self.min_phy {
                return Ok(None);
            }
            Ok(self.records.get(&phy).filter(|b| b.len() == size as usize).cloned())
        }
        fn roll_next_file(&self, phy: i64) -> i64 {
            phy + self.segment - phy % self.segment
        }
    }

    /// `n` messages with the given tags at phy 1000, 1000 + 1000, ...; returns queue units and the log.
    fn fixture(min: u64, tags: &[&str], per_file: u64) -> (FakeQueue, FakeLog) {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let mut records = BTreeMap::new();
        let mut units = Vec::new();
        for (i, tag) in tags.iter().enumerate() {
            let phy = 1000 * (i as i64 + 1);
            let mut m = Message::new("T", vec![b'x'; 10]);
            if !tag.is_empty() {
                m = m.with_tags(*tag);
            }
            let ext = MessageExt {
                message: m,
                queue_offset: (min + i as u64) as i64,
                commit_log_offset: phy,
                born_host: host,
                store_host: host,
                ..MessageExt::default()
            };
            let bytes = encode_record(&ext).unwrap().freeze();
            let tag_opt = if tag.is_empty() { None } else { Some(*tag) };
            units.push(CqUnit { phy_offset: phy, size: bytes.len() as i32, tags_code: tags_code(tag_opt) });
            records.insert(phy, bytes);
        }
        let max = 1000 * (tags.len() as i64 + 2);
        (
            FakeQueue::new(min, &units, per_file),
            FakeLog { records, max, min_phy: 0, segment: 4000, failing_from: i64::MAX },
        )
    }

    fn filter(tags: &[&str]) -> MessageFilter {
        let sub = SubscriptionData {
            sub_string: tags.join(" || "),
            code_set: tags.iter().map(|t| tags_code(Some(t)) as i32).collect(),
            tags_set: tags.iter().map(|t| (*t).to_owned()).collect(),
            ..SubscriptionData::default()
        };
        MessageFilter::from_subscription(&sub)
    }

    fn pull(
        q: Option<&FakeQueue>,
        log: &FakeLog,
        offset: i64,
        max_msgs: i32,
        f: &MessageFilter,
        leader: bool,
    ) -> GetMessageResult {
        let offset_check = if leader { OffsetCheck::All } else { OffsetCheck::Keep };
        let req = GetMessageRequest { offset, max_msg_nums: max_msgs, filter: f, offset_check };
        get_message(q, &req, log, &PullLimits::default())
    }

    const LEADER: PullPolicy = PullPolicy {
        broker_allow_suspend: true,
        long_polling_enable: true,
        short_polling_ms: 1000,
        offset_check: OffsetCheck::All,
        slave_read: None,
    };
    const FOLLOWER: PullPolicy = PullPolicy { offset_check: OffsetCheck::Keep, ..LEADER };
    const SUSPEND: i32 = pull_sys_flag::SUSPEND;

    #[test]
    fn the_sql_filter_cache_compiles_an_expression_once_and_stays_bounded() {
        let cache = SqlFilterCache::default();
        let a = cache.get_or_compile("a > 1").expect("valid");
        let again = cache.get_or_compile("a > 1").expect("valid");
        assert!(Arc::ptr_eq(&a, &again), "a second pull reuses the compiled expression");
        assert!(cache.get_or_compile("a >").is_err());
        assert_eq!(cache.len(), 1, "a refused expression is not kept");
        for i in 0..SQL_FILTER_CACHE_MAX_COUNT + 5 {
            cache.get_or_compile(&format!("a > {i}")).expect("valid");
            assert!(cache.len() <= SQL_FILTER_CACHE_MAX_COUNT);
        }
        let filter = MessageFilter::sql_shared(cache.get_or_compile("a > 1").expect("valid"));
        assert!(filter.matches_arrival(0, "a\u{1}2\u{2}"));
        assert!(!filter.matches_arrival(0, "a\u{1}1\u{2}"));
        assert!(!filter.matches_arrival(0, ""), "an absent property is unknown, and unknown does not pass");
    }

    #[test]
    fn subscriptions_are_built_as_filter_api_does() {
        let all = build_subscription("T", " * ").unwrap();
        assert!(all.is_sub_all() && all.tags_set.is_empty());
        assert!(build_subscription("T", "").unwrap().is_sub_all());
        let two = build_subscription("T", "TagA || TagB ||").unwrap();
        assert_eq!(two.tags_set, vec!["TagA", "TagB"]);
        assert_eq!(two.code_set, vec![tags_code(Some("TagA")) as i32, tags_code(Some("TagB")) as i32]);
        assert!(build_subscription("T", "||").is_err());
    }

    #[test]
    fn offset_range_table() {
        let all = MessageFilter::all();
        let (q, log) = fixture(2, &["a", "b", "c"], 100); // min 2, max 5
        let (empty, empty_log) = fixture(0, &[], 100);
        struct Case {
            name: &'static str,
            queue: Option<bool>, // Some(true) = q, Some(false) = empty, None = never written
            offset: i64,
            leader: bool,
            status: GetMessageStatus,
            next: i64,
            code: ResponseCode,
            suspend: bool,
        }
        use GetMessageStatus as S;
        use ResponseCode as C;
        let cases = [
            Case {
                name: "never written, offset 0",
                queue: None,
                offset: 0,
                leader: true,
                status: S::NoMessageInQueue,
                next: 0,
                code: C::PullNotFound,
                suspend: true,
            },
            Case {
                name: "empty, offset 0",
                queue: Some(false),
                offset: 0,
                leader: true,
                status: S::NoMessageInQueue,
                next: 0,
                code: C::PullNotFound,
                suspend: true,
            },
            Case {
                name: "empty, offset 7",
                queue: Some(false),
                offset: 7,
                leader: true,
                status: S::NoMessageInQueue,
                next: 0,
                code: C::PullOffsetMoved,
                suspend: false,
            },
            Case {
                name: "empty, offset 7, follower",
                queue: Some(false),
                offset: 7,
                leader: false,
                status: S::NoMessageInQueue,
                next: 7,
                code: C::PullRetryImmediately,
                suspend: false,
            },
            Case {
                name: "too small",
                queue: Some(true),
                offset: 1,
                leader: true,
                status: S::OffsetTooSmall,
                next: 2,
                code: C::PullOffsetMoved,
                suspend: false,
            },
            Case {
                name: "negative",
                queue: Some(true),
                offset: -1,
                leader: true,
                status: S::OffsetTooSmall,
                next: 2,
                code: C::PullOffsetMoved,
                suspend: false,
            },
            Case {
                name: "too small, follower",
                queue: Some(true),
                offset: 1,
                leader: false,
                status: S::OffsetTooSmall,
                next: 1,
                code: C::PullRetryImmediately,
                suspend: false,
            },
            Case {
                name: "overflow one",
                queue: Some(true),
                offset: 5,
                leader: true,
                status: S::OffsetOverflowOne,
                next: 5,
                code: C::PullNotFound,
                suspend: true,
            },
            Case {
                name: "overflow badly",
                queue: Some(true),
                offset: 9,
                leader: true,
                status: S::OffsetOverflowBadly,
                next: 5,
                code: C::PullOffsetMoved,
                suspend: false,
            },
            Case {
                name: "overflow badly, follower",
                queue: Some(true),
                offset: 9,
                leader: false,
                status: S::OffsetOverflowBadly,
                next: 9,
                code: C::PullRetryImmediately,
                suspend: false,
            },
            Case {
                name: "found",
                queue: Some(true),
                offset: 3,
                leader: true,
                status: S::Found,
                next: 5,
                code: C::Success,
                suspend: false,
            },
        ];
        for c in cases {
            let queue = match c.queue {
                Some(true) => Some(&q),
                Some(false) => Some(&empty),
                None => None,
            };
            let log = if c.queue == Some(true) { &log } else { &empty_log };
            let r = pull(queue, log, c.offset, 32, &all, c.leader);
            assert_eq!((r.status, r.next_begin_offset), (c.status, c.next), "{}", c.name);
            let policy = if c.leader { LEADER } else { FOLLOWER };
            let out = pull_outcome(&r, c.offset, SUSPEND, 15_000, &policy);
            assert_eq!(out.code, c.code, "{}", c.name);
            assert_eq!(out.suspend_ms.is_some(), c.suspend, "{}", c.name);
            assert_eq!(out.remark, c.status.as_str());
            assert_eq!(out.offset_moved_event, c.code == C::PullOffsetMoved, "{}", c.name);
            assert_eq!((out.min_offset, out.max_offset), (r.min_offset, r.max_offset), "{}", c.name);
            assert_eq!(out.suggest_which_broker_id, 0);
        }
    }

    #[test]
    fn a_leader_behind_its_log_corrects_offsets_only_forward() {
        let (q, log) = fixture(2, &["a", "b", "c"], 100); // min 2, max 5
        let (empty, empty_log) = fixture(0, &[], 100);
        let policy = PullPolicy { offset_check: OffsetCheck::ForwardOnly, ..LEADER };
        let run = |queue: &FakeQueue, log: &FakeLog, offset: i64| {
            let req = GetMessageRequest {
                offset,
                max_msg_nums: 32,
                filter: &MessageFilter::all(),
                offset_check: OffsetCheck::ForwardOnly,
            };
            let r = get_message(Some(queue), &req, log, &PullLimits::default());
            (r.status, r.next_begin_offset, pull_outcome(&r, offset, SUSPEND, 15_000, &policy).code)
        };
        // Below the minimum: forward to it (a minimum only grows, so even a stale one is safe).
        assert_eq!(run(&q, &log, 0), (GetMessageStatus::OffsetTooSmall, 2, ResponseCode::PullOffsetMoved));
        // Past the maximum, or an empty queue: a move back could rewind a consumer that read what a
        // follower already applied, so the offset is kept and the client asks again.
        assert_eq!(run(&q, &log, 9), (GetMessageStatus::OffsetOverflowBadly, 9, ResponseCode::PullRetryImmediately));
        assert_eq!(
            run(&empty, &empty_log, 7),
            (GetMessageStatus::NoMessageInQueue, 7, ResponseCode::PullRetryImmediately)
        );
        assert_eq!(run(&q, &log, 3).0, GetMessageStatus::Found);
    }

    #[test]
    fn found_returns_records_byte_for_byte_and_respects_max_msgs() {
        let (q, log) = fixture(0, &["a", "b", "c", "d"], 100);
        let r = pull(Some(&q), &log, 1, 2, &MessageFilter::all(), true);
        assert_eq!(r.status, GetMessageStatus::Found);
        assert_eq!(r.next_begin_offset, 3);
        assert_eq!(r.messages, vec![log.records[&2000].clone(), log.records[&3000].clone()]);
        assert_eq!(r.buffer_total_size, (r.messages[0].len() * 2) as u64);
        // maxMsgNums 0 still returns the first message (isTheBatchFull accepts the first).
        let r = pull(Some(&q), &log, 0, 0, &MessageFilter::all(), true);
        assert_eq!((r.messages.len(), r.next_begin_offset), (1, 1));
    }

    #[test]
    fn tag_filter_skips_units_and_reports_no_match() {
        let (q, log) = fixture(0, &["a", "b", "a", ""], 100);
        let r = pull(Some(&q), &log, 0, 32, &filter(&["b"]), true);
        assert_eq!((r.status, r.messages.len(), r.next_begin_offset), (GetMessageStatus::Found, 1, 4));
        let r = pull(Some(&q), &log, 2, 32, &filter(&["b"]), true);
        assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::NoMatchedMessage, 4));
        let out = pull_outcome(&r, 2, SUSPEND, 15_000, &LEADER);
        assert_eq!((out.code, out.suspend_ms), (ResponseCode::PullRetryImmediately, None));
    }

    #[test]
    fn hash_collisions_are_dropped_by_the_exact_tag_check() {
        // "Aa" and "BB" share the Java hash code 2112.
        let (q, log) = fixture(0, &["Aa", "BB"], 100);
        let f = filter(&["BB"]);
        assert!(f.matches_code(tags_code(Some("Aa"))));
        let r = pull(Some(&q), &log, 0, 32, &f, true);
        assert_eq!(r.messages, vec![log.records[&2000].clone()]);
        let r = pull(Some(&q), &log, 0, 1, &f, true);
        assert_eq!((r.status, r.messages.len(), r.next_begin_offset), (GetMessageStatus::Found, 1, 2));
        let r = pull(Some(&q), &log, 0, 32, &filter(&["Aa"]), true);
        assert_eq!((r.messages.len(), r.next_begin_offset), (1, 2));
    }

    #[test]
    fn scan_stops_at_the_consume_queue_file_end() {
        let (q, log) = fixture(0, &["a", "a", "a", "a", "a"], 3);
        let r = pull(Some(&q), &log, 1, 32, &MessageFilter::all(), true);
        assert_eq!((r.messages.len(), r.next_begin_offset), (2, 3));
    }

    #[test]
    fn deleted_consume_queue_file_is_offset_found_null() {
        let (mut q, log) = fixture(0, &["a", "a", "a", "a", "a"], 3);
        q.gone_files.push(0);
        let r = pull(Some(&q), &log, 1, 32, &MessageFilter::all(), true);
        assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::OffsetFoundNull, 3));
        let out = pull_outcome(&r, 1, SUSPEND, 15_000, &LEADER);
        assert_eq!((out.code, out.suspend_ms), (ResponseCode::PullNotFound, Some(15_000)));
        let r = pull(Some(&q), &log, 1, 32, &MessageFilter::all(), false);
        assert_eq!(r.next_begin_offset, 1);
    }

    #[test]
    fn removed_commit_log_segment_skips_to_the_next_segment() {
        // Records at 1000..=5000; segments of 4000 bytes; the segment [0, 4000) is gone.
        let (q, mut log) = fixture(0, &["a", "a", "a", "a", "a"], 100);
        log.min_phy = 4000;
        let r = pull(Some(&q), &log, 0, 32, &MessageFilter::all(), true);
        assert_eq!(r.status, GetMessageStatus::Found);
        assert_eq!(r.messages, vec![log.records[&4000].clone(), log.records[&5000].clone()]);
        assert_eq!(r.next_begin_offset, 5);
        log.min_phy = i64::MAX;
        let r = pull(Some(&q), &log, 0, 32, &MessageFilter::all(), true);
        assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::MessageWasRemoving, 5));
        assert_eq!(pull_outcome(&r, 0, SUSPEND, 15_000, &LEADER).code, ResponseCode::PullRetryImmediately);
    }

    /// Hole 5 of issue 31: a record that could not be read (EIO, EMFILE) read as a removed segment,
    /// and the pull's next offset moved past it and the rest of its segment: the consumer skipped
    /// acknowledged messages. The pull stops before it and the consumer asks again.
    #[test]
    fn hole5_a_pull_never_moves_past_a_record_it_could_not_read() {
        let (q, mut log) = fixture(0, &["a", "b", "a", "a", "a"], 100);
        log.failing_from = 3000;
        let r = pull(Some(&q), &log, 0, 32, &filter(&["a"]), true);
        assert_eq!(r.status, GetMessageStatus::Found);
        assert_eq!(r.messages, vec![log.records[&1000].clone()]);
        assert_eq!(r.next_begin_offset, 2, "the filtered unit is passed, the unread one is not");
        let r = pull(Some(&q), &log, 2, 32, &MessageFilter::all(), true);
        assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::NoMatchedMessage, 2));
        assert_eq!(pull_outcome(&r, 2, SUSPEND, 15_000, &LEADER).code, ResponseCode::PullRetryImmediately);
        log.failing_from = i64::MAX;
        let r = pull(Some(&q), &log, 2, 32, &MessageFilter::all(), true);
        assert_eq!((r.status, r.messages.len(), r.next_begin_offset), (GetMessageStatus::Found, 3, 5));
    }

    #[test]
    fn transfer_limits_in_memory_and_on_disk() {
        let tags = vec!["a"; 40];
        let (q, mut log) = fixture(0, &tags, 100);
        let r = pull(Some(&q), &log, 0, 64, &MessageFilter::all(), true);
        assert_eq!((r.messages.len(), r.next_begin_offset), (32, 32));
        assert!(!r.suggest_pulling_from_slave);
        // Everything counts as on disk: 8 messages, and the consumer is told it is slow.
        log.max += 10 * 1024 * 1024 * 1024;
        let r = pull(Some(&q), &log, 0, 64, &MessageFilter::all(), true);
        assert_eq!((r.messages.len(), r.next_begin_offset), (8, 8));
        assert!(r.suggest_pulling_from_slave);
        // slaveReadEnable: the slow consumer is sent to whichBrokerWhenConsumeSlowly; off, or once it
        // reads the tail in memory again, to the group's brokerId / the leader.
        let slave_read = Some(SlaveRead { when_slow: 1, otherwise: 0 });
        assert_eq!(pull_outcome(&r, 0, 0, 0, &LEADER).suggest_which_broker_id, 0);
        assert_eq!(pull_outcome(&r, 0, 0, 0, &PullPolicy { slave_read, ..LEADER }).suggest_which_broker_id, 1);
        assert_eq!(pull_outcome(&r, 0, 0, 0, &PullPolicy { slave_read, ..FOLLOWER }).suggest_which_broker_id, 1);
        let caught_up = pull(Some(&q), &log, 39, 64, &MessageFilter::all(), true);
        let at_tail = PullPolicy { slave_read: Some(SlaveRead { when_slow: 1, otherwise: 0 }), ..FOLLOWER };
        log.max -= 10 * 1024 * 1024 * 1024;
        let back = pull(Some(&q), &log, 39, 64, &MessageFilter::all(), true);
        assert!(caught_up.suggest_pulling_from_slave && !back.suggest_pulling_from_slave);
        assert_eq!(pull_outcome(&back, 39, 0, 0, &at_tail).suggest_which_broker_id, 0, "back to the leader");
        log.max += 10 * 1024 * 1024 * 1024;
        // The byte limit: 64 KiB on disk holds fewer records when records are large.
        let limits = PullLimits { max_transfer_bytes_in_disk: 300, ..PullLimits::default() };
        let req = GetMessageRequest {
            offset: 0,
            max_msg_nums: 64,
            filter: &MessageFilter::all(),
            offset_check: OffsetCheck::All,
        };
        let r = get_message(Some(&q), &req, &log, &limits);
        let per = r.messages[0].len() as u64;
        assert_eq!(r.messages.len() as u64, 300 / per);
    }

    #[test]
    fn filter_scan_is_bounded() {
        let tags = vec!["a"; 900];
        let (q, log) = fixture(0, &tags, 1000);
        let r = pull(Some(&q), &log, 0, 32, &filter(&["zzz"]), true);
        assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::NoMatchedMessage, 800));
    }

    #[test]
    fn suspension_policy() {
        let (q, log) = fixture(0, &["a"], 100);
        let r = pull(Some(&q), &log, 1, 32, &MessageFilter::all(), true);
        assert_eq!(r.status, GetMessageStatus::OffsetOverflowOne);
        let no_flag = pull_outcome(&r, 1, 0, 15_000, &LEADER);
        assert_eq!(no_flag.suspend_ms, None);
        let rerun = pull_outcome(&r, 1, SUSPEND, 15_000, &PullPolicy { broker_allow_suspend: false, ..LEADER });
        assert_eq!((rerun.code, rerun.suspend_ms), (ResponseCode::PullNotFound, None));
        let short = pull_outcome(&r, 1, SUSPEND, 15_000, &PullPolicy { long_polling_enable: false, ..LEADER });
        assert_eq!(short.suspend_ms, Some(1000));
        let capped = pull_outcome(&r, 1, SUSPEND, i64::MAX, &LEADER);
        assert_eq!(capped.suspend_ms, Some(LONG_POLL_SUSPEND_MAX_MS));
        assert!(should_store_offset(true, pull_sys_flag::COMMIT_OFFSET, true));
        assert!(!should_store_offset(false, pull_sys_flag::COMMIT_OFFSET, true));
        assert!(!should_store_offset(true, pull_sys_flag::COMMIT_OFFSET, false));
        assert!(!should_store_offset(true, SUSPEND, true));
    }

    #[test]
    fn filters_follow_rocketmq() {
        let all = MessageFilter::from_subscription(&SubscriptionData { sub_string: "*".into(), ..Default::default() });
        assert!(all.all && all.matches_tag(None));
        let class = SubscriptionData { class_filter_mode: true, sub_string: "x".into(), ..Default::default() };
        assert!(MessageFilter::from_subscription(&class).all);
        let f = filter(&["a", "b"]);
        assert!(f.matches_code(tags_code(Some("b"))));
        assert!(!f.matches_code(0));
        assert!(!f.matches_tag(None));
        assert!(f.matches_tag(Some("a")));
        // Java truncates the i64 code with intValue().
        let wide = (1i64 << 32) | i64::from(tags_code(Some("a")) as i32 as u32);
        assert!(f.matches_code(wide));
    }
}
