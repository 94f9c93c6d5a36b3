//! Replication of consumer offsets: UPDATE_CONSUMER_OFFSET (oneway or not) and the commitOffset that
//! piggybacks on PULL_MESSAGE are collected for [`BROKER_OFFSET_COMMIT_LINGER_MS`], deduplicated (the
//! last update of a queue wins) and proposed as one CONSUMER_OFFSETS entry (at most
//! `CONSUMER_OFFSET_BATCH_MAX_COUNT` updates, about `BROKER_OFFSET_BATCH_MAX_BYTES`), so every replica — and a
//! new leader after failover — serves the offsets consumers committed
//! (docs/raft-log.md#replicated-metadata: never keep offsets outside the log as DLedger did).
//!
//! Invariants: an update is only ever stored by applying a committed entry (never in local memory
//! only); a caller that waits is answered after the entry is applied, or with the refusal; at most one
//! entry is in flight, so updates of one queue apply in arrival order. A pull's piggybacked offset only
//! moves a queue forward ([`OffsetCommitter::commit_forward`]): a pull still in flight when its consumer
//! committed a newer offset (or shut down) must not take that commit back; explicit updates
//! (UPDATE_CONSUMER_OFFSET, resets) are stored as sent.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits::BROKER_OFFSET_BATCH_MAX_BYTES;
use raftmq_common::limits::BROKER_OFFSET_COMMIT_LINGER_MS;
use raftmq_common::limits::BROKER_OFFSET_QUEUE_MAX_COUNT;
use raftmq_common::limits::CONSUMER_OFFSET_BATCH_MAX_COUNT;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::state::entry::BrokerCommand;
use crate::state::entry::OffsetCommit;
use crate::state::entry::offset_commit_encoded_len;

type Reply = oneshot::Sender<Result<(), WriteError>>;

/// How an update combines with the queue's stored (or already queued) offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Stored as sent (it may move the offset backwards).
    Set,
    /// Stored only if it is greater.
    Forward,
}

type Queued = (OffsetCommit, Mode, Option<Reply>);

/// Submits offset updates to the committer task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OffsetCommitter {
    tx: mpsc::Sender<Queued>,
}

impl OffsetCommitter {
    /// Starts the committer task; it stops when `cancel` fires.
    pub fn spawn(replica: Arc<Replica>, cancel: CancellationToken) -> (OffsetCommitter, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(BROKER_OFFSET_QUEUE_MAX_COUNT);
        (OffsetCommitter { tx }, tokio::spawn(run(replica, rx, cancel)))
    }

    /// Queues an update without waiting for it (oneway updates).
    pub fn commit_later(&self, commit: OffsetCommit) -> Result<(), WriteError> {
        self.tx.try_send((commit, Mode::Set, None)).map_err(refused)
    }

    /// Queues an update that is dropped unless it moves the queue's offset forward (the commitOffset
    /// a pull piggybacks).
    pub fn commit_forward(&self, commit: OffsetCommit) -> Result<(), WriteError> {
        self.tx.try_send((commit, Mode::Forward, None)).map_err(refused)
    }

    /// Stores an update; returns once it is applied (or refused).
    pub async fn commit(&self, commit: OffsetCommit) -> Result<(), WriteError> {
        let (reply, rx) = oneshot::channel();
        self.tx.try_send((commit, Mode::Set, Some(reply))).map_err(refused)?;
        rx.await.unwrap_or_else(|_| Err(WriteError::Fatal("is shutting down".into())))
    }
}

fn refused<T>(e: mpsc::error::TrySendError<T>) -> WriteError {
    match e {
        mpsc::error::TrySendError::Full(_) => WriteError::Busy("too many consumer offset updates queued".into()),
        mpsc::error::TrySendError::Closed(_) => WriteError::Fatal("is shutting down".into()),
    }
}

/// Adds `commit` to the batch being built. `stored` reads the queue's applied offset; it is current
/// because at most one batch is in flight and it was applied before this one is built.
fn merge(
    batch: &mut Vec<OffsetCommit>,
    index: &mut HashMap<(String, String, i32), usize>,
    commit: OffsetCommit,
    mode: Mode,
    stored: impl Fn(&OffsetCommit) -> Option<i64>,
) {
    let key = (commit.topic.clone(), commit.group.clone(), commit.queue_id);
    match (index.get(&key), mode) {
        (Some(&i), Mode::Set) => batch[i] = commit,
        (Some(&i), Mode::Forward) => {
            if commit.offset > batch[i].offset {
                batch[i] = commit;
            }
        }
        (None, mode) => {
            if mode == Mode::Forward && stored(&commit).is_some_and(|current| commit.offset <= current) {
                return;
            }
            index.insert(key, batch.len());
            batch.push(commit);
        }
    }
}

