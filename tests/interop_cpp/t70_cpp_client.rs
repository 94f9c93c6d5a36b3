//! Apache's C++ client (librocketmq 1.2.x, through PyPI's `rocketmq` 0.4.4 wrapper) against a 3-node
//! and a 1-node raftmq group, with its default settings: the Python scenarios of this folder run as
//! `python3` subprocesses and print JSON lines (`sent`, `received`, `done`, `error`) that this test
//! checks: counts, order, keys, tags, user properties, bodies and reconsume times.
//!
//! Every request either server refuses while the scenarios run (logged by
//! `raftmq_common::remoting::refusal_log`) fails the test: a refusal is a C++ client request raftmq
//! decodes differently from Java's broker. Without Python or the wrapper the test prints a SKIP
//! line naming the package and how to install it.

#[path = "../harness/mod.rs"]
mod harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::group::drain_queue;
use harness::script::ScriptOutput;
use harness::script::run_json_lines;
use raftmq_common::message::batch::decode_batch;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::test_skip::announce_skip;
use serde_json::Value;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The wrapper's PyPI name and version (librocketmq 1.2.x inside).
const PYPI_PACKAGE: &str = "rocketmq==0.4.4";
/// Queues of every scenario topic (RocketMQ's default for a new topic).
const QUEUES: i32 = 4;
/// Bound on one scenario process; each scenario waits for its own conditions well inside it.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);
/// Messages per send mode, orders of the orderly scenario, messages of the retry and batch scenarios.
const COUNT: usize = 8;
const ORDERS: usize = 4;
const RETRIED: usize = 4;
const BATCHED: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_client_against_a_3_node_group() -> Result<()> {
    run_all(3).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_client_against_a_1_node_group() -> Result<()> {
    run_all(1).await
}

async fn run_all(nodes: u64) -> Result<()> {
    if let Some(why) = python_missing().await {
        let why = format!(
            "it needs python3 with PyPI's `{PYPI_PACKAGE}` (librocketmq 1.2.x) because it drives Apache's C++ \
             client through it; {why}. Install it with `pip install {PYPI_PACKAGE}` (.ci/run does)."
        );
        announce_skip(&format!("C++ client interop ({nodes} node(s))"), &why);
        return Ok(());
    }
    let refusals = refusal_recorder();
    let cluster = Cluster::start(nodes).await?;
    let run = Run { cluster: &cluster, nodes };
    let result = async {
        run.send_modes_and_pull().await.context("send_modes_pull")?;
        run.push_concurrently_with_tags().await.context("push_concurrent")?;
        run.orderly().await.context("orderly")?;
        run.retry().await.context("retry")?;
        run.batch().await.context("batch")?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    let probed = probe_refusal_log(&cluster, &refusals).await;
    let refused: Vec<String> = refusals
        .lock()
        .map(|r| r.iter().filter(|line| !line.contains(&format!("request_code={PROBE_CODE} "))).cloned().collect())
        .unwrap_or_default();
    cluster.shutdown().await?;
    result?;
    probed?;
    ensure!(refused.is_empty(), "the servers refused C++ client requests: {refused:#?}");
    println!("{nodes}-node group: every C++ client scenario passed, no request refused");
    Ok(())
}

/// A request code no server serves: the probe that proves refusals are recorded.
const PROBE_CODE: i32 = 29_999;

/// Sends PROBE_CODE to the leader and waits for its refusal in the recorder: an empty recorder
/// means "nothing refused", not "nothing recorded".
async fn probe_refusal_log(cluster: &Cluster, refusals: &Mutex<Vec<String>>) -> Result<()> {
    let leader = cluster.wait_leader(harness::cluster::WAIT).await?;
    let client = RemotingClient::new();
    let request = RemotingCommand::request(RequestCode::from_i32(PROBE_CODE));
    let response = client.invoke(&cluster.addr(leader), request, Duration::from_secs(5)).await?;
    ensure!(response.response_code() == ResponseCode::RequestCodeNotSupported, "the probe was answered {response:?}");
    let needle = format!("request_code={PROBE_CODE} ");
    harness::cluster::until(
        "the probe's refusal recorded",
        || async {
            Ok::<_, anyhow::Error>(refusals.lock().map(|r| r.iter().any(|l| l.contains(&needle))).unwrap_or(false))
        },
        |recorded| *recorded,
    )
    .await?;
    Ok(())
}

/// Why the scenarios cannot run here, if they cannot.
async fn python_missing() -> Option<String> {
    let out = tokio::process::Command::new("python3").args(["-c", "import rocketmq.client"]).output().await;
    match out {
        Err(e) => Some(format!("python3 could not be started ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "`python3 -c \"import rocketmq.client\"` failed: {}",
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
        )),
        Ok(_) => None,
    }
}

/// The refusals `refusal_log` writes, recorded from its warn events (one subscriber per binary).
fn refusal_recorder() -> Arc<Mutex<Vec<String>>> {
    static RECORDED: OnceLock<Arc<Mutex<Vec<String>>>> = OnceLock::new();
    RECORDED
        .get_or_init(|| {
            let recorded = Arc::new(Mutex::new(Vec::new()));
            let fmt = std::env::var_os("RUST_LOG").map(|_| {
                tracing_subscriber::fmt::layer()
                    .with_test_writer()
                    .with_filter(tracing_subscriber::EnvFilter::from_default_env())
            });
            let _already_set = tracing_subscriber::registry()
                .with(
                    RefusalLayer(recorded.clone()).with_filter(
                        tracing_subscriber::filter::Targets::new()
                            .with_target("raftmq_common::remoting::refusal_log", tracing::Level::WARN),
                    ),
                )
                .with(fmt)
                .try_init();
            recorded
        })
        .clone()
}

/// Records every event of `raftmq_common::remoting::refusal_log` with its fields.
struct RefusalLayer(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RefusalLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "raftmq_common::remoting::refusal_log" {
            return;
        }
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={:?} ", field.name(), value));
            }
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        if let Ok(mut recorded) = self.0.lock() {
            recorded.push(fields.0);
        }
    }
}

