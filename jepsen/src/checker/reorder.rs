//! `reorder`: one producer's sequential sends must land in a queue in the order they were sent
//! (`nonmonotonic_send`): for each process that never had two sends outstanding, its `ok` sends to one
//! queue, in history order, must have strictly increasing offsets. Processes with concurrent (async)
//! sends promise no order and are skipped (counted as `concurrent_processes`), and so are `ok` sends
//! without an offset: transaction producers record none (their SendResult's offset is the half's,
//! and a transaction committed by a check lands after later ones anyway).

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use super::check_result::CheckResult;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// Runs the check.
pub fn check(ops: &[Op]) -> CheckResult {
    let mut r = CheckResult::new("reorder");
    let mut pending: BTreeMap<&str, usize> = BTreeMap::new();
    let mut concurrent: BTreeSet<&str> = BTreeSet::new();
    for op in ops.iter().filter(|o| o.f == OpF::Send) {
        let n = pending.entry(op.process.as_str()).or_default();
        if op.kind == OpType::Invoke {
            *n += 1;
            if *n > 1 {
                concurrent.insert(op.process.as_str());
            }
        } else {
            *n = n.saturating_sub(1);
        }
    }
    let mut last: BTreeMap<(&str, &str), (i64, &str)> = BTreeMap::new();
    let (mut checked, mut violations) = (0usize, 0usize);
    for op in ops.iter().filter(|o| o.f == OpF::Send && o.kind == OpType::Ok) {
        let (Some(q), Some(off)) = (op.queue.as_deref(), op.offset) else { continue };
        if concurrent.contains(op.process.as_str()) {
            continue;
        }
        checked += 1;
        let v = op.value.as_deref().unwrap_or("?");
        if let Some((prev_off, prev_v)) = last.insert((op.process.as_str(), q), (off, v))
            && off <= prev_off
        {
            violations += 1;
            r.sample(format!(
                "{}: {v} landed at {q}@{off}, not after the earlier {prev_v} at {q}@{prev_off}",
                op.process
            ));
        }
    }
    r.count("checked_sends", checked);
    r.count("concurrent_processes", concurrent.len());
    r.count("reordered", violations);
    r.valid = violations == 0;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::*;

    #[test]
    fn table() {
        let async_pair = vec![
            Op::new(OpType::Invoke, OpF::Send, "p5").value("p5-0"),
            Op::new(OpType::Invoke, OpF::Send, "p5").value("p5-1"),
            Op::new(OpType::Ok, OpF::Send, "p5").value("p5-1").queue("a:0").offset(3),
            Op::new(OpType::Ok, OpF::Send, "p5").value("p5-0").queue("a:0").offset(4),
        ];
        let cases: Vec<(&str, Vec<Op>, bool, u64)> = vec![
            (
                "in order per queue",
                [sent("p0", "p0-0", "a:0", 0), sent("p0", "p0-1", "a:1", 0), sent("p0", "p0-2", "a:0", 1)].concat(),
                true,
                0,
            ),
            (
                "a later send at a lower offset",
                [sent("p0", "p0-0", "a:0", 5), sent("p0", "p0-1", "a:0", 4)].concat(),
                false,
                1,
            ),
            (
                "two sends at one offset",
                [sent("p0", "p0-0", "a:0", 5), sent("p0", "p0-1", "a:0", 5)].concat(),
                false,
                1,
            ),
            (
                "other producers interleave freely",
                [sent("p0", "p0-0", "a:0", 5), sent("p1", "p1-0", "a:0", 2), sent("p0", "p0-1", "a:0", 6)].concat(),
                true,
                0,
            ),
            ("async sends are not checked", async_pair, true, 0),
            (
                "transactional sends carry no offset and are not checked",
                [tx_committed("t0.0", "t0.0-2", "a:0"), tx_committed("t0.0", "t0.0-4", "a:0")].concat(),
                true,
                0,
            ),
        ];
        for (name, ops, valid, reordered) in cases {
            let r = check(&h(ops));
            assert_eq!((r.valid, r.get("reordered")), (valid, reordered), "{name}: {r:?}");
        }
    }
}
