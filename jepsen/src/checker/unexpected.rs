//! `unexpected`: a value a consumer or the final read returned that no send ever attempted (Jepsen's
//! `unexpected`; OpenChaos ignores these). Values are unique per attempt, so one from nowhere means the
//! broker invented, corrupted or mixed up a record. Reads of values whose send `fail`ed are reported
//! separately as `aborted_reads` (G1a): a definite failure must not become visible.

use std::collections::BTreeSet;

use super::CheckResult;
use super::Sends;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// Runs the check.
pub fn check(ops: &[Op]) -> CheckResult {
    let mut r = CheckResult::new("unexpected");
    let sends = Sends::of(ops);
    let mut unexpected = BTreeSet::new();
    let mut aborted = BTreeSet::new();
    let mut reads = 0usize;
    for op in ops.iter().filter(|o| o.kind == OpType::Ok && matches!(o.f, OpF::Read | OpF::FinalRead)) {
        for m in &op.msgs {
            reads += 1;
            if !sends.attempted.contains_key(m.value.as_str()) {
                unexpected.insert((m.value.as_str(), op.queue.as_deref().unwrap_or("?"), m.offset));
            } else if sends.failed.contains_key(m.value.as_str()) {
                aborted.insert((m.value.as_str(), op.queue.as_deref().unwrap_or("?"), m.offset));
            }
        }
    }
    r.count("read_messages", reads);
    r.count("unexpected", unexpected.len());
    r.count("aborted_reads", aborted.len());
    r.valid = unexpected.is_empty() && aborted.is_empty();
    for (v, q, o) in unexpected {
        r.sample(format!("unexpected {v:?} at {q}@{o}"));
    }
    for (v, q, o) in aborted {
        r.sample(format!("read {v:?} at {q}@{o} although its send failed"));
    }
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
                "only attempted values are read",
                [
                    sent("p0", "p0-0", "a:0", 0),
                    send_ended("p1", "p1-0", OpType::Info),
                    drain("a:0", &[(0, "p0-0"), (1, "p1-0")]),
                ]
                .concat(),
                true,
                0,
                0,
            ),
            (
                "a value never sent is unexpected",
                [sent("p0", "p0-0", "a:0", 0), drain("a:0", &[(0, "p0-0"), (1, "ghost")])].concat(),
                false,
                1,
                0,
            ),
            (
                "a consumer read from nowhere is unexpected too",
                [read(OpF::Read, "c0", "a:0", &[(0, "p9-9")]), drain("a:0", &[])].concat(),
                false,
                1,
                0,
            ),
            (
                "a value whose send failed must not be read",
                [send_ended("p0", "p0-0", OpType::Fail), drain("a:0", &[(0, "p0-0")])].concat(),
                false,
                0,
                1,
            ),
        ];
        for (name, ops, valid, unexpected, aborted) in cases {
            let r = check(&h(ops));
            assert_eq!(
                (r.valid, r.get("unexpected"), r.get("aborted_reads")),
                (valid, unexpected, aborted),
                "{name}: {r:?}"
            );
        }
    }
}
