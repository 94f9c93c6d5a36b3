//! Apache's RocketMQ 5 Python client (PyPI's `rocketmq-python-client` 5.1.2, package `rocketmq.v5`)
//! against a 3-replica raftmq group with its default settings, each replica serving the gRPC
//! MessagingService: `py5_client.py` of this folder runs as a subprocess and prints JSON lines
//! (`sent`, `ended`, `checked`, `received`, `changed`, `acked`, `done`, `error`) that this test checks,
//! then the test reads every topic back from the leader over remoting.
//!
//! Covered: the Producer's normal, FIFO (message group), delay and transactional sends (commit,
//! rollback, and a half left open that the broker's check-back resolves through the client's
//! TransactionChecker); the SimpleConsumer's receive and ack, a message left unacked and one whose
//! invisible duration is shortened coming back with delivery attempt 2, one whose invisible duration
//! is lengthened acked with its new receipt handle; a PushConsumer receiving every normal message
//! exactly once and a FIFO PushConsumer every message group exactly once in send order.
//!
//! Each client is given ONE replica's endpoint: given a list it names the channel after all of them
//! (`host:port,host:port` as the HTTP/2 `:authority`), which hyper's HTTP/2 server refuses as
//! malformed (README, "RocketMQ 5 clients"). Every client but the transactional producer is given a
//! follower's, so its calls are relayed to the leader; the transactional producer is given the
//! leader's, because the broker's check-back reaches only Telemetry streams on the leader's replica.
//!
//! A second test runs `py5_acl.py` against a group under the plain ACL (`aclEnable`): the client's
//! Credentials sign every call; the producer account sends through a follower, a wrong secret is
//! refused, the consumer account receives and acks everything. A third runs `py5_namespace.py`: a
//! client with a namespace sends and receives under the joined names (`ns%Topic`), which are what
//! the broker stores.
//!
//! Without the client the test prints a SKIP line naming the package and how to install it. The
//! script's randomness comes from a seed printed here (`RAFTMQ_PY5_SEED` replays one). Waits are
//! bounded and on conditions; nothing sleeps to synchronise.

#[path = "../harness/mod.rs"]
mod harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::group::drain_queue;
use harness::script::ScriptOutput;
use harness::script::run_json_lines;
use raftmq_client::Admin;
use raftmq_client::SessionCredentials;
use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::test_skip::announce_skip;
use raftmq_grpc::GrpcServer;
use serde_json::Value;

/// The client's PyPI name and version.
const PYPI_PACKAGE: &str = "rocketmq-python-client==5.1.2";
/// Where .ci/run installs the client: a virtual environment of its own, because the package shares
/// the top-level `rocketmq` package (and its `__init__.py`) with PyPI's `rocketmq` 0.4.4, the C++
/// client's wrapper that tests/interop_cpp uses.
const VENV_PYTHON: &str = ".cache/raftmq/py5-venv/bin/python3";
/// Names of the script's topics and groups: `<PREFIX><Name>`.
const PREFIX: &str = "Py5";
const QUEUES: i32 = 4;
/// What the script sends (its constants).
const NORMAL_COUNT: usize = 24;
const FIFO_GROUPS: usize = 3;
const FIFO_STEPS: usize = 6;
const SIMPLE_COUNT: usize = 6;
const INVISIBLE_S: i64 = 20;
const SHORT_INVISIBLE_S: i64 = 2;
/// RocketMQ's timer precision (`timerPrecisionMs`, 1 s): a timer message is never delivered earlier
/// than its time minus this.
const TIMER_PRECISION_MS: i64 = 1_000;
/// Bound on the script: its own waits (consumption 90 s each, the check-back of the open half 180 s
/// with the broker's 60 s `transactionCheckInterval`) fit inside.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(420);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn py5_client_producer_simple_and_push_consumers() -> Result<()> {
    let Some(python) = python_or_skip().await else { return Ok(()) };
    let seed: u64 = match std::env::var("RAFTMQ_PY5_SEED") {
        Ok(s) => s.parse().context("RAFTMQ_PY5_SEED")?,
        Err(_) => rand::random::<u32>().into(),
    };
    println!("t71 seed {seed} (replay: RAFTMQ_PY5_SEED={seed} cargo test --test t71_py5_client)");

    let cluster = Cluster::start(3).await?;
    let mut servers = BTreeMap::new();
    for id in cluster.running() {
        let broker = cluster.broker(id).context("a running replica has no broker")?;
        servers.insert(id, GrpcServer::bind(broker.bridge(), "127.0.0.1:0".parse()?).await?);
    }
    let result = run(&cluster, &servers, &python, seed).await;
    for (_, server) in servers {
        server.shutdown().await;
    }
    cluster.shutdown().await?;
    result.with_context(|| format!("seed {seed}"))
}

