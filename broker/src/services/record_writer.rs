//! `RecordWriter`: message records stored through group commit and counted where RocketMQ counts
//! a put (GET_BROKER_RUNTIME_INFO totals, VIEW_BROKER_STATS_DATA per topic). Every path that stores
//! records (sends, send-backs, delayed and timer deliveries, transaction halves, commits, op
//! records and check copies) goes through it, so the counts cover them all. Cheap to clone.

use std::sync::Arc;

use raftmq_common::message::CompactString;

use crate::observability::stats::BrokerTotals;
use crate::observability::stats::StatsTable;
use crate::services::group_commit::GroupCommit;
use crate::services::group_commit::SendRequest;
use crate::services::group_commit::StoredRecord;
use crate::services::replica::WriteError;
use crate::state::store::now_ms;

/// Group commit's submit side with the put statistics.
#[derive(Debug, Clone)]
pub struct RecordWriter {
    group_commit: GroupCommit,
    broker_totals: Arc<BrokerTotals>,
    stats: Arc<StatsTable>,
}

impl RecordWriter {
    /// A writer submitting to `group_commit` and counting into `broker_totals` and `stats`.
    pub fn new(group_commit: GroupCommit, broker_totals: Arc<BrokerTotals>, stats: Arc<StatsTable>) -> Self {
        RecordWriter { group_commit, broker_totals, stats }
    }

    /// The soft cap of one group-commit entry's records ([`GroupCommit::entry_max_bytes`]).
    pub fn entry_max_bytes(&self) -> usize {
        self.group_commit.entry_max_bytes()
    }

    /// Stores message records through group commit and counts them for GET_BROKER_RUNTIME_INFO
    /// (every stored record counts, as Java's `putMessage` statistics do: sends, send-backs, delayed
    /// deliveries, transaction halves, commits and op records) and VIEW_BROKER_STATS_DATA (per
    /// topic, one addition per run of records of one topic, as Java adds once per put).
    pub async fn store_records(&self, request: SendRequest) -> Result<Vec<StoredRecord>, WriteError> {
        // A client's send or batch has one topic: its run is the whole request, with no list.
        let single = request.slots.first().filter(|first| request.slots.iter().all(|s| s.topic == first.topic));
        let single =
            single.map(|first| (first.topic.clone(), request.slots.len() as u64, request.records.len() as u64));
        let runs = if single.is_some() { Vec::new() } else { topic_runs(&request) };
        let stored = self.group_commit.submit(request).await?;
        self.broker_totals.on_put(stored.len() as u64, now_ms());
        let now = self.stats.now_ms();
        for (topic, records, bytes) in single.into_iter().chain(runs) {
            self.stats.on_put(&topic, records, bytes, now);
        }
        Ok(stored)
    }
}

/// `(topic, records, bytes)` of each run of records of one topic in `request` (one for a send or a
/// batch), taken before the request moves into the batcher.
fn topic_runs(request: &SendRequest) -> Vec<(CompactString, u64, u64)> {
    let mut runs: Vec<(CompactString, u64, u64)> = Vec::with_capacity(1);
    let total = request.records.len();
    for (i, slot) in request.slots.iter().enumerate() {
        let end = request.slots.get(i + 1).map_or(total, |next| next.at);
        let bytes = end.saturating_sub(slot.at) as u64;
        match runs.last_mut() {
            Some((topic, n, size)) if *topic == slot.topic => {
                *n += 1;
                *size += bytes;
            }
            _ => runs.push((slot.topic.clone(), 1, bytes)),
        }
    }
    runs
}
