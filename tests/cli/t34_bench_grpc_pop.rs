//! `raftmq bench grpc-send` and `raftmq bench pop` against the real `raftmq dev` (a 3-replica
//! group serving gRPC on every replica): the counts, not the speed.
//! - grpc-send through the endpoint list of every replica (followers relay to the leader) stores
//!   exactly `--count` messages, with no failure;
//! - pop with `--drain` pops and acks every stored message of a new group once, and stops when the
//!   topic has nothing left; a second drain of the same group finds nothing (acked messages never
//!   come back);
//! - pop with `--count` pops exactly that many, fewer than the topic holds.

use crate::harness;

use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use harness::cli::raftmq;
use harness::dev::DEV_WAIT;
use harness::dev::DevCluster;
use raftmq_client::Admin;
use raftmq_common::protocol::body::topic::TopicConfig;
use tokio::time::Instant;

const TOPIC: &str = "T34_BENCH";
const SENT: u64 = 300;

/// The gRPC endpoints of the dev cluster's replicas, from its banner.
async fn grpc_endpoints(dev: &mut DevCluster) -> Result<Vec<String>> {
    let mut endpoints = Vec::new();
    for n in 0..3 {
        let line = dev
            .wait_line(&format!("replica n{n}'s gRPC line"), |l| {
                l.contains(&format!(" n{n}  remoting ")) && l.contains("  grpc ")
            })
            .await?;
        let addr = line.rsplit_once("  grpc ").map(|(_, a)| a.trim().to_owned()).context("gRPC address")?;
        endpoints.push(addr);
    }
    Ok(endpoints)
}

/// Creates the topic, retried until the group has a leader that registered and the route shows it.
async fn create_topic(namesrv: &str) -> Result<()> {
    let admin = Admin::new(namesrv)?;
    let config = TopicConfig { read_queue_nums: 4, write_queue_nums: 4, ..TopicConfig::new(TOPIC) };
    let deadline = Instant::now() + DEV_WAIT;
    loop {
        let made = admin.create_topic_in_cluster("DefaultCluster", &config).await;
        if made.is_ok() && admin.topic_route(TOPIC).await.is_ok() {
            admin.shutdown().await;
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("topic {TOPIC} not created and routed within {DEV_WAIT:?}: {made:?}");
        }
        // The election is under way: ask again shortly.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn pop(ns: &str, extra: &[&str]) -> Result<serde_json::Value> {
    let mut args = vec!["bench", "pop", "-t", TOPIC, "--concurrency", "4", "--poll", "500ms", "--json"];
    args.extend_from_slice(extra);
    raftmq(ns, &args).await?.ok()?.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_send_and_pop_count_every_message() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut dev = DevCluster::start(&dir.path().join("data"), &dir.path().join("dev.log")).await?;
    let ns = dev.namesrv.clone();
    let endpoints = grpc_endpoints(&mut dev).await?.join(";");
    create_topic(&ns).await?;

    let count = SENT.to_string();
    let args = [
        "bench",
        "grpc-send",
        "--endpoints",
        &endpoints,
        "-t",
        TOPIC,
        "--count",
        &count,
        "-w",
        "8",
        "-s",
        "256",
        "--json",
    ];
    let sent = raftmq(&ns, &args).await?.ok()?.json()?;
    assert_eq!(
        (sent["kind"].as_str(), sent["sent"].as_u64(), sent["failed"].as_u64()),
        (Some("grpc-send"), Some(SENT), Some(0)),
        "{sent}"
    );
    assert_eq!(sent["size"].as_u64(), Some(256), "{sent}");
    for key in ["tps", "p50_ms", "p99_ms", "p999_ms"] {
        assert!(sent[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {sent}");
    }

    // Catch-up: a new group drains what is stored, every message once.
    let drained = pop(&ns, &["-g", "t34_drain", "--drain"]).await?;
    assert_eq!((drained["received"].as_u64(), drained["acked"].as_u64()), (Some(SENT), Some(SENT)), "{drained}");
    assert_eq!((drained["ack_failed"].as_u64(), drained["pop_failed"].as_u64()), (Some(0), Some(0)), "{drained}");
    assert!(drained["empty_pops"].as_u64().is_some_and(|n| n >= 1), "a drain ends on an empty pop: {drained}");
    assert!(drained["p50_ms"].as_f64().is_some_and(|x| x > 0.0), "{drained}");
    let again = pop(&ns, &["-g", "t34_drain", "--drain"]).await?;
    assert_eq!(again["received"].as_u64(), Some(0), "acked messages never come back: {again}");

    // `--count`: exactly that many of the 300, in a group of its own.
    let counted = pop(&ns, &["-g", "t34_count", "--count", "100", "--batch", "16"]).await?;
    assert_eq!((counted["received"].as_u64(), counted["acked"].as_u64()), (Some(100), Some(100)), "{counted}");

    dev.stop().await
}
