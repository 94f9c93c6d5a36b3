//! `raftmq send` and `raftmq bench produce` against an in-process NameServer and a fake broker
//! group: what they print, what reaches the broker, and the benchmark's JSON summary.

use crate::harness;

use anyhow::Result;
use harness::cli::Cluster;
use harness::cli::TOPIC;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_prints_status_msg_id_queue_and_offset_per_message() -> Result<()> {
    let cluster = Cluster::start().await?;
    let run =
        cluster.raftmq(&["send", "-t", TOPIC, "--tag", "TagA", "--key", "K1", "--count", "3", "hello"]).await?.ok()?;
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "one line per message:\n{}", run.stdout);
    for (i, line) in lines.iter().enumerate() {
        assert!(line.starts_with("SEND_OK msgId="), "{line}");
        assert!(line.contains(" queue=broker-a:"), "{line}");
        assert!(line.ends_with(&format!(" offset={i}")), "{line}");
    }

    // Only the leader (brokerId 0) takes writes.
    let sends = cluster.leader.requests_of(RequestCode::SendMessageV2);
    assert_eq!(sends.len(), 3);
    assert!(cluster.follower.requests_of(RequestCode::SendMessageV2).is_empty());
    let header = SendMessageRequestHeader::read_request(&sends[0])?;
    assert_eq!(header.topic, TOPIC);
    let properties = header.properties.unwrap_or_default();
    assert!(properties.contains("TAGS\u{1}TagA"), "{properties:?}");
    assert!(properties.contains("KEYS\u{1}K1"), "{properties:?}");
    assert_eq!(&sends[0].body[..], b"hello");

    let run = cluster.raftmq(&["send", "-t", TOPIC, "--json", "world"]).await?.ok()?;
    let v = run.json()?;
    assert_eq!(
        (v["status"].as_str(), v["brokerName"].as_str(), v["queueOffset"].as_i64()),
        (Some("SEND_OK"), Some("broker-a"), Some(3))
    );
    cluster.shutdown().await;
    Ok(())
}

/// `--delayLevel` sends RocketMQ's DELAY property, `--delayMs` a 5.x timer (TIMER_DELAY_MS); one
/// message cannot ask for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_delay_flags_set_the_delay_properties() -> Result<()> {
    let cluster = Cluster::start().await?;
    cluster.raftmq(&["send", "-t", TOPIC, "--delayLevel", "3", "later"]).await?.ok()?;
    cluster.raftmq(&["send", "-t", TOPIC, "--delayMs", "90000", "much later"]).await?.ok()?;
    let sends = cluster.leader.requests_of(RequestCode::SendMessageV2);
    assert_eq!(sends.len(), 2);
    let props: Vec<String> = sends
        .iter()
        .map(|r| SendMessageRequestHeader::read_request(r).map(|h| h.properties.unwrap_or_default()))
        .collect::<Result<_, _>>()?;
    assert!(props[0].contains("DELAY\u{1}3") && !props[0].contains("TIMER_"), "{:?}", props[0]);
    assert!(props[1].contains("TIMER_DELAY_MS\u{1}90000") && !props[1].contains("DELAY\u{1}"), "{:?}", props[1]);
    let both = cluster.raftmq(&["send", "-t", TOPIC, "--delayLevel", "3", "--delayMs", "5", "x"]).await?;
    assert!(!both.success && both.stderr.contains("cannot be used with"), "{}", both.stderr);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_to_an_unknown_topic_fails_with_a_reason() -> Result<()> {
    let cluster = Cluster::start().await?;
    let run = cluster.raftmq(&["send", "-t", "NoSuchTopic", "--timeout", "1s", "x"]).await?;
    assert!(!run.success, "{}", run.stdout);
    assert!(run.stdout.starts_with("SEND_FAILED error="), "{}", run.stdout);
    assert!(run.stderr.contains("not confirmed stored"), "{}", run.stderr);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_produce_json_summary_counts_every_message() -> Result<()> {
    let cluster = Cluster::start().await?;
    let run = cluster
        .raftmq(&["bench", "produce", "-t", TOPIC, "--count", "200", "--concurrency", "8", "--size", "64", "--json"])
        .await?
        .ok()?;
    let v = run.json()?;
    assert_eq!(v["sent"].as_u64(), Some(200), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["failed_sends"].as_u64(), Some(0), "{v}");
    assert!(v["max_send_gap_ms"].as_f64().is_some_and(|gap| gap >= 0.0), "max_send_gap_ms in {v}");
    for key in ["tps", "p50_ms", "p99_ms", "p999_ms", "max_ms"] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {v}");
    }
    assert!(v["p50_ms"].as_f64() <= v["p99_ms"].as_f64() && v["p99_ms"].as_f64() <= v["p999_ms"].as_f64(), "{v}");
    let sends = cluster.leader.requests_of(RequestCode::SendMessageV2);
    assert_eq!(sends.len(), 200);
    assert!(sends.iter().all(|r| r.body.len() == 64));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_produce_batches_async_and_prints_the_complete_line() -> Result<()> {
    let cluster = Cluster::start().await?;
    let run =
        cluster.raftmq(&["bench", "produce", "-t", TOPIC, "--count", "95", "--batch", "10", "--json"]).await?.ok()?;
    assert_eq!(run.json()?["sent"].as_u64(), Some(95));
    // 9 full batches and the 5 left over; a one-message batch still goes as SEND_BATCH_MESSAGE.
    assert_eq!(cluster.leader.requests_of(RequestCode::SendBatchMessage).len(), 10);

    let run = cluster
        .raftmq(&["bench", "produce", "-t", TOPIC, "--count", "50", "--mode", "async", "-w", "4"])
        .await?
        .ok()?;
    let last = run.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("[Complete] Send Total: 50 | Send TPS: "), "{}", run.stdout);
    let parts =
        ["| Send Failed: 0 |", "| Response Failed: 0 |", "| P50 RT(ms): ", "| P999 RT(ms): ", "| Max Send Gap(ms): "];
    for part in parts.into_iter().chain(["| Failed Sends: 0"]) {
        assert!(last.contains(part), "{part} in {last}");
    }
    cluster.shutdown().await;
    Ok(())
}
