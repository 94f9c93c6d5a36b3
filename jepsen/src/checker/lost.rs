//! `lost`: a send acknowledged (`ok`) whose value the final full read of every queue never returned
//! (Jepsen's total-queue `lost = ok_enqueues − dequeues`, restricted to the final drain, which reads
//! each queue from offset 0 after heal and quiet).
//!
//! Also reported, never an error: `recovered`, sends that ended `info` yet were found (they landed);
//! for transaction producers, `tx_committed` (their `ok` sends: committed transactions, counted in
//! `acked` and lost like any other) and `tx_committed_by_check` (those of them the broker's check
//! committed, [`crate::transaction::TxIntent::via_check`], found in the final read); for delay
//! producers, `delay_acked` (their `ok` sends, delivered out of their delay level before the final
//! read or lost).
//! Invalid without any successful final read, or when a queue's final read did not succeed: the
//! property cannot be decided then.

use std::collections::BTreeSet;
use std::collections::HashSet;

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
    let mut r = CheckResult::new("lost");
    let sends = Sends::of(ops);
    let finals: Vec<&Op> = oks(ops, OpF::FinalRead).collect();
    let seen: HashSet<&str> = finals.iter().flat_map(|o| o.msgs.iter().map(|m| m.value.as_str())).collect();
    let drained: BTreeSet<&str> = finals.iter().filter_map(|o| o.queue.as_deref()).collect();
    let undrained: BTreeSet<&str> = ops
        .iter()
        .filter(|o| o.f == OpF::FinalRead && matches!(o.kind, OpType::Fail | OpType::Info))
        .filter_map(|o| o.queue.as_deref())
        .filter(|q| !drained.contains(q))
        .collect();

    let mut lost: Vec<&Op> = sends.acked.iter().filter(|(v, _)| !seen.contains(*v)).map(|(_, op)| *op).collect();
    lost.sort_by_key(|o| o.index);
    let recovered = sends.unknown.keys().filter(|v| seen.contains(*v)).count();

    r.count("acked", sends.acked.len());
    r.count("final_read_values", seen.len());
    r.count("lost", lost.len());
    r.count("recovered", recovered);
    r.count("undrained_queues", undrained.len());
    let tx_committed: Vec<(&str, TxIntent)> =
        sends.acked.keys().filter_map(|v| TxIntent::of_value(v).map(|i| (*v, i))).collect();
    r.count("tx_committed", tx_committed.len());
    r.count("delay_acked", sends.acked.keys().filter(|v| DelayIntent::of_value(v).is_some()).count());
    r.count("tx_committed_by_check", tx_committed.iter().filter(|(v, i)| i.via_check() && seen.contains(v)).count());
    if finals.is_empty() {
        r.fail("no successful final read: loss cannot be decided");
    }
    for q in &undrained {
        r.fail(format!("the final read of {q} did not succeed"));
    }
    if !lost.is_empty() {
        r.valid = false;
    }
    for op in lost {
        let at = match (&op.queue, op.offset) {
            (Some(q), Some(o)) => format!(" (acked at {q}@{o})"),
            _ => String::new(),
        };
        r.sample(format!("lost {}{at}", op.value.as_deref().unwrap_or("?")));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::*;

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            ops: Vec<Op>,
            valid: bool,
            lost: u64,
            recovered: u64,
        }
        let cases = vec![
            Case {
                name: "every ack is read",
                ops: [
                    sent("p0", "p0-0", "a:0", 0),
                    sent("p1", "p1-0", "a:1", 0),
                    drain("a:0", &[(0, "p0-0")]),
                    drain("a:1", &[(0, "p1-0")]),
                ]
                .concat(),
                valid: true,
                lost: 0,
                recovered: 0,
            },
            Case {
                name: "an acked value missing from the final read is lost",
                ops: [sent("p0", "p0-0", "a:0", 0), sent("p0", "p0-1", "a:0", 1), drain("a:0", &[(0, "p0-0")])]
                    .concat(),
                valid: false,
                lost: 1,
                recovered: 0,
            },
            Case {
                name: "a failed or unknown send that is missing is not lost; an unknown one found is recovered",
                ops: [
                    send_ended("p0", "p0-0", OpType::Fail),
                    send_ended("p1", "p1-0", OpType::Info),
                    send_ended("p2", "p2-0", OpType::Info),
                    drain("a:0", &[(0, "p2-0")]),
                ]
                .concat(),
                valid: true,
                lost: 0,
                recovered: 1,
            },
            Case {
                name: "read by a consumer but not by the final read is still lost",
                ops: [sent("p0", "p0-0", "a:0", 0), read(OpF::Read, "c0", "a:0", &[(0, "p0-0")]), drain("a:0", &[])]
                    .concat(),
                valid: false,
                lost: 1,
                recovered: 0,
            },
            Case {
                name: "no final read cannot be valid",
                ops: sent("p0", "p0-0", "a:0", 0),
                valid: false,
                lost: 1,
                recovered: 0,
            },
            Case {
                name: "a queue whose drain failed cannot be valid",
                ops: [
                    drain("a:0", &[]),
                    vec![
                        Op::new(OpType::Invoke, OpF::FinalRead, "final").queue("a:1"),
                        Op::new(OpType::Fail, OpF::FinalRead, "final").queue("a:1"),
                    ],
                ]
                .concat(),
                valid: false,
                lost: 0,
                recovered: 0,
            },
        ];
        for c in cases {
            let r = check(&h(c.ops));
            assert_eq!(r.valid, c.valid, "{}: {r:?}", c.name);
            assert_eq!(r.get("lost"), c.lost, "{}: {r:?}", c.name);
            assert_eq!(r.get("recovered"), c.recovered, "{}: {r:?}", c.name);
        }
    }

    #[test]
    fn a_committed_transaction_missing_from_the_final_read_is_lost() {
        let ops = h([
            tx_committed("t0.0", "t0.0-0", "a:0"),
            send_ended("t0.0", "t0.0-1", OpType::Fail),
            tx_committed("t0.0", "t0.0-2", "a:1"),
            tx_committed("t0.0", "t0.0-4", "a:1"),
            drain("a:0", &[(0, "t0.0-0")]),
            drain("a:1", &[(0, "t0.0-2")]),
        ]
        .concat());
        let r = check(&ops);
        assert!(!r.valid, "{r:?}");
        assert_eq!((r.get("acked"), r.get("lost")), (3, 1), "{r:?}");
        assert_eq!((r.get("tx_committed"), r.get("tx_committed_by_check")), (3, 1), "{r:?}");
        assert_eq!(r.samples, vec!["lost t0.0-4".to_owned()]);
    }
}
