//! The replicated command codec: what the broker puts in a Raft entry's payload, identified by the
//! entry's one-byte application tag (`AppPayload.tag`). Pure; decoding never panics on disk input.
//!
//! | tag | command | payload (big-endian) |
//! |---|---|---|
//! | 1 | [`BrokerCommand::Messages`] | one or more complete CommitLog records (docs/store-format.md#commitlog-record), back to back |
//! | 2 | [`BrokerCommand::ConsumerOffsets`] | `version u8 = 1 \| count u32 \| count × (topic_len u16, topic, group_len u16, group, queue_id i32, offset i64)` |
//! | 3 | [`BrokerCommand::TopicUpsert`] | `version u8 = 1 \| proposed_at_ms i64 \| TopicConfig JSON` |
//! | 4 | [`BrokerCommand::TopicDelete`] | `version u8 = 1 \| proposed_at_ms i64 \| topic UTF-8` |
//! | 5 | [`BrokerCommand::SubscriptionGroupUpsert`] | `version u8 = 1 \| proposed_at_ms i64 \| SubscriptionGroupConfig JSON` |
//! | 6 | [`BrokerCommand::SubscriptionGroupDelete`] | `version u8 = 1 \| proposed_at_ms i64 \| group UTF-8` |
//! | 7 | [`BrokerCommand::DelayProgress`] | `version u8 = 1 \| count u32 \| count × (queue_id i32, offset i64)` |
//! | 8 | reserved, unused: the transaction check progress is consumer offsets of `CID_RMQ_SYS_TRANS` (tag 2, [`crate::state::transaction`]) | |
//! | 9 | [`BrokerCommand::NodeIdsUsed`] | `version u8 = 1 \| has_new u8 (0/1) \| new_id u64 \| count u32 \| count × id u64` |
//! | 10 | [`BrokerCommand::RetentionPurge`] | `version u8 = 1 \| index u64 \| term u64 \| next_pos u64` |
//! | 11 | [`BrokerCommand::AclDocument`] | `version u8 = 1 \| counter i64 \| timestamp i64 \| has_base u8 (0/1) \| base_counter i64 \| base_timestamp i64 \| plain_acl.yml text UTF-8` |
//! | 12 | [`BrokerCommand::GroupOffsetsDelete`] | `version u8 = 1 \| proposed_at_ms i64 \| group UTF-8` |
//! | 13 | [`BrokerCommand::QueueLocks`] | `version u8 = 1 \| op u8 (1 lock, 2 unlock) \| stamp_ms u64 \| group_len u16, group \| client_len u16, client_id \| count u32 \| count × (topic_len u16, topic, broker_len u16, broker_name, queue_id i32)` |
//! | 14 | [`BrokerCommand::Pop`] | `version u8 = 1 \| op u8 \| stamp_ms u64 \|` op 1 pop: `plan_count u32 \| plan_count × (group_len u16, group \| topic_len u16, topic \| queue_id i32 \| from i64 \| to i64 \| invisible_ms u64 \| fifo u8 \| count u32 \| count × offset i64 \| again_count u32 \| again_count × offset i64)`; op 2 ack: `count u32 \| count × (group_len u16, group, topic_len u16, topic, queue_id i32, offset i64, epoch_ms u64)`; op 3 change: `group_len u16, group, topic_len u16, topic, queue_id i32, offset i64, epoch_ms u64, invisible_ms u64` |
//! | 0, 15–255 | unassigned (0 is what raft/ uses for blank and membership entries) | |
//!
//! Tag numbers are on-disk values: never renumber, never reuse. Config bodies are RocketMQ's own JSON
//! types (the same bytes `topics.json` / UPDATE_AND_CREATE_TOPIC carry), read leniently as fastjson does;
//! `proposed_at_ms` is the leader's clock, so every replica bumps its `DataVersion` to the same value.
//!
//! **Queue offsets** (docs/raft-log.md#queue-offsets, as DLedger does): the leader assigns each
//! record's QUEUEOFFSET before proposing ([`crate::state::queue_offset`]) so the payload bytes are final — the
//! log store's payload CRC covers them and replicas stay byte-identical. PHYSICALOFFSET is left 0 and
//! written on every replica at append time by [`patch_physical_offsets`] (the raft `PayloadPatcher`).
//! Apply does not trust the leader: [`crate::state::dispatch`] accepts an entry only when every record's queue
//! offset is exactly the queue's next one, and rejects the whole entry otherwise — a deterministic rule,
//! so all replicas agree and consumers never see a hole or a duplicate offset.

use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use raftmq_common::limits::BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT;
use raftmq_common::limits::CONSUMER_OFFSET_BATCH_MAX_COUNT;
use raftmq_common::limits::DELAY_PROGRESS_BATCH_MAX_COUNT;
use raftmq_common::limits::POP_ACK_BATCH_MAX_COUNT;
use raftmq_common::limits::POP_BATCH_MAX_COUNT;
use raftmq_common::limits::RAFT_NODE_IDS_MAX_COUNT;
use raftmq_common::limits::TOPIC_QUEUE_NUMS_MAX_COUNT;
use raftmq_common::message::MessageExt;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::RecordEncodeError;
use raftmq_common::message::record::RecordError;
use raftmq_common::message::record::RecordKind;
use raftmq_common::message::record::RecordView;
use raftmq_common::message::record::encode_record_into;
use raftmq_common::message::record::parse_record;
use raftmq_common::message::record::patch_physical_offset;
use raftmq_common::message::record::peek_record;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use thiserror::Error;

use crate::acl::AclDocument;
use crate::acl::AclVersion;
use crate::state::pop::PopPlan;
use crate::state::pop::PopQueue;
use crate::state::pop::Receipt;
use crate::state::rebalance_lock::LockedQueue;

/// Application tags of broker entries.
pub mod tag {
    /// CommitLog records.
    pub const MESSAGES: u8 = 1;
    /// A consumer-offset commit batch.
    pub const CONSUMER_OFFSETS: u8 = 2;
    /// Create or replace a topic's config.
    pub const TOPIC_UPSERT: u8 = 3;
    /// Delete a topic.
    pub const TOPIC_DELETE: u8 = 4;
    /// Create or replace a consumer group's config.
    pub const SUBSCRIPTION_GROUP_UPSERT: u8 = 5;
    /// Delete a consumer group.
    pub const SUBSCRIPTION_GROUP_DELETE: u8 = 6;
    /// Delay-queue (`SCHEDULE_TOPIC_XXXX`) delivery progress ([`crate::services::schedule`]).
    pub const DELAY_PROGRESS: u8 = 7;
    /// Reserved, never written: transaction check progress travels as consumer offsets (tag 2).
    pub const RESERVED_TRANSACTION_PROGRESS: u8 = 8;
    /// Raft node ids the group has used (membership changes; a node id is never given out twice).
    pub const NODE_IDS_USED: u8 = 9;
    /// Retention boundary: purge the log up to an entry ([`crate::services::retention`]).
    pub const RETENTION_PURGE: u8 = 10;
    /// The plain ACL file after an edit over the wire ([`crate::acl`]).
    pub const ACL_DOCUMENT: u8 = 11;
    /// Drop a consumer group's committed offsets (`deleteSubGroup -r true`).
    pub const GROUP_OFFSETS_DELETE: u8 = 12;
    /// Lock or unlock a batch of queues for an orderly consumer ([`crate::state::rebalance_lock`]).
    pub const QUEUE_LOCKS: u8 = 13;
    /// POP consumption: a pop, a batch of acks or an invisible-time change ([`crate::state::pop`]).
    pub const POP: u8 = 14;
}

