//! `pop`: POP consumption ([`crate::pop`]) delivers every acknowledged send and never delivers an
//! acked message again. From the `pop`, `ack`, `send` and `pop-settle` ops:
//!
//! - `unread`: an acknowledged send no pop ever handed out (the settle popped and acked
//!   everything left, so each must have come out at least once).
//! - `read_after_ack`: a pop invoked after an ack of one of its values completed `ok`, that
//!   handed that message out again: an acked message came back. Messages are told apart by their
//!   stored copy (`copy`: a value stored twice, as a delayed message delivered twice across a
//!   failover, which the `duplicated` checker judges, is two messages), else by value.
//! - `unexpected`: a value popped that no send attempted.
//! - `redelivered` (allowed, counted): values handed out more than once (not acked in time, a
//!   stale ack, a pop whose answer was lost).
//!
//! Invalid without a finished settle when POP consumers ran: nothing could be said about
//! `unread`. A history without pop ops (no POP consumer ran) is valid with `popped` = 0.

use std::collections::HashMap;

use super::Sends;
use super::check_result::CheckResult;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// Runs the check.
pub fn check(ops: &[Op]) -> CheckResult {
    let mut r = CheckResult::new("pop");
    let pops: Vec<&Op> = ops.iter().filter(|o| o.f == OpF::Pop).collect();
    if pops.is_empty() {
        r.count("popped", 0);
        return r;
    }
    let sends = Sends::of(ops);
    // When each message (stored copy, else value) was first acked (the ok's time).
    let mut acked_at: HashMap<&str, u64> = HashMap::new();
    let (mut acks, mut stale) = (0usize, 0usize);
    for op in ops.iter().filter(|o| o.f == OpF::Ack) {
        let Some(v) = op.value.as_deref() else { continue };
        let message = op.msgs.first().and_then(|m| m.copy.as_deref()).unwrap_or(v);
        match op.kind {
            OpType::Ok => {
                acks += 1;
                acked_at.entry(message).or_insert(op.time);
            }
            OpType::Fail => stale += 1,
            _ => {}
        }
    }
    // Each pop ok with the time its invocation started.
    let mut invoked: HashMap<&str, u64> = HashMap::new();
    let mut deliveries: HashMap<&str, usize> = HashMap::new();
    let (mut popped, mut read_after_ack, mut unexpected) = (0usize, 0usize, 0usize);
    for op in &pops {
        match op.kind {
            OpType::Invoke => {
                invoked.insert(op.process.as_str(), op.time);
            }
            OpType::Ok => {
                let started = invoked.get(op.process.as_str()).copied().unwrap_or(op.time);
                for m in &op.msgs {
                    popped += 1;
                    *deliveries.entry(m.value.as_str()).or_default() += 1;
                    if !sends.attempted.contains_key(m.value.as_str()) {
                        unexpected += 1;
                        r.sample(format!("{} popped {:?}, which no send attempted", op.process, m.value));
                    }
                    let message = m.copy.as_deref().unwrap_or(m.value.as_str());
                    if let Some(at) = acked_at.get(message)
                        && *at < started
                    {
                        read_after_ack += 1;
                        r.sample(format!(
                            "{} popped {:?} (offset {}, copy {message}) at index {}, after its ack completed at time {at}",
                            op.process, m.value, m.offset, op.index
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    let settled = ops.iter().any(|o| o.f == OpF::PopSettle && o.kind == OpType::Ok);
    let mut unread = 0usize;
    for (v, op) in &sends.acked {
        if !deliveries.contains_key(v) {
            unread += 1;
            if settled {
                r.sample(format!("acknowledged send {v:?} ({:?}) was never popped", op.queue));
            }
        }
    }
    let redelivered = deliveries.values().filter(|n| **n > 1).count();
    r.count("popped", popped);
    r.count("values", deliveries.len());
    r.count("acks", acks);
    r.count("stale_acks", stale);
    r.count("redelivered", redelivered);
    r.count("unread", unread);
    r.count("read_after_ack", read_after_ack);
    r.count("unexpected", unexpected);
    if !settled {
        r.sample("the POP settle did not finish: unread cannot be judged".to_owned());
    }
    r.valid = settled && unread == 0 && read_after_ack == 0 && unexpected == 0;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::*;
    use crate::history::ReadMsg;

    fn popped(p: &str, msgs: &[(i64, &str)]) -> Vec<Op> {
        let msgs = msgs.iter().map(|(o, v)| ReadMsg { offset: *o, value: (*v).to_owned(), copy: None }).collect();
        vec![Op::new(OpType::Invoke, OpF::Pop, p), Op::new(OpType::Ok, OpF::Pop, p).msgs(msgs)]
    }

    fn popped_copy(p: &str, v: &str, copy: &str) -> Vec<Op> {
        let msgs = vec![ReadMsg { offset: 0, value: v.to_owned(), copy: Some(copy.to_owned()) }];
        vec![Op::new(OpType::Invoke, OpF::Pop, p), Op::new(OpType::Ok, OpF::Pop, p).msgs(msgs)]
    }

    fn acked(p: &str, v: &str, kind: OpType) -> Vec<Op> {
        vec![Op::new(OpType::Invoke, OpF::Ack, p).value(v), Op::new(kind, OpF::Ack, p).value(v)]
    }

    fn acked_copy(p: &str, v: &str, copy: &str) -> Vec<Op> {
        let msgs = vec![ReadMsg { offset: 0, value: v.to_owned(), copy: Some(copy.to_owned()) }];
        vec![Op::new(OpType::Invoke, OpF::Ack, p).value(v), Op::new(OpType::Ok, OpF::Ack, p).value(v).msgs(msgs)]
    }

    fn settled() -> Vec<Op> {
        vec![Op::new(OpType::Invoke, OpF::PopSettle, "qsettle"), Op::new(OpType::Ok, OpF::PopSettle, "qsettle")]
    }

    #[test]
    fn a_clean_pop_history_with_a_redelivery_is_valid() {
        let ops = h([
            sent("p0", "p0-0", "a:0", 0),
            sent("p0", "p0-1", "a:0", 1),
            popped("q0", &[(0, "p0-0"), (1, "p0-1")]),
            acked("q0", "p0-0", OpType::Ok),
            // p0-1 was not acked in time: it comes back, then is acked.
            popped("q0", &[(0, "p0-1")]),
            acked("q0", "p0-1", OpType::Ok),
            settled(),
        ]
        .concat());
        let r = check(&ops);
        assert!(r.valid, "{r:?}");
        assert_eq!(r.counts["redelivered"], 1);
    }

    #[test]
    fn an_acked_message_popped_again_and_an_unread_send_are_caught() {
        let ops = h([
            sent("p0", "p0-0", "a:0", 0),
            sent("p0", "p0-1", "a:0", 1),
            popped("q0", &[(0, "p0-0")]),
            acked("q0", "p0-0", OpType::Ok),
            popped("q1", &[(0, "p0-0")]),
            settled(),
        ]
        .concat());
        let r = check(&ops);
        assert!(!r.valid);
        assert_eq!(r.counts["read_after_ack"], 1);
        assert_eq!(r.counts["unread"], 1);
    }

    #[test]
    fn a_value_stored_twice_is_two_messages_each_acked_once() {
        let base = [
            sent("d0", "d0-0", "a:0", 0),
            popped_copy("q0", "d0-0", "A"),
            acked_copy("q0", "d0-0", "A"),
            // The second stored copy (a delayed message delivered twice), not acked in time: back.
            popped_copy("q0", "d0-0", "B"),
            popped_copy("q1", "d0-0", "B"),
            acked_copy("q1", "d0-0", "B"),
            settled(),
        ]
        .concat();
        let r = check(&h(base.clone()));
        assert!(r.valid, "{r:?}");
        let mut more = base;
        more.extend(popped_copy("q1", "d0-0", "A"));
        let r = check(&h(more));
        assert_eq!(r.counts["read_after_ack"], 1);
    }

    #[test]
    fn without_a_finished_settle_the_run_cannot_be_judged() {
        let ops = h([sent("p0", "p0-0", "a:0", 0), popped("q0", &[(0, "p0-0")])].concat());
        assert!(!check(&ops).valid);
        assert!(check(&h(sent("p0", "p0-0", "a:0", 0))).valid, "no POP consumer ran");
    }
}
