//! t81: UpdateOffset, GetOffset and QueryOffset on a 3-replica raftmq group, called on the
//! leader's and a follower's `Messaging` service in process (rocketmq 5.0.0 has no pull consumer,
//! so no client calls them); the messages are sent by rocketmq 5.0.0's `Producer` over gRPC.
//!
//! QueryOffset answers BEGINNING, END and TIMESTAMP from the queue as stored (compared with what
//! a remoting pull reads back: offsets and store timestamps), on the leader and, relayed, on a
//! follower. GetOffset is OFFSET_NOT_FOUND before a commit; UpdateOffset commits through the
//! replicated offset path (a remoting QUERY_CONSUMER_OFFSET sees it, and so does a new leader after
//! the old one stopped); a follower refuses UpdateOffset naming the leader and changes nothing.
//! Invalid names, unknown topics, queue ids out of range, another broker group's queue, a negative
//! offset and a TIMESTAMP query without a timestamp are refused with their codes.
//! Waits poll with a deadline; nothing sleeps to synchronise.

use crate::group;

use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use group::Group;
use group::drain_queue;
use raftmq_client::Admin;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::remoting::RemotingClient;
use raftmq_grpc::GrpcServer;
use raftmq_grpc::pb::Broker;
use raftmq_grpc::pb::Code;
use raftmq_grpc::pb::GetOffsetRequest;
use raftmq_grpc::pb::MessageQueue;
use raftmq_grpc::pb::QueryOffsetPolicy;
use raftmq_grpc::pb::QueryOffsetRequest;
use raftmq_grpc::pb::Resource;
use raftmq_grpc::pb::UpdateOffsetRequest;
use raftmq_grpc::pb::messaging_service_server::MessagingService;
use raftmq_grpc::service::Messaging;
use rocketmq::Producer;
use rocketmq::conf::ClientOption;
use rocketmq::conf::ProducerOption;
use rocketmq::model::message::MessageBuilder;
use tokio_util::sync::CancellationToken;

const TOPIC: &str = "GrpcOffsetTopic";
const GROUP: &str = "GrpcOffsetGroup";
const QUEUES: i32 = 2;
const MESSAGES: usize = 8;
/// How long the whole exchange may take on a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(60);

fn resource(name: &str) -> Option<Resource> {
    Some(Resource { resource_namespace: String::new(), name: name.to_owned() })
}

fn queue(topic: &str, id: i32) -> Option<MessageQueue> {
    Some(MessageQueue {
        topic: resource(topic),
        id,
        permission: 0,
        broker: Some(Broker { name: group::BROKER_NAME.into(), id: 0, endpoints: None }),
        accept_message_types: Vec::new(),
    })
}

fn code_name(code: i32) -> String {
    Code::try_from(code).map_or_else(|_| code.to_string(), |c| c.as_str_name().to_owned())
}

/// QueryOffset by `policy`; (code, offset).
async fn query(
    service: &Messaging,
    mq: Option<MessageQueue>,
    policy: QueryOffsetPolicy,
    timestamp_ms: Option<i64>,
) -> Result<(i32, i64)> {
    let request = QueryOffsetRequest {
        message_queue: mq,
        query_offset_policy: policy as i32,
        timestamp: timestamp_ms.map(|ms| prost_types::Timestamp {
            seconds: ms.div_euclid(1_000),
            nanos: (ms.rem_euclid(1_000) * 1_000_000) as i32,
        }),
    };
    let response = service.query_offset(tonic::Request::new(request)).await?.into_inner();
    Ok((response.status.context("a status")?.code, response.offset))
}

/// GetOffset; (code, offset).
async fn get(service: &Messaging, group: &str, mq: Option<MessageQueue>) -> Result<(i32, i64)> {
    let request = GetOffsetRequest { group: resource(group), message_queue: mq };
    let response = service.get_offset(tonic::Request::new(request)).await?.into_inner();
    Ok((response.status.context("a status")?.code, response.offset))
}

