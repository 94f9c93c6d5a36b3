//! Timer messages: RocketMQ 5's arbitrary delays (`TIMER_DELAY_SEC`, `TIMER_DELAY_MS`,
//! `TIMER_DELIVER_MS`) carried by the delay levels of [`crate::services::schedule`], so that they need no
//! replicated state of their own: a timer message hops from level to level until its time.
//!
//! ```text
//! SEND_MESSAGE with a timer property ─▶ redirect_timer: delivery time (Java's precedence), at most
//!   timerMaxDelaySec away ─▶ TIMER_OUT_MS = delivery time, DELAY = the longest level not past it
//!   (the shortest when less is left) ─▶ schedule::redirect_delayed ─▶ SCHEDULE_TOPIC_XXXX
//! its level comes due ─▶ schedule's delivery asks next_hop: time left? ─▶ stored again, in the
//!   longest level not past the time (or the shortest); none left ─▶ its real topic
//! ```
//!
//! Guarantees, and why:
//! - never early: a message reaches its topic only once its time has come, by the clock of the
//!   leader that delivers it (replicas' clocks must agree, as a RocketMQ cluster's brokers' do);
//! - late by less than the shortest level (1 s by default, the precision of RocketMQ's own timer,
//!   `timerPrecisionMs`) plus a delivery round: only a last hop can pass the time, and only when
//!   less than the shortest level was left (a shorter first level in `messageDelayLevel` gives a
//!   finer precision);
//! - every hop is an ordinary delivery of its level, so failover, progress and at-least-once are
//!   the delay levels' own (a leader that dies mid-hop leaves the copy to be made again);
//! - hops are bounded: one per longest level that fits, at most `TIMER_HOPS_MAX_COUNT` of them
//!   (a longer timer is refused), then at most one per level on the way down. A 3-day delay takes
//!   36 of 2 h and about a dozen shorter ones; each hop writes the message again (RocketMQ's own
//!   timer writes a message about twice), which is the price of needing no state of its own;
//! - `TIMER_OUT_MS` steers hops only as the broker set it: one a message already carries when it
//!   takes a delay level (sent so by a client, or a consumed timer message sent back for a retry)
//!   is dropped, and a time further away than any `timerMaxDelaySec` allows is delivered at once.
//!   `timerMaxDelaySec` is updatable at runtime and bounds new timers only.
//!
//! As Java's `HookUtils`: a message with a delay level keeps the level and loses its timer
//! properties; one that already carries `TIMER_OUT_MS` (consumed from a 5.x broker and sent on) is
//! no timer; one whose time has come is stored at once; the request properties stay on the
//! message. A transaction half is checked when it is sent and timed when it is committed
//! (`crate::state::transaction`). Cancelling a timer (`TIMER_DEL_UNIQKEY`) is refused.

use raftmq_common::limits::TIMER_HOPS_MAX_COUNT;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::sys_flag::TransactionType;
use thiserror::Error;

use crate::config::broker_config::TIMER_MAX_DELAY_MAX_SECS;

/// Why a timer message is refused (MESSAGE_ILLEGAL).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TimerError {
    /// A timer property is not a whole number.
    #[error("timer message illegal: {key} {value:?} is not a whole number")]
    NotANumber {
        /// The property.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// The delivery time is further away than `timerMaxDelaySec` (Java's remark).
    #[error(
        "timer message illegal, the delay time should not be bigger than the max delay {max_delay_ms}ms; or if set \
         del msg, the delay time should be bigger than the current time"
    )]
    TooFar {
        /// `timerMaxDelaySec` in milliseconds.
        max_delay_ms: u64,
    },
    /// The delay would take more hops of the longest delay level than a message may make.
    #[error(
        "timer message illegal: a delay of {delay_ms}ms needs more than {TIMER_HOPS_MAX_COUNT} hops of the longest \
         delay level ({longest_level_ms}ms, messageDelayLevel)"
    )]
    TooManyHops {
        /// The delay asked for.
        delay_ms: i64,
        /// The longest level.
        longest_level_ms: u64,
    },
    /// `TIMER_DEL_UNIQKEY`: cancelling a timer message.
    #[error("timer message illegal: cancelling a timer message (TIMER_DEL_UNIQKEY) is not supported")]
    Cancel,
}

