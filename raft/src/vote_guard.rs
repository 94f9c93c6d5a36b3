//! [`VoteGuard`]: a replica that starts from an empty store takes no part in elections until it
//! holds what its group has, and follows no leader older than the group's newest term
//! (docs/reliability.md#broker-requirements, requirement 4: a wiped or amnesiac node never counts toward a quorum with an empty log; Kafka
//! KIP-966's "last replica standing"). An empty store is a new replica, or a wiped or replaced disk
//! under an old id. Such a replica forgot its log, so Raft's vote check ("the candidate's log is at
//! least as new as mine") compares against nothing; it forgot its vote, and it forgot its term.
//! Without the guard: a group of three commits an entry on the leader and replica X only; X's disk
//! is replaced and the leader dies; the third replica, which never had the entry, asks X for a vote,
//! gets it, leads, and the entry is gone. Or a deposed leader cut off since an older term finds X
//! and commits through it over entries the newer leader committed. With the guard the group waits
//! (unavailable, not wrong), as Raft must when two of three copies are gone.
//!
//! ```text
//! empty store ∧ peers ──▶ Probing: refuse votes, pre-votes, campaigns, leadership transfers and
//!                         every leader's entries; ask the members (Probe: term, last log id,
//!                         committed log id, membership)
//!   answers from ⌈n/2⌉ of the other members of every voter set of the newest membership heard:
//!     one of them holds an entry past the first ──▶ CatchingUp { target = newest entry held, floor }
//!     all empty ──▶ Open { floor } (a new group's first boot: the first member initialises it)
//! CatchingUp ──our fsynced log reaches target──▶ Open
//! CatchingUp: entries only from a leader in a term ≥ floor that answered a probe as leader (so it
//!             let our log go back once); a vote only in a term > floor for a candidate whose last
//!             log id is ≥ target and ≥ that commit index; no campaign (openraft's own election,
//!             which a single-voter membership in a partial log would start, is off until Open)
//! Open (after a decision): entries only from a term ≥ floor; votes only in a term > floor
//! a vote for another waits one election timeout after a CatchUp decision (an election under way
//! then may hold our forgotten vote; a leadership transfer or our own campaign does not wait, so a
//! leader removing itself can hand over at once)
//! a store that was not empty, or a group of one ──▶ Open with floor 0 from the start
//! ```
//!
//! Why a majority without us: a committed entry is on a majority, and a leader of term t was
//! elected by one; ⌈n/2⌉ of the others meet every majority of n in a replica besides us (we may
//! have been part of it and forgotten), so `target` (the newest entry they hold, which is at least
//! the entry that committed anything committed) and `floor` are at least what the group committed
//! and the newest term it had elected in. A candidate whose last log id is ≥ such an entry holds it
//! (Log Matching within a term, Leader Completeness for a later one). A replica catching up needs no vote of its own: the
//! leader that feeds it holds a term ≥ floor, so it was elected with everything committed before.
//! Only fsynced entries count towards catching up, and a `vote-guard` file in the store directory
//! keeps a replica guarded across restarts until it has caught up. A replica must start with
//! `raftPeers` naming more than itself (alone it would initialise a group of its own). It learns
//! the current members from the answers; when none of its configured peers is a member any more
//! (the group replaced them while this replica was down), the first leader or candidate it refuses
//! introduces itself (the Introduce RPC: its id and Raft address, sent by a replica that sees a
//! refusal carrying [`GUARDED_REFUSAL_MARKER`]), and the probes ask it too. The leader, asked by a probe, lets
//! that follower's log go back once (`allow_next_revert`), instead of asserting it never does.
//! The decisions are pure ([`decide`], [`VoteGuard`]'s methods); the probing loop is in `node`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use raftmq_common::limits::{RAFT_ADDR_MAX_BYTES, RAFT_INTRODUCED_PEERS_MAX_COUNT};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::type_config::{LogId, NodeId};

/// Every refusal of a guarded replica says this (the refusals below are built with it): a replica
/// whose RPC is refused so introduces itself (the Introduce RPC), since the refusing replica may
/// not know where it is.
pub const GUARDED_REFUSAL_MARKER: &str = "empty store";

