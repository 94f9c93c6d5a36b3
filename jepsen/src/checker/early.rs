//! `early`: a delayed value ([`crate::delay::DelayIntent`]) read by a consumer before its send was
//! invoked plus its delay. RocketMQ promises a delayed message is never delivered before its time,
//! and a timer message hops through the levels under the same promise (the broker's `timer` module).
//!
//! Times are the harness's own clock (the history's `time`), and a consumer's read is recorded after
//! it returned, so a read can only look later than it was, never earlier: an early read is one.
//! The broker times delays by its wall clock, which the `clock` nemesis moves; a run with a clock
//! fault counts early reads as `early_with_clock_skew` and stays valid, since a broker whose
//! clock jumped ahead delivers early in RocketMQ too.
//! Valid when no read came early, or a clock fault explains it.

use std::collections::HashMap;

use super::check_result::CheckResult;
use super::oks;
use crate::delay::DelayIntent;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// How much earlier than its time a read may be recorded without being early: the broker stamps a
/// message in whole milliseconds of a wall clock, the harness reads a monotonic one.
pub const EARLY_TOLERANCE_MS: u64 = 20;

/// The history label prefix of a clock fault (`nemesis::Fault::label`).
const CLOCK_FAULT_PREFIX: &str = "clock skew";

/// Runs the check.
pub fn check(ops: &[Op]) -> CheckResult {
    let mut r = CheckResult::new("early");
    let mut invoked: HashMap<&str, (u64, DelayIntent)> = HashMap::new();
    for op in ops.iter().filter(|o| o.f == OpF::Send && o.kind == OpType::Invoke) {
        if let Some(v) = op.value.as_deref()
            && let Some(intent) = DelayIntent::of_value(v)
        {
            invoked.insert(v, (op.time, intent));
        }
    }
    let clock_faults = ops
        .iter()
        .any(|o| o.f == OpF::Nemesis && o.value.as_deref().is_some_and(|v| v.starts_with(CLOCK_FAULT_PREFIX)));
    let (mut reads, mut early) = (0usize, 0usize);
    for op in oks(ops, OpF::Read) {
        for m in &op.msgs {
            let Some(&(sent_at, intent)) = invoked.get(m.value.as_str()) else { continue };
            reads += 1;
            let due = sent_at.saturating_add(intent.delay_ms().saturating_sub(EARLY_TOLERANCE_MS) * 1_000_000);
            if op.time < due {
                early += 1;
                let ahead_ms = (due - op.time) / 1_000_000 + EARLY_TOLERANCE_MS;
                let why = format!(
                    "{:?} ({intent:?}, {} ms) read by {} (op {}) {ahead_ms} ms before its time",
                    m.value,
                    intent.delay_ms(),
                    op.process,
                    op.index
                );
                if clock_faults {
                    r.sample(format!("{why}; a clock fault ran"));
                } else {
                    r.fail(why);
                }
            }
        }
    }
    r.count("delayed_sends", invoked.len());
    r.count("delayed_reads", reads);
    r.count("early", if clock_faults { 0 } else { early });
    r.count("early_with_clock_skew", if clock_faults { early } else { 0 });
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::*;
    use crate::history::ReadMsg;

    /// Stamps `ops` with the given times in ms (the testkit's `h` spaces them 1 µs apart).
    fn at(ms: &[u64], ops: Vec<Op>) -> Vec<Op> {
        h(ops)
            .into_iter()
            .zip(ms)
            .map(|(mut o, ms)| {
                o.time = ms * 1_000_000;
                o
            })
            .collect()
    }

    fn read_at(p: &str, v: &str) -> Vec<Op> {
        let msgs = vec![ReadMsg { offset: 0, value: v.to_owned(), copy: None }];
        vec![
            Op::new(OpType::Invoke, OpF::Read, p).queue("a:0"),
            Op::new(OpType::Ok, OpF::Read, p).queue("a:0").msgs(msgs),
        ]
    }

    #[test]
    fn a_read_at_or_after_its_time_passes_and_one_before_fails() {
        // d0.0-1 is level 2 (5 s), d0.0-3 a 12.3 s timer.
        let ok = at(&[0, 10, 5_000, 5_001], [tx_committed("d0.0", "d0.0-1", "a:0"), read_at("c0", "d0.0-1")].concat());
        let r = check(&ok);
        assert!(r.valid, "{r:?}");
        assert_eq!((r.get("delayed_sends"), r.get("delayed_reads"), r.get("early")), (1, 1, 0));

        let early =
            at(&[0, 10, 12_000, 12_001], [tx_committed("d0.0", "d0.0-3", "a:0"), read_at("c0", "d0.0-3")].concat());
        let r = check(&early);
        assert!(!r.valid, "{r:?}");
        assert_eq!(r.get("early"), 1);
        assert!(r.samples[0].contains("TimerLong"), "{r:?}");
    }

    #[test]
    fn plain_values_and_final_reads_are_not_judged() {
        let ops = at(
            &[0, 1, 2, 3, 4, 5],
            [sent("p0.0", "p0.0-0", "a:0", 0), read_at("c0", "p0.0-0"), drain("a:0", &[(0, "p0.0-0")])].concat(),
        );
        let r = check(&ops);
        assert!(r.valid, "{r:?}");
        assert_eq!((r.get("delayed_sends"), r.get("delayed_reads")), (0, 0));
    }

    #[test]
    fn a_clock_fault_explains_an_early_read() {
        let skew = vec![
            Op::new(OpType::Invoke, OpF::Nemesis, "nemesis").value("clock skew broker-a #0 +60000ms"),
            Op::new(OpType::Ok, OpF::Nemesis, "nemesis").value("clock skew broker-a #0 +60000ms"),
        ];
        let ops = at(
            &[0, 1, 2, 10, 100, 101],
            [skew, tx_committed("d0.0", "d0.0-0", "a:0"), read_at("c0", "d0.0-0")].concat(),
        );
        let r = check(&ops);
        assert!(r.valid, "{r:?}");
        assert_eq!((r.get("early"), r.get("early_with_clock_skew")), (0, 1));
    }
}
