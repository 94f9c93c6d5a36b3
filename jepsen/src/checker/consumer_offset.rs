//! `consumer_offset_monotonic`: consumer offsets only move forward unless someone resets them
//! (docs/reliability.md#broker-requirements, requirement 8).
//! - The broker's stored offset of `(group, queue)` (`fetch-offset` observations, group in `value`)
//!   must never be seen lower than an earlier observation, unless a `reset` of that queue happened
//!   in between.
//! - One consumer process's own commits of a queue (`commit-offset`) must never go down, unless that
//!   process was rebalanced (`assign`) or reset the queue in between.

use std::collections::BTreeMap;

use super::check_result::CheckResult;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// Runs the check.
pub fn check(ops: &[Op]) -> CheckResult {
    let mut r = CheckResult::new("consumer_offset_monotonic");
    let mut observed: BTreeMap<(&str, &str), (i64, u64)> = BTreeMap::new();
    let mut committed: BTreeMap<(&str, &str), (i64, u64)> = BTreeMap::new();
    let (mut observations, mut commits, mut backwards) = (0usize, 0usize, 0usize);
    for op in ops {
        let q = op.queue.as_deref().unwrap_or("?");
        match (op.f, op.kind) {
            (OpF::Reset, OpType::Ok | OpType::Info) => {
                observed.retain(|(_, oq), _| *oq != q);
                committed.retain(|(p, oq), _| !(*oq == q && *p == op.process));
            }
            (OpF::Assign, OpType::Ok) => committed.retain(|(p, _), _| *p != op.process),
            (OpF::FetchOffset, OpType::Ok) => {
                let Some(off) = op.offset else { continue };
                observations += 1;
                let group = op.value.as_deref().unwrap_or("?");
                if let Some((prev, at)) = observed.insert((group, q), (off, op.index))
                    && off < prev
                {
                    backwards += 1;
                    r.sample(format!("{group} {q}: stored offset {off} at op {} after {prev} at op {at}", op.index));
                }
            }
            (OpF::CommitOffset, OpType::Ok) => {
                let Some(off) = op.offset else { continue };
                commits += 1;
                if let Some((prev, at)) = committed.insert((op.process.as_str(), q), (off, op.index))
                    && off < prev
                {
                    backwards += 1;
                    r.sample(format!("{} {q}: committed {off} at op {} after {prev} at op {at}", op.process, op.index));
                }
            }
            _ => {}
        }
    }
    r.count("observations", observations);
    r.count("commits", commits);
    r.count("backwards", backwards);
    r.valid = backwards == 0;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::*;

    fn fetched(off: i64) -> Op {
        Op::new(OpType::Ok, OpF::FetchOffset, "monitor").value("g").queue("a:0").offset(off)
    }
    fn commit(p: &str, off: i64) -> Op {
        Op::new(OpType::Ok, OpF::CommitOffset, p).value("g").queue("a:0").offset(off)
    }

    #[test]
    fn table() {
        let reset = Op::new(OpType::Ok, OpF::Reset, "c0").queue("a:0").offset(0);
        let assign = Op::new(OpType::Ok, OpF::Assign, "c0").value("a:0");
        let cases: Vec<(&str, Vec<Op>, bool, u64)> = vec![
            ("forward only", vec![fetched(0), fetched(3), fetched(3), commit("c0", 2), commit("c0", 5)], true, 0),
            ("the stored offset went back", vec![fetched(5), fetched(3)], false, 1),
            ("a reset allows going back", vec![fetched(5), reset.clone(), fetched(0)], true, 0),
            ("a consumer committed lower", vec![commit("c0", 5), commit("c0", 4)], false, 1),
            ("two consumers' commits are separate", vec![commit("c0", 5), commit("c1", 4)], true, 0),
            ("a rebalance allows a lower commit", vec![commit("c0", 5), assign, commit("c0", 4)], true, 0),
        ];
        for (name, ops, valid, backwards) in cases {
            let r = check(&h(ops));
            assert_eq!((r.valid, r.get("backwards")), (valid, backwards), "{name}: {r:?}");
        }
    }
}
