//! The replicated queue-lock table of orderly consumers (RocketMQ's `RebalanceLockManager`), pure:
//! every replica applies the same QUEUE_LOCKS entries ([`crate::state::entry`], tag 13) in log
//! order and so holds the same table, which is part of the snapshot manifest and the checkpoint.
//! A new leader therefore answers LOCK_BATCH_MQ from the locks its predecessor granted.
//!
//! Time is the entry's: each entry carries the leader's lock-clock stamp (the leader's
//! `services/rebalance_lock.rs` chooses it, docs/broker.md#queue-locks), and the table's clock is the largest stamp
//! applied so far, so expiry is a pure function of the log and never goes backwards.
//!
//! Invariants:
//! - A queue of a group has at most one owner; the owner's lock is renewed by each grant to it.
//! - A lock not renewed for more than [`BROKER_REBALANCE_LOCK_MAX_LIVE_MS`] of table time is
//!   expired: any client may take it; purges drop it.
//! - At most [`BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT`] locks: when full, expired locks are purged
//!   first; a new lock that still finds no room is refused (renewals always succeed).
//! - Only the owner unlocks (Java's `unlockBatch`); an unlock of another's lock changes nothing.

use std::collections::BTreeMap;

use raftmq_common::limits::BROKER_REBALANCE_LOCK_MAX_LIVE_MS;
use raftmq_common::limits::BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT;

/// A queue as the table keys it: (topic, brokerName, queueId).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockedQueue {
    /// Topic.
    pub topic: String,
    /// The broker (group) name the client named.
    pub broker_name: String,
    /// Queue id.
    pub queue_id: i32,
}

/// One lock: who holds it and when it was last granted or renewed (table time, ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    /// The owning client (`clientId`).
    pub client_id: String,
    /// Table time of the last grant or renewal.
    pub last_update_ms: u64,
}

/// One lock as the snapshot lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockRecord {
    /// Consumer group.
    pub group: String,
    /// The queue.
    pub queue: LockedQueue,
    /// Owner and last renewal.
    pub entry: LockEntry,
}

/// The lock table: group → queue → lock, plus the table clock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RebalanceLockTable {
    groups: BTreeMap<String, BTreeMap<LockedQueue, LockEntry>>,
    count: usize,
    clock_ms: u64,
}

fn expired(entry: &LockEntry, now_ms: u64) -> bool {
    now_ms.saturating_sub(entry.last_update_ms) > BROKER_REBALANCE_LOCK_MAX_LIVE_MS
}

impl RebalanceLockTable {
    /// No lock, clock 0.
    pub fn new() -> Self {
        RebalanceLockTable::default()
    }