/// What a QUEUE_LOCKS entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockOp {
    /// LOCK_BATCH_MQ: grant or renew.
    Lock,
    /// UNLOCK_BATCH_MQ: release the client's own.
    Unlock,
}

const LOCK_OP_LOCK: u8 = 1;
const LOCK_OP_UNLOCK: u8 = 2;
/// Smallest encoded queue of a QUEUE_LOCKS entry: two empty names and the queue id.
const LOCKED_QUEUE_MIN_BYTES: usize = 2 + 2 + 4;

/// What a POP entry does ([`crate::state::pop::PopTable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PopOp {
    /// POP_MESSAGE: hand out the plans' messages (one queue each), under one epoch.
    Pop(Vec<PopPlan>),
    /// ACK_MESSAGE (a batch): each receipt's message leaves the table.
    Ack(Vec<Receipt>),
    /// CHANGE_MESSAGE_INVISIBLETIME: a new epoch and invisible time for one receipt.
    ChangeInvisible {
        /// The receipt renewed.
        receipt: Receipt,
        /// The new invisible time from the stamp, ms.
        invisible_ms: u64,
    },
}

const POP_OP_POP: u8 = 1;
const POP_OP_ACK: u8 = 2;
const POP_OP_CHANGE: u8 = 3;
/// Smallest encoded ack: two empty names, queue id, offset, epoch.
const POP_ACK_MIN_BYTES: usize = 2 + 2 + 4 + 8 + 8;

/// Layout version of the non-record payloads.
const LAYOUT_VERSION: u8 = 1;
/// Smallest encoded offset commit: two empty names, queue id and offset.
const OFFSET_COMMIT_MIN_BYTES: usize = 2 + 2 + 4 + 8;

/// One offset update's share of a CONSUMER_OFFSETS entry, as [`BrokerCommand::encode`] writes it.
pub fn offset_commit_encoded_len(commit: &OffsetCommit) -> usize {
    OFFSET_COMMIT_MIN_BYTES + commit.topic.len() + commit.group.len()
}
/// One encoded delay progress: queue id and offset.
const DELAY_PROGRESS_BYTES: usize = 4 + 8;

/// One consumer offset to store: `topic@group` queue `queue_id` → `offset`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OffsetCommit {
    /// Topic.
    pub topic: String,
    /// Consumer group.
    pub group: String,
    /// Queue.
    pub queue_id: i32,
    /// Next offset the group will consume (RocketMQ's committed offset).
    pub offset: i64,
}

/// Delivery progress of one `SCHEDULE_TOPIC_XXXX` queue (delay level − 1): every unit below
/// `offset` has been re-proposed into its real topic (RocketMQ's `delayOffset.json` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DelayProgress {
    /// `SCHEDULE_TOPIC_XXXX` queue id (= delay level − 1).
    pub queue_id: i32,
    /// Next ConsumeQueue offset to deliver.
    pub offset: i64,
}

/// A decoded broker entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerCommand {
    /// CommitLog records, as stored (see [`records`]).
    Messages(Bytes),
    /// Consumer offsets to store, applied in order.
    ConsumerOffsets(Vec<OffsetCommit>),
    /// Create or replace a topic.
    TopicUpsert {
        /// Leader clock when proposed (the replicated `DataVersion` timestamp).
        proposed_at_ms: i64,
        /// The new config.
        config: TopicConfig,
    },
    /// Delete a topic.
    TopicDelete {
        /// Leader clock when proposed.
        proposed_at_ms: i64,
        /// The topic.
        topic: String,
    },
    /// Create or replace a consumer group.
    SubscriptionGroupUpsert {
        /// Leader clock when proposed.
        proposed_at_ms: i64,
        /// The new config.
        config: SubscriptionGroupConfig,
    },
    /// Delete a consumer group.
    SubscriptionGroupDelete {
        /// Leader clock when proposed.
        proposed_at_ms: i64,
        /// The group.
        group: String,
    },
    /// Delay-queue delivery progress, applied in order (a level never moves back).
    DelayProgress(Vec<DelayProgress>),
    /// Record Raft node ids as used, before a membership change. Apply adds `members` to the
    /// group's used ids; with `new_id`, it first refuses (deterministically) an id already used or
    /// listed in `members`, and otherwise records it too — the reservation of a new node's id.
    NodeIdsUsed {
        /// The members at the time of the change (the initial members are recorded nowhere else).
        members: Vec<u64>,
        /// The id of a node about to be added.
        new_id: Option<u64>,
    },
    /// Set the retention boundary: every replica snapshots at entry (`index`, `term`) and purges
    /// its log up to it (whole segments); `next_pos` is where the entry after it starts.
    RetentionPurge {
        /// Raft index of the last entry to purge (P).
        index: u64,
        /// Its term.
        term: u64,
        /// Physical position right after entry P: the CommitLog's new minimum.
        next_pos: u64,
    },
    /// The plain ACL file after an edit (UPDATE_AND_CREATE_ACL_CONFIG and its family): every
    /// replica puts it in force and in its `aclFile`. Applied only if the group's last edit is
    /// still `based_on` (compare-and-set: an edit built on an older file is rejected everywhere).
    AclDocument {
        /// The version of the last replicated edit the document was built from (`None`: the first).
        based_on: Option<AclVersion>,
        /// The new file.
        document: AclDocument,
    },
    /// Drop every committed offset of a consumer group (DELETE_SUBSCRIPTIONGROUP with
    /// `removeOffset`).
    GroupOffsetsDelete {
        /// Leader clock when proposed.
        proposed_at_ms: i64,
        /// The group.
        group: String,
    },
    /// A LOCK_BATCH_MQ or UNLOCK_BATCH_MQ of one client, applied to the replicated lock table.
    QueueLocks {
        /// Lock or unlock.
        op: LockOp,
        /// The leader's lock-clock stamp (ms): the table time the batch happens at.
        stamp_ms: u64,
        /// Consumer group.
        group: String,
        /// The requesting client.
        client_id: String,
        /// The queues, in the request's order (the apply reply answers per queue).
        queues: Vec<LockedQueue>,
    },
    /// A POP table change, at the leader's POP-clock stamp.
    Pop {
        /// The leader's stamp (ms): the table time the change happens at.
        stamp_ms: u64,
        /// The change.
        op: PopOp,
    },
}

