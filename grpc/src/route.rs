//! QueryRoute and QueryAssignment answers from a topic's config on this broker group. Pure.
//!
//! Queues: every queue id below `max(readQueueNums, writeQueueNums)`, each with the permission the
//! topic's perm and the two counts give it (RocketMQ proxy's `genMessageQueueFromQueueData`), on
//! broker `brokerName` with id 0 (the master id: a Raft group has one writer, the leader).
//!
//! Endpoints: the access point the client used (the request's `endpoints`), as RocketMQ's proxy in
//! cluster mode answers, else this replica's own gRPC address. Every replica serves the same
//! MessagingService (a follower relays writes to the leader, `raftmq_broker`'s `Bridge`), so a
//! client given the list of every replica keeps sending through a failover.

use std::net::IpAddr;

use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;

use crate::pb::Address;
use crate::pb::AddressScheme;
use crate::pb::Assignment;
use crate::pb::Broker;
use crate::pb::Endpoints;
use crate::pb::MessageQueue;
use crate::pb::MessageType;
use crate::pb::Permission;
use crate::pb::Resource;

/// `brokerId` of the replica that takes writes in RocketMQ's routes (`MixAll.MASTER_ID`).
pub const MASTER_BROKER_ID: i32 = 0;

/// The message types a raftmq topic accepts: all of them (RocketMQ's `MIXED` topic).
const ACCEPTED_MESSAGE_TYPES: [MessageType; 4] =
    [MessageType::Normal, MessageType::Fifo, MessageType::Delay, MessageType::Transaction];

/// Endpoints of one `host:port`, the scheme told by the host's form.
pub fn endpoints_of(host: &str, port: u16) -> Endpoints {
    let scheme = match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => AddressScheme::IPv4,
        Ok(IpAddr::V6(_)) => AddressScheme::IPv6,
        Err(_) => AddressScheme::DomainName,
    };
    Endpoints { scheme: scheme as i32, addresses: vec![Address { host: host.to_owned(), port: i32::from(port) }] }
}

/// The endpoints a route names: the client's access point when it sent one, else `own`.
pub fn route_endpoints(requested: Option<&Endpoints>, own: Endpoints) -> Endpoints {
    match requested {
        Some(e) if !e.addresses.is_empty() && e.addresses.iter().all(|a| !a.host.is_empty() && a.port > 0) => e.clone(),
        _ => own,
    }
}

/// The proto permission of queue `queue_id` of `config`.
fn permission_of(config: &TopicConfig, queue_id: i32) -> Permission {
    let read = perm::is_readable(config.perm) && queue_id < config.read_queue_nums;
    let write = perm::is_writeable(config.perm) && queue_id < config.write_queue_nums;
    match (read, write) {
        (true, true) => Permission::ReadWrite,
        (true, false) => Permission::Read,
        (false, true) => Permission::Write,
        (false, false) => Permission::None,
    }
}

fn broker(broker_name: &str, endpoints: &Endpoints) -> Broker {
    Broker { name: broker_name.to_owned(), id: MASTER_BROKER_ID, endpoints: Some(endpoints.clone()) }
}

/// The message queues of `topic` (as the client named it, namespace kept) on this broker group.
pub fn message_queues(
    topic: &Resource,
    config: &TopicConfig,
    broker_name: &str,
    endpoints: &Endpoints,
) -> Vec<MessageQueue> {
    let count = config.read_queue_nums.max(config.write_queue_nums).max(0);
    (0..count)
        .map(|queue_id| MessageQueue {
            topic: Some(topic.clone()),
            id: queue_id,
            permission: permission_of(config, queue_id) as i32,
            broker: Some(broker(broker_name, endpoints)),
            accept_message_types: ACCEPTED_MESSAGE_TYPES.iter().map(|t| *t as i32).collect(),
        })
        .collect()
}

/// QueryAssignment for a POP consumer, as RocketMQ's proxy answers it: one assignment per broker
/// group whose topic is readable, with queue id -1 (the broker chooses queues when it pops).
pub fn assignments(
    topic: &Resource,
    config: &TopicConfig,
    broker_name: &str,
    endpoints: &Endpoints,
) -> Vec<Assignment> {
    if !perm::is_readable(config.perm) || config.read_queue_nums <= 0 {
        return Vec::new();
    }
    let queue = MessageQueue {
        topic: Some(topic.clone()),
        id: -1,
        permission: Permission::Read as i32,
        broker: Some(broker(broker_name, endpoints)),
        accept_message_types: ACCEPTED_MESSAGE_TYPES.iter().map(|t| *t as i32).collect(),
    };
    vec![Assignment { message_queue: Some(queue) }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(read: i32, write: i32, perm: i32) -> TopicConfig {
        TopicConfig {
            topic_name: "t".into(),
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            ..TopicConfig::default()
        }
    }

    fn resource() -> Resource {
        Resource { resource_namespace: String::new(), name: "t".into() }
    }

    #[test]
    fn every_queue_with_the_permission_its_counts_give_it() {
        let e = endpoints_of("127.0.0.1", 8081);
        let q = message_queues(&resource(), &topic(2, 4, perm::READ_WRITE), "broker-a", &e);
        let perms: Vec<i32> = q.iter().map(|q| q.permission).collect();
        let rw = Permission::ReadWrite as i32;
        let w = Permission::Write as i32;
        assert_eq!(perms, [rw, rw, w, w]);
        assert_eq!(q.iter().map(|q| q.id).collect::<Vec<_>>(), [0, 1, 2, 3]);
        let b = q[0].broker.as_ref().unwrap();
        assert_eq!((b.name.as_str(), b.id), ("broker-a", MASTER_BROKER_ID));
        assert_eq!(b.endpoints.as_ref().unwrap().addresses[0].port, 8081);
        let read_only = message_queues(&resource(), &topic(2, 2, perm::READ), "b", &e);
        assert!(read_only.iter().all(|q| q.permission == Permission::Read as i32));
    }

    #[test]
    fn endpoints_scheme_by_host_form_and_the_clients_access_point_first() {
        assert_eq!(endpoints_of("10.0.0.1", 1).scheme, AddressScheme::IPv4 as i32);
        assert_eq!(endpoints_of("::1", 1).scheme, AddressScheme::IPv6 as i32);
        assert_eq!(endpoints_of("broker-a.svc", 1).scheme, AddressScheme::DomainName as i32);
        let own = endpoints_of("10.0.0.1", 8081);
        let asked = Endpoints {
            scheme: AddressScheme::IPv4 as i32,
            addresses: vec![
                Address { host: "10.0.0.2".into(), port: 8081 },
                Address { host: "10.0.0.3".into(), port: 8081 },
            ],
        };
        assert_eq!(route_endpoints(Some(&asked), own.clone()), asked);
        assert_eq!(route_endpoints(None, own.clone()), own);
        let broken = Endpoints { scheme: 1, addresses: vec![Address { host: String::new(), port: 0 }] };
        assert_eq!(route_endpoints(Some(&broken), own.clone()), own);
    }

    #[test]
    fn one_assignment_per_broker_group_and_none_for_an_unreadable_topic() {
        let e = endpoints_of("127.0.0.1", 8081);
        let a = assignments(&resource(), &topic(4, 4, perm::READ_WRITE), "broker-a", &e);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].message_queue.as_ref().unwrap().id, -1);
        assert!(assignments(&resource(), &topic(4, 4, perm::WRITE), "broker-a", &e).is_empty());
    }
}
