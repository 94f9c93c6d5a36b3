//! Orderly consumers' queue locks through Raft: a LOCK_BATCH_MQ or UNLOCK_BATCH_MQ is one
//! QUEUE_LOCKS entry, stamped by the leader's lock clock and answered once applied, from the
//! replicated table ([`crate::state::rebalance_lock`]). A new leader thus holds every lock its
//! predecessors granted and refuses their queues to other clients until they expire.
//!
//! The lock clock (docs/broker.md#queue-locks): when this replica first stamps in a term, it takes
//! the table's clock (the largest stamp applied, every earlier term's entries applied by then: the
//! readiness gate) as its base, and from then on stamps `base + monotonic time elapsed`, never
//! below the table's clock. Invariant: a lock ages no faster than real time, whatever the
//! replicas' wall clocks say — a leader's stamps move at its monotonic clock's rate, and each
//! leader starts from a stamp some predecessor made no later than that moment. The wall clock only
//! seeds the very first base of a table that never held a lock.
//!
//! Test only (`testOnlyLocalQueueLocksUnsafe`): the same table kept in this replica's memory and
//! stamped with its wall clock, as RocketMQ's master keeps it, never replicated: what the jepsen
//! `order` self-test shows to break across a failover.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use raftmq_common::sync::lock;

use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::state::entry::BrokerCommand;
use crate::state::entry::LockOp;
use crate::state::rebalance_lock::LockedQueue;
use crate::state::rebalance_lock::RebalanceLockTable;
use crate::state::store::ApplyOutcome;
use crate::state::store::now_ms;

/// Where this replica's lock clock of a term started.
#[derive(Debug, Clone, Copy)]
struct TermBase {
    term: u64,
    base_ms: u64,
    started: Instant,
}

/// The leader side of queue locks: stamps and proposes lock batches.
#[derive(Debug)]
pub struct RebalanceLocks {
    replica: Arc<Replica>,
    base: Mutex<Option<TermBase>>,
    /// `Some` only with `testOnlyLocalQueueLocksUnsafe`: the unreplicated table.
    local: Option<Mutex<RebalanceLockTable>>,
}

/// The stamp at `elapsed_ms` after a term's base, given the table clock now.
fn stamp_at(base_ms: u64, elapsed_ms: u64, table_clock_ms: u64) -> u64 {
    base_ms.saturating_add(elapsed_ms).max(table_clock_ms)
}

impl RebalanceLocks {
    /// Lock batches through `replica` (`local_unsafe`: test only, in this replica's memory).
    pub fn new(replica: Arc<Replica>, local_unsafe: bool) -> Self {
        let local = local_unsafe.then(|| Mutex::new(RebalanceLockTable::new()));
        RebalanceLocks { replica, base: Mutex::new(None), local }
    }

    /// The stamp of a batch proposed now in `term`.
    fn stamp(&self, term: u64) -> u64 {
        let table_clock = self.replica.store().metadata().locks.clock_ms();
        let mut base = lock(&self.base);
        let b = match *base {
            Some(b) if b.term == term => b,
            _ => {
                // A table that never held a lock protects nothing: the wall clock seeds it.
                let base_ms = if table_clock == 0 { now_ms() } else { table_clock };
                let b = TermBase { term, base_ms, started: Instant::now() };
                *base = Some(b);
                b
            }
        };
        let elapsed = u64::try_from(b.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        stamp_at(b.base_ms, elapsed, table_clock)
    }

    /// LOCK_BATCH_MQ: the queues of `queues` that `client_id` holds once the batch is applied.
    pub async fn lock_batch(
        &self,
        group: &str,
        client_id: &str,
        queues: Vec<LockedQueue>,
    ) -> Result<Vec<LockedQueue>, WriteError> {
        if queues.is_empty() {
            return Ok(Vec::new());
        }
        let term = self.replica.check_writable()?;
        if let Some(local) = &self.local {
            let granted = lock(local).lock(group, &queues, client_id, now_ms());
            return Ok(queues.into_iter().zip(granted).filter_map(|(q, ok)| ok.then_some(q)).collect());
        }
        let command = BrokerCommand::QueueLocks {
            op: LockOp::Lock,
            stamp_ms: self.stamp(term),
            group: group.to_owned(),
            client_id: client_id.to_owned(),
            queues,
        };
        let outcome = self.replica.propose_for_outcome(&command).await?;
        let BrokerCommand::QueueLocks { queues, .. } = command else { return Ok(Vec::new()) };
        match outcome {
            ApplyOutcome::Granted(granted) if granted.len() == queues.len() => {
                Ok(queues.into_iter().zip(granted).filter_map(|(q, ok)| ok.then_some(q)).collect())
            }
            other => Err(WriteError::Rejected(format!("a lock batch was applied as {other:?}"))),
        }
    }

    /// UNLOCK_BATCH_MQ: releases the queues of `queues` that `client_id` holds.
    pub async fn unlock_batch(&self, group: &str, client_id: &str, queues: Vec<LockedQueue>) -> Result<(), WriteError> {
        if queues.is_empty() {
            return Ok(());
        }
        let term = self.replica.check_writable()?;
        if let Some(local) = &self.local {
            lock(local).unlock(group, &queues, client_id, now_ms());
            return Ok(());
        }
        let command = BrokerCommand::QueueLocks {
            op: LockOp::Unlock,
            stamp_ms: self.stamp(term),
            group: group.to_owned(),
            client_id: client_id.to_owned(),
            queues,
        };
        self.replica.propose(&command).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_move_with_elapsed_time_from_the_base_and_never_below_the_table_clock() {
        assert_eq!(stamp_at(100_000, 0, 100_000), 100_000);
        assert_eq!(stamp_at(100_000, 2_500, 100_000), 102_500);
        // Entries of this term applied meanwhile moved the table clock past the base's reckoning
        // (another stamp of the same term raced ahead): never go below it.
        assert_eq!(stamp_at(100_000, 2_500, 103_000), 103_000);
        assert_eq!(stamp_at(u64::MAX - 1, 5, 0), u64::MAX);
    }
}