/// Why an entry payload could not be encoded or decoded.
#[derive(Debug, Error)]
pub enum EntryError {
    /// A tag this broker does not know (a newer version wrote it, or the log is corrupt).
    #[error("unknown broker entry tag {0}")]
    UnknownTag(u8),
    /// A layout version this broker does not know.
    #[error("tag {tag}: unknown layout version {version}")]
    UnknownVersion {
        /// The tag.
        tag: u8,
        /// The version byte.
        version: u8,
    },
    /// The payload ends inside a field.
    #[error("tag {tag}: payload truncated reading {field}")]
    Truncated {
        /// The tag.
        tag: u8,
        /// The field.
        field: &'static str,
    },
    /// Bytes after the last field.
    #[error("tag {tag}: {count} trailing bytes")]
    TrailingBytes {
        /// The tag.
        tag: u8,
        /// How many.
        count: usize,
    },
    /// More offsets than one batch may carry, or more than the payload can hold.
    #[error("offset batch claims {0} entries")]
    TooManyOffsets(u64),
    /// More node ids than one record may carry, or a count that disagrees with the payload.
    #[error("node id record claims {0} ids")]
    TooManyNodeIds(u64),
    /// More delay levels than one progress entry may carry, or more than the payload can hold.
    #[error("delay progress claims {0} levels")]
    TooManyDelayLevels(u64),
    /// More POP offsets or acks than one entry may carry, or more than the payload can hold.
    #[error("POP entry claims {0} items")]
    TooManyPopItems(u64),
    /// More queues than one lock batch may carry, or more than the payload can hold.
    #[error("queue lock batch claims {0} queues")]
    TooManyLockedQueues(u64),
    /// A name is not UTF-8, or is empty, or too long for its length field.
    #[error("tag {tag}: bad {field}")]
    BadName {
        /// The tag.
        tag: u8,
        /// The field.
        field: &'static str,
    },
    /// A config body is not the expected JSON.
    #[error("tag {tag}: {source}")]
    Json {
        /// The tag.
        tag: u8,
        /// What the JSON reader said.
        #[source]
        source: raftmq_common::protocol::body::BodyError,
    },
    /// A MESSAGES payload is empty.
    #[error("a MESSAGES entry holds no record")]
    NoRecords,
    /// A record could not be encoded.
    #[error(transparent)]
    Encode(#[from] RecordEncodeError),
}

impl BrokerCommand {
    /// The entry tag of this command.
    pub fn tag(&self) -> u8 {
        match self {
            BrokerCommand::Messages(_) => tag::MESSAGES,
            BrokerCommand::ConsumerOffsets(_) => tag::CONSUMER_OFFSETS,
            BrokerCommand::TopicUpsert { .. } => tag::TOPIC_UPSERT,
            BrokerCommand::TopicDelete { .. } => tag::TOPIC_DELETE,
            BrokerCommand::SubscriptionGroupUpsert { .. } => tag::SUBSCRIPTION_GROUP_UPSERT,
            BrokerCommand::SubscriptionGroupDelete { .. } => tag::SUBSCRIPTION_GROUP_DELETE,
            BrokerCommand::DelayProgress(_) => tag::DELAY_PROGRESS,
            BrokerCommand::NodeIdsUsed { .. } => tag::NODE_IDS_USED,
            BrokerCommand::RetentionPurge { .. } => tag::RETENTION_PURGE,
            BrokerCommand::AclDocument { .. } => tag::ACL_DOCUMENT,
            BrokerCommand::GroupOffsetsDelete { .. } => tag::GROUP_OFFSETS_DELETE,
            BrokerCommand::QueueLocks { .. } => tag::QUEUE_LOCKS,
            BrokerCommand::Pop { .. } => tag::POP,
        }
    }

    /// (tag, payload) for `AppPayload`.
    pub fn encode(&self) -> Result<(u8, Bytes), EntryError> {
        let tag = self.tag();
        let payload = match self {
            BrokerCommand::Messages(records) => {
                if records.is_empty() {
                    return Err(EntryError::NoRecords);
                }
                records.clone()
            }
            BrokerCommand::ConsumerOffsets(commits) => encode_offsets(commits)?,
            BrokerCommand::TopicUpsert { proposed_at_ms, config } => {
                let json = config.encode().map_err(|source| EntryError::Json { tag, source })?;
                config_payload(*proposed_at_ms, &json)
            }
            BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms, config } => {
                let json = config.encode().map_err(|source| EntryError::Json { tag, source })?;
                config_payload(*proposed_at_ms, &json)
            }
            BrokerCommand::TopicDelete { proposed_at_ms, topic: name }
            | BrokerCommand::SubscriptionGroupDelete { proposed_at_ms, group: name }
            | BrokerCommand::GroupOffsetsDelete { proposed_at_ms, group: name } => {
                if name.is_empty() {
                    return Err(EntryError::BadName { tag, field: "name" });
                }
                config_payload(*proposed_at_ms, name.as_bytes())
            }
            BrokerCommand::DelayProgress(levels) => encode_delay_progress(levels)?,
            BrokerCommand::QueueLocks { op, stamp_ms, group, client_id, queues } => {
                encode_queue_locks(*op, *stamp_ms, group, client_id, queues)?
            }
            BrokerCommand::NodeIdsUsed { members, new_id } => encode_node_ids(members, *new_id)?,
            BrokerCommand::Pop { stamp_ms, op } => encode_pop(*stamp_ms, op)?,
            BrokerCommand::RetentionPurge { index, term, next_pos } => {
                let mut out = BytesMut::with_capacity(1 + 3 * 8);
                out.put_u8(LAYOUT_VERSION);
                out.put_u64(*index);
                out.put_u64(*term);
                out.put_u64(*next_pos);
                out.freeze()
            }
            BrokerCommand::AclDocument { based_on, document } => {
                let mut out = BytesMut::with_capacity(1 + 4 * 8 + 1 + document.yaml.len());
                out.put_u8(LAYOUT_VERSION);
                out.put_i64(document.version.counter);
                out.put_i64(document.version.timestamp);
                let base = based_on.unwrap_or_default();
                out.put_u8(u8::from(based_on.is_some()));
                out.put_i64(base.counter);
                out.put_i64(base.timestamp);
                out.put_slice(document.yaml.as_bytes());
                out.freeze()
            }
        };
        Ok((tag, payload))
    }