/// UpdateOffset; the status.
async fn update(
    service: &Messaging,
    group: &str,
    mq: Option<MessageQueue>,
    offset: i64,
) -> Result<raftmq_grpc::pb::Status> {
    let request = UpdateOffsetRequest { group: resource(group), message_queue: mq, offset };
    let response = service.update_offset(tonic::Request::new(request)).await?.into_inner();
    response.status.context("a status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn t81_update_get_query_offset_on_leader_and_follower() -> Result<()> {
    let mut group = Group::start(3).await?;
    let leader_id = group.wait_leader(WAIT).await?;
    let leader = group.addr(leader_id);
    let follower_id = *group.brokers.keys().find(|id| **id != leader_id).context("no follower")?;
    let server = GrpcServer::bind(group.brokers[&leader_id].bridge(), "127.0.0.1:0".parse()?).await?;
    let port = server.local_addr().port();
    let on_leader = Messaging::new(group.brokers[&leader_id].bridge(), port, CancellationToken::new());
    let on_follower = Messaging::new(group.brokers[&follower_id].bridge(), port, CancellationToken::new());

    let admin = Admin::new(&group.namesrv_addr)?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&leader, &config).await?;
    admin.shutdown().await;
    let deadline = Instant::now() + WAIT;
    while group.brokers.values().any(|b| b.bridge().topic(TOPIC).is_none()) {
        if Instant::now() > deadline {
            bail!("the topic never reached every replica");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Before any message and any commit.
    for service in [&on_leader, &on_follower] {
        for policy in [QueryOffsetPolicy::Beginning, QueryOffsetPolicy::End, QueryOffsetPolicy::Timestamp] {
            assert_eq!(query(service, queue(TOPIC, 0), policy, Some(0)).await?, (Code::Ok as i32, 0), "{policy:?}");
        }
        let (code, _) = get(service, GROUP, queue(TOPIC, 0)).await?;
        assert_eq!(code_name(code), "OFFSET_NOT_FOUND", "no offset committed yet");
    }

    let mut option = ClientOption::default();
    option.set_access_url(format!("127.0.0.1:{port}"));
    let mut producer_option = ProducerOption::default();
    producer_option.set_topics(vec![TOPIC]);
    let mut producer = Producer::new(producer_option, option).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    producer.start().await.map_err(|e| anyhow::anyhow!("producer start: {e:?}"))?;
    for i in 0..MESSAGES {
        let message = MessageBuilder::builder()
            .set_topic(TOPIC)
            .set_body(format!("offset-{i}").into_bytes())
            .build()
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        producer.send(message).await.map_err(|e| anyhow::anyhow!("send {i}: {e:?}"))?;
    }
    producer.shutdown().await.map_err(|e| anyhow::anyhow!("{e:?}"))?;

    // What each queue holds, as a remoting pull reads it from the leader.
    let client = RemotingClient::new();
    let mut stored: BTreeMap<i32, Vec<MessageExt>> = BTreeMap::new();
    for queue_id in 0..QUEUES {
        stored.insert(queue_id, drain_queue(&client, &leader, TOPIC, queue_id).await?);
    }
    assert_eq!(stored.values().map(Vec::len).sum::<usize>(), MESSAGES, "every send is stored");

    for (name, service) in [("leader", &on_leader), ("follower", &on_follower)] {
        for (queue_id, messages) in &stored {
            let mq = || queue(TOPIC, *queue_id);
            let end = messages.len() as i64;
            assert_eq!(query(service, mq(), QueryOffsetPolicy::Beginning, None).await?, (Code::Ok as i32, 0), "{name}");
            assert_eq!(query(service, mq(), QueryOffsetPolicy::End, None).await?, (Code::Ok as i32, end), "{name}");
            for m in messages {
                // The first offset stored at or after this message's time.
                let expected = messages.iter().position(|o| o.store_timestamp >= m.store_timestamp).unwrap_or(0) as i64;
                assert!(expected <= m.queue_offset);
                let got = query(service, mq(), QueryOffsetPolicy::Timestamp, Some(m.store_timestamp)).await?;
                assert_eq!(got, (Code::Ok as i32, expected), "{name}: by the time of offset {}", m.queue_offset);
            }
            let last = messages.last().map_or(0, |m| m.store_timestamp);
            let after = query(service, mq(), QueryOffsetPolicy::Timestamp, Some(last + 3_600_000)).await?;
            assert_eq!(after, (Code::Ok as i32, end), "{name}: after the last message: the end");
            assert_eq!(query(service, mq(), QueryOffsetPolicy::Timestamp, Some(0)).await?, (Code::Ok as i32, 0));
        }
    }

    // A commit through the leader, read back by gRPC on both replicas and by remoting.
    let committed = update(&on_leader, GROUP, queue(TOPIC, 1), 3).await?;
    assert_eq!(code_name(committed.code), "OK", "{committed:?}");
    assert_eq!(get(&on_leader, GROUP, queue(TOPIC, 1)).await?, (Code::Ok as i32, 3));
    assert_eq!(get(&on_follower, GROUP, queue(TOPIC, 1)).await?, (Code::Ok as i32, 3), "relayed to the leader");
    assert_eq!(group::query_offset(&client, &leader, GROUP, TOPIC, 1).await?, Some(3), "the remoting offset table");
    assert_eq!(code_name(get(&on_leader, GROUP, queue(TOPIC, 0)).await?.0), "OFFSET_NOT_FOUND", "only queue 1");

    // A follower never relays a commit: it names the leader, and nothing changes.
    let refused = update(&on_follower, GROUP, queue(TOPIC, 1), 5).await?;
    assert_eq!(code_name(refused.code), "MASTER_PERSISTENCE_TIMEOUT", "{refused:?}");
    assert!(refused.message.contains(&leader), "the refusal names the leader {leader}: {refused:?}");
    assert_eq!(get(&on_leader, GROUP, queue(TOPIC, 1)).await?, (Code::Ok as i32, 3));

    // Refused before anything is sent.
    let other_broker = queue(TOPIC, 0).map(|mut q| {
        q.broker = Some(Broker { name: "broker-zz".into(), id: 0, endpoints: None });
        q
    });
    let namespaced = queue(TOPIC, 0).map(|mut q| {
        q.topic = Some(Resource { resource_namespace: "ns".into(), name: TOPIC.into() });
        q
    });
    let refusals = [
        ("bad group!", queue(TOPIC, 0), 1, "ILLEGAL_CONSUMER_GROUP"),
        ("", queue(TOPIC, 0), 1, "ILLEGAL_CONSUMER_GROUP"),
        (GROUP, queue("bad topic!", 0), 1, "ILLEGAL_TOPIC"),
        (GROUP, queue("NoSuchTopic", 0), 1, "TOPIC_NOT_FOUND"),
        (GROUP, queue(TOPIC, QUEUES), 1, "BAD_REQUEST"),
        (GROUP, queue(TOPIC, -1), 1, "BAD_REQUEST"),
        (GROUP, other_broker.clone(), 1, "BAD_REQUEST"),
        (GROUP, namespaced, 1, "TOPIC_NOT_FOUND"),
        (GROUP, None, 1, "BAD_REQUEST"),
        (GROUP, queue(TOPIC, 0), -1, "ILLEGAL_OFFSET"),
    ];
    for (g, mq, offset, expected) in refusals {
        let s = update(&on_leader, g, mq.clone(), offset).await?;
        assert_eq!(code_name(s.code), expected, "UpdateOffset {g:?} {mq:?} {offset}: {s:?}");
        if offset >= 0 {
            let (code, _) = get(&on_leader, g, mq.clone()).await?;
            assert_eq!(code_name(code), expected, "GetOffset {g:?} {mq:?}");
        }
    }
    for (mq, expected) in [
        (queue("NoSuchTopic", 0), "TOPIC_NOT_FOUND"),
        (queue(TOPIC, QUEUES), "BAD_REQUEST"),
        (other_broker, "BAD_REQUEST"),
    ] {
        let (code, _) = query(&on_leader, mq.clone(), QueryOffsetPolicy::End, None).await?;
        assert_eq!(code_name(code), expected, "QueryOffset {mq:?}");
    }
    let (code, _) = query(&on_leader, queue(TOPIC, 0), QueryOffsetPolicy::Timestamp, None).await?;
    assert_eq!(code_name(code), "BAD_REQUEST", "TIMESTAMP needs a timestamp");
    assert_eq!(get(&on_leader, GROUP, queue(TOPIC, 0)).await?.0, Code::OffsetNotFound as i32, "nothing committed");

    // The commit is replicated: the next leader answers it.
    drop(on_leader);
    server.shutdown().await;
    group.stop(leader_id).await;
    let new_leader = group.wait_leader(WAIT).await?;
    assert_ne!(new_leader, leader_id);
    let deadline = Instant::now() + WAIT;
    loop {
        match get(&on_follower, GROUP, queue(TOPIC, 1)).await? {
            (code, 3) if code == Code::Ok as i32 => break,
            // Until every replica knows the new leader, the relay may find none.
            (code, _) if code == Code::MasterPersistenceTimeout as i32 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            other => bail!("after the leader stopped, GetOffset answered {other:?}"),
        }
    }
    println!(
        "t81: BEGINNING/END/TIMESTAMP on {QUEUES} queues of {MESSAGES} messages; commit 3 kept across a leader change"
    );
    drop(on_follower);
    group.shutdown().await;
    Ok(())
}