    /// The largest stamp applied (0 before the first lock entry).
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms
    }

    /// Locks held (expired ones not yet purged included).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the table holds no lock.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Advances the table clock to `stamp_ms` (never back) and returns it.
    fn tick(&mut self, stamp_ms: u64) -> u64 {
        self.clock_ms = self.clock_ms.max(stamp_ms);
        self.clock_ms
    }

    /// LOCK_BATCH_MQ at `stamp_ms`: for each of `queues`, whether `client_id` holds it now (it was
    /// free, expired or already its own; a renewal resets its age). Expired locks of the group are
    /// purged first, and of every group when the table is full.
    pub fn lock(&mut self, group: &str, queues: &[LockedQueue], client_id: &str, stamp_ms: u64) -> Vec<bool> {
        let now = self.tick(stamp_ms);
        self.purge_group(group, now);
        let mut granted = Vec::with_capacity(queues.len());
        for queue in queues {
            let held = self.groups.get(group).and_then(|g| g.get(queue));
            let ok = match held {
                Some(e) => e.client_id == client_id || expired(e, now),
                None => {
                    if self.count >= BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT {
                        self.purge_expired(now);
                    }
                    self.count < BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT
                }
            };
            if ok {
                let entry = LockEntry { client_id: client_id.to_owned(), last_update_ms: now };
                if self.groups.entry(group.to_owned()).or_default().insert(queue.clone(), entry).is_none() {
                    self.count += 1;
                }
            }
            granted.push(ok);
        }
        granted
    }

    /// UNLOCK_BATCH_MQ at `stamp_ms`: drops the locks of `queues` that `client_id` holds.
    pub fn unlock(&mut self, group: &str, queues: &[LockedQueue], client_id: &str, stamp_ms: u64) {
        let now = self.tick(stamp_ms);
        if let Some(table) = self.groups.get_mut(group) {
            for queue in queues {
                if table.get(queue).is_some_and(|e| e.client_id == client_id) {
                    table.remove(queue);
                    self.count -= 1;
                }
            }
            if table.is_empty() {
                self.groups.remove(group);
            }
        }
        self.purge_group(group, now);
    }

    /// The client holding `queue` of `group` at table time `now_ms`, if any (an expired lock has none).
    pub fn owner(&self, group: &str, queue: &LockedQueue, now_ms: u64) -> Option<&str> {
        let e = self.groups.get(group)?.get(queue)?;
        (!expired(e, now_ms)).then_some(e.client_id.as_str())
    }

    fn purge_group(&mut self, group: &str, now_ms: u64) {
        let Some(table) = self.groups.get_mut(group) else { return };
        let before = table.len();
        table.retain(|_, e| !expired(e, now_ms));
        self.count -= before - table.len();
        if table.is_empty() {
            self.groups.remove(group);
        }
    }

    /// Drops every lock expired at `now_ms`; returns how many went.
    pub fn purge_expired(&mut self, now_ms: u64) -> usize {
        let before = self.count;
        let groups: Vec<String> = self.groups.keys().cloned().collect();
        for group in groups {
            self.purge_group(&group, now_ms);
        }
        before - self.count
    }

    /// Every lock, sorted by (group, queue): what a snapshot holds.
    pub fn records(&self) -> Vec<LockRecord> {
        self.groups
            .iter()
            .flat_map(|(group, table)| {
                table.iter().map(move |(queue, entry)| LockRecord {
                    group: group.clone(),
                    queue: queue.clone(),
                    entry: entry.clone(),
                })
            })
            .collect()
    }

    /// The table a snapshot lists (a record repeated keeps the last one; past the bound, the rest
    /// is dropped: a manifest is checked against the bound when read).
    pub fn from_records(clock_ms: u64, records: Vec<LockRecord>) -> Self {
        let mut table = RebalanceLockTable { clock_ms, ..RebalanceLockTable::default() };
        for r in records {
            if table.count >= BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT {
                break;
            }
            if table.groups.entry(r.group).or_default().insert(r.queue, r.entry).is_none() {
                table.count += 1;
            }
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(i: i32) -> LockedQueue {
        LockedQueue { topic: "T".into(), broker_name: "b".into(), queue_id: i }
    }

    const LIVE: u64 = BROKER_REBALANCE_LOCK_MAX_LIVE_MS;

    #[test]
    fn grant_belongs_to_one_client_and_renewal_resets_the_age() {
        let mut t = RebalanceLockTable::new();
        assert_eq!(t.lock("g", &[q(0), q(1)], "c1", 1_000), vec![true, true]);
        assert_eq!(t.lock("g", &[q(1), q(2)], "c2", 2_000), vec![false, true]);
        assert_eq!(t.lock("g", &[q(1)], "c1", 3_000), vec![true], "renewal by the owner");
        assert_eq!(t.lock("other", &[q(1)], "c2", 3_000), vec![true], "groups are apart");
        // c1 renewed q1 at 3 000: at 1 000 + LIVE + 1 its q0 expired, q1 did not.
        let at = 1_000 + LIVE + 1;
        assert_eq!(t.lock("g", &[q(0), q(1)], "c2", at), vec![true, false]);
        assert_eq!(t.owner("g", &q(1), at), Some("c1"));
        assert_eq!(t.owner("g", &q(1), 3_000 + LIVE + 1), None, "expired");
        assert_eq!(t.clock_ms(), at);
    }

    #[test]
    fn expiry_is_exactly_the_max_live_time_of_table_time() {
        let mut t = RebalanceLockTable::new();
        t.lock("g", &[q(0)], "c1", 10_000);
        assert_eq!(t.lock("g", &[q(0)], "c2", 10_000 + LIVE), vec![false], "at the limit it still holds");
        assert_eq!(t.lock("g", &[q(0)], "c2", 10_000 + LIVE + 1), vec![true], "one ms past it");
    }

    #[test]
    fn a_stamp_behind_the_table_clock_never_moves_time_back() {
        let mut t = RebalanceLockTable::new();
        t.lock("g", &[q(0)], "c1", 100_000);
        // A later entry stamped earlier (a leader whose clock is behind): the table keeps its time,
        // and c1's lock (stamped 100 000) is neither expired nor aged by it.
        assert_eq!(t.lock("g", &[q(0)], "c2", 5_000), vec![false]);
        assert_eq!(t.clock_ms(), 100_000);
        assert_eq!(t.lock("g", &[q(1)], "c2", 5_000), vec![true]);
        assert_eq!(t.owner("g", &q(1), 100_000), Some("c2"), "stamped with the table clock");
    }

    #[test]
    fn only_the_owner_unlocks() {
        let mut t = RebalanceLockTable::new();
        t.lock("g", &[q(0), q(1)], "c1", 1);
        t.unlock("g", &[q(0)], "c2", 2);
        assert_eq!(t.owner("g", &q(0), 2), Some("c1"));
        t.unlock("g", &[q(0), q(1)], "c1", 3);
        assert!(t.is_empty());
        assert_eq!(t.lock("g", &[q(0)], "c2", 4), vec![true]);
    }

    #[test]
    fn expired_locks_are_purged_and_the_table_is_bounded() {
        let mut t = RebalanceLockTable::new();
        t.lock("g", &[q(0), q(1)], "c1", 0);
        t.lock("h", &[q(0)], "c1", LIVE / 2);
        // A lock of group g purges g's expired locks; h's stay until a full table or a purge.
        t.lock("g", &[q(5)], "c2", LIVE + 1);
        assert_eq!(t.len(), 2);
        assert_eq!(t.purge_expired(2 * LIVE + 2), 2);
        assert!(t.is_empty());

        // Fill the table: one more new lock is refused while all are live, a renewal is not; once
        // they expire, the full table purges and grants.
        let many: Vec<LockedQueue> = (0..BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT as i32).map(q).collect();
        let granted = t.lock("g", &many, "c1", 1_000_000);
        assert!(granted.iter().all(|g| *g));
        assert_eq!(t.len(), BROKER_REBALANCE_LOCK_TABLE_MAX_COUNT);
        assert_eq!(t.lock("h", &[q(0)], "c2", 1_000_001), vec![false], "full");
        assert_eq!(t.lock("g", &[q(7)], "c1", 1_000_001), vec![true], "a renewal needs no room");
        assert_eq!(t.lock("h", &[q(0)], "c2", 1_000_001 + LIVE + 1), vec![true], "purged, then granted");
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn records_round_trip_sorted() {
        let mut t = RebalanceLockTable::new();
        t.lock("h", &[q(1)], "c2", 7);
        t.lock("g", &[q(2), q(0)], "c1", 9);
        let records = t.records();
        let keys: Vec<(&str, i32)> = records.iter().map(|r| (r.group.as_str(), r.queue.queue_id)).collect();
        assert_eq!(keys, vec![("g", 0), ("g", 2), ("h", 1)]);
        let back = RebalanceLockTable::from_records(t.clock_ms(), records);
        assert_eq!(back, t);
    }
}
