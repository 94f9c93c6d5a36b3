//! The real topic and queue of a message stored under a system topic: a delayed message
//! (`SCHEDULE_TOPIC_XXXX`) or a transaction half keeps them in its `REAL_TOPIC` / `REAL_QID`
//! properties until it is delivered or committed. Pure; a missing or malformed property is an
//! error, never a panic.

use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use thiserror::Error;

/// Why a scheduled message cannot be delivered.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RestoreError {
    /// The record has no `REAL_TOPIC` property.
    #[error("the scheduled message has no REAL_TOPIC")]
    NoRealTopic,
    /// `REAL_QID` is absent or not an integer.
    #[error("the scheduled message has REAL_QID {0:?}")]
    BadRealQueueId(Option<String>),
}

/// The real topic and queue a redirected message (delayed, or a transaction half) keeps in its
/// `REAL_TOPIC` / `REAL_QID` properties.
pub fn real_queue(props: &Properties) -> Result<(&str, i32), RestoreError> {
    let topic = props.get(properties::REAL_TOPIC).filter(|t| !t.is_empty()).ok_or(RestoreError::NoRealTopic)?;
    let qid = props.get(properties::REAL_QID);
    let queue_id = qid
        .and_then(|q| q.parse::<i32>().ok())
        .filter(|q| *q >= 0)
        .ok_or_else(|| RestoreError::BadRealQueueId(qid.map(str::to_owned)))?;
    Ok((topic, queue_id))
}
