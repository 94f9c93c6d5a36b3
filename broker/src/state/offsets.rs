//! `ConsumerOffsetTable`: committed consumer offsets, `topic@group` → queueId → offset, as RocketMQ's
//! `ConsumerOffsetManager` keeps them — but changed only by applying replicated commit batches
//! ([`crate::state::entry::BrokerCommand::ConsumerOffsets`]), so every replica holds the same table and a new
//! leader serves the offsets consumers committed through the old one (docs/raft-log.md#replicated-metadata).
//!
//! Serialized as `consumerOffset.json` / GET_ALL_CONSUMER_OFFSET's `ConsumerOffsetSerializeWrapper`.
//! Invariant: an offset is whatever the last applied commit said (RocketMQ lets a commit move an offset
//! backwards, e.g. `resetOffsetByTime`; it is logged, not refused).

use std::collections::BTreeMap;

use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::consumer_offset::ConsumerOffsetSerializeWrapper;
use tracing::debug;

use crate::state::entry::OffsetCommit;

/// Committed offsets of every group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerOffsetTable {
    /// `topic@group` → queueId → offset.
    table: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl ConsumerOffsetTable {
    /// An empty table.
    pub fn new() -> Self {
        ConsumerOffsetTable::default()
    }

    /// Applies a replicated commit batch in order.
    pub fn apply(&mut self, commits: &[OffsetCommit]) {
        for c in commits {
            self.commit(&c.topic, &c.group, c.queue_id, c.offset);
        }
    }

    /// Stores one offset (`commitOffset`).
    pub fn commit(&mut self, topic: &str, group: &str, queue_id: i32, offset: i64) {
        let key = ConsumerOffsetSerializeWrapper::key(topic, group);
        let previous = self.table.entry(key).or_default().insert(queue_id, offset);
        if let Some(previous) = previous
            && offset < previous
        {
            debug!(topic, group, queue_id, offset, previous, "consumer offset moved backwards");
        }
    }

    /// The committed offset (`queryOffset`), `None` where RocketMQ answers -1.
    pub fn query(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        self.table.get(&ConsumerOffsetSerializeWrapper::key(topic, group))?.get(&queue_id).copied()
    }

    /// Every queue's offset of `topic@group` (`queryOffset(group, topic)`).
    pub fn query_all(&self, topic: &str, group: &str) -> Option<&BTreeMap<i32, i64>> {
        self.table.get(&ConsumerOffsetSerializeWrapper::key(topic, group))
    }

    /// Topics a group has offsets for (`whichTopicByConsumer`).
    pub fn topics_of_group(&self, group: &str) -> Vec<&str> {
        self.table
            .keys()
            .filter_map(|k| ConsumerOffsetSerializeWrapper::split_key(k))
            .filter(|(_, g)| *g == group)
            .map(|(t, _)| t)
            .collect()
    }

    /// Groups with offsets for a topic (`whichGroupByTopic`).
    pub fn groups_of_topic(&self, topic: &str) -> Vec<&str> {
        self.table
            .keys()
            .filter_map(|k| ConsumerOffsetSerializeWrapper::split_key(k))
            .filter(|(t, _)| *t == topic)
            .map(|(_, g)| g)
            .collect()
    }

    /// Drops a group's offsets on every topic (group deleted).
    pub fn remove_group(&mut self, group: &str) {
        self.table.retain(|k, _| ConsumerOffsetSerializeWrapper::split_key(k).is_none_or(|(_, g)| g != group));
    }

    /// Drops every group's offsets on a topic (topic deleted).
    pub fn remove_topic(&mut self, topic: &str) {
        self.table.retain(|k, _| ConsumerOffsetSerializeWrapper::split_key(k).is_none_or(|(t, _)| t != topic));
    }

    /// The wrapper body (GET_ALL_CONSUMER_OFFSET, `consumerOffset.json`).
    pub fn to_wrapper(&self) -> ConsumerOffsetSerializeWrapper {
        ConsumerOffsetSerializeWrapper { offset_table: self.table.clone() }
    }

    /// Rebuilds the table from a wrapper (snapshot manifest, or a Java broker's `consumerOffset.json`).
    pub fn from_wrapper(wrapper: ConsumerOffsetSerializeWrapper) -> Self {
        ConsumerOffsetTable { table: wrapper.offset_table }
    }

    /// JSON in `consumerOffset.json` form.
    pub fn encode_json(&self) -> Result<Vec<u8>, raftmq_common::protocol::body::BodyError> {
        self.to_wrapper().encode()
    }

    /// Reads `consumerOffset.json` (fastjson's bare integer keys accepted).
    pub fn decode_json(bytes: &[u8]) -> Result<Self, raftmq_common::protocol::body::BodyError> {
        ConsumerOffsetSerializeWrapper::decode(bytes).map(Self::from_wrapper)
    }
}

