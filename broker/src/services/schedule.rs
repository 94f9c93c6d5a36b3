//! Delayed delivery (RocketMQ's `ScheduleMessageService` on a Raft group): messages with a `DELAY`
//! level are stored in `SCHEDULE_TOPIC_XXXX` queue `level − 1`, and the ready leader re-proposes each
//! one into its real topic and queue once its delivery time has come.
//!
//! ```text
//! send / send-back with DELAY=n ─▶ redirect_delayed: topic SCHEDULE_TOPIC_XXXX, queue n−1,
//!                                  REAL_TOPIC / REAL_QID kept in properties ─▶ group commit
//! apply ─▶ dispatch: CQ unit tags code = storeTimestamp + delay(n)        (crate::state::dispatch)
//! ready leader, every round, per level:
//!   units from the level's progress ─▶ decide_due (pure) ─▶ due prefix ─▶ CommitLog read
//!   ─▶ restore_real (topic, queue, DELAY cleared), or for a timer message not yet due its next
//!      hop (crate::services::timer: `rescheduled` into a shorter level) ─▶ group commit (per level and round one request
//!      of at most a group-commit entry's bytes, `units_within`; the rest come back at once)
//!   ─▶ progress ▲ in memory ─▶ DELAY_PROGRESS entry (tag 7, every advanced level at once)
//! apply of DELAY_PROGRESS ─▶ DelayOffsetTable on every replica (a level never moves back)
//! ```
//!
//! Invariants and guarantees:
//! - Only a leader past the readiness gate delivers; when the term changes the in-memory progress is
//!   reloaded from the replicated table, which then holds every progress entry of earlier terms.
//! - A level's progress moves past a unit only after the unit's message was stored in its real
//!   topic (the group-commit answer), and is proposed right after, in the following entry.
//!   Delivery is therefore **at least once**: a leader that stores messages and loses leadership (or
//!   crashes) before its progress entry commits leaves them to be delivered again by the next leader.
//!   Nothing is lost: progress never passes a message that was not stored.
//! - Within a level, messages are delivered in queue order and a level stops at its first unit that
//!   is not due (units of one level are in delivery-time order, as in RocketMQ).
//! - A unit whose record is gone, is not a record or names no real topic is skipped with a warning
//!   (RocketMQ drops it the same way) so one bad record cannot stall its level forever. A record
//!   that could not be read now (EIO, EMFILE: [`RecordAtError::Unreadable`]) is not skipped: the
//!   level delivers the units before it, its progress stops there, and it retries after a backoff.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use raftmq_common::limits::DELAY_PROGRESS_BATCH_MAX_COUNT;
use raftmq_common::limits::SCHEDULE_DELIVER_BATCH_MAX_COUNT;
use raftmq_common::limits::SCHEDULE_DELIVER_POLL_INTERVAL_MS;
use raftmq_common::limits::SCHEDULE_DELIVER_RETRY_BACKOFF_MS;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_record_bytes;
use raftmq_common::message::record::encode_record_into;
use raftmq_common::message::sys_flag::TransactionType;
use raftmq_common::message::validate::RMQ_SYS_SCHEDULE_TOPIC;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;
use tracing::info;
use tracing::warn;

use crate::services::group_commit::RecordSlot;
use crate::services::group_commit::SendRequest;
use crate::services::record_writer::RecordWriter;
use crate::services::replica::Replica;
use crate::services::timer;
use crate::state::commit_log::RecordAtError;
use crate::state::commit_log::record_at;
use crate::state::consume_queue::CqUnit;
use crate::state::entry::BrokerCommand;
use crate::state::entry::DelayProgress;
use crate::state::queue_offset::has_queue_offset;
use crate::state::real_queue::RestoreError;
use crate::state::real_queue::real_queue;
use crate::state::store::MessageStore;
use crate::state::store::now_ms;

