//! `order`: orderly consumers ([`crate::orderly`]) process each queue one consumer at a time and in
//! the queue's stored order. From the `process` ops (an `invoke` when a listener starts a message,
//! an `ok` when it finishes it):
//!
//! - `overlaps`: two processes holding messages of one queue at the same time: one started a
//!   message of the queue while another had started one and not finished it. A start with no finish
//!   (the run ended inside the call) holds until the end of the history.
//! - `skipped`: a message processed before every earlier message of its queue was processed at
//!   least once (its offset is past the highest offset started so far + 1): processing went
//!   against the stored order.
//! - `reprocessed` (allowed, counted): a message started again at or below the highest offset
//!   started so far: a retry, or a new owner resuming from the committed offset. Retries aside is
//!   the promise RocketMQ makes (orderly consumption is at least once).
//!
//! A history without process ops (no orderly consumer ran) is valid with `processed` = 0.

use std::collections::BTreeMap;

use super::check_result::CheckResult;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// One message held by one process: from its start to its finish (`u64::MAX`: never finished).
#[derive(Debug, Clone, Copy)]
struct Held<'a> {
    process: &'a str,
    offset: i64,
    start: u64,
    end: u64,
}

/// Runs the check.
pub fn check(ops: &[Op]) -> CheckResult {
    let mut r = CheckResult::new("order");
    // Per queue: the holds in start order. A process holds one message at a time (the listener
    // processes a batch in sequence), so its open hold is the last one it started.
    let mut holds: BTreeMap<&str, Vec<Held<'_>>> = BTreeMap::new();
    let mut open: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.f == OpF::Process) {
        let (Some(q), Some(offset)) = (op.queue.as_deref(), op.offset) else { continue };
        let list = holds.entry(q).or_default();
        match op.kind {
            OpType::Invoke => {
                open.insert((q, op.process.as_str()), list.len());
                list.push(Held { process: op.process.as_str(), offset, start: op.time, end: u64::MAX });
            }
            _ => {
                if let Some(i) = open.remove(&(q, op.process.as_str()))
                    && let Some(h) = list.get_mut(i)
                {
                    h.end = op.time;
                }
            }
        }
    }
    let (mut processed, mut overlaps, mut skipped, mut reprocessed) = (0usize, 0usize, 0usize, 0usize);
    for (q, list) in &holds {
        processed += list.len();
        // Holds are in start order: each is checked against the still-open holds of other processes.
        let mut max_started: Option<i64> = None;
        let mut active: Vec<Held<'_>> = Vec::new();
        for h in list {
            active.retain(|a| a.end > h.start);
            if let Some(other) = active.iter().find(|a| a.process != h.process) {
                overlaps += 1;
                r.sample(format!(
                    "{q}: {} started offset {} while {} was still processing offset {}",
                    h.process, h.offset, other.process, other.offset
                ));
            }
            match max_started {
                Some(m) if h.offset > m + 1 => {
                    skipped += 1;
                    r.sample(format!(
                        "{q}: {} processed offset {} before offset {} was ever processed",
                        h.process,
                        h.offset,
                        m + 1
                    ));
                }
                Some(m) if h.offset <= m => reprocessed += 1,
                _ => {}
            }
            max_started = Some(max_started.map_or(h.offset, |m| m.max(h.offset)));
            active.push(*h);
        }
    }
    r.count("processed", processed);
    r.count("queues", holds.len());
    r.count("overlaps", overlaps);
    r.count("skipped", skipped);
    r.count("reprocessed", reprocessed);
    r.valid = overlaps == 0 && skipped == 0;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::h;

    fn start(p: &str, q: &str, off: i64) -> Op {
        Op::new(OpType::Invoke, OpF::Process, p).queue(q).offset(off).value(format!("v{off}"))
    }

    fn done(p: &str, q: &str, off: i64) -> Op {
        Op::new(OpType::Ok, OpF::Process, p).queue(q).offset(off).value(format!("v{off}"))
    }

    #[test]
    fn one_owner_at_a_time_in_order_is_valid_and_a_resume_from_the_commit_is_a_retry() {
        let ops = h(vec![
            start("o0.0", "a:0", 0),
            done("o0.0", "a:0", 0),
            start("o1.0", "a:1", 0),
            start("o0.0", "a:0", 1),
            done("o0.0", "a:0", 1),
            done("o1.0", "a:1", 0),
            // o0 left; o1 takes a:0 and resumes from the committed offset 1.
            start("o1.0", "a:0", 1),
            done("o1.0", "a:0", 1),
            start("o1.0", "a:0", 2),
            done("o1.0", "a:0", 2),
        ]);
        let r = check(&ops);
        assert!(r.valid, "{r:?}");
        assert_eq!(r.counts.get("processed"), Some(&5));
        assert_eq!(r.counts.get("reprocessed"), Some(&1));
        assert_eq!(r.counts.get("overlaps"), Some(&0));
    }

    #[test]
    fn two_consumers_inside_one_queue_at_once_fail() {
        let ops =
            h(vec![start("o0.0", "a:0", 5), start("o1.0", "a:0", 4), done("o1.0", "a:0", 4), done("o0.0", "a:0", 5)]);
        let r = check(&ops);
        assert!(!r.valid);
        assert_eq!(r.counts.get("overlaps"), Some(&1));
        assert!(r.samples[0].contains("o1.0 started offset 4 while o0.0 was still processing offset 5"));
    }

    #[test]
    fn a_call_that_never_finished_holds_the_queue_to_the_end() {
        let ops = h(vec![start("o0.0", "a:0", 0), start("o1.0", "a:0", 0), done("o1.0", "a:0", 0)]);
        assert!(!check(&ops).valid);
    }

    #[test]
    fn a_message_processed_before_an_earlier_one_fails() {
        let ops =
            h(vec![start("o0.0", "a:0", 0), done("o0.0", "a:0", 0), start("o0.0", "a:0", 2), done("o0.0", "a:0", 2)]);
        let r = check(&ops);
        assert!(!r.valid);
        assert_eq!(r.counts.get("skipped"), Some(&1));
    }

    #[test]
    fn no_orderly_consumer_is_valid_and_says_so() {
        let r = check(&[]);
        assert!(r.valid);
        assert_eq!(r.counts.get("processed"), Some(&0));
    }
}