struct Run<'a> {
    cluster: &'a Cluster,
    nodes: u64,
}

/// The last lines of every log librocketmq wrote under `home`, for a failure's message.
fn client_log_tail(home: &std::path::Path) -> String {
    const LINES: usize = 40;
    let Ok(entries) = std::fs::read_dir(home.join("logs/rocketmq-cpp")) else {
        return "(no log)".to_owned();
    };
    let mut out = String::new();
    for entry in entries.flatten().filter(|e| e.path().is_file()) {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        out.push_str(&format!("== {}\n", entry.path().display()));
        for line in &lines[lines.len().saturating_sub(LINES)..] {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn text<'v>(value: &'v Value, field: &str) -> &'v str {
    value[field].as_str().unwrap_or_default()
}

fn int(value: &Value, field: &str) -> i64 {
    value[field].as_i64().unwrap_or(i64::MIN)
}

/// What the scenarios write as the body of message `seq` (`scenario_common.body_of`).
fn body_of(scenario: &str, seq: usize) -> String {
    format!("{scenario}-{seq}-Grüße-消息")
}

impl Run<'_> {
    fn names(&self, scenario: &str) -> (String, String) {
        (format!("Cpp_{scenario}_{}n", self.nodes), format!("cpp_{scenario}_{}n", self.nodes))
    }

    /// Creates the scenario's topic (as an operator would with `updateTopic`), runs its script.
    async fn scenario(&self, script: &str, scenario: &str, count: usize) -> Result<ScriptOutput> {
        let (topic, group) = self.names(scenario);
        self.cluster.create_topic(&topic, QUEUES).await?;
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop_cpp");
        // The client's logs go to a directory of this run (its default is ~/logs/rocketmq-cpp).
        let home = tempfile::tempdir()?;
        let mut command = tokio::process::Command::new("python3");
        command
            .arg(dir.join(script))
            .args(["--namesrv", &self.cluster.namesrv_addr, "--topic", &topic, "--group", &group])
            .args(["--count", &count.to_string()])
            .arg("--client-home")
            .arg(home.path())
            .current_dir(&dir);
        let output = run_json_lines(command, script, SCENARIO_TIMEOUT, || client_log_tail(home.path())).await?;
        println!(
            "{}-node group, {script}: {} sent, {} received",
            self.nodes,
            output.of("sent").len(),
            output.of("received").len()
        );
        Ok(output)
    }

    /// Sync, async and oneway sends (`COUNT` each) read back once each by the pull consumer.
    async fn send_modes_and_pull(&self) -> Result<()> {
        let (topic, _) = self.names("send_modes");
        let out = self.scenario("send_modes_pull.py", "send_modes", COUNT).await?;
        let sent = out.of("sent");
        let mut sent_ids = BTreeMap::new();
        for mode in ["sync", "async", "oneway"] {
            let of_mode: Vec<_> = sent.iter().filter(|e| text(e, "mode") == mode).collect();
            ensure!(of_mode.len() == COUNT, "{mode}: {} sends reported, want {COUNT}", of_mode.len());
            for e in of_mode {
                let want = if mode == "oneway" { "ONEWAY" } else { "OK" };
                ensure!(text(e, "status") == want, "{mode} send answered {e}");
                if mode != "oneway" {
                    sent_ids.insert(int(e, "seq"), text(e, "msg_id").to_owned());
                }
            }
        }
        let received = out.of("received");
        ensure!(received.len() == 3 * COUNT, "pulled {} messages, want {}", received.len(), 3 * COUNT);
        let mut seqs = BTreeSet::new();
        for r in received {
            let seq: usize = text(r, "seq").parse().with_context(|| format!("no seq in {r}"))?;
            let mode = ["sync", "async", "oneway"][seq / COUNT];
            ensure!(seqs.insert(seq), "message {seq} pulled twice");
            ensure!(text(r, "topic") == topic, "{r}");
            ensure!(text(r, "tags") == if seq.is_multiple_of(2) { "TagA" } else { "TagB" }, "tags of {r}");
            ensure!(text(r, "keys") == format!("key-{mode}-{seq} order-{}", seq % 3), "keys of {r}");
            ensure!(text(r, "body") == body_of(mode, seq), "body of {r}");
            ensure!(text(r, "scenario") == mode, "user property of {r}");
            ensure!(int(r, "reconsume_times") == 0, "{r}");
            if let Some(id) = sent_ids.get(&i64::try_from(seq)?) {
                ensure!(text(r, "msg_id") == id, "message id of {r}: the send answered {id}");
            }
        }
        Ok(())
    }

    /// A concurrent push consumer with `TagA || TagB` gets every TagA and TagB message, no TagC.
    async fn push_concurrently_with_tags(&self) -> Result<()> {
        let out = self.scenario("push_concurrent.py", "push_concurrent", COUNT).await?;
        let sent = out.of("sent");
        ensure!(sent.len() == 3 * COUNT && sent.iter().all(|e| text(e, "status") == "OK"), "sends: {sent:?}");
        let wanted: BTreeSet<usize> = (0..3 * COUNT).filter(|s| s % 3 != 2).collect();
        let mut got = BTreeSet::new();
        let mut redelivered = 0;
        for r in out.of("received") {
            let seq: usize = text(r, "seq").parse().with_context(|| format!("no seq in {r}"))?;
            ensure!(text(r, "tags") != "TagC", "TagC message delivered despite the tag expression: {r}");
            ensure!(text(r, "tags") == ["TagA", "TagB"][seq % 3], "tags of {r}");
            ensure!(text(r, "keys") == format!("key-sync-{seq}"), "keys of {r}");
            ensure!(text(r, "body") == body_of("sync", seq), "body of {r}");
            ensure!(text(r, "scenario") == "sync", "user property of {r}");
            if !got.insert(seq) {
                redelivered += 1;
            }
        }
        ensure!(got == wanted, "delivered {got:?}, want {wanted:?}");
        println!("  push_concurrent: {} distinct, {redelivered} redelivered", got.len());
        Ok(())
    }

    /// Orderly sends with the hashing selector: each order on queue `order % 4`, its TagA/TagB steps
    /// delivered in step order to the orderly consumer.
    async fn orderly(&self) -> Result<()> {
        let out = self.scenario("orderly.py", "orderly", ORDERS).await?;
        let steps = usize::try_from(int(out.of("done")[0], "steps"))?;
        for e in out.of("sent") {
            ensure!(text(e, "status") == "OK" && int(e, "queues") == i64::from(QUEUES), "send: {e}");
        }
        ensure!(out.of("sent").len() == ORDERS * steps, "sends: {}", out.of("sent").len());
        let mut per_order: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for r in out.of("received") {
            let order: usize = text(r, "order").parse().with_context(|| format!("no order in {r}"))?;
            let step: usize = text(r, "step").parse().with_context(|| format!("no step in {r}"))?;
            ensure!(step % 3 != 2, "TagC step delivered despite the tag expression: {r}");
            ensure!(int(r, "queue_id") == i64::try_from(order)? % i64::from(QUEUES), "queue of {r}");
            ensure!(text(r, "keys") == format!("order-{order}-step-{step}"), "keys of {r}");
            ensure!(text(r, "tags") == ["TagA", "TagB"][step % 3], "tags of {r}");
            per_order.entry(order).or_default().push(step);
        }
        let wanted: Vec<usize> = (0..steps).filter(|s| s % 3 != 2).collect();
        for order in 0..ORDERS {
            let got = per_order.remove(&order).unwrap_or_default();
            // A redelivery repeats a step (at-least-once) but never goes back past a later one.
            let mut firsts = got.clone();
            firsts.dedup();
            ensure!(firsts == wanted, "order {order} delivered steps {got:?}, want {wanted:?} in order");
        }
        Ok(())
    }

    /// Each message fails once in the listener and comes back from `%RETRY%<group>` with reconsume
    /// times 1, its topic restored, keys, tags, body and properties intact.
    async fn retry(&self) -> Result<()> {
        let (topic, _) = self.names("retry");
        let out = self.scenario("retry.py", "retry", RETRIED).await?;
        let mut deliveries: BTreeMap<usize, Vec<&Value>> = BTreeMap::new();
        for r in out.of("received") {
            let seq: usize = text(r, "seq").parse().with_context(|| format!("no seq in {r}"))?;
            ensure!(text(r, "topic") == topic, "topic of {r}");
            ensure!(text(r, "keys") == format!("retry-{seq}"), "keys of {r}");
            ensure!(text(r, "tags") == "TagRetry", "tags of {r}");
            ensure!(text(r, "body") == body_of("retry", seq), "body of {r}");
            ensure!(text(r, "scenario") == "retry", "user property of {r}");
            deliveries.entry(seq).or_default().push(r);
        }
        ensure!(deliveries.len() == RETRIED, "messages delivered: {:?}", deliveries.keys());
        for (seq, d) in deliveries {
            let first = d.first().context("no delivery")?;
            ensure!(int(first, "reconsume_times") == 0 && first["failed"] == true, "message {seq}: {first}");
            let retried =
                d.iter().find(|r| r["failed"] == false).with_context(|| format!("message {seq} never came back"))?;
            ensure!(int(retried, "reconsume_times") == 1, "message {seq} came back with {retried}");
            ensure!(text(retried, "retry_topic") == topic, "RETRY_TOPIC of {retried}");
        }
        Ok(())
    }

    /// librocketmq 1.2.x writes a batch's flag `m` as `1`; Java's broker reads that with
    /// `Boolean.parseBoolean` (false) and stores the batch as ONE message whose body is the batch
    /// encoding. raftmq must do exactly that: one stored message, its body the `BATCHED` messages.
    async fn batch(&self) -> Result<()> {
        let (topic, _) = self.names("batch");
        let out = self.scenario("batch.py", "batch", BATCHED).await?;
        let sent = out.of("sent");
        ensure!(sent.len() == BATCHED && sent.iter().all(|e| text(e, "status") == "OK"), "sends: {sent:?}");
        let leader = self.cluster.wait_leader(harness::cluster::WAIT).await?;
        let client = RemotingClient::new();
        let mut stored = Vec::new();
        for queue_id in 0..QUEUES {
            stored.extend(drain_queue(&client, &self.cluster.addr(leader), &topic, queue_id).await?);
        }
        ensure!(stored.len() == 1, "stored {} messages, want the batch as one (as Java's broker)", stored.len());
        ensure!(out.of("received").len() == 1, "the pull consumer saw {:?}", out.of("received"));
        let inner = decode_batch(&stored[0].message.body, &topic).context("the stored body is not a batch")?;
        ensure!(inner.len() == BATCHED, "the stored batch holds {} messages", inner.len());
        for (seq, m) in inner.iter().enumerate() {
            ensure!(m.keys() == Some(format!("batch-{seq}").as_str()), "keys of {m:?}");
            ensure!(m.tags() == Some("TagBatch"), "tags of {m:?}");
            ensure!(m.property("interopSeq") == Some(seq.to_string().as_str()), "properties of {m:?}");
            ensure!(m.body == body_of("batch", seq).as_bytes(), "body of {m:?}");
        }
        Ok(())
    }
}