/// The Python that has the client, or `None` after a SKIP line saying why there is none.
async fn python_or_skip() -> Option<PathBuf> {
    match python_with_client().await {
        Ok(python) => Some(python),
        Err(why) => {
            let why = format!(
                "it needs Python with PyPI's `{PYPI_PACKAGE}` (package `rocketmq.v5`); {why}. Install it with \
                 `python3 -m venv ~/.cache/raftmq/py5-venv && ~/.cache/raftmq/py5-venv/bin/pip install \
                 {PYPI_PACKAGE}` (.ci/run does), or name a Python that has it in RAFTMQ_PY5_PYTHON."
            );
            announce_skip("RocketMQ 5 Python client interop", &why);
            None
        }
    }
}

/// The Python that has the client: RAFTMQ_PY5_PYTHON, else .ci/run's virtual environment, else
/// `python3`; why none does otherwise.
async fn python_with_client() -> std::result::Result<PathBuf, String> {
    let venv = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(VENV_PYTHON));
    let python = match std::env::var_os("RAFTMQ_PY5_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => venv.filter(|p| p.exists()).unwrap_or_else(|| PathBuf::from("python3")),
    };
    // `rocketmq.v5.consumer` imports the package's top-level `rocketmq/__init__.py`, the file the C++
    // wrapper's package overwrites when both share one site-packages.
    let out = tokio::process::Command::new(&python)
        .args(["-c", "import rocketmq.v5.consumer, rocketmq.v5.producer"])
        .output()
        .await
        .map_err(|e| format!("{} could not be started ({e})", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`{} -c \"import rocketmq.v5.consumer\"` failed: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
        ));
    }
    Ok(python)
}

fn topic(name: &str) -> String {
    format!("{PREFIX}{name}")
}

fn text<'v>(value: &'v Value, field: &str) -> &'v str {
    value[field].as_str().unwrap_or_default()
}

fn int(value: &Value, field: &str) -> i64 {
    value[field].as_i64().unwrap_or(i64::MIN)
}

/// What the script writes as the body of message `seq` of `kind` (`py5_client.body_of`).
fn body_of(kind: &str, seq: i64) -> String {
    format!("{kind}-{seq}-Grüße-消息")
}

/// The script's sent and received lines, by kind and by consumer.
impl ScriptOutput {
    fn sent(&self, kind: &str) -> Vec<&Value> {
        self.of("sent").into_iter().filter(|e| text(e, "kind") == kind).collect()
    }

    fn received(&self, consumer: &str) -> Vec<&Value> {
        self.of("received").into_iter().filter(|e| text(e, "consumer") == consumer).collect()
    }
}