/// `CommitLog.putMessage`'s delay branch: a message with `DELAY` > 0 (and not a transaction
/// PREPARED/ROLLBACK record) goes to `SCHEDULE_TOPIC_XXXX` queue `level − 1`, its real topic and queue
/// kept in `REAL_TOPIC` / `REAL_QID`; a level above the table is capped (and rewritten) to the last
/// one. Returns whether the message was redirected.
pub fn redirect_delayed(msg: &mut MessageExt, level_count: usize) -> bool {
    if !matches!(TransactionType::of(msg.sys_flag), TransactionType::Not | TransactionType::Commit) {
        return false;
    }
    let requested = msg.message.delay_time_level();
    let max_level = i32::try_from(level_count).unwrap_or(i32::MAX);
    if requested <= 0 || max_level <= 0 {
        return false;
    }
    let level = requested.min(max_level);
    if level != requested {
        msg.message.set_delay_time_level(level);
    }
    let real_topic = std::mem::replace(&mut msg.message.topic, RMQ_SYS_SCHEDULE_TOPIC.into());
    msg.message.properties.insert(properties::REAL_TOPIC, real_topic);
    msg.message.properties.insert(properties::REAL_QID, msg.queue_id.to_string());
    msg.queue_id = level - 1;
    true
}

/// `ScheduleMessageService.messageTimeup`: the message to store in its real topic and queue, `DELAY`
/// cleared, stored now by `store_host`. The tags code follows from the topic at dispatch.
pub fn restore_real(
    scheduled: &MessageExt,
    store_host: std::net::SocketAddr,
    store_timestamp: i64,
) -> Result<MessageExt, RestoreError> {
    let (topic, queue_id) = real_queue(&scheduled.message.properties)?;
    let mut message = scheduled.message.clone();
    message.topic = topic.into();
    message.properties.remove(properties::DELAY);
    Ok(copy_of(scheduled, message, queue_id, store_host, store_timestamp))
}

/// A timer message's next hop ([`crate::services::timer`]): the scheduled message stored again in `level`'s
/// queue, now by `store_host`, its real topic and queue still in its properties.
pub fn rescheduled(
    scheduled: &MessageExt,
    level: i32,
    store_host: std::net::SocketAddr,
    store_timestamp: i64,
) -> Result<MessageExt, RestoreError> {
    real_queue(&scheduled.message.properties)?;
    let mut message = scheduled.message.clone();
    message.topic = RMQ_SYS_SCHEDULE_TOPIC.into();
    message.set_delay_time_level(level);
    Ok(copy_of(scheduled, message, level - 1, store_host, store_timestamp))
}

/// A new record of `scheduled` (its origin, flags and transaction link kept) holding `message`,
/// stored now by `store_host`; nobody waits for it to be stored.
fn copy_of(
    scheduled: &MessageExt,
    mut message: Message,
    queue_id: i32,
    store_host: std::net::SocketAddr,
    store_timestamp: i64,
) -> MessageExt {
    message.set_wait_store_msg_ok(false);
    MessageExt {
        message,
        queue_id,
        sys_flag: scheduled.sys_flag,
        born_timestamp: scheduled.born_timestamp,
        born_host: scheduled.born_host,
        store_timestamp,
        store_host,
        reconsume_times: scheduled.reconsume_times,
        prepared_transaction_offset: scheduled.prepared_transaction_offset,
        ..MessageExt::default()
    }
}

/// `correctDeliverTimestamp`: a delivery time further away than the level's delay (the storing
/// leader's clock was ahead of ours) is due now.
pub fn deliver_at_ms(unit: &CqUnit, now_ms: i64, level_delay_ms: u64) -> i64 {
    let latest = now_ms.saturating_add(i64::try_from(level_delay_ms).unwrap_or(i64::MAX));
    if unit.tags_code > latest { now_ms } else { unit.tags_code }
}

/// What one level's scan decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelDecision {
    /// How many leading units are due (non-message units count: they are skipped).
    pub due: usize,
    /// Time until the first unit that is not due, if one was seen.
    pub wait_ms: Option<u64>,
}

/// Decides which leading units of a level (read from its progress, in queue order) are due at `now_ms`.
pub fn decide_due(units: &[CqUnit], now_ms: i64, level_delay_ms: u64) -> LevelDecision {
    for (i, unit) in units.iter().enumerate() {
        if !unit.is_message() {
            continue;
        }
        let at = deliver_at_ms(unit, now_ms, level_delay_ms);
        if at > now_ms {
            return LevelDecision { due: i, wait_ms: Some(u64::try_from(at - now_ms).unwrap_or(u64::MAX)) };
        }
    }
    LevelDecision { due: units.len(), wait_ms: None }
}