    /// Reads a committed entry's payload.
    pub fn decode(tag: u8, payload: Bytes) -> Result<Self, EntryError> {
        match tag {
            tag::MESSAGES => {
                if payload.is_empty() {
                    return Err(EntryError::NoRecords);
                }
                Ok(BrokerCommand::Messages(payload))
            }
            tag::CONSUMER_OFFSETS => decode_offsets(&payload).map(BrokerCommand::ConsumerOffsets),
            tag::TOPIC_UPSERT => {
                let (proposed_at_ms, body) = split_config_payload(tag, &payload)?;
                let config = TopicConfig::decode(body).map_err(|source| EntryError::Json { tag, source })?;
                Ok(BrokerCommand::TopicUpsert { proposed_at_ms, config })
            }
            tag::SUBSCRIPTION_GROUP_UPSERT => {
                let (proposed_at_ms, body) = split_config_payload(tag, &payload)?;
                let config =
                    SubscriptionGroupConfig::decode(body).map_err(|source| EntryError::Json { tag, source })?;
                Ok(BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms, config })
            }
            tag::TOPIC_DELETE => {
                let (proposed_at_ms, body) = split_config_payload(tag, &payload)?;
                Ok(BrokerCommand::TopicDelete { proposed_at_ms, topic: name(tag, body)? })
            }
            tag::SUBSCRIPTION_GROUP_DELETE => {
                let (proposed_at_ms, body) = split_config_payload(tag, &payload)?;
                Ok(BrokerCommand::SubscriptionGroupDelete { proposed_at_ms, group: name(tag, body)? })
            }
            tag::GROUP_OFFSETS_DELETE => {
                let (proposed_at_ms, body) = split_config_payload(tag, &payload)?;
                Ok(BrokerCommand::GroupOffsetsDelete { proposed_at_ms, group: name(tag, body)? })
            }
            tag::DELAY_PROGRESS => decode_delay_progress(&payload).map(BrokerCommand::DelayProgress),
            tag::QUEUE_LOCKS => decode_queue_locks(&payload),
            tag::POP => decode_pop(&payload),
            tag::NODE_IDS_USED => decode_node_ids(&payload),
            tag::RETENTION_PURGE => decode_retention_purge(&payload),
            tag::ACL_DOCUMENT => {
                let mut r = Reader { tag, buf: &payload };
                r.version()?;
                let version = AclVersion { counter: r.i64("counter")?, timestamp: r.i64("timestamp")? };
                let has_base = r.u8("has_base")?;
                let base = AclVersion { counter: r.i64("base_counter")?, timestamp: r.i64("base_timestamp")? };
                let based_on = match has_base {
                    0 => None,
                    1 => Some(base),
                    _ => return Err(EntryError::BadName { tag, field: "has_base" }),
                };
                let yaml = std::str::from_utf8(r.buf).map_err(|_| EntryError::BadName { tag, field: "yaml" })?;
                Ok(BrokerCommand::AclDocument { based_on, document: AclDocument { version, yaml: yaml.to_owned() } })
            }
            other => Err(EntryError::UnknownTag(other)),
        }
    }
}

fn name(tag: u8, body: &[u8]) -> Result<String, EntryError> {
    match std::str::from_utf8(body) {
        Ok(s) if !s.is_empty() => Ok(s.to_owned()),
        _ => Err(EntryError::BadName { tag, field: "name" }),
    }
}

fn config_payload(proposed_at_ms: i64, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(1 + 8 + body.len());
    out.put_u8(LAYOUT_VERSION);
    out.put_i64(proposed_at_ms);
    out.put_slice(body);
    out.freeze()
}

fn split_config_payload(tag: u8, payload: &[u8]) -> Result<(i64, &[u8]), EntryError> {
    let mut r = Reader { tag, buf: payload };
    r.version()?;
    let proposed_at_ms = r.i64("proposed_at_ms")?;
    Ok((proposed_at_ms, r.buf))
}

fn put_name(out: &mut BytesMut, value: &str, field: &'static str) -> Result<(), EntryError> {
    put_tagged_name(out, tag::CONSUMER_OFFSETS, value, field)
}

fn put_tagged_name(out: &mut BytesMut, tag: u8, value: &str, field: &'static str) -> Result<(), EntryError> {
    let len = u16::try_from(value.len()).map_err(|_| EntryError::BadName { tag, field })?;
    out.put_u16(len);
    out.put_slice(value.as_bytes());
    Ok(())
}

fn encode_offsets(commits: &[OffsetCommit]) -> Result<Bytes, EntryError> {
    if commits.len() > CONSUMER_OFFSET_BATCH_MAX_COUNT {
        return Err(EntryError::TooManyOffsets(commits.len() as u64));
    }
    let bytes: usize = commits.iter().map(offset_commit_encoded_len).sum();
    let mut out = BytesMut::with_capacity(1 + 4 + bytes);
    out.put_u8(LAYOUT_VERSION);
    // Bounded by CONSUMER_OFFSET_BATCH_MAX_COUNT above.
    out.put_u32(commits.len() as u32);
    for c in commits {
        put_name(&mut out, &c.topic, "topic")?;
        put_name(&mut out, &c.group, "group")?;
        out.put_i32(c.queue_id);
        out.put_i64(c.offset);
    }
    Ok(out.freeze())
}

fn decode_offsets(payload: &[u8]) -> Result<Vec<OffsetCommit>, EntryError> {
    let tag = tag::CONSUMER_OFFSETS;
    let mut r = Reader { tag, buf: payload };
    r.version()?;
    let count = r.u32("count")?;
    // Never allocate for more entries than the bytes can hold.
    let fits = r.buf.len() / OFFSET_COMMIT_MIN_BYTES;
    if count as usize > CONSUMER_OFFSET_BATCH_MAX_COUNT || count as usize > fits {
        return Err(EntryError::TooManyOffsets(u64::from(count)));
    }
    let mut commits = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let topic = r.string("topic")?;
        let group = r.string("group")?;
        let queue_id = r.i32("queue_id")?;
        let offset = r.i64("offset")?;
        commits.push(OffsetCommit { topic, group, queue_id, offset });
    }
    if !r.buf.is_empty() {
        return Err(EntryError::TrailingBytes { tag, count: r.buf.len() });
    }
    Ok(commits)
}

fn encode_delay_progress(levels: &[DelayProgress]) -> Result<Bytes, EntryError> {
    if levels.len() > DELAY_PROGRESS_BATCH_MAX_COUNT {
        return Err(EntryError::TooManyDelayLevels(levels.len() as u64));
    }
    let mut out = BytesMut::with_capacity(1 + 4 + levels.len() * DELAY_PROGRESS_BYTES);
    out.put_u8(LAYOUT_VERSION);
    // Bounded by DELAY_PROGRESS_BATCH_MAX_COUNT above.
    out.put_u32(levels.len() as u32);
    for p in levels {
        out.put_i32(p.queue_id);
        out.put_i64(p.offset);
    }
    Ok(out.freeze())
}

fn decode_delay_progress(payload: &[u8]) -> Result<Vec<DelayProgress>, EntryError> {
    let tag = tag::DELAY_PROGRESS;
    let mut r = Reader { tag, buf: payload };
    r.version()?;
    let count = r.u32("count")?;
    // Never allocate for more entries than the bytes can hold.
    let fits = r.buf.len() / DELAY_PROGRESS_BYTES;
    if count as usize > DELAY_PROGRESS_BATCH_MAX_COUNT || count as usize > fits {
        return Err(EntryError::TooManyDelayLevels(u64::from(count)));
    }
    let mut levels = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let queue_id = r.i32("queue_id")?;
        let offset = r.i64("offset")?;
        levels.push(DelayProgress { queue_id, offset });
    }
    if !r.buf.is_empty() {
        return Err(EntryError::TrailingBytes { tag, count: r.buf.len() });
    }
    Ok(levels)
}