/// The last lines of the client's log under `home`, for a failure's message.
fn client_log_tail(home: &std::path::Path) -> String {
    const LINES: usize = 60;
    let text = std::fs::read_to_string(home.join("logs/rocketmq_python/rocketmq_client.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LINES)..].join("\n")
}

async fn run(cluster: &Cluster, servers: &BTreeMap<u64, GrpcServer>, python: &PathBuf, seed: u64) -> Result<()> {
    let leader = cluster.wait_leader(harness::cluster::WAIT).await?;
    let follower = *servers.keys().find(|id| **id != leader).context("no follower")?;
    for name in ["Normal", "Fifo", "Delay", "Tx", "Simple"] {
        cluster.create_topic(&topic(name), QUEUES).await?;
    }
    // The FIFO PushConsumer's group receives each message group in order (as with Java's proxy,
    // `fifo` is the subscription group's consumeMessageOrderly).
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let orderly = SubscriptionGroupConfig {
        consume_message_orderly: true,
        ..SubscriptionGroupConfig::new(format!("{PREFIX}push_fifo"))
    };
    admin.create_subscription_group(&cluster.addr(leader), &orderly).await?;
    admin.shutdown().await;
    // The follower answers QueryRoute and the consumers' settings from its own applied state.
    harness::cluster::until(
        "the topics and the orderly group on every replica",
        || async {
            Ok::<_, anyhow::Error>(cluster.running().into_iter().all(|id| {
                cluster.broker(id).is_some_and(|b| {
                    let bridge = b.bridge();
                    ["Normal", "Fifo", "Delay", "Tx", "Simple"].iter().all(|n| bridge.topic(&topic(n)).is_some())
                        && bridge.subscription_group(&format!("{PREFIX}push_fifo")).is_some()
                })
            }))
        },
        |all| *all,
    )
    .await?;

    let endpoint = |id: u64| format!("127.0.0.1:{}", servers[&id].local_addr().port());
    let out = script(python, &endpoint(follower), &endpoint(leader), seed).await?;
    check_transactions(&out)?;
    check_push(&out)?;
    check_push_fifo(&out)?;
    check_simple(&out)?;
    check_delay(&out)?;
    check_stored(cluster, &out).await?;
    println!(
        "t71: every Python 5.x client scenario passed through follower {follower}'s gRPC endpoint ({} lines)",
        out.events.len()
    );
    Ok(())
}

/// Runs py5_client.py against `endpoint` (`tx_endpoint` for the transactional producer) with the
/// client's log in a home of its own.
async fn script(python: &PathBuf, endpoint: &str, tx_endpoint: &str, seed: u64) -> Result<ScriptOutput> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop_py5");
    // The client logs to ~/logs/rocketmq_python: a home of this run keeps it apart.
    let home = tempfile::tempdir()?;
    let mut command = tokio::process::Command::new(python);
    command
        .arg(dir.join("py5_client.py"))
        .args(["--endpoints", endpoint, "--tx-endpoints", tx_endpoint])
        .args(["--prefix", PREFIX, "--seed", &seed.to_string()])
        .env("HOME", home.path())
        .current_dir(&dir)
        .stdin(Stdio::null());
    let output = run_json_lines(command, "py5_client.py", SCRIPT_TIMEOUT, || client_log_tail(home.path())).await?;
    println!("py5_client.py: {} sent, {} received", output.of("sent").len(), output.of("received").len());
    Ok(output)
}

/// The message id the script sent as the one `kind` message.
fn only_sent<'o>(out: &'o ScriptOutput, kind: &str) -> Result<&'o str> {
    let sent = out.sent(kind);
    ensure!(sent.len() == 1, "{kind}: {} sends reported", sent.len());
    Ok(text(sent[0], "msg_id"))
}

/// Commit and rollback answered OK; only the open half was checked back, and committed; the
/// transactional consumer received the committed and the checked half once each, never the other.
fn check_transactions(out: &ScriptOutput) -> Result<()> {
    let committed = only_sent(out, "commit")?;
    let rolled_back = only_sent(out, "rollback")?;
    let orphan = only_sent(out, "orphan")?;
    for (kind, id) in [("commit", committed), ("rollback", rolled_back), ("orphan", orphan)] {
        let sent = &out.sent(kind)[0];
        ensure!(!text(sent, "tx_id").is_empty(), "the {kind} half's receipt has no transaction id: {sent}");
        ensure!(!id.is_empty(), "the {kind} half has no message id");
    }
    let ended: Vec<(&str, &str)> = out.of("ended").iter().map(|e| (text(e, "kind"), text(e, "msg_id"))).collect();
    ensure!(ended == [("commit", committed), ("rollback", rolled_back)], "ended: {ended:?}");
    let checked = out.of("checked");
    ensure!(
        checked.iter().any(|c| text(c, "msg_id") == orphan && text(c, "resolution") == "COMMIT"),
        "the open half {orphan} was never checked back: {checked:?}"
    );
    for c in &checked {
        ensure!(text(c, "msg_id") == orphan, "a check-back asked about {c}, not the open half {orphan}");
    }
    let received: Vec<&str> = out.received("tx").iter().map(|r| text(r, "msg_id")).collect();
    let distinct: BTreeSet<&str> = received.iter().copied().collect();
    ensure!(distinct == BTreeSet::from([committed, orphan]), "the transactional topic delivered {received:?}");
    Ok(())
}

