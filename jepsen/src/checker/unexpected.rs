//! `unexpected`: a value a consumer or the final read returned that no send ever attempted (Jepsen's
//! `unexpected`; OpenChaos ignores these). Values are unique per attempt, so one from nowhere means the
//! broker invented, corrupted or mixed up a record. Reads of values whose send `fail`ed are reported
//! separately as `aborted_reads` (G1a): a definite failure must not become visible. A transaction
//! producer's value whose transaction rolls back ([`TxIntent`]) is an aborted read whatever its send's
//! outcome: stored or not, acknowledged or not, no path commits it. `tx_rollbacks` counts the
//! acknowledged halves rolled back, `tx_rollbacks_by_check` those of them a check rolled back.

use std::collections::BTreeSet;

use super::Sends;
use super::check_result::CheckResult;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;
use crate::transaction::TxIntent;

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
            } else if sends.failed.contains_key(m.value.as_str())
                || TxIntent::of_value(&m.value).is_some_and(|i| !i.commits())
            {
                aborted.insert((m.value.as_str(), op.queue.as_deref().unwrap_or("?"), m.offset));
            }
        }
    }
    r.count("read_messages", reads);
    r.count("unexpected", unexpected.len());
    r.count("aborted_reads", aborted.len());
    // Rolled-back transactions: halves acknowledged (a `fail` naming the queue), then rolled back.
    let rolled_back: Vec<TxIntent> = sends
        .failed
        .iter()
        .filter(|(_, op)| op.queue.is_some())
        .filter_map(|(v, _)| TxIntent::of_value(v).filter(|i| !i.commits()))
        .collect();
    r.count("tx_rollbacks", rolled_back.len());
    r.count("tx_rollbacks_by_check", rolled_back.iter().filter(|i| i.via_check()).count());
    r.valid = unexpected.is_empty() && aborted.is_empty();
    for (v, q, o) in unexpected {
        r.sample(format!("unexpected {v:?} at {q}@{o}"));
    }
    for (v, q, o) in aborted {
        r.sample(format!("read {v:?} at {q}@{o} although its send failed or its transaction rolled back"));
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
            (
                "a rolled-back transaction must not be read",
                [send_ended("t0.0", "t0.0-1", OpType::Fail), drain("a:0", &[(0, "t0.0-1")])].concat(),
                false,
                0,
                1,
            ),
            (
                "nor one rolled back by its check, even after an unknown send",
                [send_ended("t0.0", "t0.0-3", OpType::Info), read(OpF::Read, "c0", "a:0", &[(0, "t0.0-3")])].concat(),
                false,
                0,
                1,
            ),
            (
                "committed transactions, also after an unknown send, may be read",
                [
                    tx_committed("t0.0", "t0.0-0", "a:0"),
                    send_ended("t0.0", "t0.0-2", OpType::Info),
                    drain("a:0", &[(0, "t0.0-0"), (1, "t0.0-2")]),
                ]
                .concat(),
                true,
                0,
                0,
            ),
        ];
        let rolled_back = h([
            vec![Op::new(OpType::Invoke, OpF::Send, "t0.0").value("t0.0-3")],
            vec![Op::new(OpType::Fail, OpF::Send, "t0.0").value("t0.0-3").queue("a:0")],
            drain("a:0", &[]),
        ]
        .concat());
        let r = check(&rolled_back);
        assert!(r.valid, "{r:?}");
        assert_eq!((r.get("tx_rollbacks"), r.get("tx_rollbacks_by_check")), (1, 1), "{r:?}");
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
