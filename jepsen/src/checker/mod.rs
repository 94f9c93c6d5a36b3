//! Checkers: each reads a finished history (and, for divergence, the per-replica dumps) and returns a
//! [`CheckResult`] `{name, valid, counts, samples}`; [`check_all`] runs every one into a [`Report`]
//! (JSON for tools, [`Report::summary`] for people).
//!
//! One file per property (jepsen/README.md#checkers):
//! - [`lost`]: acknowledged sends the final full read never saw.
//! - [`unexpected`]: values read that no send ever attempted.
//! - [`duplicated`]: values stored or delivered more than once, and whether that was allowed.
//! - [`reorder`]: one sequential producer's sends landing out of order in a queue.
//! - [`offsets`]: offset gaps and one offset holding two values.
//! - [`consumer_offset`]: consumer offsets moving backwards without a reset.
//! - [`divergence`]: replicas (each group's final members) whose committed logs differ.
//! - [`early`]: delayed values read before their time.
//! - [`order`]: orderly consumers processing one queue at once, or against its stored order.
//! - [`pop`]: POP consumers missing an acknowledged send, or handed an acked message again.
//!
//! Invariant: a checker is valid only when it had the input to decide (e.g. `lost` with no final read
//! is invalid): a harness that cannot fail proves nothing.

pub mod check_result;
pub mod consumer_offset;
pub mod divergence;
pub mod duplicated;
pub mod early;
pub mod lost;
pub mod offsets;
pub mod order;
pub mod pop;
pub mod reorder;
pub mod unexpected;

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Deserialize;
use serde::Serialize;

pub use self::check_result::CheckResult;
pub use self::check_result::SAMPLES_MAX_COUNT;
pub use self::divergence::ReplicaDump;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// Every checker's verdict on one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// True when every checker is valid.
    pub valid: bool,
    /// The verdicts, in [`check_all`]'s order.
    pub results: Vec<CheckResult>,
}

impl Report {
    /// A report over `results`.
    pub fn new(results: Vec<CheckResult>) -> Self {
        Report { valid: results.iter().all(|r| r.valid), results }
    }

    /// The verdict of checker `name`.
    pub fn result(&self, name: &str) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.name == name)
    }

    /// A readable summary: one line per checker, then its counts and samples.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let verdict = if self.valid { "VALID" } else { "INVALID" };
        let _ = writeln!(out, "raftmq-jepsen: {verdict}");
        for r in &self.results {
            let mark = if r.valid { "ok  " } else { "FAIL" };
            let counts: Vec<String> = r.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "  [{mark}] {:<24} {}", r.name, counts.join(" "));
            for s in &r.samples {
                let _ = writeln!(out, "         - {s}");
            }
        }
        out
    }
}

/// Runs every checker on `ops` and `dumps`.
pub fn check_all(ops: &[Op], dumps: &[ReplicaDump]) -> Report {
    Report::new(vec![
        lost::check(ops),
        unexpected::check(ops),
        duplicated::check(ops),
        reorder::check(ops),
        offsets::check(ops),
        consumer_offset::check(ops),
        early::check(ops),
        order::check(ops),
        pop::check(ops),
        divergence::check_members(dumps, &crate::history::final_members(ops)),
    ])
}

/// What happened to each attempted send value.
#[derive(Debug, Default)]
pub(crate) struct Sends<'a> {
    /// Value → its invocation.
    pub attempted: HashMap<&'a str, &'a Op>,
    /// Value → its `ok` completion.
    pub acked: HashMap<&'a str, &'a Op>,
    /// Values whose send ended `info`.
    pub unknown: HashMap<&'a str, &'a Op>,
    /// Values whose send ended `fail`.
    pub failed: HashMap<&'a str, &'a Op>,
}

impl<'a> Sends<'a> {
    pub(crate) fn of(ops: &'a [Op]) -> Self {
        let mut s = Sends::default();
        for op in ops.iter().filter(|o| o.f == OpF::Send) {
            let Some(v) = op.value.as_deref() else { continue };
            let table = match op.kind {
                OpType::Invoke => &mut s.attempted,
                OpType::Ok => &mut s.acked,
                OpType::Info => &mut s.unknown,
                OpType::Fail => &mut s.failed,
            };
            table.insert(v, op);
        }
        s
    }
}

