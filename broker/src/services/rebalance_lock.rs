//! Orderly consumers' queue locks through Raft: a LOCK_BATCH_MQ or UNLOCK_BATCH_MQ is one
//! QUEUE_LOCKS entry, stamped by the leader's lock clock and answered once applied, from the
//! replicated table ([`crate::state::rebalance_lock`]). A new leader thus holds every lock its
//! predecessors granted and refuses their queues to other clients until they expire.
//!
//! Stamps come from the lock table's [`TableClock`] (docs/broker.md#queue-locks): a lock ages no
//! faster than real time, whatever the replicas' wall clocks say.
//!
//! Test only (`testOnlyLocalQueueLocksUnsafe`): the same table kept in this replica's memory and
//! stamped with its wall clock, as RocketMQ's master keeps it, never replicated: what the jepsen
//! `order` self-test shows to break across a failover.

use std::sync::Arc;
use std::sync::Mutex;

use raftmq_common::sync::lock;

use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::services::table_clock::TableClock;
use crate::state::entry::BrokerCommand;
use crate::state::entry::LockOp;
use crate::state::rebalance_lock::LockedQueue;
use crate::state::rebalance_lock::RebalanceLockTable;
use crate::state::store::ApplyOutcome;
use crate::state::store::now_ms;

/// The leader side of queue locks: stamps and proposes lock batches.
#[derive(Debug)]
pub struct RebalanceLocks {
    replica: Arc<Replica>,
    clock: TableClock,
    /// `Some` only with `testOnlyLocalQueueLocksUnsafe`: the unreplicated table.
    local: Option<Mutex<RebalanceLockTable>>,
}

impl RebalanceLocks {
    /// Lock batches through `replica` (`local_unsafe`: test only, in this replica's memory).
    pub fn new(replica: Arc<Replica>, local_unsafe: bool) -> Self {
        let local = local_unsafe.then(|| Mutex::new(RebalanceLockTable::new()));
        RebalanceLocks { replica, clock: TableClock::new(), local }
    }

    /// The stamp of a batch proposed now in `term`.
    fn stamp(&self, term: u64) -> u64 {
        let table_clock = self.replica.store().metadata().locks.clock_ms();
        self.clock.stamp(term, table_clock)
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