/// QUERY_CONSUMER_OFFSET's answer when nothing is stored (`ConsumerManageProcessor.queryConsumerOffset`):
/// `Ok(0)` — start from the beginning — when the queue still starts at 0 and its first message is in
/// memory (a brand-new queue), else QUERY_NOT_FOUND so the client applies `consumeFromWhere`.
pub fn query_offset_answer(
    stored: Option<i64>,
    queue_min_offset: i64,
    first_message_in_memory: bool,
) -> Result<i64, ResponseCode> {
    match stored {
        Some(offset) if offset >= 0 => Ok(offset),
        _ if queue_min_offset <= 0 && first_message_in_memory => Ok(0),
        _ => Err(ResponseCode::QueryNotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(topic: &str, group: &str, queue_id: i32, offset: i64) -> OffsetCommit {
        OffsetCommit { topic: topic.into(), group: group.into(), queue_id, offset }
    }

    #[test]
    fn apply_query_and_serialize() {
        let mut t = ConsumerOffsetTable::new();
        t.apply(&[
            commit("T", "g", 0, 5),
            commit("T", "g", 1, 7),
            commit("%RETRY%g", "g", 0, 1),
            commit("T", "h", 0, 2),
        ]);
        t.apply(&[commit("T", "g", 0, 3)]);
        assert_eq!(t.query("T", "g", 0), Some(3));
        assert_eq!(t.query("T", "g", 2), None);
        assert_eq!(t.query("U", "g", 0), None);
        assert_eq!(t.query_all("T", "g").map(|m| m.len()), Some(2));
        assert_eq!(t.topics_of_group("g"), vec!["%RETRY%g", "T"]);
        assert_eq!(t.groups_of_topic("T"), vec!["g", "h"]);
        let json = String::from_utf8(t.encode_json().unwrap()).unwrap();
        assert_eq!(json, r#"{"offsetTable":{"%RETRY%g@g":{"0":1},"T@g":{"0":3,"1":7},"T@h":{"0":2}}}"#);
        assert_eq!(ConsumerOffsetTable::decode_json(json.as_bytes()).unwrap(), t);
        let java = br#"{"offsetTable":{"T@g":{0:3,1:7}}}"#;
        assert_eq!(ConsumerOffsetTable::decode_json(java).unwrap().query("T", "g", 1), Some(7));
        t.remove_topic("T");
        assert_eq!(t.groups_of_topic("T"), Vec::<&str>::new());
        t.remove_group("g");
        assert_eq!(t, ConsumerOffsetTable::new());
    }

    #[test]
    fn query_answer_follows_consumer_manage_processor() {
        assert_eq!(query_offset_answer(Some(9), 5, false), Ok(9));
        assert_eq!(query_offset_answer(Some(0), 5, false), Ok(0));
        assert_eq!(query_offset_answer(None, 0, true), Ok(0));
        assert_eq!(query_offset_answer(Some(-1), 0, true), Ok(0));
        assert_eq!(query_offset_answer(None, 0, false), Err(ResponseCode::QueryNotFound));
        assert_eq!(query_offset_answer(None, 3, true), Err(ResponseCode::QueryNotFound));
    }
}