fn encode_queue_locks(
    op: LockOp,
    stamp_ms: u64,
    group: &str,
    client_id: &str,
    queues: &[LockedQueue],
) -> Result<Bytes, EntryError> {
    let tag = tag::QUEUE_LOCKS;
    if queues.len() > BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT {
        return Err(EntryError::TooManyLockedQueues(queues.len() as u64));
    }
    let names: usize = queues.iter().map(|q| LOCKED_QUEUE_MIN_BYTES + q.topic.len() + q.broker_name.len()).sum();
    let mut out = BytesMut::with_capacity(1 + 1 + 8 + 4 + group.len() + client_id.len() + 4 + names);
    out.put_u8(LAYOUT_VERSION);
    out.put_u8(match op {
        LockOp::Lock => LOCK_OP_LOCK,
        LockOp::Unlock => LOCK_OP_UNLOCK,
    });
    out.put_u64(stamp_ms);
    put_tagged_name(&mut out, tag, group, "group")?;
    put_tagged_name(&mut out, tag, client_id, "client_id")?;
    // Bounded by BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT above.
    out.put_u32(queues.len() as u32);
    for q in queues {
        put_tagged_name(&mut out, tag, &q.topic, "topic")?;
        put_tagged_name(&mut out, tag, &q.broker_name, "broker_name")?;
        out.put_i32(q.queue_id);
    }
    Ok(out.freeze())
}

fn decode_queue_locks(payload: &[u8]) -> Result<BrokerCommand, EntryError> {
    let tag = tag::QUEUE_LOCKS;
    let mut r = Reader { tag, buf: payload };
    r.version()?;
    let op = match r.u8("op")? {
        LOCK_OP_LOCK => LockOp::Lock,
        LOCK_OP_UNLOCK => LockOp::Unlock,
        _ => return Err(EntryError::BadName { tag, field: "op" }),
    };
    let stamp_ms = u64::from_be_bytes(r.array("stamp_ms")?);
    let group = r.string("group")?;
    let client_id = r.string("client_id")?;
    let count = r.u32("count")?;
    // Never allocate for more queues than the bytes can hold.
    let fits = r.buf.len() / LOCKED_QUEUE_MIN_BYTES;
    if count as usize > BROKER_REBALANCE_LOCK_BATCH_MAX_COUNT || count as usize > fits {
        return Err(EntryError::TooManyLockedQueues(u64::from(count)));
    }
    let mut queues = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let topic = r.string("topic")?;
        let broker_name = r.string("broker_name")?;
        let queue_id = r.i32("queue_id")?;
        queues.push(LockedQueue { topic, broker_name, queue_id });
    }
    if !r.buf.is_empty() {
        return Err(EntryError::TrailingBytes { tag, count: r.buf.len() });
    }
    Ok(BrokerCommand::QueueLocks { op, stamp_ms, group, client_id, queues })
}

fn put_pop_queue(out: &mut BytesMut, queue: &PopQueue) -> Result<(), EntryError> {
    put_tagged_name(out, tag::POP, &queue.group, "group")?;
    put_tagged_name(out, tag::POP, &queue.topic, "topic")?;
    out.put_i32(queue.queue_id);
    Ok(())
}

fn put_offsets(out: &mut BytesMut, offsets: &[i64]) -> Result<(), EntryError> {
    if offsets.len() > POP_OFFSETS_MAX_COUNT {
        return Err(EntryError::TooManyPopItems(offsets.len() as u64));
    }
    out.put_u32(offsets.len() as u32);
    offsets.iter().for_each(|o| out.put_i64(*o));
    Ok(())
}

/// Most offsets one plan may name (a pop hands out at most `POP_BATCH_MAX_COUNT`).
const POP_OFFSETS_MAX_COUNT: usize = 4 * POP_BATCH_MAX_COUNT;
/// Most queues one pop entry plans (a topic's queues and its retry topic's).
const POP_PLANS_MAX_COUNT: usize = TOPIC_QUEUE_NUMS_MAX_COUNT as usize + 1;
/// Smallest encoded plan: two empty names, queue id, from, to, invisible, fifo, two counts.
const POP_PLAN_MIN_BYTES: usize = 2 + 2 + 4 + 8 + 8 + 8 + 1 + 4 + 4;

fn encode_pop(stamp_ms: u64, op: &PopOp) -> Result<Bytes, EntryError> {
    let mut out = BytesMut::with_capacity(64);
    out.put_u8(LAYOUT_VERSION);
    match op {
        PopOp::Pop(plans) => {
            if plans.len() > POP_PLANS_MAX_COUNT {
                return Err(EntryError::TooManyPopItems(plans.len() as u64));
            }
            out.put_u8(POP_OP_POP);
            out.put_u64(stamp_ms);
            out.put_u32(plans.len() as u32);
            for plan in plans {
                put_pop_queue(&mut out, &plan.queue)?;
                out.put_i64(plan.from);
                out.put_i64(plan.to);
                out.put_u64(plan.invisible_ms);
                out.put_u8(u8::from(plan.fifo));
                put_offsets(&mut out, &plan.offsets)?;
                put_offsets(&mut out, &plan.again)?;
            }
        }
        PopOp::Ack(receipts) => {
            if receipts.len() > POP_ACK_BATCH_MAX_COUNT {
                return Err(EntryError::TooManyPopItems(receipts.len() as u64));
            }
            out.put_u8(POP_OP_ACK);
            out.put_u64(stamp_ms);
            out.put_u32(receipts.len() as u32);
            for r in receipts {
                put_pop_queue(&mut out, &r.queue)?;
                out.put_i64(r.offset);
                out.put_u64(r.epoch_ms);
            }
        }
        PopOp::ChangeInvisible { receipt, invisible_ms } => {
            out.put_u8(POP_OP_CHANGE);
            out.put_u64(stamp_ms);
            put_pop_queue(&mut out, &receipt.queue)?;
            out.put_i64(receipt.offset);
            out.put_u64(receipt.epoch_ms);
            out.put_u64(*invisible_ms);
        }
    }
    Ok(out.freeze())
}

