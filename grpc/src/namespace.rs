//! A 5.x client's namespace (`Resource.resource_namespace`, the client's `setNamespace`) joined into
//! every topic and group name of its request as `ns%name`, before the ACL or anything else reads
//! the request, as RocketMQ 5.1's proxy wraps them (`GrpcConverter.wrapResourceWithNamespace`).
//! The broker then stores and serves the joined names, which are also what a 4.x client with the
//! same namespace sends; on the way out a stored name is split again ([`crate::message::resource_of`]).
//!
//! Java 5.1 reads the namespace of each `Resource`, not the `x-mq-namespace` header, and so does
//! this module.
//!
//! Invariant: after [`Namespaced::join_namespace`] every `Resource` of the request has an empty
//! `resource_namespace`, so no later step can read a name without its namespace; the service's
//! `admit`, every RPC's first step, joins them.

use raftmq_common::message::namespace::join;

use crate::pb::*;

/// A request whose resources may carry a namespace.
pub trait Namespaced {
    /// Every resource's namespace joined into its name, the namespace field cleared.
    fn join_namespace(&mut self);
}

fn resource(r: &mut Resource) {
    if !r.resource_namespace.is_empty() {
        r.name = join(&r.resource_namespace, &r.name);
        r.resource_namespace.clear();
    }
}

fn optional(r: &mut Option<Resource>) {
    if let Some(r) = r {
        resource(r);
    }
}

fn queue(q: &mut Option<MessageQueue>) {
    if let Some(q) = q {
        optional(&mut q.topic);
    }
}

/// `Namespaced` for requests whose resources are fields: each joined by `optional` (a topic or a
/// group) or `queue` (a message queue's topic).
macro_rules! namespaced_fields {
    ($($request:ty => [$($field:ident: $join:ident),+];)+) => {$(
        impl Namespaced for $request {
            fn join_namespace(&mut self) {
                $($join(&mut self.$field);)+
            }
        }
    )+};
}

namespaced_fields! {
    QueryRouteRequest => [topic: optional];
    HeartbeatRequest => [group: optional];
    QueryAssignmentRequest => [topic: optional, group: optional];
    ReceiveMessageRequest => [group: optional, message_queue: queue];
    AckMessageRequest => [group: optional, topic: optional];
    ForwardMessageToDeadLetterQueueRequest => [group: optional, topic: optional];
    ChangeInvisibleDurationRequest => [group: optional, topic: optional];
    EndTransactionRequest => [topic: optional];
    NotifyClientTerminationRequest => [group: optional];
    UpdateOffsetRequest => [group: optional, message_queue: queue];
    GetOffsetRequest => [group: optional, message_queue: queue];
    QueryOffsetRequest => [message_queue: queue];
}

impl Namespaced for SendMessageRequest {
    fn join_namespace(&mut self) {
        for m in &mut self.messages {
            optional(&mut m.topic);
        }
    }
}

