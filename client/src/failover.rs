//! Leader failover on the client, as pure state: which addresses of a broker group are suspected
//! dead, which replica of the group to ask next, and when a group's route may be asked of the
//! NameServers again. [`crate::route::TopicRouteManager`] holds one of each and does the I/O.
//!
//! Why: a group's leader changes (crash, graceful stop, transfer) long before the 30 s route poll
//! (`pollNameServerInterval`) tells the client. A refused or dropped connection, or
//! SERVICE_NOT_AVAILABLE without a usable `leader=` hint, makes the client ask at once: the
//! NameServers (one query per group at most every [`GROUP_REFRESH_INTERVAL_MIN`], shared by every
//! topic and every caller) and the group's other replicas (a follower refuses a leader-only request
//! naming the leader; the new leader accepts it).
//!
//! Invariants:
//! - A suspect address is skipped for writes for [`SUSPECT_HOLD`] at most, then tried again, so a
//!   transient failure never strands a group whose NameServer view does not change.
//! - [`next_replica`] never returns the group's write address or a suspect address.
//! - [`RefreshSlot::decide`] lets at most one refresh of a group start per interval, and a caller
//!   whose failure is older than the last finished refresh waits for nothing.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::time::Duration;

use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::leader_hint::parse_leader_hint;
use tokio::time::Instant;

use crate::error::ClientError;
use crate::error::ErrorKind;

/// The least time between two NameServer queries for the same group's route after failures.
pub const GROUP_REFRESH_INTERVAL_MIN: Duration = Duration::from_millis(150);
/// How long a write address that refused or dropped a connection is skipped.
pub const SUSPECT_HOLD: Duration = Duration::from_secs(3);
/// Failover steps (retries within one group after a dead address, a hint or a leaderless route)
/// one send may take on top of its `retryTimesWhenSendFailed` attempts; the send timeout bounds
/// them too.
pub const FAILOVER_STEPS_MAX: u32 = 32;

/// Addresses that refused or dropped a connection recently, each until its hold ends.
#[derive(Debug, Default)]
pub struct Suspects {
    until: HashMap<String, Instant>,
}

impl Suspects {
    /// Suspects `addr` from `now` for [`SUSPECT_HOLD`].
    pub fn mark(&mut self, addr: &str, now: Instant) {
        self.until.retain(|_, until| *until > now);
        self.until.insert(addr.to_owned(), now + SUSPECT_HOLD);
    }

    /// Whether `addr` is suspect at `now`.
    pub fn is_suspect(&self, addr: &str, now: Instant) -> bool {
        self.until.get(addr).is_some_and(|until| *until > now)
    }

    /// Trusts `addr` again (it answered).
    pub fn clear(&mut self, addr: &str) {
        self.until.remove(addr);
    }
}

/// The replica of a group to send a leader-only request to when its write address is suspect: the
/// group's other addresses (brokerId ≠ 0), suspects left out, in brokerId order, the `cursor`-th
/// (wrapping), so successive calls walk every replica. `None` when there is none to ask.
pub fn next_replica(addrs: &BTreeMap<i64, String>, is_suspect: impl Fn(&str) -> bool, cursor: usize) -> Option<String> {
    let master = addrs.get(&MASTER_ID);
    let mut candidates: Vec<&String> = addrs
        .iter()
        .filter(|(id, addr)| **id != MASTER_ID && Some(*addr) != master && !is_suspect(addr))
        .map(|(_, addr)| addr)
        .collect();
    candidates.dedup();
    if candidates.is_empty() {
        return None;
    }
    Some(candidates[cursor % candidates.len()].clone())
}

/// What a failed call to a group's address says about the group's leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallFailure {
    /// SERVICE_NOT_AVAILABLE naming another address as leader.
    LeaderHint(String),
    /// SERVICE_NOT_AVAILABLE without a hint to another address (no leader yet, not ready).
    Unavailable,
    /// The connection was refused or dropped: the address is likely dead.
    Unreachable,
    /// No answer in time: the address may be dead or only slow.
    Unanswered,
    /// Nothing about the leader (a refusal about the request itself, a client-side failure).
    Other,
}

/// Classifies a failed call to `addr`.
pub fn classify(e: &ClientError, addr: &str) -> CallFailure {
    match &e.kind {
        ErrorKind::Broker { code: ResponseCode::ServiceNotAvailable, remark } => {
            match remark.as_deref().and_then(parse_leader_hint) {
                Some(leader) if leader != addr => CallFailure::LeaderHint(leader.to_owned()),
                _ => CallFailure::Unavailable,
            }
        }
        ErrorKind::Connection | ErrorKind::OutcomeUnknown => CallFailure::Unreachable,
        ErrorKind::Timeout => CallFailure::Unanswered,
        _ => CallFailure::Other,
    }
}

/// Whether a failed call's error is one [`classify`] ties to the group's leader, whatever the
/// address (a consumer's pull loop then pulls again at once: the failed call refreshed the route).
pub fn is_leader_change(e: &ClientError) -> bool {
    let addr = e.context.iter().find(|(k, _)| *k == "addr").map_or("", |(_, v)| v.as_str());
    classify(e, addr) != CallFailure::Other
}