fn decode_pop(payload: &[u8]) -> Result<BrokerCommand, EntryError> {
    let tag = tag::POP;
    let mut r = Reader { tag, buf: payload };
    r.version()?;
    let op = r.u8("op")?;
    let stamp_ms = r.u64("stamp_ms")?;
    let op = match op {
        POP_OP_POP => {
            let count = r.u32("plan count")? as usize;
            if count > POP_PLANS_MAX_COUNT || count > r.buf.len() / POP_PLAN_MIN_BYTES {
                return Err(EntryError::TooManyPopItems(count as u64));
            }
            let mut plans = Vec::with_capacity(count);
            for _ in 0..count {
                let queue = r.pop_queue()?;
                let from = r.i64("from")?;
                let to = r.i64("to")?;
                let invisible_ms = r.u64("invisible_ms")?;
                let fifo = match r.u8("fifo")? {
                    0 => false,
                    1 => true,
                    _ => return Err(EntryError::BadName { tag, field: "fifo" }),
                };
                let offsets = r.offsets()?;
                let again = r.offsets()?;
                plans.push(PopPlan { queue, from, to, offsets, again, invisible_ms, fifo });
            }
            PopOp::Pop(plans)
        }
        POP_OP_ACK => {
            let count = r.u32("count")? as usize;
            if count > POP_ACK_BATCH_MAX_COUNT || count > r.buf.len() / POP_ACK_MIN_BYTES {
                return Err(EntryError::TooManyPopItems(count as u64));
            }
            let mut receipts = Vec::with_capacity(count);
            for _ in 0..count {
                let queue = r.pop_queue()?;
                receipts.push(Receipt { queue, offset: r.i64("offset")?, epoch_ms: r.u64("epoch_ms")? });
            }
            PopOp::Ack(receipts)
        }
        POP_OP_CHANGE => {
            let queue = r.pop_queue()?;
            let receipt = Receipt { queue, offset: r.i64("offset")?, epoch_ms: r.u64("epoch_ms")? };
            PopOp::ChangeInvisible { receipt, invisible_ms: r.u64("invisible_ms")? }
        }
        _ => return Err(EntryError::BadName { tag, field: "op" }),
    };
    if !r.buf.is_empty() {
        return Err(EntryError::TrailingBytes { tag, count: r.buf.len() });
    }
    Ok(BrokerCommand::Pop { stamp_ms, op })
}

fn encode_node_ids(members: &[u64], new_id: Option<u64>) -> Result<Bytes, EntryError> {
    if members.len() > RAFT_NODE_IDS_MAX_COUNT {
        return Err(EntryError::TooManyNodeIds(members.len() as u64));
    }
    let mut out = BytesMut::with_capacity(1 + 1 + 8 + 4 + 8 * members.len());
    out.put_u8(LAYOUT_VERSION);
    out.put_u8(u8::from(new_id.is_some()));
    out.put_u64(new_id.unwrap_or(0));
    // Bounded by RAFT_NODE_IDS_MAX_COUNT above.
    out.put_u32(members.len() as u32);
    for id in members {
        out.put_u64(*id);
    }
    Ok(out.freeze())
}

fn decode_node_ids(payload: &[u8]) -> Result<BrokerCommand, EntryError> {
    let tag = tag::NODE_IDS_USED;
    let mut r = Reader { tag, buf: payload };
    r.version()?;
    let [has_new] = r.array::<1>("has_new")?;
    let new_id = u64::from_be_bytes(r.array("new_id")?);
    let new_id = match has_new {
        0 => None,
        1 => Some(new_id),
        _ => return Err(EntryError::BadName { tag, field: "has_new" }),
    };
    let count = r.u32("count")?;
    // Never allocate for more ids than the bytes hold; and the bytes must hold exactly them.
    if count as usize > RAFT_NODE_IDS_MAX_COUNT || r.buf.len() != 8 * count as usize {
        return Err(EntryError::TooManyNodeIds(u64::from(count)));
    }
    let mut members = Vec::with_capacity(count as usize);
    for _ in 0..count {
        members.push(u64::from_be_bytes(r.array("id")?));
    }
    Ok(BrokerCommand::NodeIdsUsed { members, new_id })
}

fn decode_retention_purge(payload: &[u8]) -> Result<BrokerCommand, EntryError> {
    let tag = tag::RETENTION_PURGE;
    let mut r = Reader { tag, buf: payload };
    r.version()?;
    let index = u64::from_be_bytes(r.array("index")?);
    let term = u64::from_be_bytes(r.array("term")?);
    let next_pos = u64::from_be_bytes(r.array("next_pos")?);
    if !r.buf.is_empty() {
        return Err(EntryError::TrailingBytes { tag, count: r.buf.len() });
    }
    Ok(BrokerCommand::RetentionPurge { index, term, next_pos })
}