/// `commits` in runs of at most `CONSUMER_OFFSET_BATCH_MAX_COUNT` updates and about
/// `BROKER_OFFSET_BATCH_MAX_BYTES` (each run holds at least one), each run one CONSUMER_OFFSETS entry.
pub fn offset_batches(commits: Vec<OffsetCommit>) -> Vec<Vec<OffsetCommit>> {
    let mut batches = Vec::new();
    let (mut batch, mut bytes) = (Vec::new(), 0usize);
    for commit in commits {
        let len = offset_commit_encoded_len(&commit);
        if !batch.is_empty()
            && (batch.len() >= CONSUMER_OFFSET_BATCH_MAX_COUNT || bytes + len > BROKER_OFFSET_BATCH_MAX_BYTES)
        {
            batches.push(std::mem::take(&mut batch));
            bytes = 0;
        }
        bytes += len;
        batch.push(commit);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
}

async fn run(replica: Arc<Replica>, mut rx: mpsc::Receiver<Queued>, cancel: CancellationToken) {
    loop {
        let first = tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            first = rx.recv() => match first { Some(f) => f, None => break },
        };
        // Linger so the updates a consumer sends for all its queues at once share one entry.
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(BROKER_OFFSET_COMMIT_LINGER_MS)) => {}
        }
        let mut latest: HashMap<(String, String, i32), usize> = HashMap::new();
        let mut commits: Vec<OffsetCommit> = Vec::new();
        let mut replies: Vec<Reply> = Vec::new();
        let mut next = Some(first);
        let mut bytes = 0usize;
        while let Some((commit, mode, reply)) = next.take() {
            // Counted even when it replaces a queued update: an over-estimate only ends a batch early.
            bytes = bytes.saturating_add(offset_commit_encoded_len(&commit));
            let stored = |c: &OffsetCommit| replica.store().metadata().offsets.query(&c.topic, &c.group, c.queue_id);
            merge(&mut commits, &mut latest, commit, mode, stored);
            replies.extend(reply);
            if commits.len() < CONSUMER_OFFSET_BATCH_MAX_COUNT && bytes < BROKER_OFFSET_BATCH_MAX_BYTES {
                next = rx.try_recv().ok();
            }
        }
        let count = commits.len();
        if count == 0 {
            for reply in replies {
                let _ = reply.send(Ok(()));
            }
            continue;
        }
        let result = replica.propose(&BrokerCommand::ConsumerOffsets(commits)).await;
        if let Err(e) = &result {
            debug!(count, error = %e, "consumer offset batch not stored");
        }
        for reply in replies {
            // A waiter that gave up needs no answer.
            let _ = reply.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(queue_id: i32, offset: i64) -> OffsetCommit {
        OffsetCommit { topic: "T".into(), group: "g".into(), queue_id, offset }
    }

    #[test]
    fn offset_batches_stay_within_count_and_bytes() {
        let long = |queue_id: i32| OffsetCommit { topic: "t".repeat(255), group: "g".repeat(248), queue_id, offset: 1 };
        let per = offset_commit_encoded_len(&long(0));
        let fit = BROKER_OFFSET_BATCH_MAX_BYTES / per;
        let batches = offset_batches((0..(2 * fit + 1) as i32).map(long).collect());
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), vec![fit, fit, 1]);
        let short = (0..(CONSUMER_OFFSET_BATCH_MAX_COUNT + 1) as i32).map(|q| c(q, 1)).collect();
        assert_eq!(
            offset_batches(short).iter().map(Vec::len).collect::<Vec<_>>(),
            vec![CONSUMER_OFFSET_BATCH_MAX_COUNT, 1]
        );
        assert!(offset_batches(Vec::new()).is_empty());
        // Every update kept, in order.
        let all: Vec<i32> =
            offset_batches((0..5).map(|q| c(q, 1)).collect()).concat().iter().map(|x| x.queue_id).collect();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn piggybacked_offsets_only_move_forward() {
        let stored = |x: &OffsetCommit| (x.queue_id == 0).then_some(10);
        let (mut batch, mut index) = (Vec::new(), HashMap::new());
        merge(&mut batch, &mut index, c(0, 9), Mode::Forward, stored);
        assert!(batch.is_empty(), "behind the stored offset");
        merge(&mut batch, &mut index, c(0, 10), Mode::Forward, stored);
        assert!(batch.is_empty(), "equal to the stored offset");
        merge(&mut batch, &mut index, c(1, 3), Mode::Forward, stored);
        assert_eq!(batch, vec![c(1, 3)], "nothing stored yet");
        merge(&mut batch, &mut index, c(1, 7), Mode::Set, stored);
        merge(&mut batch, &mut index, c(1, 5), Mode::Forward, stored);
        assert_eq!(batch, vec![c(1, 7)], "a stale pull behind a queued update");
        merge(&mut batch, &mut index, c(1, 2), Mode::Set, stored);
        assert_eq!(batch, vec![c(1, 2)], "an explicit update may move backwards");
        merge(&mut batch, &mut index, c(0, 4), Mode::Set, stored);
        assert_eq!(batch, vec![c(1, 2), c(0, 4)]);
    }
}