/// Every id of `kind` the script sent, with its seq.
fn sent_ids(out: &ScriptOutput, kind: &str) -> BTreeMap<String, i64> {
    out.sent(kind).iter().map(|e| (text(e, "msg_id").to_owned(), int(e, "seq"))).collect()
}

/// A delivered message as the script sent it: topic, tag, both keys, body, user properties, intact
/// body digest.
fn check_delivery(r: &Value, kind: &str, seq: i64, topic_name: &str, tag: &str) -> Result<()> {
    ensure!(text(r, "topic") == topic_name, "topic of {r}");
    ensure!(text(r, "tag") == tag, "tag of {r}");
    let keys: Vec<&str> =
        r["keys"].as_array().map(|k| k.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let mut want = vec![format!("key-{kind}-{seq}"), format!("order-{}", seq % 3)];
    want.sort();
    ensure!(keys == want, "keys of {r}");
    ensure!(text(r, "body") == body_of(kind, seq), "body of {r}");
    ensure!(
        text(&r["props"], "interopSeq") == seq.to_string() && text(&r["props"], "interopKind") == kind,
        "properties of {r}"
    );
    ensure!(r["corrupted"] == false, "the client found the body digest wrong: {r}");
    Ok(())
}

/// The PushConsumer got every normal message exactly once, each on its first attempt.
fn check_push(out: &ScriptOutput) -> Result<()> {
    let sent = sent_ids(out, "normal");
    ensure!(sent.len() == NORMAL_COUNT, "{} normal sends", sent.len());
    let mut got: BTreeMap<&str, usize> = BTreeMap::new();
    for r in out.received("push") {
        let id = text(r, "msg_id");
        let seq = *sent.get(id).with_context(|| format!("pushed a message never sent: {r}"))?;
        check_delivery(r, "normal", seq, &topic("Normal"), "TagA")?;
        ensure!(int(r, "attempt") == 1, "pushed on attempt {}: {r}", int(r, "attempt"));
        *got.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = got.iter().filter(|(_, n)| **n > 1).collect();
    ensure!(twice.is_empty(), "pushed more than once: {twice:?}");
    let missing: Vec<_> = sent.keys().filter(|id| !got.contains_key(id.as_str())).collect();
    ensure!(missing.is_empty(), "never pushed: {missing:?}");
    Ok(())
}

/// The FIFO PushConsumer got every message exactly once, each message group in send order.
fn check_push_fifo(out: &ScriptOutput) -> Result<()> {
    let sent = sent_ids(out, "fifo");
    ensure!(sent.len() == FIFO_GROUPS * FIFO_STEPS, "{} FIFO sends", sent.len());
    let mut per_group: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in out.received("push_fifo") {
        let seq = *sent.get(text(r, "msg_id")).with_context(|| format!("pushed a message never sent: {r}"))?;
        check_delivery(r, "fifo", seq, &topic("Fifo"), "TagF")?;
        let group = format!("group-{}", seq / FIFO_STEPS as i64);
        ensure!(text(r, "message_group") == group, "message group of {r}");
        per_group.entry(group).or_default().push(seq % FIFO_STEPS as i64);
    }
    let want: Vec<i64> = (0..FIFO_STEPS as i64).collect();
    for g in 0..FIFO_GROUPS {
        let group = format!("group-{g}");
        let got = per_group.get(&group).cloned().unwrap_or_default();
        ensure!(got == want, "{group} pushed steps {got:?}, want each once in order {want:?}");
    }
    Ok(())
}

/// Every message received on attempt 1; the unacked and the shortened one back on attempt 2 (the
/// shortened one after its new invisible time, before its first one), then acked; the lengthened one acked with the
/// handle the change answered and never back.
fn check_simple(out: &ScriptOutput) -> Result<()> {
    let plan = out.of("simple_plan");
    let plan = plan.first().context("no simple_plan line")?;
    let (unacked, shortened, lengthened) = (int(plan, "unacked"), int(plan, "shortened"), int(plan, "lengthened"));
    let sent = sent_ids(out, "simple");
    ensure!(sent.len() == SIMPLE_COUNT, "{} simple sends", sent.len());
    let mut deliveries: BTreeMap<i64, Vec<&Value>> = BTreeMap::new();
    for r in out.received("simple") {
        let seq = *sent.get(text(r, "msg_id")).with_context(|| format!("received a message never sent: {r}"))?;
        check_delivery(r, "simple", seq, &topic("Simple"), "TagS")?;
        deliveries.entry(seq).or_default().push(r);
    }
    for seq in 0..SIMPLE_COUNT as i64 {
        let d = deliveries.get(&seq).with_context(|| format!("simple message {seq} never received"))?;
        let attempts: Vec<i64> = d.iter().map(|r| int(r, "attempt")).collect();
        let want: &[i64] = if seq == unacked || seq == shortened { &[1, 2] } else { &[1] };
        ensure!(attempts == want, "simple message {seq} delivered on attempts {attempts:?}, want {want:?}");
    }
    let changed = out.of("changed");
    for (seq, to) in [(shortened, SHORT_INVISIBLE_S), (lengthened, 60)] {
        let c =
            changed.iter().find(|c| int(c, "seq") == seq).with_context(|| format!("message {seq} never changed"))?;
        ensure!(int(c, "to_s") == to && c["new_handle"] == true, "the change answered no new receipt handle: {c}");
    }
    let back_at = int(deliveries[&shortened][1], "at_ms");
    let changed_at = int(changed.iter().find(|c| int(c, "seq") == shortened).context("no change")?, "at_ms");
    ensure!(
        back_at >= changed_at + SHORT_INVISIBLE_S * 1_000 - TIMER_PRECISION_MS,
        "the shortened message came back {} ms after its change, before its {SHORT_INVISIBLE_S} s",
        back_at - changed_at
    );
    let first_at = int(deliveries[&shortened][0], "at_ms");
    ensure!(
        back_at < first_at + INVISIBLE_S * 1_000,
        "the shortened message came back {} ms after its first delivery, as if never changed from {INVISIBLE_S} s",
        back_at - first_at
    );
    let acked: BTreeSet<i64> =
        out.of("acked").iter().filter(|a| text(a, "consumer") == "simple").map(|a| int(a, "seq")).collect();
    ensure!(acked == (0..SIMPLE_COUNT as i64).collect(), "acked {acked:?}");
    Ok(())
}

/// The delayed message delivered once, not before its time.
fn check_delay(out: &ScriptOutput) -> Result<()> {
    let id = only_sent(out, "delay")?;
    let due = int(out.sent("delay")[0], "deliver_at_ms");
    let received = out.received("delay");
    ensure!(received.len() == 1 && text(received[0], "msg_id") == id, "delay deliveries: {received:?}");
    let r = received[0];
    check_delivery(r, "delay", 0, &topic("Delay"), "TagD")?;
    ensure!(int(r, "delivery_ms") == due, "delivery timestamp of {r}, want {due}");
    ensure!(int(r, "at_ms") >= due - TIMER_PRECISION_MS, "delivered {} ms before its time", due - int(r, "at_ms"));
    Ok(())
}

/// Every message of `topic` on the leader, by UNIQ_KEY (fails on a duplicate).
async fn stored(client: &RemotingClient, leader: &str, topic: &str) -> Result<BTreeMap<String, MessageExt>> {
    let mut out = BTreeMap::new();
    for queue_id in 0..QUEUES {
        for m in drain_queue(client, leader, topic, queue_id).await? {
            let id = m.message.property(properties::UNIQ_KEY).context("a stored message has no UNIQ_KEY")?.to_owned();
            if let Some(first) = out.insert(id.clone(), m) {
                bail!("{id} is stored twice (first at queue {} offset {})", first.queue_id, first.queue_offset);
            }
        }
    }
    Ok(out)
}

/// Each topic holds exactly the acknowledged and committed messages, once each, with RocketMQ's
/// properties; each message group in one queue in send order.
async fn check_stored(cluster: &Cluster, out: &ScriptOutput) -> Result<()> {
    let leader = cluster.addr(cluster.wait_leader(harness::cluster::WAIT).await?);
    let client = RemotingClient::new();
    let ids = |kinds: &[&str]| -> BTreeSet<String> {
        kinds.iter().flat_map(|k| out.sent(k)).map(|e| text(e, "msg_id").to_owned()).collect()
    };
    for (name, kinds) in [
        ("Normal", &["normal"][..]),
        ("Fifo", &["fifo"]),
        ("Delay", &["delay"]),
        ("Tx", &["commit", "orphan"]),
        ("Simple", &["simple"]),
    ] {
        let messages = stored(&client, &leader, &topic(name)).await?;
        let got: BTreeSet<String> = messages.keys().cloned().collect();
        ensure!(got == ids(kinds), "{name} stores {got:?}, want {:?}", ids(kinds));
        for (id, m) in &messages {
            let sent = out.of("sent").into_iter().find(|e| text(e, "msg_id") == id).context("sent")?;
            let (kind, seq) = (text(sent, "kind"), int(sent, "seq"));
            ensure!(
                m.message.property(properties::KEYS) == Some(format!("key-{kind}-{seq} order-{}", seq % 3).as_str())
                    || m.message.property(properties::KEYS)
                        == Some(format!("order-{} key-{kind}-{seq}", seq % 3).as_str()),
                "KEYS of {id}: {:?}",
                m.message.property(properties::KEYS)
            );
            ensure!(m.message.body == body_of(kind, seq).as_bytes(), "body of {id}");
            if kind == "delay" {
                ensure!(
                    m.message.property(properties::TIMER_DELIVER_MS)
                        == Some(int(sent, "deliver_at_ms").to_string().as_str()),
                    "TIMER_DELIVER_MS of {id}: {:?}",
                    m.message.property(properties::TIMER_DELIVER_MS)
                );
            }
        }
        if name == "Fifo" {
            let mut queues: BTreeMap<String, (i32, Vec<i64>)> = BTreeMap::new();
            let mut in_order: Vec<&MessageExt> = messages.values().collect();
            in_order.sort_by_key(|m| (m.queue_id, m.queue_offset));
            for m in in_order {
                let group =
                    m.message.property(properties::SHARDING_KEY).context("a FIFO message has no message group")?;
                let seq: i64 = m.message.property("interopSeq").context("interopSeq")?.parse()?;
                let entry = queues.entry(group.to_owned()).or_insert((m.queue_id, Vec::new()));
                ensure!(
                    entry.0 == m.queue_id,
                    "message group {group} is spread over queues {} and {}",
                    entry.0,
                    m.queue_id
                );
                entry.1.push(seq % FIFO_STEPS as i64);
            }
            for (group, (_, steps)) in queues {
                ensure!(steps == (0..FIFO_STEPS as i64).collect::<Vec<_>>(), "{group} stored as {steps:?}");
            }
        }
    }
    Ok(())
}

/// The accounts of the ACL run: an admin, a producer that may publish to `Py5AclOrders` only, a
/// consumer that may read it in group `Py5AclReaders`.
const ACL: &str = r#"
globalWhiteRemoteAddresses:
accounts:
  - accessKey: py5admin
    secretKey: py5-admin-secret
    admin: true
  - accessKey: py5producer
    secretKey: py5-producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - Py5AclOrders=PUB
  - accessKey: py5consumer
    secretKey: py5-consumer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - Py5AclOrders=SUB
    groupPerms:
      - Py5AclReaders=SUB
"#;
const ACL_TOPIC: &str = "Py5AclOrders";
const ACL_GROUP: &str = "Py5AclReaders";
/// What `py5_acl.py` sends (its COUNT).
const ACL_COUNT: usize = 6;

/// The plain ACL (`aclEnable`) with the Python client's Credentials: `py5_acl.py` sends as the
/// producer account through a follower (which signs the relayed sends as that account), a wrong
/// secret is refused, and the consumer account receives and acks every message; exactly the
/// accepted sends are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn py5_client_under_acl_acts_as_its_accounts() -> Result<()> {
    let Some(python) = python_or_skip().await else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let acl_file = dir.path().join("plain_acl.yml");
    std::fs::write(&acl_file, ACL)?;
    let cluster = Cluster::start_with(3, |c| {
        c.acl_enable = true;
        c.acl_file = Some(acl_file.clone());
    })
    .await?;
    let mut servers = BTreeMap::new();
    for id in cluster.running() {
        let broker = cluster.broker(id).context("a running replica has no broker")?;
        servers.insert(id, GrpcServer::bind(broker.bridge(), "127.0.0.1:0".parse()?).await?);
    }
    let result = run_acl(&cluster, &servers, &python).await;
    for (_, server) in servers {
        server.shutdown().await;
    }
    cluster.shutdown().await?;
    result
}

async fn run_acl(cluster: &Cluster, servers: &BTreeMap<u64, GrpcServer>, python: &PathBuf) -> Result<()> {
    let leader = cluster.wait_leader(harness::cluster::WAIT).await?;
    let follower = *servers.keys().find(|id| **id != leader).context("no follower")?;
    let admin_keys = SessionCredentials::new("py5admin", "py5-admin-secret")?;
    let admin = Admin::with_credentials(&cluster.namesrv_addr, Some(admin_keys.clone()))?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(ACL_TOPIC) };
    admin.create_topic(&cluster.addr(leader), &config).await?;
    admin.create_subscription_group(&cluster.addr(leader), &SubscriptionGroupConfig::new(ACL_GROUP)).await?;
    admin.shutdown().await;
    harness::cluster::until(
        "the topic and the group on every replica",
        || async {
            Ok::<_, anyhow::Error>(cluster.running().into_iter().all(|id| {
                cluster.broker(id).is_some_and(|b| {
                    b.bridge().topic(ACL_TOPIC).is_some() && b.bridge().subscription_group(ACL_GROUP).is_some()
                })
            }))
        },
        |all| *all,
    )
    .await?;

    let script_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop_py5");
    let home = tempfile::tempdir()?;
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script_dir.join("py5_acl.py"))
        .args(["--endpoints", &format!("127.0.0.1:{}", servers[&follower].local_addr().port())])
        .args(["--topic", ACL_TOPIC, "--group", ACL_GROUP])
        .args(["--producer-keys", "py5producer:py5-producer-secret"])
        .args(["--consumer-keys", "py5consumer:py5-consumer-secret"])
        .env("HOME", home.path())
        .current_dir(&script_dir)
        .stdin(Stdio::null());
    let out = run_json_lines(command, "py5_acl.py", SCRIPT_TIMEOUT, || client_log_tail(home.path())).await?;
    let sent: BTreeSet<&str> = out.of("sent").iter().map(|e| text(e, "msg_id")).collect();
    ensure!(sent.len() == ACL_COUNT, "{} sends reported", sent.len());
    let refused = out.of("refused");
    ensure!(refused.len() == 1, "the wrong secret was not refused: {:?}", out.events);
    println!("py5_acl.py: {} sent; the wrong secret refused: {}", sent.len(), text(refused[0], "text"));
    let received: BTreeSet<&str> = out.of("received").iter().map(|e| text(e, "msg_id")).collect();
    ensure!(received == sent, "received {received:?}, sent {sent:?}");

    // Exactly the accepted sends are stored (not the impostor's `acl-6`), read back by the admin.
    let reader = RemotingClient::with_credentials(ProcessorTable::new(), false, Some(std::sync::Arc::new(admin_keys)));
    let mut stored = BTreeSet::new();
    for queue_id in 0..QUEUES {
        for m in drain_queue(&reader, &cluster.addr(leader), ACL_TOPIC, queue_id).await? {
            let body = String::from_utf8_lossy(&m.message.body).into_owned();
            ensure!(stored.insert(body.clone()), "{body} stored twice");
        }
    }
    let bodies: BTreeSet<String> = (0..ACL_COUNT).map(|seq| format!("acl-{seq}")).collect();
    ensure!(stored == bodies, "stored {stored:?}");
    Ok(())
}

