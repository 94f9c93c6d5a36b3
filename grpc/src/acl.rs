//! The plain ACL as a gRPC call meets it (`aclEnable`): the credentials in the call's metadata and
//! what each RPC needs, from Java 5.1's proxy (`PlainAccessResource.parse` of a gRPC message). The
//! check itself is the broker's (`raftmq_broker::acl::credentials`, through `Bridge::admit_grpc`).
//!
//! | RPC | needs |
//! |---|---|
//! | QueryRoute | ANY on the topic |
//! | Heartbeat | SUB on the group, for a push or simple consumer (which must name one) |
//! | SendMessage | PUB on the topic (every message of one call names the same one) |
//! | QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue | SUB on the group and the topic |
//! | EndTransaction | PUB on the topic |
//! | Telemetry `Settings` | PUB on each published topic; SUB on the subscribing group and each of its topics; one of the two |
//! | NotifyClientTermination | SUB on the group, when it names one |
//! | UpdateOffset, GetOffset | SUB on the group and the topic (Java: a signature only) |
//! | QueryOffset | SUB on the topic (Java: a signature only) |
//! | the rest | a valid signature |
//!
//! Pure: each function reads its request only (and [`denied`] maps a refusal to its status). A retry topic (`%RETRY%g`) is the group `g`. PUB on
//! the trace topic needs nothing but never vouches for the other topics of the same call.

use raftmq_broker::acl::AclDenied;
use raftmq_broker::acl::GrpcCredentials;
use raftmq_broker::acl::Resource;
use raftmq_broker::acl::credentials::AUTHORIZATION_METADATA_KEY;
use raftmq_broker::acl::credentials::DATE_TIME_METADATA_KEY;
use raftmq_broker::acl::perm;
use tonic::metadata::MetadataMap;

use crate::pb;
use crate::pb::settings::PubSub;

/// The resources a call touches, with the permission each needs.
pub type Needs = Vec<(Resource, u8)>;

/// The credentials a call's metadata presents (`None`: none; refused: malformed).
pub fn credentials(metadata: &MetadataMap) -> Result<Option<GrpcCredentials>, AclDenied> {
    let text = |key: &str| {
        metadata
            .get(key)
            .map(|v| v.to_str().map_err(|_| AclDenied(format!("the {key} metadata is not visible ASCII"))))
            .transpose()
    };
    GrpcCredentials::from_metadata(text(AUTHORIZATION_METADATA_KEY)?, text(DATE_TIME_METADATA_KEY)?)
}

/// A refusal as a call meets it: gRPC PERMISSION_DENIED with the ACL's reason (Java's proxy).
pub fn denied(refusal: AclDenied) -> tonic::Status {
    tonic::Status::permission_denied(refusal.0)
}

fn topic(out: &mut Needs, topic: Option<&pb::Resource>, p: u8) {
    if let Some(t) = topic {
        out.push((Resource::of_topic(&t.name), p));
    }
}

fn group(out: &mut Needs, group: Option<&pb::Resource>, p: u8) {
    if let Some(g) = group {
        out.push((Resource::Group(g.name.clone()), p));
    }
}

/// SUB on a consumer's group and topic (QueryAssignment, ReceiveMessage, AckMessage,
/// ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue).
pub fn consuming(group_of: Option<&pb::Resource>, topic_of: Option<&pb::Resource>) -> Needs {
    let mut out = Vec::with_capacity(2);
    group(&mut out, group_of, perm::SUB);
    topic(&mut out, topic_of, perm::SUB);
    out
}

/// QueryRoute: ANY on the topic.
pub fn query_route(request: &pb::QueryRouteRequest) -> Needs {
    let mut out = Vec::with_capacity(1);
    topic(&mut out, request.topic.as_ref(), perm::ANY);
    out
}

/// Heartbeat: a consumer's group.
pub fn heartbeat(request: &pb::HeartbeatRequest) -> Result<Needs, AclDenied> {
    let consumer = [pb::ClientType::PushConsumer as i32, pb::ClientType::SimpleConsumer as i32];
    if !consumer.contains(&request.client_type) {
        return Ok(Vec::new());
    }
    if request.group.is_none() {
        return Err(AclDenied("Consumer heartbeat doesn't have group".into()));
    }
    let mut out = Vec::with_capacity(1);
    group(&mut out, request.group.as_ref(), perm::SUB);
    Ok(out)
}

/// SendMessage: PUB on the one topic its messages name.
pub fn send(request: &pb::SendMessageRequest) -> Result<Needs, AclDenied> {
    let Some(first) = request.messages.first() else {
        return Err(AclDenied("SendMessageRequest, messageCount is zero".into()));
    };
    if request.messages.iter().any(|m| m.topic != first.topic) {
        return Err(AclDenied("SendMessageRequest, messages' topic is not consistent".into()));
    }
    let mut out = Vec::with_capacity(1);
    topic(&mut out, first.topic.as_ref(), perm::PUB);
    Ok(out)
}

/// ReceiveMessage: the group and the queue's topic.
pub fn receive(request: &pb::ReceiveMessageRequest) -> Needs {
    consuming(request.group.as_ref(), request.message_queue.as_ref().and_then(|q| q.topic.as_ref()))
}

/// EndTransaction: PUB on the topic.
pub fn end_transaction(request: &pb::EndTransactionRequest) -> Needs {
    let mut out = Vec::with_capacity(1);
    topic(&mut out, request.topic.as_ref(), perm::PUB);
    out
}