/// The leader's view of delivery in one term.
#[derive(Debug)]
struct LeaderState {
    term: u64,
    /// Next unit to deliver, per level (in memory; ahead of `replicated` until proposed).
    next: Vec<i64>,
    /// What the replicated table holds as far as this leader knows.
    replicated: Vec<i64>,
    /// A level whose re-proposal failed waits until this time (ms).
    retry_at_ms: Vec<u64>,
}

impl LeaderState {
    fn load(h: &ScheduleHandles, term: u64, levels: usize) -> LeaderState {
        let meta = h.store.metadata();
        let next: Vec<i64> = (0..levels).map(|q| meta.delay_offsets.get(q as i32)).collect();
        info!(term, ?next, "delay-queue delivery starts on this leader");
        LeaderState { term, replicated: next.clone(), next, retry_at_ms: vec![0; levels] }
    }
}

/// What delayed delivery uses: the store it reads the levels from, the replica whose leadership
/// it follows and through which it proposes progress, the writer that stores the delivered
/// messages, and the STOREHOST they are stored by.
#[derive(Debug)]
pub struct ScheduleHandles {
    /// The applied state.
    pub store: Arc<MessageStore>,
    /// The Raft group.
    pub replica: Arc<Replica>,
    /// Group commit with the put statistics.
    pub writer: RecordWriter,
    /// STOREHOST (`brokerIP1:listenPort`).
    pub store_host: SocketAddr,
}

/// Starts the delivery service; it runs until `cancel` fires, delivering only while this replica
/// is a ready leader.
pub fn spawn(h: Arc<ScheduleHandles>, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(run(h, cancel))
}