/// What a peer says about itself when asked (the Probe RPC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReply {
    /// Its current term.
    pub term: u64,
    /// Its last log id.
    pub last_log_id: Option<LogId>,
    /// The last log id it knows committed.
    pub committed: Option<LogId>,
    /// The voter sets of its effective membership (two during a joint change; none before the
    /// group is initialised).
    pub voters: Vec<BTreeSet<NodeId>>,
    /// Raft addresses of the members it knows.
    pub nodes: BTreeMap<NodeId, String>,
    /// It leads and let the asker's log go back once (openraft's `allow_next_revert`).
    pub reverts_allowed: bool,
}

/// What to do after a round of probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Not enough peers answered: ask again.
    Wait,
    /// Every answer is empty: a new group; take part (and the first member initialises it).
    Open {
        /// The highest term a peer reported.
        floor: u64,
    },
    /// The group has entries: no part in elections until our log holds them; never initialise.
    CatchUp {
        /// The newest entry (or commit point) a peer reported.
        target: LogId,
        /// The highest term a peer reported.
        floor: u64,
    },
}

/// The decision from this round's `answers` (peer id, reply) for replica `me`, whose configured
/// members are `configured`: the voter sets are those of the answer with the newest log (the
/// configured members when none has a membership), and each set of n needs answers from ⌈n/2⌉ of
/// its members other than `me` (all of them when fewer).
pub fn decide(me: NodeId, answers: &[(NodeId, ProbeReply)], configured: &BTreeSet<NodeId>) -> Decision {
    let newest = answers.iter().filter(|(_, a)| !a.voters.is_empty()).max_by_key(|(_, a)| a.last_log_id);
    let sets = newest.map_or_else(|| vec![configured.clone()], |(_, a)| a.voters.clone());
    let heard: BTreeSet<NodeId> = answers.iter().map(|(id, _)| *id).filter(|id| *id != me).collect();
    let enough = sets.iter().all(|set| {
        let others = set.iter().filter(|id| **id != me).count();
        let needed = set.len().div_ceil(2).min(others);
        set.iter().filter(|id| heard.contains(id)).count() >= needed
    });
    if !enough {
        return Decision::Wait;
    }
    let floor = answers.iter().map(|(_, a)| a.term).max().unwrap_or(0);
    let target = answers.iter().flat_map(|(_, a)| [a.last_log_id, a.committed]).flatten().filter(|l| l.index > 0).max();
    match target {
        Some(target) => Decision::CatchUp { target, floor },
        None => Decision::Open { floor },
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Probing,
    CatchingUp { target: LogId, floor: u64, since: Instant },
    Open { floor: u64, since: Option<Instant> },
}

/// The guard of one replica; shared by its RPC service, its network client and its probing task.
#[derive(Debug)]
pub struct VoteGuard {
    id: NodeId,
    /// How long after a decision no vote goes out (openraft's longest election timeout).
    quiet: Duration,
    state: Mutex<State>,
    /// Leaders that answered a probe as leader, having let our log go back once.
    reverts_allowed_by: Mutex<BTreeSet<NodeId>>,
    /// Replicas that introduced themselves (id → Raft address), not yet handed to the probes.
    introduced: Mutex<BTreeMap<NodeId, String>>,
}

impl VoteGuard {
    /// A guard that never refuses (the store was not empty, or the group has one member).
    pub fn open(id: NodeId) -> Self {
        Self::new(id, Duration::ZERO, State::Open { floor: 0, since: None })
    }

    /// A guard that refuses every election and every leader until [`Self::decided`] is told what
    /// the peers said; votes wait `quiet` after that.
    pub fn probing(id: NodeId, quiet: Duration) -> Self {
        Self::new(id, quiet, State::Probing)
    }

    fn new(id: NodeId, quiet: Duration, state: State) -> Self {
        Self {
            id,
            quiet,
            state: Mutex::new(state),
            reverts_allowed_by: Mutex::new(BTreeSet::new()),
            introduced: Mutex::new(BTreeMap::new()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // State is a Copy value replaced whole: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies the probing task's decision at `now` ([`Decision::Wait`] changes nothing).
    pub fn decided(&self, decision: Decision, now: Instant) {
        let mut st = self.state();
        if *st != State::Probing {
            return;
        }
        match decision {
            Decision::Wait => {}
            Decision::Open { floor } => {
                tracing::info!(id = self.id, floor, "empty store in a new group: taking part in elections");
                // No quiet time: a forgotten vote of a group that holds nothing would have to come
                // from a wipe during its first election, and waiting would delay every first boot.
                *st = State::Open { floor, since: None };
            }
            Decision::CatchUp { target, floor } => {
                tracing::warn!(id = self.id, %target, floor,
                    "empty store in a group that has entries (a new replica, or a wiped disk): \
                     no vote until this replica's log holds them");
                *st = State::CatchingUp { target, floor, since: now };
            }
        }
    }

    /// Replica `from` says it is at `raft_addr` (the Introduce RPC): the probes ask it from the next
    /// round. Ignored once the guard is open (nothing is asked any more), from ourselves, and past
    /// [`RAFT_INTRODUCED_PEERS_MAX_COUNT`] waiting or with an address over
    /// [`RAFT_ADDR_MAX_BYTES`]. Returns whether it was taken.
    pub fn introduce(&self, from: NodeId, raft_addr: &str) -> bool {
        if from == self.id || raft_addr.is_empty() || raft_addr.len() > RAFT_ADDR_MAX_BYTES {
            return false;
        }
        if matches!(*self.state(), State::Open { .. }) {
            return false;
        }
        let mut introduced = self.introduced.lock().unwrap_or_else(PoisonError::into_inner);
        if introduced.len() >= RAFT_INTRODUCED_PEERS_MAX_COUNT && !introduced.contains_key(&from) {
            return false;
        }
        introduced.insert(from, raft_addr.to_owned());
        true
    }

    /// The replicas introduced since the last call (the probing task asks them from now on).
    pub fn take_introduced(&self) -> BTreeMap<NodeId, String> {
        std::mem::take(&mut *self.introduced.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A probe found `leader` leading: it lets our log go back once, so its entries may come.
    pub fn leader_answered(&self, leader: NodeId) {
        self.reverts_allowed_by.lock().unwrap_or_else(PoisonError::into_inner).insert(leader);
    }

    /// Ends catching up once our fsynced log (`local_last`) holds the target; returns whether the
    /// guard is open. The target covers the commit index of every leader whose entries we take
    /// (each answered a probe); what the group commits later without us is a later majority's,
    /// as for any lagging voter.
    pub fn catch_up(&self, local_last: Option<LogId>) -> bool {
        let mut st = self.state();
        if let State::CatchingUp { target, floor, since } = *st
            && local_last >= Some(target)
        {
            tracing::info!(id = self.id, %target, "holds the group's entries: taking part in elections again");
            *st = State::Open { floor, since: Some(since) };
        }
        matches!(*st, State::Open { .. })
    }

    /// Whether this replica may vote (or pre-vote) in `term` for a candidate whose last log id
    /// is `candidate_last` (`None` for a leadership transfer to us, which needs us caught up),
    /// given our own fsynced log and the commit index our leader last told us; the refusal says why.
    pub fn permits(
        &self,
        term: u64,
        candidate_last: Option<LogId>,
        local_last: Option<LogId>,
        told_committed: Option<LogId>,
        now: Instant,
    ) -> Result<(), String> {
        self.catch_up(local_last);
        let st = *self.state();
        match st {
            State::CatchingUp { target, floor, since } => {
                let needs = Some(target).max(told_committed);
                if candidate_last.is_some() && candidate_last >= needs {
                    self.after_floor_and_quiet(term, floor, Some((since, now)))
                } else {
                    Err(format!(
                        "node {}: {GUARDED_REFUSAL_MARKER} catching up to {target}: a vote only for a candidate holding it",
                        self.id
                    ))
                }
            }
            _ => self.check(st, term, Some(now)),
        }
    }

    /// Whether this replica may take entries (or a snapshot) from `leader` in `term`: none while
    /// probing (the group's newest term is not known yet), none from a term below it, and while
    /// catching up only from a leader that answered a probe.
    pub fn accepts_leader(&self, term: u64, leader: NodeId) -> Result<(), String> {
        match *self.state() {
            State::Probing => {
                Err(format!("node {}: {GUARDED_REFUSAL_MARKER}, asking its peers before it follows a leader", self.id))
            }
            State::CatchingUp { floor, .. } | State::Open { floor, .. } if term < floor => {
                Err(format!("node {}: a leader of term {term}, older than term {floor} the group has reached", self.id))
            }
            State::CatchingUp { .. } => {
                let allowed = self.reverts_allowed_by.lock().unwrap_or_else(PoisonError::into_inner);
                if allowed.contains(&leader) {
                    Ok(())
                } else {
                    Err(format!(
                        "node {}: {GUARDED_REFUSAL_MARKER}, waiting for leader {leader} to answer a probe",
                        self.id
                    ))
                }
            }
            State::Open { .. } => Ok(()),
        }
    }

    /// Whether this replica may campaign in `term` (no change of state). No quiet time: a
    /// campaign is a leadership transfer the group's leader asked for, or an election timeout.
    pub fn may_campaign(&self, term: u64) -> Result<(), String> {
        let st = *self.state();
        self.check(st, term, None)
    }

    /// Whether the group's leader may hand leadership to this replica: only once it caught up.
    pub fn accepts_transfer(&self, local_last: Option<LogId>) -> Result<(), String> {
        self.catch_up(local_last);
        match *self.state() {
            State::Open { .. } => Ok(()),
            _ => Err(format!("node {}: {GUARDED_REFUSAL_MARKER}, not caught up: no leadership transfer", self.id)),
        }
    }

    fn check(&self, st: State, term: u64, now: Option<Instant>) -> Result<(), String> {
        match st {
            State::Open { floor, since } => self.after_floor_and_quiet(term, floor, since.zip(now)),
            State::Probing => {
                Err(format!("node {}: {GUARDED_REFUSAL_MARKER}, asking its peers before it votes", self.id))
            }
            State::CatchingUp { target, .. } => {
                Err(format!("node {}: {GUARDED_REFUSAL_MARKER} catching up to {target}: no campaign", self.id))
            }
        }
    }

    /// `since_now`: the decision's time and now, when a quiet time applies (a vote for another).
    fn after_floor_and_quiet(
        &self,
        term: u64,
        floor: u64,
        since_now: Option<(Instant, Instant)>,
    ) -> Result<(), String> {
        if term <= floor {
            return Err(format!(
                "node {}: {GUARDED_REFUSAL_MARKER}: no election in term {term}, at or below term {floor} it may have voted \
                 in before",
                self.id
            ));
        }
        match since_now {
            Some((since, now)) if now < since + self.quiet => Err(format!(
                "node {}: {GUARDED_REFUSAL_MARKER}: no vote within {:?} of learning the group's state (an election then under \
                 way may hold its forgotten vote)",
                self.id, self.quiet
            )),
            _ => Ok(()),
        }
    }

    /// A line for status: `None` once it takes part in elections.
    pub fn describe(&self) -> Option<String> {
        match *self.state() {
            State::Open { .. } => None,
            State::Probing => Some("empty store: asking the peers before voting".to_owned()),
            State::CatchingUp { target, .. } => {
                Some(format!("empty store: catching up to the group's {target} before voting"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::type_config::log_id;

    fn reply(term: u64, last: Option<LogId>, committed: Option<LogId>, voters: &[u64]) -> ProbeReply {
        let set: BTreeSet<NodeId> = voters.iter().copied().collect();
        let nodes = set.iter().map(|id| (*id, format!("n{id}"))).collect();
        ProbeReply {
            term,
            last_log_id: last,
            committed,
            voters: if set.is_empty() { vec![] } else { vec![set] },
            nodes,
            reverts_allowed: false,
        }
    }

    fn members(ids: &[u64]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_majority_without_us_must_answer() {
        let three = members(&[1, 2, 3]);
        let held = reply(5, Some(log_id(5, 12)), Some(log_id(4, 9)), &[1, 2, 3]);
        // One peer of three is not a majority of the others: it may be the stale one.
        assert_eq!(decide(1, &[(2, held.clone())], &three), Decision::Wait);
        let stale = reply(4, Some(log_id(4, 10)), Some(log_id(4, 9)), &[1, 2, 3]);
        assert_eq!(
            decide(1, &[(2, held.clone()), (3, stale)], &three),
            Decision::CatchUp { target: log_id(5, 12), floor: 5 }
        );
        // Our own answer (a loopback) does not count.
        assert_eq!(decide(1, &[(1, held.clone()), (2, held.clone())], &three), Decision::Wait);
        // Five voters: three of the four others.
        let five = members(&[1, 2, 3, 4, 5]);
        let some: Vec<_> = [2, 3].iter().map(|id| (*id, reply(2, None, None, &[]))).collect();
        assert_eq!(decide(1, &some, &five), Decision::Wait);
        let more: Vec<_> = [2, 3, 5].iter().map(|id| (*id, reply(2, None, None, &[]))).collect();
        assert_eq!(decide(1, &more, &five), Decision::Open { floor: 2 });
    }

    #[test]
    fn all_empty_is_a_new_group_and_entry_0_is_empty() {
        let three = members(&[1, 2, 3]);
        let empty = reply(0, None, None, &[]);
        assert_eq!(decide(2, &[(1, empty.clone()), (3, empty.clone())], &three), Decision::Open { floor: 0 });
        // The first member already initialised (entry 0 only) and campaigns in term 1.
        let init = reply(1, Some(log_id(0, 0)), None, &[1, 2, 3]);
        assert_eq!(decide(2, &[(1, init), (3, empty)], &three), Decision::Open { floor: 1 });
        // A peer with entries but nothing known committed (restarted before it heard a commit).
        let held = reply(2, Some(log_id(2, 3)), None, &[1, 2, 3]);
        let other = reply(2, Some(log_id(2, 3)), None, &[1, 2, 3]);
        assert_eq!(decide(3, &[(1, held), (2, other)], &three), Decision::CatchUp { target: log_id(2, 3), floor: 2 });
    }

    #[test]
    fn the_newest_membership_heard_decides_who_must_answer() {
        // Configured with {1,2,3}; the group has replaced 1 and 2 by 4 and 5 since.
        let configured = members(&[1, 2, 3]);
        let now = |last: u64| reply(9, Some(log_id(9, last)), Some(log_id(9, last)), &[3, 4, 5]);
        assert_eq!(decide(3, &[(4, now(40))], &configured), Decision::Wait);
        assert_eq!(
            decide(3, &[(4, now(40)), (5, now(41))], &configured),
            Decision::CatchUp { target: log_id(9, 41), floor: 9 }
        );
        // During a joint change both voter sets need their majority.
        let joint = ProbeReply { voters: vec![members(&[1, 2, 3]), members(&[3, 4, 5])], ..now(50) };
        assert_eq!(decide(3, &[(4, joint.clone()), (5, now(49))], &configured), Decision::Wait);
        assert_eq!(
            decide(3, &[(1, now(48)), (2, now(48)), (4, joint), (5, now(49))], &configured),
            Decision::CatchUp { target: log_id(9, 50), floor: 9 }
        );
        // A replica joining two voters (not one of them): either meets every majority of two.
        let two = members(&[1, 2]);
        let empty = reply(0, None, None, &[]);
        assert_eq!(decide(3, &[], &two), Decision::Wait);
        assert_eq!(decide(3, &[(1, empty.clone())], &two), Decision::Open { floor: 0 });
        // Four voters with us (a 3 → 4 change): two of the three others meet every majority of four.
        let four = members(&[1, 2, 3, 4]);
        assert_eq!(decide(4, &[(1, empty.clone())], &four), Decision::Wait);
        assert_eq!(decide(4, &[(1, empty.clone()), (2, empty)], &four), Decision::Open { floor: 0 });
    }

    const QUIET: Duration = Duration::from_millis(600);

    #[test]
    fn probing_refuses_every_election_and_every_leader() {
        let t0 = Instant::now();
        let g = VoteGuard::probing(3, QUIET);
        assert!(g.permits(9, Some(log_id(9, 100)), Some(log_id(9, 100)), None, t0).is_err());
        assert!(g.may_campaign(9).is_err());
        assert!(g.accepts_leader(9, 1).is_err());
        assert!(g.describe().is_some());
        g.decided(Decision::Wait, t0);
        assert!(g.permits(9, Some(log_id(9, 100)), None, None, t0).is_err());
        g.decided(Decision::Open { floor: 2 }, t0);
        assert_eq!(g.permits(3, None, None, None, t0), Ok(()), "a new group: no quiet time");
        let later = t0 + QUIET;
        assert_eq!(g.permits(3, None, None, None, later), Ok(()));
        assert!(g.permits(2, None, None, None, later).is_err(), "a term it may have voted in before");
        assert_eq!(g.may_campaign(3), Ok(()));
        assert_eq!(g.accepts_leader(2, 1), Ok(()));
        assert!(g.accepts_leader(1, 1).is_err(), "a leader older than the group's term");
        assert!(g.describe().is_none());
        // A late decision does not close an open guard.
        g.decided(Decision::CatchUp { target: log_id(2, 5), floor: 2 }, later);
        assert_eq!(g.permits(3, None, None, None, later), Ok(()));
    }

    #[test]
    fn catching_up_follows_only_a_probed_leader_and_votes_only_for_a_candidate_holding_the_target() {
        let t0 = Instant::now();
        let later = t0 + QUIET;
        let g = VoteGuard::probing(3, QUIET);
        g.decided(Decision::CatchUp { target: log_id(4, 50), floor: 4 }, t0);
        assert!(g.accepts_leader(3, 1).is_err(), "a deposed leader of an older term");
        assert!(g.accepts_leader(4, 1).is_err(), "a leader that has not let our log go back");
        g.leader_answered(1);
        assert_eq!(g.accepts_leader(4, 1), Ok(()));
        assert!(g.accepts_leader(4, 2).is_err());
        // Votes: only for a candidate holding the target and what the leader told us committed.
        assert!(g.accepts_transfer(Some(log_id(4, 49))).is_err(), "a transfer to us before catching up");
        assert!(g.permits(5, Some(log_id(4, 49)), None, None, later).is_err(), "one entry short");
        assert!(g.permits(5, Some(log_id(4, 60)), None, Some(log_id(4, 70)), later).is_err());
        assert!(g.permits(4, Some(log_id(4, 70)), None, None, later).is_err(), "at the floor");
        assert!(g.permits(5, Some(log_id(4, 70)), None, None, t0).is_err(), "too soon");
        assert_eq!(g.permits(5, Some(log_id(4, 70)), None, Some(log_id(4, 70)), later), Ok(()));
        assert!(g.may_campaign(9).is_err(), "no campaign while catching up");
        // Caught up (the fsynced log holds the target): open for good.
        assert!(!g.catch_up(Some(log_id(4, 49))));
        assert!(g.catch_up(Some(log_id(4, 50))));
        assert!(g.describe().is_none());
        assert_eq!(g.may_campaign(5), Ok(()));
        assert_eq!(g.accepts_leader(4, 2), Ok(()));
        assert!(g.permits(4, None, None, None, later).is_err(), "the floor stays");
    }

    #[test]
    fn introductions_are_kept_for_the_probes_while_guarded_and_bounded() {
        let g = VoteGuard::probing(1, QUIET);
        let refusal = g.accepts_leader(3, 7).expect_err("probing refuses every leader");
        assert!(refusal.contains(GUARDED_REFUSAL_MARKER), "{refusal}");
        assert!(g.introduce(7, "10.0.0.7:20911"));
        assert!(g.introduce(7, "10.0.0.7:20912"), "a newer address for the same replica");
        assert!(!g.introduce(1, "10.0.0.1:20911"), "not ourselves");
        assert!(!g.introduce(8, ""), "no address");
        assert!(!g.introduce(8, &"x".repeat(RAFT_ADDR_MAX_BYTES + 1)), "an address past the limit");
        assert_eq!(g.take_introduced(), BTreeMap::from([(7, "10.0.0.7:20912".to_owned())]));
        assert!(g.take_introduced().is_empty(), "handed over once");
        for id in 0..RAFT_INTRODUCED_PEERS_MAX_COUNT as u64 {
            assert!(g.introduce(100 + id, "10.0.0.9:1"));
        }
        assert!(!g.introduce(99, "10.0.0.9:1"), "past the bound");
        assert!(g.introduce(100, "10.0.0.9:2"), "one already waiting may still update");
        let open = VoteGuard::open(1);
        assert!(!open.introduce(7, "10.0.0.7:20911"), "an open guard asks nobody");
        assert!(open.take_introduced().is_empty());
    }

    #[test]
    fn a_guard_that_was_never_shut_has_no_floor_and_no_quiet_time() {
        let t0 = Instant::now();
        let g = VoteGuard::open(1);
        assert_eq!(g.permits(1, None, None, None, t0), Ok(()));
        assert_eq!(g.may_campaign(1), Ok(()));
        assert_eq!(g.accepts_leader(0, 1), Ok(()));
    }
}