/// The properties that ask for a timer, in Java's order of precedence.
pub const TIMER_REQUEST_PROPERTIES: [&str; 3] =
    [properties::TIMER_DELAY_SEC, properties::TIMER_DELAY_MS, properties::TIMER_DELIVER_MS];

/// Whether a message asks for a timer.
pub fn has_timer(props: &Properties) -> bool {
    has_timer_key(props) && TIMER_REQUEST_PROPERTIES.iter().any(|k| props.get(k).is_some())
}

/// Whether any `TIMER_*` property is present: one pass, so that a message without any (nearly
/// every send) costs the send path no more than that.
fn has_timer_key(props: &Properties) -> bool {
    props.iter().any(|(k, _)| k.starts_with("TIMER_"))
}

/// The requested delivery time in ms since the epoch: `TIMER_DELAY_SEC`, else `TIMER_DELAY_MS`
/// (both from `now_ms`), else `TIMER_DELIVER_MS`; `None` without any of them.
pub fn requested_deliver_ms(props: &Properties, now_ms: i64) -> Result<Option<i64>, TimerError> {
    let parse = |key: &'static str| -> Result<Option<i64>, TimerError> {
        props
            .get(key)
            .map(|v| v.trim().parse::<i64>().map_err(|_| TimerError::NotANumber { key, value: v.to_owned() }))
            .transpose()
    };
    if let Some(sec) = parse(properties::TIMER_DELAY_SEC)? {
        return Ok(Some(now_ms.saturating_add(sec.saturating_mul(1000))));
    }
    if let Some(ms) = parse(properties::TIMER_DELAY_MS)? {
        return Ok(Some(now_ms.saturating_add(ms)));
    }
    parse(properties::TIMER_DELIVER_MS)
}

/// The level (1-based) to wait `remaining_ms` in: the longest not longer than it, or the shortest
/// when all are longer; `None` when nothing is left to wait (the message is due).
pub fn hop_level(remaining_ms: i64, levels_ms: &[u64]) -> Option<i32> {
    let remaining = u64::try_from(remaining_ms).ok().filter(|r| *r > 0)?;
    let levels = levels_ms.iter().enumerate().filter(|(_, delay)| **delay > 0);
    let fitting = levels.clone().filter(|(_, delay)| **delay <= remaining).max_by_key(|(i, delay)| (**delay, *i));
    fitting.or_else(|| levels.min_by_key(|(i, delay)| (**delay, *i))).and_then(|(i, _)| i32::try_from(i + 1).ok())
}

/// On send (and at a transaction's commit): a timer message whose time is still to come gets
/// `TIMER_OUT_MS` (its delivery time) and the `DELAY` level of its first hop; the caller then
/// redirects it as any delayed message. Returns whether it set a level.
pub fn redirect_timer(
    msg: &mut MessageExt,
    now_ms: i64,
    levels_ms: &[u64],
    max_delay_ms: u64,
) -> Result<bool, TimerError> {
    if !matches!(TransactionType::of(msg.sys_flag), TransactionType::Not | TransactionType::Commit)
        || !has_timer_key(&msg.message.properties)
    {
        return Ok(false);
    }
    let has_level = msg.message.delay_time_level() > 0;
    let props = &mut msg.message.properties;
    if props.get(properties::TIMER_DEL_UNIQKEY).is_some() {
        return Err(TimerError::Cancel);
    }
    if has_level {
        // Bound for a level queue: no time of its own may steer it there.
        for key in TIMER_REQUEST_PROPERTIES.iter().chain([&properties::TIMER_OUT_MS]) {
            props.remove(key);
        }
        return Ok(false);
    }
    if props.get(properties::TIMER_OUT_MS).is_some() || !has_timer(props) {
        return Ok(false);
    }
    let Some(deliver_ms) = requested_deliver_ms(props, now_ms)? else { return Ok(false) };
    let remaining = deliver_ms.saturating_sub(now_ms);
    if remaining <= 0 {
        return Ok(false);
    }
    if u64::try_from(remaining).is_ok_and(|r| r > max_delay_ms) {
        return Err(TimerError::TooFar { max_delay_ms });
    }
    let longest_level_ms = levels_ms.iter().copied().max().unwrap_or(0).max(1);
    if u64::try_from(remaining).is_ok_and(|r| r / longest_level_ms > TIMER_HOPS_MAX_COUNT) {
        return Err(TimerError::TooManyHops { delay_ms: remaining, longest_level_ms });
    }
    let Some(level) = hop_level(remaining, levels_ms) else { return Ok(false) };
    props.insert(properties::TIMER_OUT_MS, deliver_ms.to_string());
    msg.message.set_delay_time_level(level);
    Ok(true)
}