async fn run(h: Arc<ScheduleHandles>, cancel: CancellationToken) {
    let delays: Vec<u64> = h.store.delay_levels_ms().iter().copied().take(DELAY_PROGRESS_BATCH_MAX_COUNT).collect();
    let mut leadership = h.replica.leadership_watch();
    let mut watching = true;
    let mut state: Option<LeaderState> = None;
    let poll = Duration::from_millis(SCHEDULE_DELIVER_POLL_INTERVAL_MS);
    loop {
        let wait = match h.replica.ready_term() {
            None => {
                if let Some(s) = state.take() {
                    info!(term = s.term, "delay-queue delivery stops: no longer the ready leader");
                }
                poll
            }
            Some(term) => {
                if state.as_ref().is_none_or(|s| s.term != term) {
                    state = Some(LeaderState::load(&h, term, delays.len()));
                }
                match state.as_mut() {
                    Some(s) => round(&h, s, &delays).await.min(poll),
                    None => poll,
                }
            }
        };
        // Readiness (applied term = leader term) has no notification of its own: the poll bounds
        // how late delivery starts after an election; a leadership change wakes the loop at once.
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            changed = leadership.changed(), if watching => watching = changed.is_ok(),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// One pass over every level; returns how long to sleep before the next.
async fn round(h: &ScheduleHandles, s: &mut LeaderState, delays: &[u64]) -> Duration {
    let mut wait_ms = SCHEDULE_DELIVER_POLL_INTERVAL_MS;
    for (level_index, delay_ms) in delays.iter().enumerate() {
        let now = now_ms();
        if s.retry_at_ms[level_index] > now {
            wait_ms = wait_ms.min(s.retry_at_ms[level_index] - now);
            continue;
        }
        match deliver_level(h, s, level_index, *delay_ms).await {
            Ok(Some(w)) => wait_ms = wait_ms.min(w),
            Ok(None) => {}
            Err(()) => s.retry_at_ms[level_index] = now_ms().saturating_add(SCHEDULE_DELIVER_RETRY_BACKOFF_MS),
        }
    }
    propose_progress(h, s).await;
    Duration::from_millis(wait_ms)
}

/// Delivers the due prefix of one level, as much of it as one request holds. `Ok(Some(ms))`: the
/// next unit is due in `ms` (0: more is due now); `Ok(None)`: nothing waiting; `Err`: the
/// re-proposal failed.
async fn deliver_level(
    h: &ScheduleHandles,
    s: &mut LeaderState,
    level_index: usize,
    delay_ms: u64,
) -> Result<Option<u64>, ()> {
    // Bounded by DELAY_PROGRESS_BATCH_MAX_COUNT.
    let queue_id = level_index as i32;
    let (min, max) = h.store.queue_offsets(RMQ_SYS_SCHEDULE_TOPIC, queue_id);
    let from = s.next[level_index].max(i64::try_from(min).unwrap_or(i64::MAX));
    let Ok(from_u) = u64::try_from(from) else { return Ok(None) };
    if from_u >= max {
        s.next[level_index] = from;
        return Ok(None);
    }
    let units: Vec<CqUnit> = {
        let cq = h.store.consume_queues();
        match cq.get(RMQ_SYS_SCHEDULE_TOPIC, queue_id).and_then(|q| q.read(from_u, SCHEDULE_DELIVER_BATCH_MAX_COUNT)) {
            Some(units) => units.iter().map(|(_, u)| u).collect(),
            None => Vec::new(),
        }
    };
    let decision = decide_due(&units, i64::try_from(now_ms()).unwrap_or(i64::MAX), delay_ms);
    if decision.due == 0 {
        return Ok(decision.wait_ms);
    }
    if h.store.disk_full().is_some() {
        // A full disk refuses every write; delivery resumes (late, nothing lost) once space is freed.
        return Err(());
    }
    let due = units.get(..decision.due).unwrap_or_default();
    let taken = units_within(due, h.writer.entry_max_bytes());
    let (request, unread) = build_request(h, due.get(..taken).unwrap_or_default());
    // A record that could not be read is delivered later: progress stops at it.
    let taken = unread.unwrap_or(taken);
    if !request.slots.is_empty() {
        let count = request.slots.len();
        if let Err(e) = h.writer.store_records(request).await {
            debug!(level = level_index + 1, error = %e, "delayed messages not delivered; retrying later");
            return Err(());
        }
        debug!(level = level_index + 1, count, "delayed messages delivered");
    }
    let next = from.saturating_add(taken as i64);
    s.next[level_index] = next;
    if unread.is_some() {
        return Err(());
    }
    // Due units left for the next request, or every unit read was due and the queue holds more
    // (they may be due too): come back at once.
    let more = u64::try_from(next).is_ok_and(|n| n < max);
    Ok(if taken < decision.due || (decision.wait_ms.is_none() && more) { Some(0) } else { decision.wait_ms })
}

/// How many of the `due` units one delivery request takes: those whose records add up to at most
/// `max_bytes`, and always the first message however large (all of them when none is a message).
/// A copy is about the size of its scheduled original (the delay properties give way to the real
/// topic's), so the originals' sizes bound the request.
fn units_within(due: &[CqUnit], max_bytes: usize) -> usize {
    let mut bytes = 0usize;
    for (i, unit) in due.iter().enumerate() {
        if !unit.is_message() {
            continue;
        }
        let size = usize::try_from(unit.size).unwrap_or(usize::MAX);
        if bytes > 0 && bytes.saturating_add(size) > max_bytes {
            return i;
        }
        bytes = bytes.saturating_add(size);
    }
    due.len()
}

/// Reads the due units' records and encodes their real-topic copies into one send request; stops
/// at the first record that could not be read now, and returns its index in `due` with the
/// request for the units before it.
fn build_request(h: &ScheduleHandles, due: &[CqUnit]) -> (SendRequest, Option<usize>) {
    let mut records = BytesMut::new();
    let mut slots = Vec::with_capacity(due.len());
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    for (index, unit) in due.iter().enumerate().filter(|(_, u)| u.is_message()) {
        let read = match record_at(h.store.commit_log(), unit.phy_offset) {
            Err(e @ RecordAtError::Unreadable { .. }) => {
                warn!(phy_offset = unit.phy_offset, error = %e, "scheduled message cannot be read now; retrying later");
                return (SendRequest { records, slots }, Some(index));
            }
            read => read,
        };
        let scheduled = match read
            .map_err(|e| e.to_string())
            .and_then(|bytes| decode_record_bytes(&bytes, DecodeOptions::default()).map_err(|e| e.to_string()))
        {
            Ok((msg, _)) => msg,
            Err(e) => {
                warn!(phy_offset = unit.phy_offset, error = %e, "scheduled message unreadable; skipped");
                continue;
            }
        };
        let hop = timer::next_hop(&scheduled.message.properties, now, h.store.delay_levels_ms());
        let real = match hop {
            Some(level) => rescheduled(&scheduled, level, h.store_host, now),
            None => restore_real(&scheduled, h.store_host, now),
        };
        let real = match real {
            Ok(m) => m,
            Err(e) => {
                warn!(phy_offset = unit.phy_offset, error = %e, "scheduled message not deliverable; skipped");
                continue;
            }
        };
        let at = records.len();
        if let Err(e) = encode_record_into(&real, &mut records) {
            warn!(phy_offset = unit.phy_offset, error = %e, "scheduled message cannot be re-encoded; skipped");
            records.truncate(at);
            continue;
        }
        slots.push(RecordSlot {
            topic: real.message.topic.clone(),
            queue_id: real.queue_id,
            has_queue_offset: has_queue_offset(real.sys_flag),
            at,
        });
    }
    (SendRequest { records, slots }, None)
}

/// Replicates every level whose in-memory progress is ahead, in one entry.
async fn propose_progress(h: &ScheduleHandles, s: &mut LeaderState) {
    let advanced: Vec<DelayProgress> = s
        .next
        .iter()
        .zip(&s.replicated)
        .enumerate()
        .filter(|(_, (next, replicated))| next > replicated)
        // Bounded by DELAY_PROGRESS_BATCH_MAX_COUNT.
        .map(|(q, (next, _))| DelayProgress { queue_id: q as i32, offset: *next })
        .collect();
    if advanced.is_empty() {
        return;
    }
    match h.replica.propose(&BrokerCommand::DelayProgress(advanced.clone())).await {
        Ok(()) => {
            for p in advanced {
                if let Some(r) = s.replicated.get_mut(p.queue_id as usize) {
                    *r = p.offset;
                }
            }
        }
        // Proposed again next round; a new leader would redeliver from the replicated offsets.
        Err(e) => debug!(error = %e, "delay progress not replicated yet"),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use raftmq_common::message::Message;
    use raftmq_common::message::sys_flag;

    use super::*;

    fn unit(tags_code: i64) -> CqUnit {
        CqUnit { phy_offset: 100, size: 120, tags_code }
    }

    #[test]
    fn due_prefix_stops_at_the_first_unit_not_due() {
        let units = [unit(900), unit(1_000), unit(1_500), unit(1_200)];
        assert_eq!(decide_due(&units, 1_000, 1_000), LevelDecision { due: 2, wait_ms: Some(500) });
        assert_eq!(decide_due(&units, 2_000, 1_000), LevelDecision { due: 4, wait_ms: None });
        assert_eq!(decide_due(&units, 0, 10_000), LevelDecision { due: 0, wait_ms: Some(900) });
        assert_eq!(decide_due(&[], 0, 1_000), LevelDecision { due: 0, wait_ms: None });
        // Fillers are skipped, never waited for.
        assert_eq!(decide_due(&[CqUnit::FILLER, unit(5)], 10, 1), LevelDecision { due: 2, wait_ms: None });
    }

    #[test]
    fn one_delivery_request_stays_within_its_byte_cap() {
        let sized = |size: i32| CqUnit { phy_offset: 100, size, tags_code: 0 };
        let mib = 1 << 20;
        let five = [sized(mib); 5];
        assert_eq!(units_within(&five, 4 << 20), 4, "a fifth MiB would pass 4 MiB");
        assert_eq!(units_within(&five, 5 << 20), 5);
        assert_eq!(units_within(&five, (4 << 20) - 1), 3);
        // The first message travels however large; the next one waits for the next request.
        assert_eq!(units_within(&[sized(8 * mib), sized(1)], 4 << 20), 1);
        // Fillers cost nothing and never end a request on their own.
        assert_eq!(units_within(&[CqUnit::FILLER, sized(8 * mib)], 4 << 20), 2);
        assert_eq!(units_within(&[sized(mib), CqUnit::FILLER, sized(4 * mib)], 4 << 20), 2);
        assert_eq!(units_within(&[CqUnit::FILLER], 1), 1);
        assert_eq!(units_within(&[], 1), 0);
    }

    #[test]
    fn a_delivery_time_beyond_the_level_delay_is_due_now() {
        // Stored by a leader whose clock ran an hour ahead of ours.
        assert_eq!(deliver_at_ms(&unit(3_601_000), 1_000, 1_000), 1_000);
        assert_eq!(decide_due(&[unit(3_601_000)], 1_000, 1_000).due, 1);
        assert_eq!(deliver_at_ms(&unit(2_000), 1_000, 1_000), 2_000);
    }

    fn message(topic: &str, queue_id: i32, delay: Option<&str>) -> MessageExt {
        let host: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let mut message = Message::new(topic, &b"body"[..]).with_tags("TagA");
        if let Some(d) = delay {
            message.properties.insert(properties::DELAY, d);
        }
        MessageExt {
            message,
            queue_id,
            born_host: host,
            store_host: host,
            born_timestamp: 7,
            reconsume_times: 2,
            ..MessageExt::default()
        }
    }

    #[test]
    fn delayed_sends_go_to_the_schedule_queue_of_their_level() {
        let mut m = message("T", 3, Some("2"));
        assert!(redirect_delayed(&mut m, 18));
        assert_eq!((m.message.topic.as_str(), m.queue_id), (RMQ_SYS_SCHEDULE_TOPIC, 1));
        assert_eq!(m.message.property(properties::REAL_TOPIC), Some("T"));
        assert_eq!(m.message.property(properties::REAL_QID), Some("3"));
        // Capped to the last level, and the property says so.
        let mut capped = message("T", 0, Some("99"));
        assert!(redirect_delayed(&mut capped, 3));
        assert_eq!((capped.queue_id, capped.message.delay_time_level()), (2, 3));
        for (delay, flag) in [(None, 0), (Some("0"), 0), (Some("-1"), 0), (Some("x"), 0)]
            .into_iter()
            .chain([(Some("1"), sys_flag::TRANSACTION_PREPARED_TYPE), (Some("1"), sys_flag::TRANSACTION_ROLLBACK_TYPE)])
        {
            let mut m = message("T", 1, delay);
            m.sys_flag = flag;
            let before = m.clone();
            assert!(!redirect_delayed(&mut m, 18), "{delay:?} {flag}");
            assert_eq!(m, before);
        }
        let mut committed = message("T", 1, Some("1"));
        committed.sys_flag = sys_flag::TRANSACTION_COMMIT_TYPE;
        assert!(redirect_delayed(&mut committed, 18));
        assert!(!redirect_delayed(&mut message("T", 1, Some("1")), 0));
    }

    #[test]
    fn restore_brings_back_topic_queue_and_clears_the_delay() {
        let mut m = message("T", 3, Some("2"));
        redirect_delayed(&mut m, 18);
        let host: SocketAddr = "10.0.0.2:10911".parse().unwrap();
        let real = restore_real(&m, host, 99).unwrap();
        assert_eq!((real.message.topic.as_str(), real.queue_id), ("T", 3));
        assert_eq!(real.message.delay_time_level(), 0);
        assert_eq!(real.message.tags(), Some("TagA"));
        assert_eq!((real.born_timestamp, real.store_timestamp, real.store_host), (7, 99, host));
        assert_eq!(real.reconsume_times, 2);
        assert_eq!(real.message.body, m.message.body);
        let mut no_topic = m.clone();
        no_topic.message.properties.remove(properties::REAL_TOPIC);
        assert_eq!(restore_real(&no_topic, host, 0), Err(RestoreError::NoRealTopic));
        let mut bad_qid = m.clone();
        bad_qid.message.properties.insert(properties::REAL_QID, "q");
        assert_eq!(restore_real(&bad_qid, host, 0), Err(RestoreError::BadRealQueueId(Some("q".into()))));
    }
}
