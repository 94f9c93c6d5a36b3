//! The delayed workload: delay producers (`d<i>.<incarnation>`) sending one message at a time with
//! a fixed delay level or a timer delay, and the wait for every group's delay levels to drain before
//! the final read.
//!
//! ```text
//! d<i>: invoke ─▶ send(value, DELAY level | TIMER_DELAY_MS, by the value's counter) ─▶ record
//!         ok (the queue, no offset) │ fail │ info (the process retires, as a plain producer's)
//! broker: SCHEDULE_TOPIC_XXXX level queue ─▶ (timer: hops through the levels) ─▶ the real queue
//! after heal + quiet: settle() polls every group leader's brokerStatus until each level's
//!   `scheduleMessageOffset_N` reads delivered ≥ stored twice, one delivery round apart
//! ```
//!
//! Invariants:
//! - The delay is a pure function of the value ([`DelayIntent::of_value`]), so the checkers know
//!   each value's promised delay without sharing state with the producers.
//! - An `ok` carries the producer's queue but no offset: the SendResult's offset is the message's
//!   place in its delay level's queue, and the delivered copy lands in the real queue later, after
//!   sends that came after it (`reorder` skips sends without an offset).
//! - Delivery out of a level is at least once (docs/broker.md#send-back-and-delayed-delivery: a leader that
//!   stores a due message and dies before its progress entry commits leaves it to the next
//!   leader), so `duplicated` allows store duplicates of delayed values.
//! - Never early: no consumer may read a value before its send was invoked plus its delay
//!   (`checker::early`), unless a `clock` fault moved a broker's wall clock.

use std::time::Duration;

use raftmq_common::message::Message;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::db::Db;
use crate::history::Recorder;
use crate::workload::SequentialStyle;
use crate::workload::WorkloadConfig;
use crate::workload::sequential_producer;
use crate::workload::settle_twice;

/// The delay producers' group.
pub const DELAY_PRODUCER_GROUP: &str = "jepsen_delay_producers";
/// How long the final wait for the delay levels may take (the longest delay is 12.3 s, and a
/// timer hops through several levels).
pub const DELAY_SETTLE_TIMEOUT_MS: u64 = 60_000;
/// Period of the final wait's look at each leader's delay levels.
pub const DELAY_SETTLE_POLL_MS: u64 = 200;
/// Between the two looks that must both find every level drained: longer than one delivery round
/// of the broker (`SCHEDULE_DELIVER_POLL_INTERVAL_MS`), so a message stored between them shows.
pub const DELAY_SETTLE_CONFIRM_MS: u64 = 1_000;
/// The value of the final wait's history record.
pub const SETTLE_LABEL: &str = "delay levels drain";
/// The brokerStatus key prefix of a level's "delivered,stored" offsets.
const LEVEL_KEY_PREFIX: &str = "scheduleMessageOffset_";

/// How one value is delayed, from its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayIntent {
    /// Delay level 1 (1 s with the default `messageDelayLevel`).
    Level1,
    /// Delay level 2 (5 s).
    Level2,
    /// A timer of 1.5 s: one hop through level 1, then the shortest level again.
    TimerShort,
    /// A timer of 12.3 s: hops through 10 s and 1 s levels.
    TimerLong,
}

impl DelayIntent {
    /// The intent of a delay producer's value `d<i>.<incarnation>-<counter>`; `None` for any other
    /// value.
    pub fn of_value(value: &str) -> Option<DelayIntent> {
        let (process, counter) = value.rsplit_once('-')?;
        let (i, incarnation) = process.strip_prefix('d')?.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(i) || !digits(incarnation) || !digits(counter) {
            return None;
        }
        let counter: u64 = counter.parse().ok()?;
        Some(match counter % 4 {
            0 => DelayIntent::Level1,
            1 => DelayIntent::Level2,
            2 => DelayIntent::TimerShort,
            _ => DelayIntent::TimerLong,
        })
    }

    /// The shortest time between the send and a delivery, with the default delay levels.
    pub fn delay_ms(self) -> u64 {
        match self {
            DelayIntent::Level1 => 1_000,
            DelayIntent::Level2 => 5_000,
            DelayIntent::TimerShort => 1_500,
            DelayIntent::TimerLong => 12_300,
        }
    }

    /// The message to send for `value` on `topic`.
    pub fn message(self, topic: &str, value: &str) -> Message {
        let mut m = Message::new(topic.to_owned(), value.to_owned());
        match self {
            DelayIntent::Level1 => m.set_delay_time_level(1),
            DelayIntent::Level2 => m.set_delay_time_level(2),
            DelayIntent::TimerShort | DelayIntent::TimerLong => m.set_delay_ms(self.delay_ms()),
        }
        m
    }
}

/// The delay producers: one value at a time, recorded without an offset.
const DELAYED: SequentialStyle = SequentialStyle {
    prefix: "d",
    group: DELAY_PRODUCER_GROUP,
    message: |topic, value| DelayIntent::of_value(value).map(|intent| intent.message(topic, value)),
    // The result's offset is the level queue's, not the real queue's.
    with_offset: false,
};