/// A Telemetry `Settings`: what the client publishes or subscribes to.
pub fn settings(settings: &pb::Settings) -> Result<Needs, AclDenied> {
    let mut out = Vec::new();
    match &settings.pub_sub {
        Some(PubSub::Publishing(p)) => p.topics.iter().for_each(|t| topic(&mut out, Some(t), perm::PUB)),
        Some(PubSub::Subscription(s)) => {
            group(&mut out, s.group.as_ref(), perm::SUB);
            s.subscriptions.iter().for_each(|e| topic(&mut out, e.topic.as_ref(), perm::SUB));
        }
        None => return Err(AclDenied("settings command doesn't have publishing or subscription".into())),
    }
    Ok(out)
}

/// UpdateOffset, GetOffset: SUB on the group and the queue's topic (stricter than Java's proxy,
/// which asks only for a signature; the remoting check would refuse the same, less clearly).
pub fn group_offset(group_of: Option<&pb::Resource>, queue: Option<&pb::MessageQueue>) -> Needs {
    consuming(group_of, queue.and_then(|q| q.topic.as_ref()))
}

/// QueryOffset: SUB on the queue's topic (stricter than Java's proxy: its offsets are the topic's).
pub fn topic_offset(queue: Option<&pb::MessageQueue>) -> Needs {
    let mut out = Vec::with_capacity(1);
    topic(&mut out, queue.and_then(|q| q.topic.as_ref()), perm::SUB);
    out
}

/// NotifyClientTermination: the group, when it names one.
pub fn notify_client_termination(request: &pb::NotifyClientTerminationRequest) -> Needs {
    let mut out = Vec::with_capacity(1);
    group(&mut out, request.group.as_ref().filter(|g| !g.name.trim().is_empty()), perm::SUB);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(name: &str) -> Option<pb::Resource> {
        Some(pb::Resource { name: name.into(), ..Default::default() })
    }

    fn message(topic: &str) -> pb::Message {
        pb::Message { topic: resource(topic), ..Default::default() }
    }

    #[test]
    fn a_send_needs_pub_on_its_one_topic() {
        let one = pb::SendMessageRequest { messages: vec![message("Orders"), message("Orders")] };
        assert_eq!(send(&one).unwrap(), vec![(Resource::Topic("Orders".into()), perm::PUB)]);
        let mixed = pb::SendMessageRequest { messages: vec![message("Orders"), message("Payments")] };
        assert!(send(&mixed).unwrap_err().0.contains("not consistent"));
        assert!(send(&pb::SendMessageRequest { messages: Vec::new() }).unwrap_err().0.contains("zero"));
    }

    #[test]
    fn consumers_need_sub_on_group_and_topic_and_a_retry_topic_is_its_group() {
        let request = pb::ReceiveMessageRequest {
            group: resource("g"),
            message_queue: Some(pb::MessageQueue { topic: resource("%RETRY%g"), ..Default::default() }),
            ..Default::default()
        };
        let want = vec![(Resource::Group("g".into()), perm::SUB), (Resource::Group("g".into()), perm::SUB)];
        assert_eq!(receive(&request), want);
        let route = pb::QueryRouteRequest { topic: resource("Orders"), ..Default::default() };
        assert_eq!(query_route(&route), vec![(Resource::Topic("Orders".into()), perm::ANY)]);
    }

    #[test]
    fn heartbeats_and_settings_follow_the_client_type() {
        let producer = pb::HeartbeatRequest { group: None, client_type: pb::ClientType::Producer as i32 };
        assert_eq!(heartbeat(&producer).unwrap(), Vec::new());
        let consumer = pb::HeartbeatRequest { group: None, client_type: pb::ClientType::SimpleConsumer as i32 };
        assert!(heartbeat(&consumer).is_err(), "a consumer names its group");
        let publishing = pb::Settings {
            pub_sub: Some(PubSub::Publishing(pb::Publishing {
                topics: vec![pb::Resource { name: "A".into(), ..Default::default() }],
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(settings(&publishing).unwrap(), vec![(Resource::Topic("A".into()), perm::PUB)]);
        let subscribing = pb::Settings {
            pub_sub: Some(PubSub::Subscription(pb::Subscription {
                group: resource("g"),
                subscriptions: vec![pb::SubscriptionEntry { topic: resource("A"), ..Default::default() }],
                ..Default::default()
            })),
            ..Default::default()
        };
        let want = vec![(Resource::Group("g".into()), perm::SUB), (Resource::Topic("A".into()), perm::SUB)];
        assert_eq!(settings(&subscribing).unwrap(), want);
        assert!(settings(&pb::Settings::default()).is_err());
        let unnamed = pb::NotifyClientTerminationRequest { group: resource(" ") };
        assert_eq!(notify_client_termination(&unnamed), Vec::new());
    }

    #[test]
    fn credentials_come_from_the_metadata() {
        let mut metadata = MetadataMap::new();
        assert!(matches!(credentials(&metadata), Ok(None)));
        let header = "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=00ff";
        metadata.insert("authorization", header.parse().unwrap());
        metadata.insert("x-mq-date-time", "20261207T165001Z".parse().unwrap());
        assert_eq!(credentials(&metadata).unwrap().unwrap().access_key.as_deref(), Some("ak"));
        metadata.insert("authorization", "MQv2-HMAC-SHA1 Credential=ak, Signature=nothex".parse().unwrap());
        assert!(credentials(&metadata).is_err());
    }
}