const NS: &str = "Py5Tenant";
const NS_TOPIC: &str = "Orders";
const NS_GROUP: &str = "Readers";
/// What `py5_namespace.py` sends (its COUNT).
const NS_COUNT: usize = 6;

/// A client with a namespace (`ClientConfiguration(namespace=...)`): its resources are joined as
/// RocketMQ 5.1's proxy joins them, so `py5_namespace.py` sends to and receives from
/// `Py5Tenant%Orders` as group `Py5Tenant%Readers` (the only ones that exist), reads the topic back
/// as the client named it, and a client without the namespace cannot reach the topic. A 4.x client
/// with the same namespace (which joins names itself) reads the same messages: the test drains
/// `Py5Tenant%Orders` over remoting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn py5_client_with_a_namespace_uses_the_joined_names() -> Result<()> {
    let Some(python) = python_or_skip().await else { return Ok(()) };
    let cluster = Cluster::start(1).await?;
    let id = *cluster.running().first().context("no replica")?;
    let broker = cluster.broker(id).context("a running replica has no broker")?;
    let server = GrpcServer::bind(broker.bridge(), "127.0.0.1:0".parse()?).await?;
    let result = run_namespace(&cluster, &server, &python).await;
    server.shutdown().await;
    cluster.shutdown().await?;
    result
}

