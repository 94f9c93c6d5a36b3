//! The broker's admin HTTP API and `/metrics`, end to end over real sockets against an in-process
//! 3-replica group (`broker_group`, admin ports chosen by the OS): probes, status, config, topics and groups
//! (token, bad input, not-leader refusals — each refusal read back to prove nothing changed),
//! consumer progress, message queries, offset reset and leader transfer, and the metric series a
//! send and a pull leave behind (and a waiting timer message, on every replica).
//!
//! The HTTP client is a few lines over `TcpStream` (`Connection: close`), so the tests depend on no
//! HTTP client crate.

use crate::harness;

use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use harness::group::Group;
use harness::group::RPC_TIMEOUT;
use harness::group::pull;
use harness::group::query_offset;
use harness::group::update_offset;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;
use raftmq_common::remoting::RemotingClient;
use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;

const WAIT: Duration = Duration::from_secs(20);
const TOKEN: &str = "t64-s3cret-0123456789";

/// One HTTP answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: String,
    body: String,
}

impl Reply {
    fn json(&self) -> Result<Value> {
        serde_json::from_str(&self.body).with_context(|| format!("not JSON ({}): {}", self.status, self.body))
    }

    /// The stable error code of an error answer.
    fn code(&self) -> String {
        self.json().ok().and_then(|v| v["code"].as_str().map(str::to_owned)).unwrap_or_default()
    }

    fn expect(self, status: u16) -> Result<Reply> {
        ensure!(self.status == status, "expected {status}, got {}: {}", self.status, self.body);
        Ok(self)
    }

    fn expect_error(self, status: u16, code: &str) -> Result<Reply> {
        let r = self.expect(status)?;
        ensure!(r.code() == code, "expected code {code}, got {}", r.body);
        ensure!(r.json()?["message"].as_str().is_some_and(|m| !m.is_empty()), "no message: {}", r.body);
        Ok(r)
    }
}

fn dechunk(mut body: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("chunk size line")?;
        let size = usize::from_str_radix(size.trim(), 16)?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(rest.get(..size).context("short chunk")?);
        body = rest.get(size + 2..).context("chunk end")?;
    }
}

/// Reads until the server closes. A server that answers before reading the whole request (413)
/// may reset the connection after its answer: what arrived before the reset is the answer.
async fn read_all(stream: &mut tokio::net::TcpStream) -> Result<Vec<u8>> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => return Ok(raw),
            Ok(n) => raw.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(raw),
            Err(e) => return Err(e.into()),
        }
    }
}

/// One request over a fresh connection; `token` adds `Authorization: Bearer`.
async fn http(addr: &str, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> Result<Reply> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        request.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() || method != "GET" {
        request.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await?;
    let raw = tokio::time::timeout(RPC_TIMEOUT, read_all(&mut stream)).await.context("HTTP answer timed out")??;
    let text = String::from_utf8(raw)?;
    let (head, rest) = text.split_once("\r\n\r\n").context("no header end")?;
    let status: u16 = head.split(' ').nth(1).context("status line")?.parse()?;
    let headers = head.to_ascii_lowercase();
    let body = if headers.contains("transfer-encoding: chunked") { dechunk(rest)? } else { rest.to_owned() };
    Ok(Reply { status, headers, body })
}

/// A GET with the token: groups started with `adminToken` need it for every `/api/v1/` call, the
/// others ignore it.
async fn get(addr: &str, path: &str) -> Result<Reply> {
    http(addr, "GET", path, Some(TOKEN), None).await
}

/// `head` (request line and headers, no blank line) and `body` sent as they are.
async fn raw(addr: &str, head: &str, body: &str) -> Result<Reply> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes()).await?;
    let raw = tokio::time::timeout(RPC_TIMEOUT, read_all(&mut stream)).await.context("HTTP answer timed out")??;
    let text = String::from_utf8(raw)?;
    let (head, rest) = text.split_once("\r\n\r\n").context("no header end")?;
    let status: u16 = head.split(' ').nth(1).context("status line")?.parse()?;
    let headers = head.to_ascii_lowercase();
    let body = if headers.contains("transfer-encoding: chunked") { dechunk(rest)? } else { rest.to_owned() };
    Ok(Reply { status, headers, body })
}