/// Starts `cfg.delay_producers` delay producers in `set`; they send until `stop`.
pub fn spawn_into(
    set: &mut JoinSet<()>,
    namesrv: &str,
    cfg: &WorkloadConfig,
    rec: &Recorder,
    stop: &watch::Receiver<bool>,
) {
    for i in 0..cfg.delay_producers {
        set.spawn(sequential_producer(i, DELAYED, namesrv.to_owned(), cfg.topic.clone(), rec.clone(), stop.clone()));
    }
}

/// The levels of one brokerStatus table still holding messages: `(level, delivered, stored)`.
/// `Err` when the table has no level at all or a level's value does not read as two offsets (then
/// nothing can be decided from it).
pub fn levels_behind(table: &std::collections::BTreeMap<String, String>) -> Result<Vec<(u32, i64, i64)>, String> {
    let mut behind = Vec::new();
    let mut levels = 0usize;
    for (key, value) in table {
        let Some(level) = key.strip_prefix(LEVEL_KEY_PREFIX) else { continue };
        let level: u32 = level.parse().map_err(|_| format!("bad level key {key:?}"))?;
        let parsed = value.split_once(',').and_then(|(d, s)| Some((d.trim().parse().ok()?, s.trim().parse().ok()?)));
        let (delivered, stored): (i64, i64) =
            parsed.ok_or_else(|| format!("{key} = {value:?} is not \"delivered,stored\""))?;
        levels += 1;
        if delivered < stored {
            behind.push((level, delivered, stored));
        }
    }
    if levels == 0 {
        return Err("brokerStatus lists no delay level".to_owned());
    }
    Ok(behind)
}

/// Whether every group's delay levels are drained now. `Err` says which group is behind and why.
async fn drained_now(db: &Db) -> Result<(), String> {
    let mut behind = Vec::new();
    for g in db.layout.groups() {
        let admin = db.admin();
        let table = match admin.master_addr_of_group(&g).await {
            Ok(addr) => admin.broker_runtime_info(&addr).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match table.and_then(|t| levels_behind(&t.table)) {
            Ok(levels) if levels.is_empty() => {}
            Ok(levels) => {
                let list: Vec<String> = levels.iter().map(|(l, d, s)| format!("level {l} at {d} of {s}")).collect();
                behind.push(format!("{g}: {}", list.join(", ")));
            }
            Err(e) => behind.push(format!("{g}: {e}")),
        }
    }
    if behind.is_empty() { Ok(()) } else { Err(behind.join("; ")) }
}

/// Waits until every group's delay levels are drained, twice [`DELAY_SETTLE_CONFIRM_MS`] apart, or
/// until `deadline`. Records a `delay levels drain` op: `ok` when drained, `info` with what was
/// still waiting otherwise (`lost` then reports any acknowledged value that never arrived).
pub async fn settle(db: &Db, rec: &Recorder, deadline: Instant) -> bool {
    let confirm = Duration::from_millis(DELAY_SETTLE_CONFIRM_MS);
    let poll = Duration::from_millis(DELAY_SETTLE_POLL_MS);
    settle_twice(rec, SETTLE_LABEL, confirm, poll, deadline, || drained_now(db)).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use raftmq_common::message::properties;

    use super::*;

    #[test]
    fn the_counter_decides_every_delay() {
        let of = DelayIntent::of_value;
        assert_eq!(of("d0.0-0"), Some(DelayIntent::Level1));
        assert_eq!(of("d1.3-5"), Some(DelayIntent::Level2));
        assert_eq!(of("d0.0-6"), Some(DelayIntent::TimerShort));
        assert_eq!(of("d0.0-7"), Some(DelayIntent::TimerLong));
        for other in ["p0.0-1", "t0.0-1", "d0-1", "d0.0-", "d.0-1", "dx.0-1", "d0.0-1x", "d0.0"] {
            assert_eq!(of(other), None, "{other}");
        }
    }

    #[test]
    fn each_intent_sets_its_own_property_only() {
        let m = DelayIntent::Level2.message("T", "d0.0-1");
        assert_eq!(m.delay_time_level(), 2);
        assert_eq!(m.properties.get(properties::TIMER_DELAY_MS), None);
        let m = DelayIntent::TimerLong.message("T", "d0.0-3");
        assert_eq!(m.delay_time_level(), 0);
        assert_eq!(m.properties.get(properties::TIMER_DELAY_MS), Some("12300"));
        assert_eq!(&m.body[..], b"d0.0-3");
    }

    #[test]
    fn levels_behind_reads_brokerstatus() {
        let t = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let drained = t(&[("scheduleMessageOffset_1", "4,4"), ("scheduleMessageOffset_2", "0,0"), ("putTps", "1")]);
        assert_eq!(levels_behind(&drained), Ok(vec![]));
        let waiting = t(&[("scheduleMessageOffset_1", "4,4"), ("scheduleMessageOffset_3", "2,5")]);
        assert_eq!(levels_behind(&waiting), Ok(vec![(3, 2, 5)]));
        assert!(levels_behind(&t(&[("putTps", "1")])).is_err(), "no level: nothing to decide");
        assert!(levels_behind(&t(&[("scheduleMessageOffset_1", "4")])).is_err());
        assert!(levels_behind(&t(&[("scheduleMessageOffset_x", "4,4")])).is_err());
    }
}