async fn run_namespace(cluster: &Cluster, server: &GrpcServer, python: &PathBuf) -> Result<()> {
    let leader = cluster.wait_leader(harness::cluster::WAIT).await?;
    let topic = format!("{NS}%{NS_TOPIC}");
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(&topic) };
    admin.create_topic(&cluster.addr(leader), &config).await?;
    let group = SubscriptionGroupConfig::new(format!("{NS}%{NS_GROUP}"));
    admin.create_subscription_group(&cluster.addr(leader), &group).await?;
    admin.shutdown().await;

    let script_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop_py5");
    let home = tempfile::tempdir()?;
    let mut command = tokio::process::Command::new(python);
    command
        .arg(script_dir.join("py5_namespace.py"))
        .args(["--endpoints", &format!("127.0.0.1:{}", server.local_addr().port())])
        .args(["--namespace", NS, "--topic", NS_TOPIC, "--group", NS_GROUP])
        .env("HOME", home.path())
        .current_dir(&script_dir)
        .stdin(Stdio::null());
    let out = run_json_lines(command, "py5_namespace.py", SCRIPT_TIMEOUT, || client_log_tail(home.path())).await?;
    let sent: BTreeSet<&str> = out.of("sent").iter().map(|e| text(e, "msg_id")).collect();
    ensure!(sent.len() == NS_COUNT, "{} sends reported", sent.len());
    let refused = out.of("refused");
    ensure!(refused.len() == 1, "a client outside the namespace reached its topic: {:?}", out.events);
    ensure!(text(refused[0], "text").contains("route"), "refused for another reason than the route: {:?}", refused[0]);
    println!("py5_namespace.py: {} sent; outside the namespace: {}", sent.len(), text(refused[0], "text"));
    let received = out.of("received");
    for r in &received {
        ensure!(
            (text(r, "topic"), text(r, "namespace")) == (NS_TOPIC, NS),
            "a message names its topic as the client did: {r}"
        );
    }
    let received: BTreeSet<&str> = received.iter().map(|e| text(e, "msg_id")).collect();
    ensure!(received == sent, "received {received:?}, sent {sent:?}");

    // The consumer's group was the joined one: the bare name was never asked for (the broker
    // creates a subscription group a consumer names, `autoCreateSubscriptionGroup`).
    let bridge = cluster.broker(leader).context("the leader has no broker")?.bridge();
    ensure!(bridge.subscription_group(NS_GROUP).is_none(), "the group {NS_GROUP} outside the namespace was used");

    // Stored under the joined name, where a 4.x client in the namespace reads them.
    let reader = RemotingClient::new();
    let mut stored = BTreeSet::new();
    for queue_id in 0..QUEUES {
        for m in drain_queue(&reader, &cluster.addr(leader), &topic, queue_id).await? {
            let body = String::from_utf8_lossy(&m.message.body).into_owned();
            ensure!(stored.insert(body.clone()), "{body} stored twice");
        }
    }
    let bodies: BTreeSet<String> = (0..NS_COUNT).map(|seq| format!("ns-{seq}")).collect();
    ensure!(stored == bodies, "stored {stored:?}");
    Ok(())
}