struct Reader<'a> {
    tag: u8,
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], EntryError> {
        if self.buf.len() < n {
            return Err(EntryError::Truncated { tag: self.tag, field });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], EntryError> {
        let bytes = self.take(N, field)?;
        bytes.try_into().map_err(|_| EntryError::Truncated { tag: self.tag, field })
    }

    fn version(&mut self) -> Result<(), EntryError> {
        let [version] = self.array::<1>("version")?;
        if version != LAYOUT_VERSION {
            return Err(EntryError::UnknownVersion { tag: self.tag, version });
        }
        Ok(())
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, EntryError> {
        self.array::<1>(field).map(|[b]| b)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, EntryError> {
        self.array(field).map(u32::from_be_bytes)
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, EntryError> {
        self.array(field).map(i32::from_be_bytes)
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, EntryError> {
        self.array(field).map(i64::from_be_bytes)
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, EntryError> {
        self.array(field).map(u64::from_be_bytes)
    }

    fn pop_queue(&mut self) -> Result<PopQueue, EntryError> {
        Ok(PopQueue { group: self.string("group")?, topic: self.string("topic")?, queue_id: self.i32("queue_id")? })
    }

    fn offsets(&mut self) -> Result<Vec<i64>, EntryError> {
        let count = self.u32("offset count")? as usize;
        if count > POP_OFFSETS_MAX_COUNT || count > self.buf.len() / 8 {
            return Err(EntryError::TooManyPopItems(count as u64));
        }
        (0..count).map(|_| self.i64("offset")).collect()
    }

    fn string(&mut self, field: &'static str) -> Result<String, EntryError> {
        let len = u16::from_be_bytes(self.array(field)?);
        let bytes = self.take(usize::from(len), field)?;
        std::str::from_utf8(bytes).map(str::to_owned).map_err(|_| EntryError::BadName { tag: self.tag, field })
    }
}

/// Encodes messages (QUEUEOFFSET already assigned, PHYSICALOFFSET whatever: the patcher overwrites it)
/// into a MESSAGES payload.
pub fn encode_messages(messages: &[MessageExt]) -> Result<Bytes, EntryError> {
    if messages.is_empty() {
        return Err(EntryError::NoRecords);
    }
    let mut out = BytesMut::new();
    for msg in messages {
        encode_record_into(msg, &mut out)?;
    }
    Ok(out.freeze())
}

/// Walks a MESSAGES payload: `(offset_in_payload, record)` for each record; stops after the first error.
pub fn records(payload: &[u8]) -> impl Iterator<Item = Result<(usize, RecordView<'_>), RecordError>> {
    let mut at = 0usize;
    let mut index = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || at >= payload.len() {
            return None;
        }
        let rest = payload.get(at..).unwrap_or_default();
        match parse_record(rest, DecodeOptions::default()) {
            Ok(view) => {
                let start = at;
                at += view.total_size;
                index += 1;
                Some(Ok((start, view)))
            }
            Err(e) => {
                failed = true;
                Some(Err(RecordError::AtOffset { index, offset: at, source: Box::new(e) }))
            }
        }
    })
}

/// Writes each record's PHYSICALOFFSET = `payload_pos + offset_in_payload` (the `PayloadPatcher` for
/// tag MESSAGES; runs on every replica at append time). Deterministic and idempotent. Stops at the first
/// malformed record (apply then rejects the entry) and returns how many records it patched.
pub fn patch_physical_offsets(payload: &mut [u8], payload_pos: u64) -> usize {
    let mut at = 0usize;
    let mut patched = 0usize;
    while at < payload.len() {
        let Some(rest) = payload.get_mut(at..) else { break };
        let total_size = match peek_record(rest) {
            Ok(RecordKind::Message { total_size, .. }) if total_size <= rest.len() => total_size,
            _ => break,
        };
        let Ok(phy) = i64::try_from(payload_pos.saturating_add(at as u64)) else { break };
        if patch_physical_offset(rest, phy).is_err() {
            break;
        }
        patched += 1;
        at += total_size;
    }
    patched
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use proptest::prelude::*;
    use raftmq_common::message::Message;
    use raftmq_common::message::record::read_physical_offset;

    use super::*;

    fn msg(topic: &str, queue_id: i32, queue_offset: i64, body: &'static [u8]) -> MessageExt {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        MessageExt {
            message: Message::new(topic, body).with_tags("TagA"),
            queue_id,
            queue_offset,
            born_host: host,
            store_host: host,
            store_timestamp: 1_700_000_000_000,
            ..MessageExt::default()
        }
    }

    #[test]
    fn messages_payload_patches_every_record() {
        let payload = encode_messages(&[msg("T", 0, 5, b"a"), msg("T", 0, 6, b"bb"), msg("U", 1, 0, b"")]).unwrap();
        let mut bytes = payload.to_vec();
        assert_eq!(patch_physical_offsets(&mut bytes, 1048), 3);
        let found: Vec<(usize, i64, i64)> =
            records(&bytes).map(|r| r.unwrap()).map(|(at, v)| (at, v.commit_log_offset, v.queue_offset)).collect();
        assert_eq!(found.len(), 3);
        for (at, phy, _) in &found {
            assert_eq!(*phy, 1048 + *at as i64);
            assert_eq!(read_physical_offset(&bytes[*at..]).unwrap(), *phy);
        }
        assert_eq!(found.iter().map(|f| f.2).collect::<Vec<_>>(), vec![5, 6, 0]);
        // Idempotent: followers patch bytes the leader already patched.
        let once = bytes.clone();
        patch_physical_offsets(&mut bytes, 1048);
        assert_eq!(bytes, once);
        // A torn tail stops patching and iteration reports the error.
        let mut torn = once[..once.len() - 3].to_vec();
        assert_eq!(patch_physical_offsets(&mut torn, 0), 2);
        assert!(records(&torn).last().unwrap().is_err());
    }

    #[test]
    fn command_golden_layouts() {
        let cmd = BrokerCommand::ConsumerOffsets(vec![OffsetCommit {
            topic: "T".into(),
            group: "g".into(),
            queue_id: 3,
            offset: 42,
        }]);
        let (tag, bytes) = cmd.encode().unwrap();
        assert_eq!(tag, 2);
        assert_eq!(bytes.as_ref(), &[1, 0, 0, 0, 1, 0, 1, b'T', 0, 1, b'g', 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 42][..]);
        let del = BrokerCommand::TopicDelete { proposed_at_ms: 1, topic: "T".into() };
        let (tag, bytes) = del.encode().unwrap();
        assert_eq!((tag, bytes.as_ref()), (4, &[1, 0, 0, 0, 0, 0, 0, 0, 1, b'T'][..]));
        let delay = BrokerCommand::DelayProgress(vec![DelayProgress { queue_id: 2, offset: 9 }]);
        let (tag, bytes) = delay.encode().unwrap();
        assert_eq!((tag, bytes.as_ref()), (7, &[1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9][..]));
        let up = BrokerCommand::TopicUpsert { proposed_at_ms: 2, config: TopicConfig::new("T") };
        let (tag, bytes) = up.encode().unwrap();
        assert_eq!(tag, 3);
        assert!(bytes[9..].starts_with(br#"{"order":false,"perm":6"#));
        let purge = BrokerCommand::RetentionPurge { index: 7, term: 2, next_pos: 0x0102 };
        let (tag, bytes) = purge.encode().unwrap();
        assert_eq!(
            (tag, bytes.as_ref()),
            (10, &[1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2][..])
        );
        let acl = BrokerCommand::AclDocument {
            based_on: Some(AclVersion { counter: 2, timestamp: 7 }),
            document: AclDocument { version: AclVersion { counter: 3, timestamp: 0x0105 }, yaml: "a: 1".into() },
        };
        let (tag, bytes) = acl.encode().unwrap();
        assert_eq!(tag, 11);
        assert_eq!(
            bytes.as_ref(),
            &[
                1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 5, // version, counter, timestamp
                1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 7, // based on
                b'a', b':', b' ', b'1',
            ][..]
        );
        let locks = BrokerCommand::QueueLocks {
            op: LockOp::Lock,
            stamp_ms: 0x0102,
            group: "g".into(),
            client_id: "c".into(),
            queues: vec![LockedQueue { topic: "T".into(), broker_name: "b".into(), queue_id: 3 }],
        };
        let (tag, bytes) = locks.encode().unwrap();
        assert_eq!(tag, 13);
        assert_eq!(
            bytes.as_ref(),
            &[
                1, 1, 0, 0, 0, 0, 0, 0, 1, 2, // version, op, stamp
                0, 1, b'g', 0, 1, b'c', 0, 0, 0, 1, // group, client, count
                0, 1, b'T', 0, 1, b'b', 0, 0, 0, 3, // topic, broker, queue id
            ][..]
        );
        let ids = BrokerCommand::NodeIdsUsed { members: vec![1, 2], new_id: Some(4) };
        let (tag, bytes) = ids.encode().unwrap();
        assert_eq!(tag, 9);
        assert_eq!(
            bytes.as_ref(),
            &[1, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2][..]
        );
    }

    #[test]
    fn decode_errors() {
        assert!(matches!(BrokerCommand::decode(15, Bytes::new()), Err(EntryError::UnknownTag(15))));
        assert!(matches!(BrokerCommand::decode(14, Bytes::from_static(&[1, 9])), Err(EntryError::Truncated { .. })));
        // A pop claiming more plans than its bytes hold allocates nothing.
        let huge = [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        assert!(matches!(
            BrokerCommand::decode(14, Bytes::copy_from_slice(&huge)),
            Err(EntryError::TooManyPopItems(9))
        ));
        assert!(matches!(BrokerCommand::decode(13, Bytes::from_static(&[1, 3])), Err(EntryError::BadName { .. })));
        assert!(matches!(
            BrokerCommand::decode(13, Bytes::from_static(&[1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9])),
            Err(EntryError::TooManyLockedQueues(9))
        ));
        assert!(matches!(BrokerCommand::decode(11, Bytes::from_static(&[1, 0, 0])), Err(EntryError::Truncated { .. })));
        assert!(matches!(BrokerCommand::decode(10, Bytes::from_static(&[1, 0])), Err(EntryError::Truncated { .. })));
        assert!(matches!(
            BrokerCommand::decode(9, Bytes::from_static(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])),
            Err(EntryError::TooManyNodeIds(_))
        ));
        assert!(matches!(
            BrokerCommand::decode(9, Bytes::from_static(&[1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])),
            Err(EntryError::BadName { .. })
        ));
        assert!(matches!(BrokerCommand::decode(8, Bytes::new()), Err(EntryError::UnknownTag(8))));
        assert!(matches!(
            BrokerCommand::decode(7, Bytes::from_static(&[1, 0, 0, 0, 2, 0, 0, 0, 0])),
            Err(EntryError::TooManyDelayLevels(2))
        ));
        assert!(matches!(BrokerCommand::decode(1, Bytes::new()), Err(EntryError::NoRecords)));
        assert!(matches!(
            BrokerCommand::decode(2, Bytes::from_static(&[2, 0, 0, 0, 0])),
            Err(EntryError::UnknownVersion { version: 2, .. })
        ));
        assert!(matches!(
            BrokerCommand::decode(2, Bytes::from_static(&[1, 0xff, 0xff, 0xff, 0xff])),
            Err(EntryError::TooManyOffsets(_))
        ));
        assert!(matches!(
            BrokerCommand::decode(2, Bytes::from_static(&[1, 0, 0, 0, 0, 9])),
            Err(EntryError::TrailingBytes { count: 1, .. })
        ));
        assert!(matches!(
            BrokerCommand::decode(4, Bytes::from_static(&[1, 0, 0, 0, 0, 0, 0, 0, 1])),
            Err(EntryError::BadName { .. })
        ));
        assert!(matches!(
            BrokerCommand::decode(3, Bytes::from_static(&[1, 0, 0, 0, 0, 0, 0, 0, 1, b'{'])),
            Err(EntryError::Json { .. })
        ));
        assert!(matches!(BrokerCommand::decode(5, Bytes::from_static(&[1, 0])), Err(EntryError::Truncated { .. })));
    }

    fn name_strategy() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_%|-]{1,40}"
    }

    fn command_strategy() -> impl Strategy<Value = BrokerCommand> {
        let commit = (name_strategy(), name_strategy(), any::<i32>(), any::<i64>())
            .prop_map(|(topic, group, queue_id, offset)| OffsetCommit { topic, group, queue_id, offset });
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 1..64).prop_map(|b| BrokerCommand::Messages(Bytes::from(b))),
            proptest::collection::vec(commit, 0..8).prop_map(BrokerCommand::ConsumerOffsets),
            (any::<i64>(), name_strategy(), 0..64i32, 0..8i32).prop_map(|(ts, t, q, p)| {
                BrokerCommand::TopicUpsert {
                    proposed_at_ms: ts,
                    config: TopicConfig { read_queue_nums: q, write_queue_nums: q, perm: p, ..TopicConfig::new(t) },
                }
            }),
            (any::<i64>(), name_strategy())
                .prop_map(|(ts, topic)| BrokerCommand::TopicDelete { proposed_at_ms: ts, topic }),
            (any::<i64>(), name_strategy(), any::<i32>()).prop_map(|(ts, g, retry)| {
                BrokerCommand::SubscriptionGroupUpsert {
                    proposed_at_ms: ts,
                    config: SubscriptionGroupConfig { retry_max_times: retry, ..SubscriptionGroupConfig::new(g) },
                }
            }),
            (any::<i64>(), name_strategy())
                .prop_map(|(ts, group)| BrokerCommand::SubscriptionGroupDelete { proposed_at_ms: ts, group }),
            (any::<i64>(), "[a-z]{1,8}")
                .prop_map(|(ts, group)| BrokerCommand::GroupOffsetsDelete { proposed_at_ms: ts, group }),
            proptest::collection::vec((any::<i32>(), any::<i64>()), 0..20).prop_map(|levels| {
                BrokerCommand::DelayProgress(
                    levels.into_iter().map(|(queue_id, offset)| DelayProgress { queue_id, offset }).collect(),
                )
            }),
            (proptest::collection::vec(any::<u64>(), 0..8), proptest::option::of(any::<u64>()))
                .prop_map(|(members, new_id)| BrokerCommand::NodeIdsUsed { members, new_id }),
            (any::<u64>(), any::<u64>(), any::<u64>())
                .prop_map(|(index, term, next_pos)| BrokerCommand::RetentionPurge { index, term, next_pos }),
            (
                any::<bool>(),
                any::<u64>(),
                name_strategy(),
                ".{0,20}",
                proptest::collection::vec((name_strategy(), name_strategy(), any::<i32>()), 0..6)
            )
                .prop_map(|(lock, stamp_ms, group, client_id, queues)| BrokerCommand::QueueLocks {
                    op: if lock { LockOp::Lock } else { LockOp::Unlock },
                    stamp_ms,
                    group,
                    client_id,
                    queues: queues
                        .into_iter()
                        .map(|(topic, broker_name, queue_id)| LockedQueue { topic, broker_name, queue_id })
                        .collect(),
                }),
            (
                any::<u64>(),
                name_strategy(),
                name_strategy(),
                any::<i32>(),
                proptest::collection::vec(any::<i64>(), 0..5),
                any::<bool>()
            )
                .prop_map(|(stamp_ms, group, topic, queue_id, offsets, fifo)| {
                    let queue = PopQueue { group, topic, queue_id };
                    let op = match stamp_ms % 3 {
                        0 => PopOp::Pop(vec![PopPlan {
                            queue,
                            from: 1,
                            to: 9,
                            offsets: offsets.clone(),
                            again: offsets,
                            invisible_ms: stamp_ms / 7,
                            fifo,
                        }]),
                        1 => PopOp::Ack(
                            offsets
                                .iter()
                                .map(|o| Receipt { queue: queue.clone(), offset: *o, epoch_ms: stamp_ms })
                                .collect(),
                        ),
                        _ => PopOp::ChangeInvisible {
                            receipt: Receipt { queue, offset: 3, epoch_ms: stamp_ms },
                            invisible_ms: 5,
                        },
                    };
                    BrokerCommand::Pop { stamp_ms, op }
                }),
            (any::<i64>(), any::<i64>(), proptest::option::of((any::<i64>(), any::<i64>())), ".*").prop_map(
                |(counter, timestamp, base, yaml)| BrokerCommand::AclDocument {
                    based_on: base.map(|(counter, timestamp)| AclVersion { counter, timestamp }),
                    document: AclDocument { version: AclVersion { counter, timestamp }, yaml },
                }
            ),
        ]
    }

    proptest! {
        #[test]
        fn commands_round_trip(cmd in command_strategy()) {
            let (tag, payload) = cmd.encode().unwrap();
            prop_assert_eq!(BrokerCommand::decode(tag, payload).unwrap(), cmd);
        }

        #[test]
        fn decoding_garbage_never_panics(tag in 0u8..15, bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            // Only the absence of a panic is checked: garbage may decode or fail.
            let _ = BrokerCommand::decode(tag, Bytes::from(bytes.clone()));
            let mut b = bytes.clone();
            patch_physical_offsets(&mut b, 7);
            prop_assert_eq!(b.len(), bytes.len());
            prop_assert!(records(&bytes).count() <= bytes.len() / 91 + 1);
        }
    }
}
