//! `duplicated`: values stored or delivered more than once, always counted, and an error only when
//! nothing in the history allows them (docs/reliability.md#the-promise: "duplicates are possible after
//! indeterminate sends or consumer failover").
//!
//! - Store duplicates: one value at two or more `(queue, offset)` places in the final read. Allowed only
//!   when its send ended `info` (the producer never resends on an unknown outcome, so with a definite
//!   outcome the store itself wrote it twice), or when it is a transaction producer's value: a
//!   committed transaction is delivered at least once, as in RocketMQ, counted as
//!   `store_duplicates_tx`. The broker commits each chain of a half and its check copies once while
//!   it remembers the chain ended, so a count above zero is worth a look, though not an error.
//!   Likewise a delay producer's value: delivery out of a delay level is at least once (a leader
//!   that dies between storing a due message and committing its level's progress leaves it to the
//!   next leader), counted as `store_duplicates_delay`.
//! - Delivery duplicates: one value returned by consumer reads more than once. Each repeat is allowed
//!   when it went to another process (failover), when the same process had a rebalance (`assign`), a
//!   `reset`, or a failed/unknown read in between, or when the value is a store duplicate.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;

use super::Sends;
use super::check_result::CheckResult;
use super::oks;
use crate::delay::DelayIntent;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;
use crate::transaction::TxIntent;

/// Runs the check.
pub fn check(ops: &[Op]) -> CheckResult {
    let mut r = CheckResult::new("duplicated");
    let sends = Sends::of(ops);

    let mut places: BTreeMap<&str, BTreeSet<(&str, i64)>> = BTreeMap::new();
    for op in oks(ops, OpF::FinalRead) {
        for m in &op.msgs {
            places.entry(m.value.as_str()).or_default().insert((op.queue.as_deref().unwrap_or("?"), m.offset));
        }
    }
    let store_dups: Vec<(&str, &BTreeSet<(&str, i64)>)> =
        places.iter().filter(|(_, p)| p.len() > 1).map(|(v, p)| (*v, p)).collect();
    let (mut store_disallowed, mut store_tx, mut store_delay) = (0, 0, 0);
    for (v, p) in &store_dups {
        if TxIntent::of_value(v).is_some() {
            store_tx += 1;
        } else if DelayIntent::of_value(v).is_some() {
            store_delay += 1;
        } else if !sends.unknown.contains_key(v) {
            store_disallowed += 1;
            r.sample(format!("{v:?} stored {} times ({p:?}) although its send had a definite outcome", p.len()));
        }
    }
    let store_dup_values: BTreeSet<&str> = store_dups.iter().map(|(v, _)| *v).collect();

    // Per process, the indexes of events that allow a redelivery.
    let mut resets: HashMap<&str, Vec<u64>> = HashMap::new();
    for op in ops {
        let allows = matches!(op.f, OpF::Assign | OpF::Reset)
            || (op.f == OpF::Read && matches!(op.kind, OpType::Fail | OpType::Info));
        if allows {
            resets.entry(op.process.as_str()).or_default().push(op.index);
        }
    }
    let mut deliveries: BTreeMap<&str, Vec<(u64, &str)>> = BTreeMap::new();
    for op in oks(ops, OpF::Read) {
        for m in &op.msgs {
            deliveries.entry(m.value.as_str()).or_default().push((op.index, op.process.as_str()));
        }
    }
    let (mut redelivered, mut redelivery_disallowed) = (0usize, 0usize);
    for (v, ds) in &deliveries {
        for w in ds.windows(2) {
            let ((i1, p1), (i2, p2)) = (w[0], w[1]);
            redelivered += 1;
            let reset_between = resets.get(p2).is_some_and(|rs| rs.iter().any(|&i| i > i1 && i < i2));
            if p1 != p2 || reset_between || store_dup_values.contains(v) {
                continue;
            }
            redelivery_disallowed += 1;
            r.sample(format!("{v:?} delivered again to {p2} (ops {i1} and {i2}) with no failover, rebalance or reset"));
        }
    }

    r.count("store_duplicates", store_dups.len());
    r.count("store_duplicates_disallowed", store_disallowed);
    r.count("store_duplicates_tx", store_tx);
    r.count("store_duplicates_delay", store_delay);
    r.count("redeliveries", redelivered);
    r.count("redeliveries_disallowed", redelivery_disallowed);
    r.valid = store_disallowed == 0 && redelivery_disallowed == 0;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::*;

    fn assign(p: &str) -> Vec<Op> {
        vec![Op::new(OpType::Ok, OpF::Assign, p).value("a:0")]
    }

    #[test]
    fn table() {
        let r0 = |off| read(OpF::Read, "c0", "a:0", &[(off, "p0-0")]);
        let cases: Vec<(&str, Vec<Op>, bool, u64, u64)> = vec![
            ("no duplicates", [sent("p0", "p0-0", "a:0", 0), r0(0), drain("a:0", &[(0, "p0-0")])].concat(), true, 0, 0),
            (
                "stored twice after an acked send is an error",
                [sent("p0", "p0-0", "a:0", 0), drain("a:0", &[(0, "p0-0"), (1, "p0-0")])].concat(),
                false,
                1,
                0,
            ),
            (
                "stored twice after an unknown send is allowed",
                [send_ended("p0", "p0-0", OpType::Info), drain("a:0", &[(0, "p0-0"), (1, "p0-0")])].concat(),
                true,
                1,
                0,
            ),
            (
                "delivered twice to one consumer with nothing in between is an error",
                [sent("p0", "p0-0", "a:0", 0), r0(0), r0(0), drain("a:0", &[(0, "p0-0")])].concat(),
                false,
                0,
                1,
            ),
            (
                "delivered again after a rebalance is allowed",
                [sent("p0", "p0-0", "a:0", 0), r0(0), assign("c0"), r0(0), drain("a:0", &[(0, "p0-0")])].concat(),
                true,
                0,
                1,
            ),
            (
                "delivered to another consumer (failover) is allowed",
                [
                    sent("p0", "p0-0", "a:0", 0),
                    r0(0),
                    read(OpF::Read, "c1", "a:0", &[(0, "p0-0")]),
                    drain("a:0", &[(0, "p0-0")]),
                ]
                .concat(),
                true,
                0,
                1,
            ),
            (
                "delivered again after a failed read is allowed",
                [
                    sent("p0", "p0-0", "a:0", 0),
                    r0(0),
                    vec![Op::new(OpType::Invoke, OpF::Read, "c0"), Op::new(OpType::Info, OpF::Read, "c0")],
                    r0(0),
                    drain("a:0", &[(0, "p0-0")]),
                ]
                .concat(),
                true,
                0,
                1,
            ),
            (
                "a committed transaction stored twice is allowed (at least once)",
                [tx_committed("t0.0", "t0.0-2", "a:0"), drain("a:0", &[(0, "t0.0-2"), (1, "t0.0-2")])].concat(),
                true,
                1,
                0,
            ),
            (
                "a delayed value delivered twice out of its level is allowed (at least once)",
                [tx_committed("d0.0", "d0.0-3", "a:0"), drain("a:0", &[(0, "d0.0-3"), (1, "d0.0-3")])].concat(),
                true,
                1,
                0,
            ),
        ];
        for (name, ops, valid, store, redelivered) in cases {
            let r = check(&h(ops));
            assert_eq!(
                (r.valid, r.get("store_duplicates"), r.get("redeliveries")),
                (valid, store, redelivered),
                "{name}: {r:?}"
            );
        }
    }
}
