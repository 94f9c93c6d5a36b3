//! Admin against a real NameServer (routes, clusters, topic lists, KV config, topic deletion) and a
//! scripted broker (topic creation and deletion at the group leader, topic configs, offsets).

mod common;

use anyhow::Result;
use common::CLUSTER;
use common::FakeBroker;
use common::start_namesrv;
use raftmq_client::Admin;
use raftmq_client::ErrorKind;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::admin::CreateTopicRequestHeader;
use raftmq_common::protocol::header::admin::DeleteTopicRequestHeader;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namesrv_queries_and_writes() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let leader = FakeBroker::start("broker-a", 0).await?;
    let follower = FakeBroker::start("broker-a", 1).await?;
    leader.register(&ns_addr, &[("TopicA", 4, perm::READ_WRITE)]).await?;
    follower.register(&ns_addr, &[("TopicA", 4, perm::READ_WRITE)]).await?;
    let admin = Admin::new(&ns_addr)?;

    let route = admin.topic_route("TopicA").await?;
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.broker_datas[0].broker_addrs.get(&0), Some(&leader.addr));
    let missing = admin.topic_route("Nope").await.unwrap_err();
    assert_eq!(missing.response_code(), Some(ResponseCode::TopicNotExist));

    let info = admin.cluster_info().await?;
    assert!(info.cluster_addr_table[CLUSTER].contains("broker-a"));
    assert_eq!(admin.master_addrs_of_cluster(CLUSTER).await?, vec![("broker-a".to_owned(), leader.addr.clone())]);
    assert_eq!(admin.master_addr_of_group("broker-a").await?, leader.addr);
    assert_eq!(admin.master_addrs_of_cluster("NoCluster").await.unwrap_err().kind, ErrorKind::InvalidArgument);

    assert!(admin.all_topics().await?.contains("TopicA"));
    assert!(admin.topics_by_cluster(CLUSTER).await?.contains("TopicA"));

    assert_eq!(admin.get_kv_config("NS", "k").await?, None);
    admin.put_kv_config("NS", "k", "v").await?;
    assert_eq!(admin.get_kv_config("NS", "k").await?.as_deref(), Some("v"));
    assert_eq!(admin.kv_list_by_namespace("NS").await?.get("k").map(String::as_str), Some("v"));
    admin.delete_kv_config("NS", "k").await?;
    assert_eq!(admin.get_kv_config("NS", "k").await?, None);

    // Topic deletion: every group leader of the cluster, then the NameServer.
    admin.delete_topic("TopicA", CLUSTER).await?;
    let deletes: Vec<_> =
        leader.requests().into_iter().filter(|r| r.request_code() == RequestCode::DeleteTopicInBroker).collect();
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].decode_header::<DeleteTopicRequestHeader>()?.topic, "TopicA");
    assert_eq!(follower.request_count(), 0, "followers get no writes");
    assert!(!admin.all_topics().await?.contains("TopicA"));

    admin.shutdown().await;
    leader.shutdown().await;
    follower.shutdown().await;
    ns.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_topic_and_offset_calls() -> Result<()> {
    let ns = start_namesrv().await?;
    let ns_addr = ns.local_addr().to_string();
    let a = FakeBroker::start("broker-a", 0).await?;
    let b = FakeBroker::start("broker-b", 0).await?;
    a.register(&ns_addr, &[("TBW102", 8, perm::READ_WRITE)]).await?;
    b.register(&ns_addr, &[("TBW102", 8, perm::READ_WRITE)]).await?;
    let admin = Admin::new(&ns_addr)?;

    let config = TopicConfig { read_queue_nums: 8, write_queue_nums: 6, order: true, ..TopicConfig::new("NewTopic") };
    let mut written = admin.create_topic_in_cluster(CLUSTER, &config).await?;
    written.sort();
    let mut expected = vec![a.addr.clone(), b.addr.clone()];
    expected.sort();
    assert_eq!(written, expected);
    for broker in [&a, &b] {
        let create = broker.requests().into_iter().find(|r| r.request_code() == RequestCode::UpdateAndCreateTopic);
        let h: CreateTopicRequestHeader = create.expect("UPDATE_AND_CREATE_TOPIC").decode_header()?;
        assert_eq!((h.topic.as_str(), h.default_topic.as_str()), ("NewTopic", "TBW102"));
        assert_eq!((h.read_queue_nums, h.write_queue_nums, h.perm, h.order), (8, 6, 6, true));
        assert_eq!((h.topic_filter_type.as_str(), h.topic_sys_flag), ("SINGLE_TAG", Some(0)));
    }
    assert_eq!(admin.create_topic_in_group("broker-b", &config).await?, b.addr);
    let bad = TopicConfig { write_queue_nums: 0, ..TopicConfig::new("NewTopic") };
    let before = a.request_count();
    assert_eq!(admin.create_topic(&a.addr, &bad).await.unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(
        admin.create_topic(&a.addr, &TopicConfig::new("bad name")).await.unwrap_err().kind,
        ErrorKind::InvalidArgument
    );
    assert_eq!(a.request_count(), before, "refused before sending");

    let topics = admin.all_topic_config(&a.addr).await?;
    assert!(topics.topic_config_table.contains_key("TopicA"));
    assert_eq!(admin.max_offset(&a.addr, "TopicA", 0).await?, 100);
    assert_eq!(admin.min_offset(&a.addr, "TopicA", 0).await?, 5);
    assert_eq!(admin.query_consumer_offset(&a.addr, "G", "TopicA", 0).await?, Some(42));
    assert_eq!(admin.query_consumer_offset(&a.addr, "G", "TopicA", 1).await?, None);

    a.set_behavior(common::Behavior::Fail(ResponseCode::NoPermission, "read only".into()));
    let err = admin.max_offset(&a.addr, "TopicA", 0).await.unwrap_err();
    assert_eq!(err.response_code(), Some(ResponseCode::NoPermission));
    assert_eq!(err.remark(), Some("read only"));

    admin.shutdown().await;
    a.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
    Ok(())
}
