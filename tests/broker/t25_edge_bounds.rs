//! Issue 32 acceptance (edge): a `raftmq broker` process, as users run it (default limits), under
//! three hostile clients at once — one that sends 2,000 pulls and never reads an answer, 1,000 idle
//! connections, and 32 slow-loris HTTP clients trickling one header byte a second — keeps its
//! resident memory within `RSS_GROWTH_MAX_BYTES` of what it used before, and meanwhile answers a
//! send, a pull and `/readyz` from another client.
//!
//! Without the bounds the silent client alone would pin 2,000 pull answers of up to 256 KiB
//! (≈ 500 MiB). The hostile clients connect from other loopback addresses (127.0.0.2-4) so the
//! per-address limits apply to them, not to the client that must still be served.

use crate::harness;

use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use harness::group::RPC_TIMEOUT;
use harness::group::free_port;
use harness::group::pull;
use harness::group::replica_configs;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::remoting::RemotingClient;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;
use tokio::net::TcpStream;
use tokio::process::Command;

const WAIT: Duration = Duration::from_secs(30);
const TOPIC: &str = "T24_EDGE";
/// What the hostile clients may add to the broker's resident memory: the silent client's queued
/// answers (at most `SERVER_CONNECTION_QUEUED_MAX_BYTES`, 32 MiB), 1,000 idle connections' buffers
/// and tasks, 32 HTTP connections, with room for the allocator.
const RSS_GROWTH_MAX_BYTES: u64 = 320 * 1024 * 1024;
const IDLE_CONNECTIONS: usize = 1_000;
const SILENT_PULLS: i64 = 2_000;
const SLOW_LORIS_CLIENTS: usize = 32;

fn rss_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
    let kib: u64 = line.split_whitespace().nth(1).context("VmRSS value")?.parse()?;
    Ok(kib * 1024)
}

async fn connect_from(from: &str, addr: &str) -> Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(format!("{from}:0").parse()?)?;
    Ok(socket.connect(addr.parse()?).await?)
}

/// One HTTP/1.1 request on a fresh connection; the status code.
async fn http(addr: &str, method: &str, path: &str, body: &str) -> Result<u16> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if !body.is_empty() {
        request.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(RPC_TIMEOUT, stream.read_to_end(&mut raw)).await.context("HTTP answer timed out")??;
    let text = String::from_utf8_lossy(&raw);
    Ok(text.split(' ').nth(1).context("status line")?.parse()?)
}