/// Polls `path` until `ok` holds for its answer (a state wait with a safety deadline).
async fn eventually(addr: &str, path: &str, what: &str, ok: impl Fn(&Reply) -> bool) -> Result<Reply> {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = get(addr, path).await?;
        if ok(&r) {
            return Ok(r);
        }
        if Instant::now() > deadline {
            bail!("{what}: last answer {} {}", r.status, r.body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A follower of `leader`.
fn follower(group: &Group, leader: u64) -> u64 {
    group.brokers.keys().copied().find(|id| *id != leader).unwrap_or(leader)
}

/// SEND_MESSAGE_V2 of one message to queue 0 of `topic` at `addr`; its offsetMsgId.
async fn send(client: &RemotingClient, addr: &str, topic: &str, keys: &str, body: &str) -> Result<String> {
    let header = SendMessageRequestHeaderV2 {
        a: "t60_producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: 0,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(format!("KEYS\u{1}{keys}\u{2}TAGS\u{1}TagA\u{2}")),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::SendMessageV2, &header).with_body(body.as_bytes().to_vec());
    let response = client.invoke(addr, request, RPC_TIMEOUT).await?;
    ensure!(response.response_code() == ResponseCode::Success, "send refused: {:?}", response.remark);
    Ok(response.decode_header::<SendMessageResponseHeader>()?.msg_id)
}

async fn create_topic(admin: &str, topic: &str, queues: i32, token: Option<&str>) -> Result<()> {
    let body = json!({ "topic": topic, "read_queue_nums": queues, "write_queue_nums": queues }).to_string();
    http(admin, "POST", "/api/v1/topics", token, Some(&body)).await?.expect(201)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_status_metrics_and_draining() -> Result<()> {
    const TOPIC: &str = "T60_METRICS";
    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    let f = follower(&group, leader);
    let (la, fa) = (group.admin_addr(leader)?, group.admin_addr(f)?);

    for id in group.brokers.keys() {
        let a = group.admin_addr(*id)?;
        ensure!(get(&a, "/livez").await?.expect(200)?.json()?["status"] == "ok");
        eventually(&a, "/readyz", "replica ready", |r| r.status == 200).await?;
    }

    let s = get(&la, "/api/v1/status").await?.expect(200)?.json()?;
    ensure!(s["node_id"] == leader && s["role"] == "leader" && s["leader_id"] == leader, "{s}");
    ensure!(s["group"] == "broker-a" && s["cluster"] == "DefaultCluster" && s["writable"] == true, "{s}");
    ensure!(s["term"].as_u64() >= Some(1) && s["commit_index"].as_u64().is_some(), "{s}");
    ensure!(s["applied_index"].as_u64().is_some() && s["last_log_index"].as_u64().is_some(), "{s}");
    ensure!(s["membership"]["voters"] == json!([1, 2, 3]) && s["membership"]["learners"] == json!([]), "{s}");
    ensure!(s["damaged"] == false && s["draining"] == false, "{s}");
    ensure!(s["storage_faults"] == json!([]) && s["apply_failure"].is_null(), "{s}");
    let r = get(&la, "/readyz").await?.expect(200)?.json()?;
    ensure!(r["ready"] == true && r["storage_faults"] == json!([]), "{r}");

    // Without adminToken the API listens on loopback only and answers only loopback Host names; a
    // browser's cross-site request and a non-JSON body never reach a handler.
    let bound = group.brokers[&leader].admin_addr().context("admin address")?;
    ensure!(bound.ip().is_loopback(), "no token, yet the admin API listens on {bound}");
    let create = json!({ "topic": "T64_CSRF", "read_queue_nums": 1, "write_queue_nums": 1 }).to_string();
    let form = "POST /api/v1/topics HTTP/1.1\r\nHost: {la}\r\nOrigin: https://evil.example\r\nContent-Type: text/plain";
    raw(&la, &form.replace("{la}", &la), &create).await?.expect_error(403, "FORBIDDEN_ORIGIN")?;
    let plain = format!("POST /api/v1/topics HTTP/1.1\r\nHost: {la}\r\nContent-Type: text/plain");
    raw(&la, &plain, &create).await?.expect_error(415, "UNSUPPORTED_MEDIA_TYPE")?;
    let untyped = format!("POST /api/v1/topics HTTP/1.1\r\nHost: {la}");
    raw(&la, &untyped, &create).await?.expect_error(415, "UNSUPPORTED_MEDIA_TYPE")?;
    let rebound = "GET /api/v1/status HTTP/1.1\r\nHost: evil.example:8080";
    raw(&la, rebound, "").await?.expect_error(403, "FORBIDDEN_ORIGIN")?;
    raw(&la, "GET /readyz HTTP/1.1\r\nHost: evil.example:8080", "").await?.expect(200)?;
    get(&la, "/api/v1/topics/T64_CSRF").await?.expect_error(404, "TOPIC_NOT_FOUND")?;
    let followers = s["followers"].as_array().context("followers")?;
    ensure!(followers.len() == 2 && followers.iter().all(|x| x["lag"].as_u64().is_some()), "{s}");
    let s = get(&fa, "/api/v1/status").await?.expect(200)?.json()?;
    ensure!(s["role"] == "follower" && s["leader_id"] == leader && s["leader_addr"] == group.addr(leader), "{s}");
    ensure!(s["followers"] == json!([]) && s["writable"] == false, "{s}");

    let doc = get(&fa, "/api/openapi.json").await?.expect(200)?.json()?;
    ensure!(doc["openapi"].as_str().is_some_and(|v| v.starts_with('3')) && doc["paths"]["/api/v1/status"].is_object());
    get(&la, "/api/v1/nothing").await?.expect_error(404, "NOT_FOUND")?;
    http(&la, "DELETE", "/api/v1/status", None, None).await?.expect_error(405, "METHOD_NOT_ALLOWED")?;

    // A send and a pull, then the named series.
    create_topic(&la, TOPIC, 2, None).await?;
    let client = RemotingClient::new();
    for i in 0..3 {
        send(&client, &group.addr(leader), TOPIC, &format!("m{i}"), "x").await?;
    }
    let pulled = pull(&client, &group.addr(leader), "g60", TOPIC, 0, 0, 32, None).await?;
    ensure!(pulled.messages.len() == 3, "pulled {:?}", pulled.code);
    ensure!(
        update_offset(&client, &group.addr(leader), "g60", TOPIC, 0, 1).await?.response_code() == ResponseCode::Success
    );
    let m = get(&la, "/metrics").await?.expect(200)?;
    ensure!(m.headers.contains("content-type: text/plain"), "{}", m.headers);
    let me = format!("cluster=\"DefaultCluster\",broker_name=\"broker-a\",node_id=\"{leader}\"");
    for series in [
        format!("rocketmq_messages_in_total{{{me},topic=\"{TOPIC}\"}} 3"),
        format!("rocketmq_messages_out_total{{{me},topic=\"{TOPIC}\",group=\"g60\"}} 3"),
        format!("rocketmq_consumer_lag{{{me},group=\"g60\",topic=\"{TOPIC}\",queue=\"0\"}} 2"),
        format!("raftmq_raft_is_leader{{{me}}} 1"),
    ] {
        ensure!(m.body.lines().any(|l| l == series), "no `{series}` in\n{}", m.body);
    }
    for name in [
        "rocketmq_send_latency_seconds_bucket{",
        "rocketmq_send_latency_seconds_count{",
        "raftmq_raft_term{",
        "raftmq_raft_commit_index{",
        "raftmq_raft_applied_index{",
        "raftmq_fsync_latency_seconds_bucket{",
        "raftmq_fsync_latency_seconds_count{",
        "raftmq_disk_used_ratio{",
    ] {
        ensure!(m.body.lines().any(|l| l.starts_with(name)), "no {name} in\n{}", m.body);
    }
    // A 2 h timer message waits in the longest delay level (18); every replica reports it.
    send(&client, &group.addr(leader), "T60_TIMER", "k\u{2}TIMER_DELAY_SEC\u{1}7200", "later").await?;
    let waiting = |node: u64| {
        format!(
            "raftmq_delay_messages_waiting{{cluster=\"DefaultCluster\",broker_name=\"broker-a\",node_id=\"{node}\",level=\"18\"}} 1"
        )
    };
    let m = get(&la, "/metrics").await?.expect(200)?;
    ensure!(m.body.lines().any(|l| l == waiting(leader)), "no `{}` in\n{}", waiting(leader), m.body);
    eventually(&fa, "/metrics", "the follower's delayed-message gauge", |r| r.body.lines().any(|l| l == waiting(f)))
        .await?;
    let fm = get(&fa, "/metrics").await?.expect(200)?;
    ensure!(fm.body.contains(&format!(
        "raftmq_raft_is_leader{{cluster=\"DefaultCluster\",broker_name=\"broker-a\",node_id=\"{f}\"}} 0"
    )));
    ensure!(!fm.body.contains("rocketmq_messages_in_total"), "the follower stored nothing itself");
    // The leader tells how far each follower is behind; caught up, 0. A follower has no followers.
    let caught_up = format!("raftmq_raft_follower_lag_entries{{{me},follower=\"{f}\"}} 0");
    eventually(&la, "/metrics", "the follower's lag of 0", |r| r.body.lines().any(|l| l == caught_up)).await?;
    ensure!(!fm.body.contains("raftmq_raft_follower_lag_entries"), "{}", fm.body);

    // Draining: /readyz 503 at once, /livez still 200, changes refused and nothing created.
    group.brokers[&f].begin_draining();
    let r = get(&fa, "/readyz").await?.expect(503)?.json()?;
    ensure!(r["ready"] == false && r["checks"]["not_draining"] == false && r["checks"]["leader_known"] == true, "{r}");
    get(&fa, "/livez").await?.expect(200)?;
    group.brokers[&leader].begin_draining();
    get(&la, "/readyz").await?.expect(503)?;
    let body = json!({ "topic": "T60_DRAIN" }).to_string();
    http(&la, "POST", "/api/v1/topics", None, Some(&body)).await?.expect_error(503, "NOT_READY")?;
    get(&la, "/api/v1/topics/T60_DRAIN").await?.expect_error(404, "TOPIC_NOT_FOUND")?;
    get(&la, "/api/v1/status").await?.expect(200)?;

    group.shutdown().await;
    Ok(())
}

/// `GET` / `PATCH /api/v1/config`: the replica's config and its runtime keys, changed all or none,
/// only with the token; a refused change is read back to prove nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_is_read_and_changed_at_runtime() -> Result<()> {
    let group = Group::start_with(1, |c| c.admin_token = Some(TOKEN.to_owned())).await?;
    let id = group.wait_leader(WAIT).await?;
    let admin = group.admin_addr(id)?;
    // With a token the API listens on every interface, and every /api/v1/ call needs the token.
    let bound = group.brokers[&id].admin_addr().context("admin address")?;
    ensure!(bound.ip().is_unspecified(), "with a token the admin API listens on {bound}");
    http(&admin, "GET", "/api/v1/config", None, None).await?.expect_error(401, "UNAUTHORIZED")?;
    http(&admin, "GET", "/api/v1/status", Some("t60-s3cre"), None).await?.expect_error(401, "UNAUTHORIZED")?;
    http(&admin, "GET", "/readyz", None, None).await?.expect(200)?;
    let named = format!("GET /api/v1/status HTTP/1.1\r\nHost: broker-1.example:8080\r\nAuthorization: Bearer {TOKEN}");
    raw(&admin, &named, "").await?.expect(200)?;
    let v = get(&admin, "/api/v1/config").await?.expect(200)?.json()?;
    ensure!(v["config"]["brokerPermission"] == "6" && v["config"]["adminToken"] == "******", "{v}");
    ensure!(v["version"]["counter"] == 0, "{v}");
    ensure!(v["runtime_updatable_keys"].as_array().is_some_and(|k| k.contains(&json!("brokerPermission"))), "{v}");

    let change = json!({ "brokerPermission": 4, "deleteWhen": "3" }).to_string();
    http(&admin, "PATCH", "/api/v1/config", None, Some(&change)).await?.expect_error(401, "UNAUTHORIZED")?;
    for bad in [json!({ "listenPort": 1 }), json!({ "brokerPermission": [4] }), json!({ "brokerPermission": 99 })] {
        let r = http(&admin, "PATCH", "/api/v1/config", Some(TOKEN), Some(&bad.to_string())).await?;
        let r = r.expect_error(400, "INVALID_ARGUMENT")?;
        ensure!(bad.as_object().is_some_and(|o| o.keys().all(|k| r.body.contains(k.as_str()))), "{}", r.body);
    }
    let v = get(&admin, "/api/v1/config").await?.expect(200)?.json()?;
    ensure!(v["config"]["brokerPermission"] == "6" && v["version"]["counter"] == 0, "refused, so unchanged: {v}");

    let v = http(&admin, "PATCH", "/api/v1/config", Some(TOKEN), Some(&change)).await?.expect(200)?.json()?;
    ensure!(v["config"]["brokerPermission"] == "4" && v["config"]["deleteWhen"] == "3", "{v}");
    ensure!(v["version"]["counter"] == 1, "{v}");
    group.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_and_groups_need_the_token_and_the_leader() -> Result<()> {
    const TOPIC: &str = "T60_CRUD";
    const GROUP: &str = "G60_CRUD";
    let group = Group::start_with(3, |c| c.admin_token = Some(TOKEN.to_owned())).await?;
    let leader = group.wait_leader(WAIT).await?;
    let f = follower(&group, leader);
    let (la, fa) = (group.admin_addr(leader)?, group.admin_addr(f)?);
    let tok = Some(TOKEN);
    let path = format!("/api/v1/topics/{TOPIC}");
    let create = json!({ "topic": TOPIC, "read_queue_nums": 4, "write_queue_nums": 4 }).to_string();

    // Refused creates leave nothing behind.
    http(&la, "POST", "/api/v1/topics", None, Some(&create)).await?.expect_error(401, "UNAUTHORIZED")?;
    http(&la, "POST", "/api/v1/topics", Some("wrong"), Some(&create)).await?.expect_error(401, "UNAUTHORIZED")?;
    for bad in [
        "{\"topic\": ".to_owned(),
        "[1, 2]".to_owned(),
        json!({ "topic": TOPIC, "colour": "red" }).to_string(),
        json!({ "topic": TOPIC, "read_queue_nums": "four" }).to_string(),
    ] {
        http(&la, "POST", "/api/v1/topics", tok, Some(&bad)).await?.expect_error(400, "BAD_JSON")?;
    }
    for bad in [
        json!({ "topic": "bad topic!" }),
        json!({ "topic": "" }),
        json!({ "topic": "SCHEDULE_TOPIC_XXXX" }),
        json!({ "read_queue_nums": 4 }),
        json!({ "topic": TOPIC, "read_queue_nums": 0 }),
        json!({ "topic": TOPIC, "perm": 99 }),
        json!({ "topic": TOPIC, "topic_filter_type": "NO_SUCH" }),
    ] {
        http(&la, "POST", "/api/v1/topics", tok, Some(&bad.to_string()))
            .await?
            .expect_error(400, "INVALID_ARGUMENT")?;
    }
    let huge = format!("{{\"topic\": \"{}\"}}", "x".repeat(128 * 1024));
    http(&la, "POST", "/api/v1/topics", tok, Some(&huge)).await?.expect_error(413, "PAYLOAD_TOO_LARGE")?;
    get(&la, &path).await?.expect_error(404, "TOPIC_NOT_FOUND")?;
    get(&la, "/api/v1/topics/bad%20name").await?.expect_error(400, "INVALID_ARGUMENT")?;

    // Create, read, update, refuse on a follower, delete.
    let t = http(&la, "POST", "/api/v1/topics", tok, Some(&create)).await?.expect(201)?.json()?;
    ensure!(t["topic"] == TOPIC && t["read_queue_nums"] == 4 && t["perm"] == 6 && t["system"] == false, "{t}");
    http(&la, "POST", "/api/v1/topics", tok, Some(&create)).await?.expect_error(409, "ALREADY_EXISTS")?;
    let t = get(&la, &path).await?.expect(200)?.json()?;
    ensure!(t["queues"].as_array().map(Vec::len) == Some(4) && t["queues"][3]["max_offset"] == 0, "{t}");
    let list = get(&la, "/api/v1/topics").await?.expect(200)?.json()?;
    ensure!(list["topics"].as_array().context("topics")?.iter().any(|t| t["topic"] == TOPIC), "{list}");
    let update = json!({ "write_queue_nums": 2 }).to_string();
    http(&la, "PUT", &path, None, Some(&update)).await?.expect_error(401, "UNAUTHORIZED")?;
    http(&la, "PUT", &path, tok, Some(&json!({ "perm": -1 }).to_string()))
        .await?
        .expect_error(400, "INVALID_ARGUMENT")?;
    let mismatch = json!({ "topic": "OTHER" }).to_string();
    http(&la, "PUT", &path, tok, Some(&mismatch)).await?.expect_error(400, "INVALID_ARGUMENT")?;
    let t = get(&la, &path).await?.expect(200)?.json()?;
    ensure!(t["write_queue_nums"] == 4 && t["perm"] == 6, "refused updates changed nothing: {t}");
    let t = http(&la, "PUT", &path, tok, Some(&update)).await?.expect(200)?.json()?;
    ensure!(t["write_queue_nums"] == 2 && t["read_queue_nums"] == 4, "{t}");
    http(&la, "PUT", "/api/v1/topics/T60_NONE", tok, Some(&update)).await?.expect_error(404, "TOPIC_NOT_FOUND")?;

    // Followers serve reads of the replicated table and refuse changes naming the leader.
    eventually(&fa, &path, "topic replicated", |r| r.status == 200 && r.body.contains("\"write_queue_nums\":2"))
        .await?;
    let other = json!({ "topic": "T60_FOLLOWER" }).to_string();
    let e = http(&fa, "POST", "/api/v1/topics", tok, Some(&other)).await?.expect_error(421, "NOT_LEADER")?.json()?;
    ensure!(e["leader_id"] == leader && e["leader_addr"] == group.addr(leader), "{e}");
    http(&fa, "DELETE", &path, tok, None).await?.expect_error(421, "NOT_LEADER")?;
    get(&la, "/api/v1/topics/T60_FOLLOWER").await?.expect_error(404, "TOPIC_NOT_FOUND")?;

    http(&la, "DELETE", &path, None, None).await?.expect_error(401, "UNAUTHORIZED")?;
    get(&la, &path).await?.expect(200)?;
    http(&la, "DELETE", "/api/v1/topics/SCHEDULE_TOPIC_XXXX", tok, None)
        .await?
        .expect_error(400, "INVALID_ARGUMENT")?;
    ensure!(http(&la, "DELETE", &path, tok, None).await?.expect(200)?.json()?["deleted"] == TOPIC);
    get(&la, &path).await?.expect_error(404, "TOPIC_NOT_FOUND")?;
    http(&la, "DELETE", &path, tok, None).await?.expect_error(404, "TOPIC_NOT_FOUND")?;

    // Subscription groups, the same way.
    let gpath = format!("/api/v1/groups/{GROUP}");
    let gcreate = json!({ "group": GROUP, "retry_max_times": 3 }).to_string();
    http(&la, "POST", "/api/v1/groups", None, Some(&gcreate)).await?.expect_error(401, "UNAUTHORIZED")?;
    http(&la, "POST", "/api/v1/groups", tok, Some("{oops")).await?.expect_error(400, "BAD_JSON")?;
    let bad_name = json!({ "group": "bad group" }).to_string();
    http(&la, "POST", "/api/v1/groups", tok, Some(&bad_name)).await?.expect_error(400, "INVALID_ARGUMENT")?;
    get(&la, &gpath).await?.expect_error(404, "GROUP_NOT_FOUND")?;
    get(&la, &format!("{gpath}/progress")).await?.expect_error(404, "GROUP_NOT_FOUND")?;
    let g = http(&la, "POST", "/api/v1/groups", tok, Some(&gcreate)).await?.expect(201)?.json()?;
    ensure!(g["group"] == GROUP && g["retry_max_times"] == 3 && g["consume_enable"] == true, "{g}");
    http(&la, "POST", "/api/v1/groups", tok, Some(&gcreate)).await?.expect_error(409, "ALREADY_EXISTS")?;
    let disable = json!({ "consume_enable": false }).to_string();
    http(&la, "PUT", &gpath, Some("nope"), Some(&disable)).await?.expect_error(401, "UNAUTHORIZED")?;
    ensure!(get(&la, &gpath).await?.expect(200)?.json()?["consume_enable"] == true);
    let g = http(&la, "PUT", &gpath, tok, Some(&disable)).await?.expect(200)?.json()?;
    ensure!(g["consume_enable"] == false && g["retry_max_times"] == 3, "{g}");
    http(&la, "PUT", "/api/v1/groups/G60_NONE", tok, Some(&disable)).await?.expect_error(404, "GROUP_NOT_FOUND")?;
    let list = get(&la, "/api/v1/groups").await?.expect(200)?.json()?;
    ensure!(list["groups"].as_array().context("groups")?.iter().any(|g| g["group"] == GROUP), "{list}");
    eventually(&fa, &gpath, "group replicated", |r| r.status == 200 && r.body.contains("\"consume_enable\":false"))
        .await?;
    http(&fa, "DELETE", &gpath, tok, None).await?.expect_error(421, "NOT_LEADER")?;
    get(&la, &gpath).await?.expect(200)?;
    ensure!(http(&la, "DELETE", &gpath, tok, None).await?.expect(200)?.json()?["offsets_removed"] == false);
    get(&la, &gpath).await?.expect_error(404, "GROUP_NOT_FOUND")?;
    // `?remove_offset=true` drops the group's committed offsets too (`deleteSubGroup -r true`).
    http(&la, "POST", "/api/v1/groups", tok, Some(&gcreate)).await?.expect(201)?;
    let bad = format!("{gpath}?remove_offset=maybe");
    http(&la, "DELETE", &bad, tok, None).await?.expect_error(400, "INVALID_ARGUMENT")?;
    let removed = http(&la, "DELETE", &format!("{gpath}?remove_offset=true"), tok, None).await?.expect(200)?.json()?;
    ensure!(removed["deleted"] == GROUP && removed["offsets_removed"] == true, "{removed}");

    group.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_progress_reset_offset_and_transfer_leader() -> Result<()> {
    const TOPIC: &str = "T60_MSG";
    const CG: &str = "G60_PROGRESS";
    let group = Group::start(3).await?;
    let leader = group.wait_leader(WAIT).await?;
    let f = follower(&group, leader);
    let (la, fa) = (group.admin_addr(leader)?, group.admin_addr(f)?);
    let client = RemotingClient::new();
    create_topic(&la, TOPIC, 2, None).await?;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(send(&client, &group.addr(leader), TOPIC, &format!("k-{i} shared"), &format!("body-{i}")).await?);
    }

    // By offsetMsgId, on any replica.
    let mut store_times = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let m = get(&la, &format!("/api/v1/messages/{id}")).await?.expect(200)?.json()?;
        ensure!(m["topic"] == TOPIC && m["queue_offset"] == i && m["body"] == format!("body-{i}"), "{m}");
        ensure!(m["keys"] == format!("k-{i} shared") && m["tags"] == "TagA" && m["msg_id"] == id.as_str(), "{m}");
        store_times.push(m["store_timestamp"].as_i64().context("store_timestamp")?);
    }
    eventually(&fa, &format!("/api/v1/messages/{}", ids[4]), "follower has the message", |r| r.status == 200).await?;
    get(&la, "/api/v1/messages/zz").await?.expect_error(400, "INVALID_ARGUMENT")?;
    let nowhere = OffsetMsgId::new("127.0.0.1:10911".parse()?, 1 << 40).to_string();
    get(&la, &format!("/api/v1/messages/{nowhere}")).await?.expect_error(404, "MESSAGE_NOT_FOUND")?;

    // By key.
    let r = get(&la, &format!("/api/v1/messages/by-key?topic={TOPIC}&key=shared")).await?.expect(200)?.json()?;
    ensure!(r["messages"].as_array().map(Vec::len) == Some(5), "{r}");
    let r = get(&la, &format!("/api/v1/messages/by-key?topic={TOPIC}&key=shared&max=2")).await?.expect(200)?.json()?;
    ensure!(r["messages"].as_array().map(Vec::len) == Some(2), "{r}");
    let r = get(&fa, &format!("/api/v1/messages/by-key?topic={TOPIC}&key=k-2")).await?.expect(200)?.json()?;
    ensure!(r["messages"].as_array().map(Vec::len) == Some(1) && r["messages"][0]["body"] == "body-2", "{r}");
    let r = get(&la, &format!("/api/v1/messages/by-key?topic={TOPIC}&key=none")).await?.expect(200)?.json()?;
    ensure!(r["messages"] == json!([]), "{r}");
    get(&la, "/api/v1/messages/by-key?topic=T60_NONE&key=x").await?.expect_error(404, "TOPIC_NOT_FOUND")?;
    get(&la, &format!("/api/v1/messages/by-key?topic={TOPIC}")).await?.expect_error(400, "INVALID_ARGUMENT")?;
    let r = get(&la, &format!("/api/v1/messages/by-key?topic={TOPIC}&key=x&max=lots")).await?;
    r.expect_error(400, "INVALID_ARGUMENT")?;

    // By time: the first offset stored at or after the time, and the message there.
    let ts = store_times[2];
    let want = store_times.iter().position(|t| *t >= ts).context("position")?;
    let r = get(&la, &format!("/api/v1/messages/by-time?topic={TOPIC}&queue_id=0&timestamp_ms={ts}")).await?;
    let r = r.expect(200)?.json()?;
    ensure!(r["offset"] == want && r["message"]["queue_offset"] == want, "{r}");
    let r = get(&la, &format!("/api/v1/messages/by-time?topic={TOPIC}&queue_id=0&timestamp_ms=0")).await?;
    ensure!(r.expect(200)?.json()?["message"]["body"] == "body-0");
    let late = format!("/api/v1/messages/by-time?topic={TOPIC}&queue_id=0&timestamp_ms={}", i64::MAX);
    get(&la, &late).await?.expect_error(404, "MESSAGE_NOT_FOUND")?;
    let bad_queue = format!("/api/v1/messages/by-time?topic={TOPIC}&queue_id=7&timestamp_ms=0");
    get(&la, &bad_queue).await?.expect_error(400, "INVALID_ARGUMENT")?;
    get(&la, "/api/v1/messages/by-time?topic=T60_NONE&queue_id=0&timestamp_ms=0")
        .await?
        .expect_error(404, "TOPIC_NOT_FOUND")?;

    // Consumer progress.
    let ok = update_offset(&client, &group.addr(leader), CG, TOPIC, 0, 2).await?;
    ensure!(ok.response_code() == ResponseCode::Success, "{:?}", ok.remark);
    let p = get(&la, &format!("/api/v1/groups/{CG}/progress")).await?.expect(200)?.json()?;
    ensure!(p["lag_total"] == 3 && p["broker_offset_total"] == 5 && p["consumer_offset_total"] == 2, "{p}");
    let q0 = json!({ "topic": TOPIC, "queue_id": 0, "broker_offset": 5, "consumer_offset": 2, "lag": 3, "pop_in_flight": 0 });
    let q1 = json!({
        "topic": TOPIC, "queue_id": 1, "broker_offset": 0, "consumer_offset": null, "lag": 0, "pop_in_flight": 0
    });
    ensure!(p["queues"] == json!([q0, q1]), "{p}");
    eventually(&fa, &format!("/api/v1/groups/{CG}/progress"), "follower progress", |r| {
        r.body.contains("\"lag_total\":3")
    })
    .await?;

    // Reset by time: backwards to the start, then forwards to the end; refusals change nothing.
    let reset = |ts: i64| json!({ "group": CG, "topic": TOPIC, "timestamp_ms": ts }).to_string();
    let r = http(&la, "POST", "/api/v1/ops/reset-offset", None, Some(&reset(0))).await?.expect(200)?.json()?;
    ensure!(r["queues"][0] == json!({ "queue_id": 0, "previous": 2, "offset": 0 }), "{r}");
    ensure!(query_offset(&client, &group.addr(leader), CG, TOPIC, 0).await? == Some(0));
    let p = get(&la, &format!("/api/v1/groups/{CG}/progress")).await?.expect(200)?.json()?;
    ensure!(p["lag_total"] == 5, "{p}");
    http(&la, "POST", "/api/v1/ops/reset-offset", None, Some(&reset(i64::MAX))).await?.expect(200)?;
    ensure!(query_offset(&client, &group.addr(leader), CG, TOPIC, 0).await? == Some(5));
    let unknown_topic = json!({ "group": CG, "topic": "T60_NONE", "timestamp_ms": 0 }).to_string();
    http(&la, "POST", "/api/v1/ops/reset-offset", None, Some(&unknown_topic))
        .await?
        .expect_error(404, "TOPIC_NOT_FOUND")?;
    let unknown_group = json!({ "group": "G60_NONE", "topic": TOPIC, "timestamp_ms": 0 }).to_string();
    http(&la, "POST", "/api/v1/ops/reset-offset", None, Some(&unknown_group))
        .await?
        .expect_error(404, "GROUP_NOT_FOUND")?;
    http(&la, "POST", "/api/v1/ops/reset-offset", None, Some("{\"group\": 1}")).await?.expect_error(400, "BAD_JSON")?;
    http(&fa, "POST", "/api/v1/ops/reset-offset", None, Some(&reset(0))).await?.expect_error(421, "NOT_LEADER")?;
    ensure!(
        query_offset(&client, &group.addr(leader), CG, TOPIC, 0).await? == Some(5),
        "refused resets changed nothing"
    );

    // Leader transfer.
    let to = |id: u64| json!({ "to": id }).to_string();
    http(&la, "POST", "/api/v1/ops/transfer-leader", None, Some(&to(99)))
        .await?
        .expect_error(400, "INVALID_ARGUMENT")?;
    http(&fa, "POST", "/api/v1/ops/transfer-leader", None, Some(&to(f))).await?.expect_error(421, "NOT_LEADER")?;
    let r = http(&la, "POST", "/api/v1/ops/transfer-leader", None, Some(&to(f))).await?.expect(200)?.json()?;
    ensure!(r["from"] == leader && r["to"] == f && r["requested"] == true, "{r}");
    eventually(&fa, "/api/v1/status", "transfer done", |r| r.body.contains("\"role\":\"leader\"")).await?;
    let s = get(&la, "/api/v1/status").await?.expect(200)?.json()?;
    ensure!(s["role"] != "leader", "{s}");

    group.shutdown().await;
    Ok(())
}

/// The voters `/api/v1/status` of `admin` reports.
async fn voters(admin: &str) -> Result<Vec<u64>> {
    let s = get(admin, "/api/v1/status").await?.expect(200)?.json()?;
    let list = s["membership"]["voters"].as_array().context("membership.voters")?;
    Ok(list.iter().filter_map(Value::as_u64).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_added_and_removed_over_http() -> Result<()> {
    let mut group = Group::start_with(3, |c| c.admin_token = Some(TOKEN.to_owned())).await?;
    let leader = group.wait_leader(WAIT).await?;
    let f = follower(&group, leader);
    let (la, fa) = (group.admin_addr(leader)?, group.admin_addr(f)?);
    let tok = Some(TOKEN);
    let nodes = "/api/v1/ops/nodes";

    // Node 4 joins as RocketMQ operators would start it: a fresh id, the members plus itself as peers.
    let dir = tempfile::tempdir()?;
    let mut c4 = group.configs[&leader].clone();
    let port = harness::group::free_port();
    let (r4, a4) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{}", harness::group::free_port()));
    c4.raft_self_id = 4;
    c4.listen_port = port;
    c4.admin_port = 0;
    c4.store_path_root_dir = dir.path().join("node-4");
    c4.raft_peers.push(raftmq_broker::config::broker_config::RaftPeer {
        id: 4,
        remoting_addr: r4.clone(),
        raft_addr: a4.clone(),
    });
    let add = json!({ "id": 4, "remoting_addr": r4, "raft_addr": a4 }).to_string();

    // Refusals change nothing.
    http(&la, "POST", nodes, None, Some(&add)).await?.expect_error(401, "UNAUTHORIZED")?;
    http(&la, "POST", nodes, tok, Some("{\"id\": ")).await?.expect_error(400, "BAD_JSON")?;
    http(&la, "POST", nodes, tok, Some(&json!({ "id": 4 }).to_string())).await?.expect_error(400, "BAD_JSON")?;
    http(&fa, "POST", nodes, tok, Some(&add)).await?.expect_error(421, "NOT_LEADER")?;
    let member = json!({ "id": f, "remoting_addr": r4, "raft_addr": a4 }).to_string();
    http(&la, "POST", nodes, tok, Some(&member)).await?.expect_error(400, "INVALID_ARGUMENT")?;
    let bad_addr = json!({ "id": 4, "remoting_addr": "nowhere", "raft_addr": a4 }).to_string();
    http(&la, "POST", nodes, tok, Some(&bad_addr)).await?.expect_error(400, "INVALID_ARGUMENT")?;
    http(&la, "DELETE", &format!("{nodes}/{f}"), None, None).await?.expect_error(401, "UNAUTHORIZED")?;
    http(&la, "DELETE", &format!("{nodes}/99"), tok, None).await?.expect_error(404, "NOT_FOUND")?;
    http(&la, "DELETE", &format!("{nodes}/x"), tok, None).await?.expect_error(400, "INVALID_ARGUMENT")?;
    http(&fa, "DELETE", &format!("{nodes}/{f}"), tok, None).await?.expect_error(421, "NOT_LEADER")?;
    ensure!(voters(&la).await? == vec![1, 2, 3], "refused calls changed the membership");

    // Add: the answer comes once node 4 caught up and votes.
    let broker = raftmq_broker::Broker::start(c4.clone()).await?;
    group.brokers.insert(4, broker);
    group.configs.insert(4, c4);
    let r = http(&la, "POST", nodes, tok, Some(&add)).await?.expect(200)?.json()?;
    ensure!(r["voters"] == json!([1, 2, 3, 4]), "{r}");
    ensure!(voters(&la).await? == vec![1, 2, 3, 4]);

    // Remove a follower; its id is never taken again.
    let r = http(&la, "DELETE", &format!("{nodes}/{f}"), tok, None).await?.expect(200)?.json()?;
    let left: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|id| *id != f).collect();
    ensure!(r["voters"] == json!(left), "{r}");
    let fresh = || format!("127.0.0.1:{}", harness::group::free_port());
    let again = json!({ "id": f, "remoting_addr": fresh(), "raft_addr": fresh() });
    let refused =
        http(&la, "POST", nodes, tok, Some(&again.to_string())).await?.expect_error(400, "INVALID_ARGUMENT")?;
    ensure!(refused.body.contains("used"), "{}", refused.body);
    ensure!(voters(&la).await? == left);

    group.shutdown().await;
    Ok(())
}
