//! Issue 5 acceptance with real processes: three `raftmq broker` children and a NameServer; the
//! leader gets SIGKILL mid-stream while 8 producers send.
//!
//! - every message acknowledged with SEND_OK (before or after the kill) is stored, once, at a dense
//!   queue offset, with its keys, tags and properties;
//! - consumer offsets committed through the killed leader are served by the new one;
//! - the killed replica restarts on its files (no graceful stop ran: its ConsumeQueues are rebuilt
//!   from the log past their last durable point), catches up, and then holds exactly the same
//!   messages at the same offsets as the two others.

use crate::harness;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use harness::group::BROKER_NAME;
use harness::group::drain_queue;
use harness::group::free_port;
use harness::group::query_offset;
use harness::group::replica_configs;
use harness::group::update_offset;
use harness::processes::BrokerProcesses;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::remoting::RemotingClient;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "T25_KILL9";
const GROUP: &str = "t25_group";
const QUEUES: i32 = 4;
const SENDERS: usize = 8;
/// SEND_OKs before the kill, and again after the new leader took over.
const ACKS_PER_PHASE: usize = 300;

/// The group's leader as the NameServer routes it (brokerId 0), once it is not `not`.
async fn routed_leader(admin: &Admin, procs: &BrokerProcesses, not: Option<u64>) -> Result<u64> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(addr) = admin.master_addr_of_group(BROKER_NAME).await
            && let Some(id) = procs.id_of(&addr)
            && Some(id) != not
        {
            return Ok(id);
        }
        if Instant::now() > deadline {
            bail!("no leader routed within {WAIT:?} (excluding {not:?})");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every queue of `TOPIC` on replica `addr`, read to its end.
async fn read_all(client: &RemotingClient, addr: &str) -> Result<Vec<Vec<MessageExt>>> {
    let mut queues = Vec::new();
    for q in 0..QUEUES {
        queues.push(drain_queue(client, addr, TOPIC, q).await?);
    }
    Ok(queues)
}

/// (queue offset, UNIQ_KEY) of every stored message, per queue.
fn identities(queues: &[Vec<MessageExt>]) -> Vec<Vec<(i64, String)>> {
    queues
        .iter()
        .map(|q| q.iter().map(|m| (m.queue_offset, m.message.uniq_key().unwrap_or_default().to_owned())).collect())
        .collect()
}

async fn wait_acks(acked: &AtomicUsize, at_least: usize, what: &str) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    while acked.load(Ordering::Acquire) < at_least {
        anyhow::ensure!(Instant::now() < deadline, "{what}: only {} SEND_OKs", acked.load(Ordering::Acquire));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_sigkilled_mid_stream_then_restarted_loses_nothing() -> Result<()> {
    let namesrv = NameServer::start(NamesrvConfig {
        listen_port: 0,
        bind_address: "127.0.0.1".into(),
        kv_config_path: String::new(),
        ..NamesrvConfig::default()
    })
    .await?;
    let namesrv_addr = namesrv.local_addr().to_string();
    let dir = tempfile::tempdir()?;
    let mut configs = replica_configs(dir.path(), &namesrv_addr, 3)?;
    // Separate processes: a fixed free admin port per replica, so a restart keeps it.
    configs.values_mut().for_each(|c| c.admin_port = free_port());
    let mut procs = BrokerProcesses::new(dir.path(), configs);
    let result = scenario(&mut procs, &namesrv_addr).await;
    if result.is_err() {
        procs.dump_logs();
    }
    procs.kill_all().await?;
    namesrv.shutdown().await;
    result
}

async fn scenario(procs: &mut BrokerProcesses, namesrv_addr: &str) -> Result<()> {
    for id in 1..=3 {
        procs.start(id)?;
    }
    let admin = Admin::new(namesrv_addr)?;
    let old = routed_leader(&admin, procs, None).await?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&procs.addr(old), &config).await?;

    let client = RemotingClient::new();
    for q in 0..QUEUES {
        let r = update_offset(&client, &procs.addr(old), GROUP, TOPIC, q, 50 + i64::from(q)).await?;
        assert_eq!(r.response_code(), ResponseCode::Success, "{:?}", r.remark);
    }

    let producer = Arc::new(
        Producer::builder("t25_producer").namesrv_addr(namesrv_addr).send_timeout(Duration::from_secs(2)).build()?,
    );
    producer.start().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let acked_total = Arc::new(AtomicUsize::new(0));
    // When the last SEND_OK came, and the longest time without one (the failover as producers see it).
    let gap: Arc<Mutex<(Option<Instant>, Duration)>> = Arc::default();
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let (producer, stop, acked_total) = (Arc::clone(&producer), Arc::clone(&stop), Arc::clone(&acked_total));
        let gap = Arc::clone(&gap);
        senders.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) {
                let mut m = Message::new(TOPIC, format!("{s}-{i}"))
                    .with_tags(if i.is_multiple_of(2) { "TagA" } else { "TagB" })
                    .with_keys(format!("k-{s}-{i}"));
                m.properties.insert("sender", s.to_string());
                match producer.send(m).await {
                    Ok(r) => {
                        acked.push((r.msg_id, format!("{s}-{i}")));
                        acked_total.fetch_add(1, Ordering::AcqRel);
                        let now = Instant::now();
                        let mut g = gap.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(last) = g.0 {
                            g.1 = g.1.max(now.saturating_duration_since(last));
                        }
                        g.0 = Some(g.0.map_or(now, |last| last.max(now)));
                    }
                    // Refused or outcome unknown while the group elects: only SEND_OK counts. Back
                    // off a little so a refusing group is not flooded.
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
                i += 1;
            }
            acked
        }));
    }

    wait_acks(&acked_total, ACKS_PER_PHASE, "before the kill").await?;
    let killed_at = Instant::now();
    procs.kill9(old).await?;
    let new = routed_leader(&admin, procs, Some(old)).await?;
    eprintln!("leader {old} SIGKILLed; {new} routed as leader {:?} later", killed_at.elapsed());
    let before = acked_total.load(Ordering::Acquire);
    wait_acks(&acked_total, before + ACKS_PER_PHASE, "after the failover").await?;
    let longest_gap = gap.lock().unwrap_or_else(|p| p.into_inner()).1;
    eprintln!("longest time without a SEND_OK across the SIGKILL: {longest_gap:?}");
    stop.store(true, Ordering::Release);
    let mut acked = Vec::new();
    for task in senders {
        acked.extend(task.await?);
    }
    producer.shutdown().await;
    admin.shutdown().await;

    // Everything acknowledged is on the new leader, once, densely, with what was sent.
    let leader_view = read_all(&client, &procs.addr(new)).await?;
    let mut stored = HashSet::new();
    for (q, messages) in leader_view.iter().enumerate() {
        for (index, m) in messages.iter().enumerate() {
            assert_eq!(m.queue_offset, index as i64, "queue {q} stays dense across the kill");
            let body = String::from_utf8_lossy(&m.message.body).into_owned();
            let sender = body.split('-').next().unwrap_or_default().to_owned();
            assert_eq!(m.message.keys(), Some(format!("k-{body}").as_str()), "keys of {body}");
            assert_eq!(m.message.property("sender"), Some(sender.as_str()), "property of {body}");
            assert!(matches!(m.message.tags(), Some("TagA" | "TagB")), "tags of {body}");
            assert!(stored.insert(m.message.uniq_key().context("UNIQ_KEY")?.to_owned()), "{body} stored twice");
        }
    }
    let lost: Vec<_> = acked.iter().filter(|(id, _)| !stored.contains(id)).collect();
    assert!(lost.is_empty(), "{} of {} acknowledged messages lost, e.g. {:?}", lost.len(), acked.len(), lost.first());
    for q in 0..QUEUES {
        assert_eq!(query_offset(&client, &procs.addr(new), GROUP, TOPIC, q).await?, Some(50 + i64::from(q)));
    }

    // The killed replica restarts on its files and converges to the same queues.
    procs.start(old)?;
    let want = identities(&leader_view);
    let deadline = Instant::now() + WAIT;
    loop {
        let view = match read_all(&client, &procs.addr(old)).await {
            Ok(view) => identities(&view),
            Err(_) => Vec::new(),
        };
        if view == want {
            break;
        }
        if Instant::now() > deadline {
            let counts: Vec<usize> = view.iter().map(Vec::len).collect();
            bail!("restarted replica {old} holds {counts:?} messages per queue, the leader {:?}", leader_view.len());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for id in procs.ids() {
        assert_eq!(identities(&read_all(&client, &procs.addr(id)).await?), want, "replica {id}");
    }
    eprintln!(
        "{} acknowledged, {} stored, identical on all 3 replicas after the SIGKILLed one restarted",
        acked.len(),
        stored.len()
    );
    client.close().await;
    Ok(())
}