/// What a caller that saw its group fail at some instant should do about the group's route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshDecision {
    /// A refresh finished after the failure: its answer is as fresh as a new one.
    AlreadyFresh,
    /// Too soon after the last refresh began: wait until then, then refresh.
    WaitUntil(Instant),
    /// Refresh now.
    Now,
}

/// When the group's route was last asked for and last answered (or failed).
#[derive(Debug, Default, Clone, Copy)]
pub struct RefreshSlot {
    started: Option<Instant>,
    done: Option<Instant>,
}

impl RefreshSlot {
    /// What a caller whose group failed at `failed_at` does at `now`.
    pub fn decide(&self, failed_at: Instant, now: Instant) -> RefreshDecision {
        if self.done.is_some_and(|done| done >= failed_at) {
            return RefreshDecision::AlreadyFresh;
        }
        match self.started.map(|s| s + GROUP_REFRESH_INTERVAL_MIN) {
            Some(next) if next > now => RefreshDecision::WaitUntil(next),
            _ => RefreshDecision::Now,
        }
    }

    /// A refresh begins at `now`.
    pub fn start(&mut self, now: Instant) {
        self.started = Some(now);
    }

    /// The refresh that began last ended at `now`.
    pub fn finish(&mut self, now: Instant) {
        self.done = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(pairs: &[(i64, &str)]) -> BTreeMap<i64, String> {
        pairs.iter().map(|(id, a)| (*id, (*a).to_owned())).collect()
    }

    #[test]
    fn suspects_expire_and_clear() {
        let t0 = Instant::now();
        let mut s = Suspects::default();
        s.mark("a:1", t0);
        assert!(s.is_suspect("a:1", t0 + Duration::from_millis(10)));
        assert!(!s.is_suspect("b:1", t0));
        assert!(!s.is_suspect("a:1", t0 + SUSPECT_HOLD));
        s.mark("a:1", t0);
        s.clear("a:1");
        assert!(!s.is_suspect("a:1", t0));
    }

    #[test]
    fn next_replica_walks_the_live_followers() {
        let group = addrs(&[(0, "old:1"), (2, "f2:1"), (3, "f3:1")]);
        let none = |_: &str| false;
        assert_eq!(next_replica(&group, none, 0).as_deref(), Some("f2:1"));
        assert_eq!(next_replica(&group, none, 1).as_deref(), Some("f3:1"));
        assert_eq!(next_replica(&group, none, 2).as_deref(), Some("f2:1"));
        // A suspect follower is skipped; with none left, nobody is asked.
        assert_eq!(next_replica(&group, |a| a == "f2:1", 0).as_deref(), Some("f3:1"));
        assert_eq!(next_replica(&group, |a| a != "old:1", 0), None);
        // A hint may have made a follower the write address: it is not "another" replica.
        let hinted = addrs(&[(0, "f2:1"), (2, "f2:1"), (3, "f3:1")]);
        assert_eq!(next_replica(&hinted, none, 0).as_deref(), Some("f3:1"));
        assert_eq!(next_replica(&addrs(&[(0, "m:1")]), none, 0), None);
    }

    #[test]
    fn failed_calls_are_classified_for_failover() {
        let sna = |remark: &str| ClientError::broker("pull", ResponseCode::ServiceNotAvailable, Some(remark.into()));
        assert_eq!(classify(&sna("not leader; leader=b:1"), "a:1"), CallFailure::LeaderHint("b:1".into()));
        assert_eq!(classify(&sna("not leader; leader=a:1"), "a:1"), CallFailure::Unavailable);
        assert_eq!(classify(&sna("leader unknown"), "a:1"), CallFailure::Unavailable);
        let kind = |k: ErrorKind| classify(&ClientError::new(k, "pull", "x"), "a:1");
        assert_eq!(kind(ErrorKind::Connection), CallFailure::Unreachable);
        assert_eq!(kind(ErrorKind::OutcomeUnknown), CallFailure::Unreachable);
        assert_eq!(kind(ErrorKind::Timeout), CallFailure::Unanswered);
        assert_eq!(kind(ErrorKind::InvalidArgument), CallFailure::Other);
        let busy = ClientError::broker("pull", ResponseCode::SystemBusy, None);
        assert_eq!(classify(&busy, "a:1"), CallFailure::Other);
    }

    #[test]
    fn refresh_slot_limits_the_rate_and_shares_answers() {
        let t0 = Instant::now();
        let mut slot = RefreshSlot::default();
        assert_eq!(slot.decide(t0, t0), RefreshDecision::Now);
        slot.start(t0);
        // A second failure right after: wait for the interval.
        let soon = t0 + Duration::from_millis(20);
        assert_eq!(slot.decide(soon, soon), RefreshDecision::WaitUntil(t0 + GROUP_REFRESH_INTERVAL_MIN));
        slot.finish(t0 + Duration::from_millis(5));
        // A failure seen before that answer is answered by it.
        assert_eq!(slot.decide(t0 + Duration::from_millis(1), soon), RefreshDecision::AlreadyFresh);
        // A later failure waits for the interval, then refreshes.
        assert_eq!(slot.decide(soon, soon), RefreshDecision::WaitUntil(t0 + GROUP_REFRESH_INTERVAL_MIN));
        let later = t0 + GROUP_REFRESH_INTERVAL_MIN;
        assert_eq!(slot.decide(later, later), RefreshDecision::Now);
    }
}