impl Namespaced for Settings {
    fn join_namespace(&mut self) {
        match &mut self.pub_sub {
            Some(settings::PubSub::Publishing(p)) => p.topics.iter_mut().for_each(resource),
            Some(settings::PubSub::Subscription(s)) => {
                optional(&mut s.group);
                for entry in &mut s.subscriptions {
                    optional(&mut entry.topic);
                }
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(namespace: &str, name: &str) -> Option<Resource> {
        Some(Resource { resource_namespace: namespace.into(), name: name.into() })
    }

    fn plain(name: &str) -> Option<Resource> {
        named("", name)
    }

    /// Whether any resource in `request` still carries a namespace (its `Debug` names every field).
    fn carries_namespace(request: &impl std::fmt::Debug) -> bool {
        format!("{request:?}").contains("resource_namespace: \"ns\"")
    }

    #[test]
    fn no_request_keeps_a_namespace() {
        let queue = || Some(MessageQueue { topic: named("ns", "T"), ..Default::default() });
        fn check<T: Namespaced + std::fmt::Debug>(mut request: T) {
            assert!(carries_namespace(&request), "{request:?}");
            request.join_namespace();
            assert!(!carries_namespace(&request), "{request:?}");
        }
        check(QueryRouteRequest { topic: named("ns", "T"), ..Default::default() });
        check(HeartbeatRequest { group: named("ns", "G"), ..Default::default() });
        check(QueryAssignmentRequest { topic: named("ns", "T"), group: named("ns", "G"), ..Default::default() });
        check(ReceiveMessageRequest { group: named("ns", "G"), message_queue: queue(), ..Default::default() });
        check(AckMessageRequest { group: named("ns", "G"), topic: named("ns", "T"), ..Default::default() });
        check(ForwardMessageToDeadLetterQueueRequest {
            group: named("ns", "G"),
            topic: named("ns", "T"),
            ..Default::default()
        });
        check(ChangeInvisibleDurationRequest {
            group: named("ns", "G"),
            topic: named("ns", "T"),
            ..Default::default()
        });
        check(EndTransactionRequest { topic: named("ns", "T"), ..Default::default() });
        check(NotifyClientTerminationRequest { group: named("ns", "G") });
        check(UpdateOffsetRequest { group: named("ns", "G"), message_queue: queue(), ..Default::default() });
        check(GetOffsetRequest { group: named("ns", "G"), message_queue: queue() });
        check(QueryOffsetRequest { message_queue: queue(), ..Default::default() });
        check(SendMessageRequest { messages: vec![Message { topic: named("ns", "T"), ..Default::default() }] });
    }

    #[test]
    fn every_resource_of_a_request_is_joined() {
        let mut receive = ReceiveMessageRequest {
            group: named("ns", "G"),
            message_queue: Some(MessageQueue { topic: named("ns", "T"), ..Default::default() }),
            ..Default::default()
        };
        receive.join_namespace();
        assert_eq!(receive.group, plain("ns%G"));
        assert_eq!(receive.message_queue.unwrap().topic, plain("ns%T"));

        let mut send = SendMessageRequest {
            messages: vec![
                Message { topic: named("ns", "T"), ..Default::default() },
                Message { topic: plain("T"), ..Default::default() },
            ],
        };
        send.join_namespace();
        let topics: Vec<_> = send.messages.into_iter().map(|m| m.topic).collect();
        assert_eq!(topics, vec![plain("ns%T"), plain("T")], "a resource without a namespace is left alone");

        let mut ack = AckMessageRequest { group: named("ns", "G"), topic: named("ns", "T"), ..Default::default() };
        ack.join_namespace();
        assert_eq!((ack.group, ack.topic), (plain("ns%G"), plain("ns%T")));
    }

    #[test]
    fn settings_join_published_and_subscribed_names() {
        let mut publishing = Settings {
            pub_sub: Some(settings::PubSub::Publishing(Publishing {
                topics: vec![named("ns", "A").unwrap(), named("ns", "RMQ_SYS_TRACE_TOPIC").unwrap()],
                ..Default::default()
            })),
            ..Default::default()
        };
        publishing.join_namespace();
        let Some(settings::PubSub::Publishing(p)) = publishing.pub_sub else { unreachable!() };
        assert_eq!(p.topics, vec![plain("ns%A").unwrap(), plain("RMQ_SYS_TRACE_TOPIC").unwrap()]);

        let mut subscription = Settings {
            pub_sub: Some(settings::PubSub::Subscription(Subscription {
                group: named("ns", "G"),
                subscriptions: vec![SubscriptionEntry { topic: named("ns", "T"), expression: None }],
                ..Default::default()
            })),
            ..Default::default()
        };
        subscription.join_namespace();
        let Some(settings::PubSub::Subscription(s)) = subscription.pub_sub else { unreachable!() };
        assert_eq!((s.group, s.subscriptions[0].topic.clone()), (plain("ns%G"), plain("ns%T")));
    }
}
