//! `offsets`: a queue is one history. Two anomalies:
//! - `inconsistent_offsets`: one `(queue, offset)` seen with two or more values, across send acks,
//!   consumer reads and the final read (split brain, an overwritten record, a lying ack);
//! - `gaps`: offsets missing from a queue's final read between 0 and its highest offset (ConsumeQueue
//!   offsets are dense; nothing is deleted during a run).

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use super::check_result::CheckResult;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// Runs the check.
pub fn check(ops: &[Op]) -> CheckResult {
    let mut r = CheckResult::new("offsets");
    let mut at: BTreeMap<(&str, i64), BTreeSet<&str>> = BTreeMap::new();
    let mut final_offsets: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.kind == OpType::Ok) {
        let Some(q) = op.queue.as_deref() else { continue };
        match op.f {
            OpF::Send => {
                if let (Some(off), Some(v)) = (op.offset, op.value.as_deref()) {
                    at.entry((q, off)).or_default().insert(v);
                }
            }
            OpF::Read | OpF::FinalRead => {
                for m in &op.msgs {
                    at.entry((q, m.offset)).or_default().insert(m.value.as_str());
                }
                if op.f == OpF::FinalRead {
                    final_offsets.entry(q).or_default().extend(op.msgs.iter().map(|m| m.offset));
                }
            }
            _ => {}
        }
    }
    let mut inconsistent = 0usize;
    for ((q, off), values) in &at {
        if values.len() > 1 {
            inconsistent += 1;
            r.sample(format!("{q}@{off} holds {values:?}"));
        }
    }
    let mut gaps = 0usize;
    for (q, offs) in &final_offsets {
        let Some(&max) = offs.last() else { continue };
        let missing: Vec<i64> = (0..=max).filter(|o| !offs.contains(o)).collect();
        if let (Some(first), Some(last)) = (missing.first(), missing.last()) {
            r.sample(format!("{q}: {} offsets missing in 0..={max} (first {first}, last {last})", missing.len()));
        }
        gaps += missing.len();
    }
    r.count("offsets_seen", at.len());
    r.count("inconsistent_offsets", inconsistent);
    r.count("gaps", gaps);
    r.valid = inconsistent == 0 && gaps == 0;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::*;

    #[test]
    fn table() {
        let cases: Vec<(&str, Vec<Op>, bool, u64, u64)> = vec![
            (
                "dense and consistent",
                [
                    sent("p0", "p0-0", "a:0", 0),
                    read(OpF::Read, "c0", "a:0", &[(0, "p0-0")]),
                    drain("a:0", &[(0, "p0-0"), (1, "x")]),
                ]
                .concat(),
                true,
                0,
                0,
            ),
            (
                "the same offset in two queues is fine",
                [drain("a:0", &[(0, "x")]), drain("a:1", &[(0, "y")])].concat(),
                true,
                0,
                0,
            ),
            (
                "ack and final read disagree",
                [sent("p0", "p0-0", "a:0", 0), drain("a:0", &[(0, "p1-0")])].concat(),
                false,
                1,
                0,
            ),
            (
                "two consumers saw different values at one offset",
                [
                    read(OpF::Read, "c0", "a:0", &[(3, "x")]),
                    read(OpF::Read, "c1", "a:0", &[(3, "y")]),
                    drain("a:0", &[(0, "a"), (1, "b"), (2, "c"), (3, "x")]),
                ]
                .concat(),
                false,
                1,
                0,
            ),
            ("a hole in the final read", [drain("a:0", &[(0, "x"), (2, "y")])].concat(), false, 0, 1),
            ("a final read not starting at 0", [drain("a:0", &[(2, "x"), (3, "y")])].concat(), false, 0, 2),
        ];
        for (name, ops, valid, inconsistent, gaps) in cases {
            let r = check(&h(ops));
            assert_eq!(
                (r.valid, r.get("inconsistent_offsets"), r.get("gaps")),
                (valid, inconsistent, gaps),
                "{name}: {r:?}"
            );
        }
    }
}