/// What [`redirect_timer`] would refuse, for a message it does not change now (a transaction half,
/// timed at its commit), so the sender hears of a bad timer at once.
pub fn check_timer(msg: &MessageExt, now_ms: i64, levels_ms: &[u64], max_delay_ms: u64) -> Result<(), TimerError> {
    let props = &msg.message.properties;
    if !has_timer(props) && props.get(properties::TIMER_DEL_UNIQKEY).is_none() {
        return Ok(());
    }
    let mut probe = MessageExt { message: msg.message.clone(), ..MessageExt::default() };
    redirect_timer(&mut probe, now_ms, levels_ms, max_delay_ms).map(|_| ())
}

/// On delivery of a scheduled message: the level of its next hop, or `None` when it goes to its
/// topic (no timer, an unreadable `TIMER_OUT_MS`, its time has come, or it is further away than
/// the largest `timerMaxDelaySec` a broker accepts, which no time the broker set can be).
pub fn next_hop(props: &Properties, now_ms: i64, levels_ms: &[u64]) -> Option<i32> {
    let out_ms = props.get(properties::TIMER_OUT_MS)?.trim().parse::<i64>().ok()?;
    let remaining = out_ms.saturating_sub(now_ms);
    if u64::try_from(remaining).is_ok_and(|r| r > TIMER_MAX_DELAY_MAX_SECS * 1000) {
        return None;
    }
    hop_level(remaining, levels_ms)
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::Message;

    use super::*;

    /// RocketMQ's default levels.
    const LEVELS: [u64; 18] = [
        1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000, 480_000, 540_000,
        600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
    ];
    const DAY_MS: u64 = 86_400_000;

    fn msg(props: &[(&str, &str)]) -> MessageExt {
        let mut m = MessageExt { message: Message::new("T", b"x".to_vec()), ..MessageExt::default() };
        for (k, v) in props {
            m.message.properties.insert(*k, *v);
        }
        m
    }

    #[test]
    fn the_delivery_time_follows_javas_precedence() {
        let p = |pairs: &[(&str, &str)]| msg(pairs).message.properties;
        let now = 1_000_000;
        assert_eq!(requested_deliver_ms(&p(&[]), now), Ok(None));
        assert_eq!(requested_deliver_ms(&p(&[(properties::TIMER_DELAY_SEC, "3")]), now), Ok(Some(1_003_000)));
        assert_eq!(requested_deliver_ms(&p(&[(properties::TIMER_DELAY_MS, "1500")]), now), Ok(Some(1_001_500)));
        assert_eq!(requested_deliver_ms(&p(&[(properties::TIMER_DELIVER_MS, "5")]), now), Ok(Some(5)));
        let all = p(&[
            (properties::TIMER_DELIVER_MS, "5"),
            (properties::TIMER_DELAY_MS, "7"),
            (properties::TIMER_DELAY_SEC, "2"),
        ]);
        assert_eq!(requested_deliver_ms(&all, now), Ok(Some(1_002_000)));
        assert_eq!(
            requested_deliver_ms(&p(&[(properties::TIMER_DELAY_SEC, "soon")]), now),
            Err(TimerError::NotANumber { key: properties::TIMER_DELAY_SEC, value: "soon".into() })
        );
        assert_eq!(
            requested_deliver_ms(&p(&[(properties::TIMER_DELAY_SEC, &i64::MAX.to_string())]), now),
            Ok(Some(i64::MAX))
        );
    }

    #[test]
    fn a_hop_is_the_longest_level_not_past_the_time() {
        assert_eq!(hop_level(0, &LEVELS), None);
        assert_eq!(hop_level(-5, &LEVELS), None);
        assert_eq!(hop_level(1, &LEVELS), Some(1));
        assert_eq!(hop_level(999, &LEVELS), Some(1));
        assert_eq!(hop_level(1_000, &LEVELS), Some(1));
        assert_eq!(hop_level(1_001, &LEVELS), Some(1));
        assert_eq!(hop_level(37_400, &LEVELS), Some(4));
        assert_eq!(hop_level(3 * DAY_MS as i64, &LEVELS), Some(18));
        // Unordered levels: still the longest that fits.
        assert_eq!(hop_level(6_000, &[10_000, 5_000, 1_000]), Some(2));
        assert_eq!(hop_level(500, &[10_000, 5_000, 1_000]), Some(3));
        assert_eq!(hop_level(6_000, &[]), None);
    }

    /// Hop after hop (each stored when the previous level came due, a few ms late), a delay
    /// reaches its topic never early and less than the shortest level late.
    #[test]
    fn hops_end_at_the_time_or_less_than_the_shortest_level_after() {
        for delay_ms in [1u64, 999, 1_000, 1_999, 2_500, 6_000, 37_400, 61_000, 7_300_000, 3 * DAY_MS] {
            let now = 1_700_000_000_000i64;
            let mut m = msg(&[(properties::TIMER_DELAY_MS, &delay_ms.to_string())]);
            assert_eq!(redirect_timer(&mut m, now, &LEVELS, 3 * DAY_MS), Ok(true), "{delay_ms}");
            let due = now + delay_ms as i64;
            assert_eq!(m.message.properties.get(properties::TIMER_OUT_MS), Some(due.to_string().as_str()));
            // The request stays on the message, as Java keeps it.
            assert_eq!(m.message.properties.get(properties::TIMER_DELAY_MS), Some(delay_ms.to_string().as_str()));
            let (mut t, mut level, mut hops) = (now, m.message.delay_time_level(), 1);
            loop {
                // Each delivery round runs a little after the level's time.
                t += LEVELS[(level - 1) as usize] as i64 + 7;
                match next_hop(&m.message.properties, t, &LEVELS) {
                    Some(l) => {
                        assert!(t < due, "{delay_ms}: a hop from {t}, after the time {due}");
                        level = l;
                        hops += 1;
                    }
                    None => break,
                }
            }
            assert!(t >= due, "{delay_ms}: delivered {} ms early", due - t);
            assert!(t - due < 1_000 + 7, "{delay_ms}: delivered {} ms late", t - due);
            // One per longest level that fits, then at most one per level on the way down.
            let bound = delay_ms / LEVELS[17] + LEVELS.len() as u64;
            assert!(hops <= bound, "{delay_ms}: {hops} hops, more than {bound}");
        }
    }

    #[test]
    fn what_is_not_a_timer_hop_is_stored_as_it_is() {
        let now = 10_000;
        // Due already: stored now, as a plain message.
        let mut m = msg(&[(properties::TIMER_DELIVER_MS, "10000")]);
        assert_eq!(redirect_timer(&mut m, now, &LEVELS, DAY_MS), Ok(false));
        assert_eq!(m.message.delay_time_level(), 0);
        assert_eq!(m.message.properties.get(properties::TIMER_OUT_MS), None);
        // Less than the shortest level ahead: one hop of it.
        let mut m = msg(&[(properties::TIMER_DELIVER_MS, "10500")]);
        assert_eq!(redirect_timer(&mut m, now, &LEVELS, DAY_MS), Ok(true));
        assert_eq!(m.message.delay_time_level(), 1);
        // A delay level wins; the timer properties go, a time of its own too.
        let mut m =
            msg(&[(properties::DELAY, "2"), (properties::TIMER_DELAY_SEC, "60"), (properties::TIMER_OUT_MS, "1")]);
        assert_eq!(redirect_timer(&mut m, now, &LEVELS, DAY_MS), Ok(false));
        assert_eq!(m.message.delay_time_level(), 2);
        assert!(!has_timer(&m.message.properties));
        assert_eq!(m.message.properties.get(properties::TIMER_OUT_MS), None);
        // Already timed (consumed from a 5.x broker and sent on): no timer again, kept as it is.
        let mut m = msg(&[(properties::TIMER_DELAY_SEC, "60"), (properties::TIMER_OUT_MS, "70000")]);
        assert_eq!(redirect_timer(&mut m, now, &LEVELS, DAY_MS), Ok(false));
        assert_eq!(m.message.delay_time_level(), 0);
        assert_eq!(m.message.properties.get(properties::TIMER_OUT_MS), Some("70000"));
        // A transaction half is left alone (timed at its commit).
        let mut m = msg(&[(properties::TIMER_DELAY_SEC, "60")]);
        m.sys_flag = TransactionType::Prepared.bits();
        assert_eq!(redirect_timer(&mut m, now, &LEVELS, DAY_MS), Ok(false));
        assert!(has_timer(&m.message.properties));
        assert_eq!(check_timer(&m, now, &LEVELS, DAY_MS), Ok(()));
        m.message.properties.insert(properties::TIMER_DELAY_SEC, "86401");
        assert_eq!(check_timer(&m, now, &LEVELS, DAY_MS), Err(TimerError::TooFar { max_delay_ms: DAY_MS }));
        // No timer at all.
        let mut m = msg(&[]);
        assert_eq!(redirect_timer(&mut m, now, &LEVELS, DAY_MS), Ok(false));
        assert_eq!(m.message.properties.get(properties::TIMER_OUT_MS), None);
    }

    #[test]
    fn too_far_long_unreadable_or_cancelling_timers_are_refused() {
        let mut m = msg(&[(properties::TIMER_DELAY_SEC, "86401")]);
        assert_eq!(redirect_timer(&mut m, 0, &LEVELS, DAY_MS), Err(TimerError::TooFar { max_delay_ms: DAY_MS }));
        let mut m = msg(&[(properties::TIMER_DELAY_MS, "1.5")]);
        assert!(matches!(redirect_timer(&mut m, 0, &LEVELS, DAY_MS), Err(TimerError::NotANumber { .. })));
        // Exactly the maximum is allowed.
        let mut m = msg(&[(properties::TIMER_DELAY_SEC, "86400")]);
        assert_eq!(redirect_timer(&mut m, 0, &LEVELS, DAY_MS), Ok(true));
        // One 1 s level: at most TIMER_HOPS_MAX_COUNT seconds (plus one), whatever the maximum.
        let limit_ms = (TIMER_HOPS_MAX_COUNT + 1) * 1_000 - 1;
        let mut m = msg(&[(properties::TIMER_DELAY_MS, &limit_ms.to_string())]);
        assert_eq!(redirect_timer(&mut m, 0, &[1_000], DAY_MS), Ok(true));
        let mut m = msg(&[(properties::TIMER_DELAY_MS, &(limit_ms + 1).to_string())]);
        assert_eq!(
            redirect_timer(&mut m, 0, &[1_000], DAY_MS),
            Err(TimerError::TooManyHops { delay_ms: (limit_ms + 1) as i64, longest_level_ms: 1_000 })
        );
        let mut m = msg(&[(properties::TIMER_DEL_UNIQKEY, "k")]);
        assert_eq!(redirect_timer(&mut m, 0, &LEVELS, DAY_MS), Err(TimerError::Cancel));
        assert_eq!(check_timer(&m, 0, &LEVELS, DAY_MS), Err(TimerError::Cancel));
        // Hostile values neither panic nor pass the maximum.
        let mut m = msg(&[(properties::TIMER_DELIVER_MS, &i64::MIN.to_string())]);
        assert_eq!(redirect_timer(&mut m, 0, &LEVELS, DAY_MS), Ok(false));
        let mut m = msg(&[(properties::TIMER_DELAY_SEC, &i64::MIN.to_string())]);
        assert_eq!(redirect_timer(&mut m, i64::MAX, &LEVELS, DAY_MS), Ok(false));
    }

    #[test]
    fn a_delivered_copy_without_a_time_the_broker_could_have_set_goes_to_its_topic() {
        let p = |pairs: &[(&str, &str)]| msg(pairs).message.properties;
        assert_eq!(next_hop(&p(&[]), 0, &LEVELS), None);
        assert_eq!(next_hop(&p(&[(properties::TIMER_OUT_MS, "x")]), 0, &LEVELS), None);
        assert_eq!(next_hop(&p(&[(properties::TIMER_OUT_MS, "6000")]), 0, &LEVELS), Some(2));
        assert_eq!(next_hop(&p(&[(properties::TIMER_OUT_MS, "6000")]), 6_000, &LEVELS), None);
        let longest = (TIMER_MAX_DELAY_MAX_SECS * 1000).to_string();
        assert_eq!(next_hop(&p(&[(properties::TIMER_OUT_MS, &longest)]), 0, &LEVELS), Some(18));
        let beyond = (TIMER_MAX_DELAY_MAX_SECS * 1000 + 1).to_string();
        assert_eq!(next_hop(&p(&[(properties::TIMER_OUT_MS, &beyond)]), 0, &LEVELS), None);
        assert_eq!(next_hop(&p(&[(properties::TIMER_OUT_MS, &i64::MAX.to_string())]), i64::MIN, &LEVELS), None);
    }
}
