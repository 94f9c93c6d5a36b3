//! Replication of consumer offsets: UPDATE_CONSUMER_OFFSET (oneway or not) and the commitOffset that
//! piggybacks on PULL_MESSAGE are collected for [`BROKER_OFFSET_COMMIT_LINGER_MS`], deduplicated (the
//! last update of a queue wins) and proposed as one CONSUMER_OFFSETS entry, so every replica — and a
//! new leader after failover — serves the offsets consumers committed (raft-log-design.md §15: never
//! keep offsets outside the log as DLedger did).
//!
//! Invariants: an update is only ever stored by applying a committed entry (never in local memory
//! only); a caller that waits is answered after the entry is applied, or with the refusal; at most one
//! entry is in flight, so updates of one queue apply in arrival order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits::BROKER_OFFSET_COMMIT_LINGER_MS;
use raftmq_common::limits::BROKER_OFFSET_QUEUE_MAX_COUNT;
use raftmq_common::limits::CONSUMER_OFFSET_BATCH_MAX_COUNT;
use tokio::sync::mpsc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::entry::BrokerCommand;
use crate::entry::OffsetCommit;
use crate::replica::Replica;
use crate::replica::WriteError;

type Reply = oneshot::Sender<Result<(), WriteError>>;

/// Submits offset updates to the committer task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OffsetCommitter {
    tx: mpsc::Sender<(OffsetCommit, Option<Reply>)>,
}

impl OffsetCommitter {
    /// Starts the committer task; it stops when `cancel` fires.
    pub fn spawn(replica: Arc<Replica>, cancel: CancellationToken) -> (OffsetCommitter, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(BROKER_OFFSET_QUEUE_MAX_COUNT);
        (OffsetCommitter { tx }, tokio::spawn(run(replica, rx, cancel)))
    }

    /// Queues an update without waiting for it (oneway updates, pull piggyback).
    pub fn commit_later(&self, commit: OffsetCommit) -> Result<(), WriteError> {
        self.tx.try_send((commit, None)).map_err(refused)
    }

    /// Stores an update; returns once it is applied (or refused).
    pub async fn commit(&self, commit: OffsetCommit) -> Result<(), WriteError> {
        let (reply, rx) = oneshot::channel();
        self.tx.try_send((commit, Some(reply))).map_err(refused)?;
        rx.await.unwrap_or_else(|_| Err(WriteError::Fatal("is shutting down".into())))
    }
}

fn refused<T>(e: mpsc::error::TrySendError<T>) -> WriteError {
    match e {
        mpsc::error::TrySendError::Full(_) => WriteError::Busy("too many consumer offset updates queued".into()),
        mpsc::error::TrySendError::Closed(_) => WriteError::Fatal("is shutting down".into()),
    }
}

async fn run(replica: Arc<Replica>, mut rx: mpsc::Receiver<(OffsetCommit, Option<Reply>)>, cancel: CancellationToken) {
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
        while let Some((commit, reply)) = next.take() {
            let key = (commit.topic.clone(), commit.group.clone(), commit.queue_id);
            match latest.get(&key) {
                Some(&i) => commits[i] = commit,
                None => {
                    latest.insert(key, commits.len());
                    commits.push(commit);
                }
            }
            replies.extend(reply);
            if commits.len() < CONSUMER_OFFSET_BATCH_MAX_COUNT {
                next = rx.try_recv().ok();
            }
        }
        let count = commits.len();
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