/// `ok` ops with function `f`.
pub(crate) fn oks(ops: &[Op], f: OpF) -> impl Iterator<Item = &Op> {
    ops.iter().filter(move |o| o.f == f && o.kind == OpType::Ok)
}

/// Synthetic-history helpers for the checker tests.
#[cfg(test)]
pub(crate) mod testkit {
    use crate::history::Op;
    use crate::history::OpF;
    use crate::history::OpType;
    use crate::history::ReadMsg;

    /// Stamps indexes and times in order.
    pub fn h(ops: Vec<Op>) -> Vec<Op> {
        ops.into_iter()
            .enumerate()
            .map(|(i, mut o)| {
                o.index = i as u64;
                o.time = i as u64 * 1_000;
                o
            })
            .collect()
    }

    /// invoke + ok of a send landing at `queue`/`offset`.
    pub fn sent(p: &str, v: &str, q: &str, off: i64) -> Vec<Op> {
        vec![
            Op::new(OpType::Invoke, OpF::Send, p).value(v),
            Op::new(OpType::Ok, OpF::Send, p).value(v).queue(q).offset(off),
        ]
    }

    /// invoke + ok of a transactional send: the real queue, no offset.
    pub fn tx_committed(p: &str, v: &str, q: &str) -> Vec<Op> {
        vec![Op::new(OpType::Invoke, OpF::Send, p).value(v), Op::new(OpType::Ok, OpF::Send, p).value(v).queue(q)]
    }

    /// invoke + completion `kind` of a send without a result.
    pub fn send_ended(p: &str, v: &str, kind: OpType) -> Vec<Op> {
        vec![Op::new(OpType::Invoke, OpF::Send, p).value(v), Op::new(kind, OpF::Send, p).value(v)]
    }

    /// An ok read or final read of `msgs` from `q`.
    pub fn read(f: OpF, p: &str, q: &str, msgs: &[(i64, &str)]) -> Vec<Op> {
        let msgs = msgs.iter().map(|(o, v)| ReadMsg { offset: *o, value: (*v).to_owned(), copy: None }).collect();
        vec![Op::new(OpType::Invoke, f, p).queue(q), Op::new(OpType::Ok, f, p).queue(q).msgs(msgs)]
    }

    /// The final drain of `q`.
    pub fn drain(q: &str, msgs: &[(i64, &str)]) -> Vec<Op> {
        read(OpF::FinalRead, "final", q, msgs)
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;

    #[test]
    fn a_clean_history_passes_every_history_checker_and_the_summary_says_so() {
        let ops =
            h([sent("p0", "p0-0", "a:0", 0), sent("p0", "p0-1", "a:0", 1), drain("a:0", &[(0, "p0-0"), (1, "p0-1")])]
                .concat());
        let dumps = vec![
            ReplicaDump::new("broker-a", "n1", 1, 2, [(1, "x"), (2, "y")]),
            ReplicaDump::new("broker-a", "n2", 1, 2, [(1, "x"), (2, "y")]),
        ];
        let report = check_all(&ops, &dumps);
        assert!(report.valid, "{}", report.summary());
        assert!(report.summary().starts_with("raftmq-jepsen: VALID"));
        let json = serde_json::to_string(&report).expect("a report serialises");
        let back: Report = serde_json::from_str(&json).expect("and reads back");
        assert_eq!(back, report);
    }

    #[test]
    fn one_failing_checker_makes_the_report_invalid() {
        let ops = h([sent("p0", "p0-0", "a:0", 0), drain("a:0", &[])].concat());
        let report = check_all(&ops, &[ReplicaDump::new("g", "n1", 1, 0, Vec::<(u64, &str)>::new())]);
        assert!(!report.valid);
        assert!(report.summary().contains("[FAIL] lost"));
    }
}