async fn send(client: &RemotingClient, addr: &str, body: Vec<u8>) -> Result<()> {
    let header = SendMessageRequestHeaderV2 {
        a: "t24_producer".into(),
        b: TOPIC.into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: None,
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    let request = RemotingCommand::request_with_header(RequestCode::SendMessageV2, &header).with_body(body);
    let response = client.invoke(addr, request, RPC_TIMEOUT).await?;
    ensure!(response.response_code() == ResponseCode::Success, "send refused: {:?}", response.remark);
    Ok(())
}

fn pull_frame(offset: i64) -> Result<Vec<u8>> {
    let header = PullMessageRequestHeader {
        consumer_group: "t24_group".into(),
        topic: TOPIC.into(),
        queue_id: 0,
        queue_offset: offset,
        max_msg_nums: 32,
        sys_flag: pull_sys_flag::build(false, false, true, false, false),
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        bname: None,
    };
    Ok(RemotingCommand::request_with_header(RequestCode::PullMessage, &header).encode()?.to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_leave_memory_bounded_and_others_served() -> Result<()> {
    let namesrv = NameServer::start(NamesrvConfig {
        listen_port: 0,
        bind_address: "127.0.0.1".into(),
        kv_config_path: String::new(),
        ..NamesrvConfig::default()
    })
    .await?;
    let dir = tempfile::tempdir()?;
    let mut configs = replica_configs(dir.path(), &namesrv.local_addr().to_string(), 1)?;
    let (_, config) = configs.pop_first().context("one replica")?;
    let mut config = config;
    config.admin_port = free_port();
    let file = dir.path().join("broker.toml");
    std::fs::write(&file, config.to_toml_string())?;
    let log = std::fs::File::create(dir.path().join("broker.log"))?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .arg("broker")
        .arg("-c")
        .arg(&file)
        .stdout(std::process::Stdio::from(log.try_clone()?))
        .stderr(std::process::Stdio::from(log))
        .kill_on_drop(true)
        .spawn()?;
    let result = scenario(child.id().context("broker pid")?, &config.broker_addr(), config.admin_port).await;
    child.start_kill()?;
    child.wait().await?;
    if result.is_err() {
        let text = std::fs::read_to_string(dir.path().join("broker.log")).unwrap_or_default();
        for line in text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev() {
            eprintln!("{line}");
        }
    }
    namesrv.shutdown().await;
    result
}

async fn scenario(pid: u32, addr: &str, admin_port: u16) -> Result<()> {
    let admin = format!("127.0.0.1:{admin_port}");
    let deadline = Instant::now() + WAIT;
    while !matches!(http(&admin, "GET", "/readyz", "").await, Ok(200)) {
        if Instant::now() > deadline {
            bail!("the broker was not ready within {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let create = format!(r#"{{"topic":"{TOPIC}","read_queue_nums":1,"write_queue_nums":1}}"#);
    ensure!(http(&admin, "POST", "/api/v1/topics", &create).await? == 201, "topic not created");
    let client = RemotingClient::new();
    for _ in 0..64 {
        send(&client, addr, vec![b'x'; 32 * 1024]).await?;
    }
    let before = rss_bytes(pid)?;

    // 1,000 idle connections.
    let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
    for _ in 0..IDLE_CONNECTIONS {
        idle.push(connect_from("127.0.0.2", addr).await?);
    }
    // A client that asks for 2,000 pull answers and reads none.
    let silent = connect_from("127.0.0.3", addr).await?;
    let (_silent_read, mut silent_write) = silent.into_split();
    let frames: Vec<Vec<u8>> = (0..SILENT_PULLS).map(|i| pull_frame(i % 64)).collect::<Result<_>>()?;
    let silent_task = tokio::spawn(async move {
        for frame in frames {
            if silent_write.write_all(&frame).await.is_err() {
                break;
            }
        }
        silent_write
    });
    // Slow-loris HTTP clients: one header byte a second, never a complete head.
    let mut loris = Vec::new();
    for _ in 0..SLOW_LORIS_CLIENTS {
        let admin = admin.clone();
        loris.push(tokio::spawn(async move {
            let Ok(mut stream) = connect_from("127.0.0.4", &admin).await else { return };
            let head = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            for byte in head {
                if stream.write_all(&[*byte]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
    }

    // Other clients are served meanwhile.
    send(&client, addr, b"still served".to_vec()).await?;
    let pulled = pull(&client, addr, "t24_other", TOPIC, 0, 0, 1, None).await?;
    ensure!(pulled.code == ResponseCode::Success && pulled.messages.len() == 1, "pull: {:?}", pulled.code);
    ensure!(http(&admin, "GET", "/readyz", "").await? == 200, "/readyz not answered during the slow-loris");

    // Memory stays bounded while the hostile clients hold on (sampled for 10 s).
    let mut peak = 0;
    let sample_until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < sample_until {
        peak = peak.max(rss_bytes(pid)?);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let growth = peak.saturating_sub(before);
    eprintln!("broker RSS before {before} B, peak {peak} B, growth {growth} B (bound {RSS_GROWTH_MAX_BYTES} B)");
    ensure!(growth <= RSS_GROWTH_MAX_BYTES, "RSS grew {growth} B, more than {RSS_GROWTH_MAX_BYTES} B");
    send(&client, addr, b"served after".to_vec()).await?;
    ensure!(http(&admin, "GET", "/readyz", "").await? == 200, "/readyz after");
    silent_task.abort();
    loris.iter().for_each(tokio::task::JoinHandle::abort);
    drop(idle);
    Ok(())
}
