//! What each request code touches and needs (`PlainAccessValidator.parse` of 4.9.8): the topic or
//! group [`Resource`]s a request names with the permission each needs, and the codes that need an
//! `admin` account ([`ADMIN_CODES`]) or pass no address shortcut ([`ACL_EDIT_CODES`]).
//!
//! Pure: it reads the request's `extFields` and body only. Where it is stricter than Java, the
//! place says so.

use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::decode_lenient;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::lock_batch::LockBatchRequestBody;
use raftmq_common::protocol::body::lock_batch::UnlockBatchRequestBody;

use super::error::AclDenied;
use super::perm;

/// The codes that edit the ACL, and the one that reads every account's secret (which would let
/// its reader sign as an admin): they need a signed `admin` account whatever the peer's address
/// (stricter than Java, which lets any signed or white-listed client send them).
pub const ACL_EDIT_CODES: &[RequestCode] = &[
    RequestCode::UpdateAndCreateAclConfig,
    RequestCode::DeleteAclConfig,
    RequestCode::UpdateGlobalWhiteAddrsConfig,
    RequestCode::GetBrokerClusterAclConfig,
];

/// Codes only an `admin: true` account may send: Java 4.9's `Permission.ADMIN_CODE`; our Raft
/// membership codes (a removal notice unroutes a replica); and, stricter than Java, the two that
/// move any group's offsets (`resetOffsetByTime`, `cloneGroupOffset`), the one that puts any
/// producer group's half back for checking (`resumeCheckHalfMessage`), the one that reads every
/// account's secret (`getAccessConfigSubCommand`), and the three that edit
/// the ACL itself, which Java leaves to any signed account (`crate::processors::acl`).
pub const ADMIN_CODES: &[RequestCode] = &[
    RequestCode::UpdateAndCreateTopic,
    RequestCode::UpdateBrokerConfig,
    RequestCode::DeleteTopicInBroker,
    RequestCode::UpdateAndCreateSubscriptiongroup,
    RequestCode::DeleteSubscriptiongroup,
    RequestCode::RaftAddNode,
    RequestCode::RaftRemoveNode,
    RequestCode::RaftTransferLeadership,
    RequestCode::RaftNodeRemoved,
    RequestCode::InvokeBrokerToResetOffset,
    RequestCode::CloneGroupOffset,
    RequestCode::ResumeCheckHalfMessage,
    RequestCode::GetBrokerClusterAclConfig,
    RequestCode::UpdateAndCreateAclConfig,
    RequestCode::DeleteAclConfig,
    RequestCode::UpdateGlobalWhiteAddrsConfig,
];

/// What a request touches: a topic, or a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resource {
    /// A topic.
    Topic(String),
    /// A consumer group (RocketMQ writes it as the group's `%RETRY%` topic).
    Group(String),
}

impl Resource {
    /// A topic as a request names it: `%RETRY%g` is the group `g`, as Java reads it.
    pub fn of_topic(topic: &str) -> Self {
        match topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
            Some(group) => Resource::Group(group.to_owned()),
            None => Resource::Topic(topic.to_owned()),
        }
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Topic(t) => write!(f, "topic:{t}"),
            Resource::Group(g) => write!(f, "group:{g}"),
        }
    }
}

/// The resources `request` touches and the permission each needs (`PlainAccessValidator.parse`
/// of 4.9.8).
pub fn resources(request: &RemotingCommand) -> Result<Vec<(Resource, u8)>, AclDenied> {
    fn topic(out: &mut Vec<(Resource, u8)>, name: Option<&str>, p: u8) {
        if let Some(t) = name {
            out.push((Resource::of_topic(t), p));
        }
    }
    fn group(out: &mut Vec<(Resource, u8)>, name: Option<&str>, p: u8) {
        if let Some(g) = name {
            out.push((Resource::Group(g.to_owned()), p));
        }
    }
    let field = |name: &str| request.ext_fields.get(name).map(|v| v.as_str());
    let mut out = Vec::new();
    // A send to a retry topic is a consumer's re-delivery: SUB on the sending group (Java 4.9.4+)
    // and, stricter than Java, SUB on the group whose retry topic it is.
    let send = |out: &mut Vec<(Resource, u8)>, topic_field: &str, group_field: &str| match field(topic_field) {
        Some(t) if t.starts_with(RETRY_GROUP_TOPIC_PREFIX) => {
            group(out, field(group_field), perm::SUB);
            topic(out, Some(t), perm::SUB);
        }
        t => topic(out, t, perm::PUB),
    };
    match request.request_code() {
        // Java reads `group`, which SEND_MESSAGE's header does not have (`producerGroup`).
        RequestCode::SendMessage => send(&mut out, "topic", "group"),
        // Java 4.9 checks V2 only; a batch travels with the same header, so it is checked alike.
        RequestCode::SendMessageV2 | RequestCode::SendBatchMessage => send(&mut out, "b", "a"),
        // Java checks no resource on replies (only the signature); an ACL that let a consumer read
        // the request keeps letting it answer, whatever `<cluster>_REPLY_TOPIC`'s permission.
        RequestCode::SendReplyMessage | RequestCode::SendReplyMessageV2 => {}
        // Stricter than Java: SUB on the original topic too (the broker copies the message at an
        // offset the request names; `send_back` also checks that it is of that topic).
        RequestCode::ConsumerSendMsgBack => {
            group(&mut out, field("group"), perm::SUB);
            topic(&mut out, field("originTopic"), perm::SUB);
        }
        RequestCode::PullMessage => {
            topic(&mut out, field("topic"), perm::SUB);
            group(&mut out, field("consumerGroup"), perm::SUB);
        }
        RequestCode::QueryMessage => topic(&mut out, field("topic"), perm::SUB),
        RequestCode::HeartBeat => {
            let data = HeartbeatData::decode(&request.body)
                .map_err(|e| AclDenied(format!("the heartbeat body does not decode: {e}")))?;
            for consumer in &data.consumer_data_set {
                group(&mut out, Some(&consumer.group_name), perm::SUB);
                for sub in &consumer.subscription_data_set {
                    topic(&mut out, Some(&sub.topic), perm::SUB);
                }
            }
        }
        RequestCode::UnregisterClient | RequestCode::GetConsumerListByGroup => {
            group(&mut out, field("consumerGroup"), perm::SUB)
        }
        // QUERY_CONSUMER_OFFSET is stricter than Java, which reads any group's offsets.
        RequestCode::UpdateConsumerOffset | RequestCode::QueryConsumerOffset => {
            group(&mut out, field("consumerGroup"), perm::SUB);
            topic(&mut out, field("topic"), perm::SUB);
        }
        // Stricter than Java: a queue lock is the group's.
        RequestCode::LockBatchMq => {
            let body: LockBatchRequestBody = decode_lenient(&request.body, LockBatchRequestBody::NAME)
                .map_err(|e| AclDenied(format!("the lock body does not decode: {e}")))?;
            group(&mut out, Some(&body.consumer_group), perm::SUB);
        }
        RequestCode::UnlockBatchMq => {
            let body: UnlockBatchRequestBody = decode_lenient(&request.body, UnlockBatchRequestBody::NAME)
                .map_err(|e| AclDenied(format!("the unlock body does not decode: {e}")))?;
            group(&mut out, Some(&body.consumer_group), perm::SUB);
        }
        _ => {}
    }
    Ok(out)
}
