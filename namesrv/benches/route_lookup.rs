//! Route lookups per second: GET_ROUTEINFO_BY_TOPIC against one NameServer holding 1,000 topics
//! (one three-node broker group), from 64 concurrent clients, each on its own connection.
//!
//! Two measurements:
//! - `tcp`: 64 `RemotingClient`s over loopback, each looping lookups (request → response) for the
//!   run time; reports lookups/s and latency percentiles.
//! - `handler`: 64 OS threads calling `NamesrvProcessor::handle` directly: the route table and JSON
//!   encoding under the read lock, without sockets.
//!
//! No benchmark framework: `cargo bench -p raftmq-namesrv --bench route_lookup` runs 10 s per
//! measurement (`ROUTE_LOOKUP_SECS` overrides); `-- --test` (as CI compiles benches) runs 0.2 s.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::remoting::RemotingClient;
use raftmq_namesrv::config::NamesrvConfig;
use raftmq_namesrv::server::NameServer;

const TOPIC_COUNT: usize = 1_000;
const CLIENT_COUNT: usize = 64;
const RPC_TIMEOUT: Duration = Duration::from_secs(5);

fn topic(i: usize) -> String {
    format!("BenchTopic_{i:04}")
}

fn route_request(i: usize) -> RemotingCommand {
    let header = GetRouteInfoRequestHeader { topic: topic(i % TOPIC_COUNT), accept_standard_json_only: Some(true) };
    RemotingCommand::request_with_header(RequestCode::GetRouteinfoByTopic, &header)
}

fn register_request(node: u64) -> RemotingCommand {
    let mut wrapper =
        TopicConfigSerializeWrapper { data_version: DataVersion { counter: 1, timestamp: 1 }, ..Default::default() };
    for i in 0..TOPIC_COUNT {
        let config = TopicConfig { read_queue_nums: 8, write_queue_nums: 8, ..TopicConfig::new(topic(i)) };
        wrapper.topic_config_table.insert(topic(i), config);
    }
    let body = RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
        .encode_body(true)
        .expect("encode a generated body");
    let role = if node == 0 { RaftRole::Leader } else { RaftRole::Follower };
    let header = RegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: format!("127.0.0.1:{}", 10911 + node * 10),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: String::new(),
        broker_id: if node == 0 { 0 } else { node as i64 + 1 },
        heartbeat_timeout_millis: None,
        compressed: true,
        body_crc32: 0,
        raft: Some(RaftRegistration { term: 1, role, node_id: node }),
    };
    RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header).with_body(body)
}

fn percentile(sorted_us: &[u32], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let rank = ((sorted_us.len() - 1) as f64 * p).round() as usize;
    f64::from(sorted_us[rank.min(sorted_us.len() - 1)]) / 1000.0
}

fn report(name: &str, lookups: usize, elapsed: Duration, mut latencies_us: Vec<u32>) {
    latencies_us.sort_unstable();
    println!(
        "route_lookup/{name}: topics={TOPIC_COUNT} clients={CLIENT_COUNT} secs={:.1} lookups={lookups} \
         lookups/s={:.0} | P50 RT(ms): {:.3} | P99 RT(ms): {:.3} | P999 RT(ms): {:.3}",
        elapsed.as_secs_f64(),
        lookups as f64 / elapsed.as_secs_f64(),
        percentile(&latencies_us, 0.50),
        percentile(&latencies_us, 0.99),
        percentile(&latencies_us, 0.999),
    );
}

async fn bench_tcp(addr: String, run: Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENT_COUNT {
        let (addr, stop) = (addr.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let client = RemotingClient::new();
            let mut latencies = Vec::new();
            let mut i = c * 7919;
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                let response = client.invoke(&addr, route_request(i), RPC_TIMEOUT).await.expect("lookup");
                assert_eq!(response.response_code(), ResponseCode::Success, "{:?}", response.remark);
                latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
                i += 1;
            }
            client.close().await;
            latencies
        }));
    }
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("client task"));
    }
    report("tcp", all.len(), start.elapsed(), all);
}

fn bench_handler(server: &NameServer, run: Duration) {
    let processor = server.processor().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let threads: Vec<_> = (0..CLIENT_COUNT)
        .map(|c| {
            let (processor, stop) = (processor.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut latencies = Vec::new();
                let mut i = c * 7919;
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let response = processor.handle(None, &route_request(i));
                    assert_eq!(response.response_code(), ResponseCode::Success);
                    latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    std::thread::sleep(run);
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in threads {
        all.extend(t.join().expect("bench thread"));
    }
    report("handler", all.len(), start.elapsed(), all);
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test");
    let secs: f64 = std::env::var("ROUTE_LOOKUP_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let run = if quick { Duration::from_millis(200) } else { Duration::from_secs_f64(secs) };

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let config = NamesrvConfig {
            listen_port: 0,
            bind_address: "127.0.0.1".into(),
            kv_config_path: String::new(),
            ..NamesrvConfig::default()
        };
        let server = NameServer::start(config).await.expect("start namesrv");
        let addr = server.local_addr().to_string();
        let broker = RemotingClient::new();
        for node in 0..3 {
            let response = broker.invoke(&addr, register_request(node), RPC_TIMEOUT).await.expect("register");
            assert_eq!(response.response_code(), ResponseCode::Success, "{:?}", response.remark);
        }
        assert_eq!(server.processor().routes().topic_count(), TOPIC_COUNT);

        bench_tcp(addr, run).await;
        tokio::task::block_in_place(|| bench_handler(&server, run));
        server.shutdown().await;
    });
}
