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
        let runs = topic_runs(&request);
        let stored = self.group_commit.submit(request).await?;
        self.broker_totals.on_put(stored.len() as u64, now_ms());
        let now = self.stats.now_ms();
        for (topic, records, bytes) in runs {
            self.stats.on_put(&topic, records, bytes, now);
        }
        Ok(stored)
    }
}

/// One run of records of one topic: `(topic, records, bytes)`.
type TopicRun = (CompactString, u64, u64);

/// Each run of records of one topic in `request`, taken before the request moves into the batcher.
/// The first run is kept apart from the list: a client's send or batch has one topic, so it needs
/// no list at all.
fn topic_runs(request: &SendRequest) -> impl Iterator<Item = TopicRun> + use<> {
    let mut first: Option<TopicRun> = None;
    let mut rest: Vec<TopicRun> = Vec::new();
    let total = request.records.len();
    for (i, slot) in request.slots.iter().enumerate() {
        let end = request.slots.get(i + 1).map_or(total, |next| next.at);
        let bytes = end.saturating_sub(slot.at) as u64;
        let run = || (slot.topic.clone(), 1, bytes);
        match rest.last_mut().or(first.as_mut()) {
            Some((topic, n, size)) if *topic == slot.topic => {
                *n += 1;
                *size += bytes;
            }
            Some(_) => rest.push(run()),
            None => first = Some(run()),
        }
    }
    first.into_iter().chain(rest)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::services::group_commit::RecordSlot;

    fn request(records: &[(&str, usize)]) -> SendRequest {
        let mut at = 0;
        let mut slots = Vec::new();
        for (topic, len) in records {
            slots.push(RecordSlot { topic: (*topic).into(), queue_id: 0, has_queue_offset: true, at });
            at += len;
        }
        SendRequest { records: BytesMut::zeroed(at), slots }
    }

    #[test]
    fn runs_of_one_topic_and_of_several() {
        let one: Vec<TopicRun> = topic_runs(&request(&[("A", 10), ("A", 20)])).collect();
        assert_eq!(one, vec![("A".into(), 2, 30)]);
        let several: Vec<TopicRun> = topic_runs(&request(&[("A", 10), ("B", 5), ("B", 5), ("A", 7)])).collect();
        assert_eq!(several, vec![("A".into(), 1, 10), ("B".into(), 2, 10), ("A".into(), 1, 7)]);
        assert_eq!(topic_runs(&request(&[])).count(), 0);
    }
}
