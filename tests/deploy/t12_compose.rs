//! Issue 34: docker-compose.yml started for real, as its README section says, with the image built
//! from this test's own `raftmq` binary (deploy/image-from-host.sh: no base image, no registry).
//! Two NameServers, groups broker-a and broker-b of three replicas each; one test walks through
//! what an operator does to it, in order, on one cluster (starting it is the expensive part):
//!
//! 1. up: all eight containers healthy (their /readyz health checks);
//! 2. sends through NameServer 1 and consumption through NameServer 2 reach both groups (and the
//!    unchanged Apache C++ client, PyPI `rocketmq` 0.4.4, sends and consumes where it is installed);
//! 3. `kill` the leader of broker-a while sends run: sends go on (the longest time without a SEND_OK
//!    under 3 s), broker-a takes writes again, nothing acknowledged is lost;
//! 4. `docker network disconnect` a follower of broker-b, write, reconnect: it catches up;
//! 5. stop NameServer 1: a producer and a consumer given both NameServers go on with the other;
//! 6. `restart` everything: every acknowledged message is still there;
//! 7. `down -v` (also when the test fails, from a drop guard).
//!
//! Client settings are the defaults everywhere. Skips, saying why, where no Docker daemon or no
//! compose tool answers.

use crate::harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::process::Output;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use harness::cluster::Collector;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::body::membership::GroupStatus;
use raftmq_common::test_skip::announce_skip;

/// The compose project: its own name, so a user's `raftmq` cluster is never touched.
const PROJECT: &str = "raftmqci";
const IMAGE: &str = "raftmq:ci";
const NAMESRV_1: &str = "172.28.0.2:9876";
const NAMESRV_2: &str = "172.28.0.3:9876";
const TOPIC: &str = "ComposeTopic";
/// Replica addresses of each group (deploy/broker-*.toml).
const GROUPS: [(&str, [(&str, &str); 3]); 2] = [
    ("broker-a", [("broker-a-n1", "172.28.0.11"), ("broker-a-n2", "172.28.0.12"), ("broker-a-n3", "172.28.0.13")]),
    ("broker-b", [("broker-b-n1", "172.28.0.21"), ("broker-b-n2", "172.28.0.22"), ("broker-b-n3", "172.28.0.23")]),
];
/// How long the cluster may take to become healthy, and anything after to converge.
const HEALTHY_WITHIN: Duration = Duration::from_secs(180);
const CONVERGE_WITHIN: Duration = Duration::from_secs(60);
/// The acceptance bound of a leader kill: the longest time without a SEND_OK.
const SEND_GAP_MAX: Duration = Duration::from_secs(3);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The compose tool here: `docker compose` (v2) or `docker-compose` (v1).
fn compose_tool() -> Option<Vec<&'static str>> {
    let works =
        |cmd: &[&str]| Command::new(cmd[0]).args(&cmd[1..]).arg("version").output().is_ok_and(|o| o.status.success());
    [vec!["docker", "compose"], vec!["docker-compose"]].into_iter().find(|c| works(c))
}

/// Runs the compose tool on this project; the output, or an error with its stderr.
struct Compose {
    tool: Vec<&'static str>,
}

impl Compose {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.tool[0]);
        cmd.args(&self.tool[1..]).args(["-p", PROJECT]).args(args).current_dir(root()).env("RAFTMQ_IMAGE", IMAGE);
        cmd
    }

    fn run(&self, args: &[&str]) -> Result<String> {
        checked(self.command(args).output(), &format!("compose {}", args.join(" ")))
    }

    /// The container id of a service.
    fn container(&self, service: &str) -> Result<String> {
        let id = self.run(&["ps", "-q", service])?.trim().to_owned();
        ensure!(!id.is_empty(), "no container for {service}");
        Ok(id)
    }

    /// Health of every container of the project (`healthy`, `starting`, `unhealthy`, or the state
    /// of one that has stopped), by service name.
    fn health(&self) -> Result<BTreeMap<String, String>> {
        let ids: Vec<String> = self.run(&["ps", "-q"])?.split_whitespace().map(str::to_owned).collect();
        ensure!(!ids.is_empty(), "no containers");
        let out = checked(
            Command::new("docker")
                .args(["inspect", "-f", "{{index .Config.Labels \"com.docker.compose.service\"}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}"])
                .args(&ids)
                .output(),
            "docker inspect",
        )?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let (service, state) = (it.next()?, it.next()?);
                Some((service.to_owned(), it.next().unwrap_or(state).to_owned()))
            })
            // The one-shot secret-init has done its work once it exited.
            .filter(|(service, _)| service != "secret-init")
            .collect())
    }

    /// Waits until all eight long-running services are healthy.
    async fn wait_healthy(&self) -> Result<()> {
        let deadline = Instant::now() + HEALTHY_WITHIN;
        loop {
            let health = self.health()?;
            if health.len() == 8 && health.values().all(|h| h == "healthy") {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("not healthy within {HEALTHY_WITHIN:?}: {health:?}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Takes the project down with its volumes, whatever happened.
struct DownOnDrop<'a>(&'a Compose);

impl Drop for DownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.command(&["down", "-v", "--remove-orphans"]).output();
    }
}

fn checked(output: std::io::Result<Output>, what: &str) -> Result<String> {
    let output = output.with_context(|| format!("running {what}"))?;
    ensure!(output.status.success(), "{what} failed: {}", String::from_utf8_lossy(&output.stderr));
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A replica's own view of its group (RAFT_GROUP_STATUS on its remoting port, as `raftmq admin
/// groupStatus` asks it): the admin HTTP API stays closed inside each container.
async fn status(admin: &Admin, ip: &str) -> Result<GroupStatus> {
    Ok(tokio::time::timeout(Duration::from_secs(3), admin.group_status(&format!("{ip}:10911"))).await??)
}

/// The leader of a group: (service, ip), from its replicas' own views.
async fn leader(admin: &Admin, group: usize) -> Result<(&'static str, &'static str)> {
    let deadline = Instant::now() + CONVERGE_WITHIN;
    loop {
        for (service, ip) in GROUPS[group].1 {
            if status(admin, ip).await.is_ok_and(|s| s.role == "LEADER" && s.ready) {
                return Ok((service, ip));
            }
        }
        if Instant::now() > deadline {
            bail!("{} has no leader", GROUPS[group].0);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Bodies acknowledged with SEND_OK, by group.
#[derive(Clone, Default)]
struct Acked(Arc<Mutex<Vec<(String, String, Instant)>>>);

impl Acked {
    fn push(&self, body: String, broker: String) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push((body, broker, Instant::now()));
    }
    fn bodies(&self) -> BTreeSet<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|a| a.0.clone()).collect()
    }
    fn brokers(&self) -> BTreeSet<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|a| a.1.clone()).collect()
    }
    fn times(&self) -> Vec<(String, Instant)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|a| (a.1.clone(), a.2)).collect()
    }
}

async fn send_n(producer: &Producer, acked: &Acked, prefix: &str, n: usize) -> Result<()> {
    for i in 0..n {
        let body = format!("{prefix}-{i}");
        let r = producer.send(Message::new(TOPIC, body.clone())).await.with_context(|| format!("sending {body}"))?;
        acked.push(body, r.message_queue.broker_name.clone());
    }
    Ok(())
}

/// A push consumer of the topic from its first offset, recording into `sink`.
async fn consumer(group: &str, namesrv: &str, sink: &Collector) -> Result<PushConsumer> {
    let sink = sink.clone();
    let name = group.to_owned();
    let consumer = PushConsumer::builder(group)
        .namesrv_addr(namesrv)
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .listener_concurrently(move |msgs: &[MessageExt], _ctx: &mut ConsumeConcurrentlyContext| {
            sink.record(&name, msgs);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    Ok(consumer)
}

/// Runs deploy/cpp_client_gaps.py (the unchanged C++ client) in `mode`; its JSON line, or `None`
/// where the package is not installed (said once by the caller).
fn cpp_client(args: &[&str]) -> Result<serde_json::Value> {
    // The C++ client logs under $HOME/logs/rocketmq-cpp: a directory of the run, not the user's.
    let home = tempfile::tempdir()?;
    let out = checked(
        Command::new("python3")
            .arg(root().join("deploy/cpp_client_gaps.py"))
            .args(args)
            .env("HOME", home.path())
            .output(),
        "the C++ client",
    )?;
    Ok(serde_json::from_str(out.lines().last().context("no output")?)?)
}

fn cpp_client_installed() -> bool {
    Command::new("python3").args(["-c", "import rocketmq.client"]).output().is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_cluster_starts_fails_over_heals_and_keeps_every_message() -> Result<()> {
    harness::cluster::init_logging();
    if !Command::new("docker").args(["info"]).output().is_ok_and(|o| o.status.success()) {
        announce_skip("t12_compose", "no Docker daemon answers `docker info`");
        return Ok(());
    }
    let Some(tool) = compose_tool() else {
        announce_skip("t12_compose", "neither `docker compose` nor `docker-compose` is installed");
        return Ok(());
    };
    let compose = Compose { tool };
    let _ = compose.command(&["down", "-v", "--remove-orphans"]).output();

    // The image from this build's binary, as a user without a registry builds it.
    checked(
        Command::new(root().join("deploy/image-from-host.sh"))
            .arg(env!("CARGO_BIN_EXE_raftmq"))
            .env("RAFTMQ_IMAGE", IMAGE)
            .current_dir(root())
            .output(),
        "deploy/image-from-host.sh",
    )?;
    let _down = DownOnDrop(&compose);

    // 1. Up and healthy.
    let started = Instant::now();
    compose.run(&["up", "-d"])?;
    compose.wait_healthy().await?;
    eprintln!("t12: 2 NameServers and 2 x 3 brokers healthy {:?} after `up -d`", started.elapsed());

    // 2. Both groups, both NameServers. A healthy replica is not yet a registered one, and
    // `updateTopic -c` writes to the groups the NameServer lists with a leader: wait for both.
    let admin = Admin::new(&format!("{NAMESRV_1};{NAMESRV_2}"))?;
    let deadline = Instant::now() + CONVERGE_WITHIN;
    loop {
        let leaders = admin.master_addrs_of_cluster("DefaultCluster").await.unwrap_or_default();
        if leaders.len() == GROUPS.len() {
            break;
        }
        ensure!(Instant::now() < deadline, "the NameServer lists leaders of only {leaders:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let bin = env!("CARGO_BIN_EXE_raftmq");
    checked(
        Command::new(bin)
            .args(["admin", "updateTopic", "-n", NAMESRV_1, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"])
            .output(),
        "raftmq admin updateTopic",
    )?;
    let acked = Acked::default();
    let producer = Producer::builder("t12_producer").namesrv_addr(NAMESRV_1).build()?;
    producer.start().await?;
    // The route lists both groups once each has registered the topic (at most one registration).
    let deadline = Instant::now() + CONVERGE_WITHIN;
    let mut round = 0;
    while acked.brokers().len() < 2 {
        ensure!(Instant::now() < deadline, "sends reached only {:?}", acked.brokers());
        send_n(&producer, &acked, &format!("warm{round}"), 16).await?;
        round += 1;
    }
    send_n(&producer, &acked, "both", 200).await?;
    let sink = Collector::default();
    let consumer_1 = consumer("t12_consumer", NAMESRV_2, &sink).await?;
    // Every body sent to both groups through NameServer 1, consumed through NameServer 2.
    sink.wait_for_bodies(&acked.bodies()).await?;

    let mut cpp_sent = 0;
    if cpp_client_installed() {
        let sent = cpp_client(&["produce", NAMESRV_2, TOPIC, "2", "1"])?;
        cpp_sent = sent["sent"].as_u64().context("sent")?;
        let got = cpp_client(&["consume", NAMESRV_1, TOPIC, "t12_cpp_consumer", "10"])?;
        let received = got["received"].as_u64().context("received")?;
        let total = acked.bodies().len() as u64 + cpp_sent;
        ensure!(cpp_sent > 0 && received >= total, "the C++ client sent {cpp_sent} and consumed {received} of {total}");
        eprintln!("t12: the C++ client sent {cpp_sent} and consumed all {received}");
    } else {
        announce_skip(
            "t12_compose's C++ client part",
            "PyPI's rocketmq 0.4.4 is not installed (pip install rocketmq==0.4.4)",
        );
    }

    // 3. Kill broker-a's leader while sends run.
    let (victim, victim_ip) = leader(&admin, 0).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (producer, acked, stop) = (producer.clone(), acked.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) {
                let body = format!("kill-{i}");
                if let Ok(r) = producer.send(Message::new(TOPIC, body.clone())).await {
                    acked.push(body, r.message_queue.broker_name.clone());
                }
                i += 1;
            }
        })
    };
    let before = acked.bodies().len();
    let deadline = Instant::now() + CONVERGE_WITHIN;
    while acked.bodies().len() < before + 100 {
        ensure!(Instant::now() < deadline, "sends did not run before the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed_at = Instant::now();
    compose.run(&["kill", victim])?;
    let (new_leader, _) = leader(&admin, 0).await?;
    ensure!(new_leader != victim, "{victim} still leads");
    let deadline = Instant::now() + CONVERGE_WITHIN;
    let broker_a_back = loop {
        let back = acked.times().iter().find(|(b, t)| b == "broker-a" && *t > killed_at).map(|(_, t)| *t);
        if let Some(t) = back {
            break t;
        }
        ensure!(Instant::now() < deadline, "broker-a took no write after its leader was killed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_millis(500)).await; // sends after recovery, then stop them
    stop.store(true, Ordering::Release);
    sender.await?;
    let mut times: Vec<Instant> = acked.times().into_iter().map(|(_, t)| t).filter(|t| *t >= killed_at).collect();
    times.sort();
    let gap =
        times.windows(2).map(|w| w[1] - w[0]).chain(times.first().map(|t| *t - killed_at)).max().unwrap_or_default();
    eprintln!(
        "t12: killed {victim} ({victim_ip}); longest time without a SEND_OK {gap:?}; broker-a wrote again {:?} after the kill (new leader {new_leader})",
        broker_a_back - killed_at
    );
    ensure!(gap < SEND_GAP_MAX, "sends stopped for {gap:?} after the leader kill");
    compose.run(&["start", victim])?;
    compose.wait_healthy().await?;

    // 4. Cut a follower of broker-b off, write, reconnect: it catches up.
    let (b_leader, b_leader_ip) = leader(&admin, 1).await?;
    let (follower, follower_ip) =
        GROUPS[1].1.into_iter().find(|(s, _)| *s != b_leader).context("a follower of broker-b")?;
    let network = format!("{PROJECT}_raftmq");
    let id = compose.container(follower)?;
    checked(Command::new("docker").args(["network", "disconnect", &network, &id]).output(), "network disconnect")?;
    send_n(&producer, &acked, "cut", 200).await?;
    checked(
        Command::new("docker").args(["network", "connect", "--ip", follower_ip, &network, &id]).output(),
        "network connect",
    )?;
    let deadline = Instant::now() + CONVERGE_WITHIN;
    loop {
        let (l, f) = (status(&admin, b_leader_ip).await, status(&admin, follower_ip).await);
        if let (Ok(l), Ok(f)) = (l, f)
            && l.committed_index.is_some()
            && f.applied_index >= l.committed_index
        {
            break;
        }
        ensure!(Instant::now() < deadline, "{follower} did not catch up after reconnecting");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("t12: {follower} caught up with {b_leader} after a network disconnect");

    // 5. One NameServer down: clients given both go on.
    compose.run(&["stop", "namesrv-1"])?;
    let both = format!("{NAMESRV_1};{NAMESRV_2}");
    let producer_2 = Producer::builder("t12_producer_2").namesrv_addr(&both).build()?;
    producer_2.start().await?;
    send_n(&producer_2, &acked, "one-namesrv", 100).await?;
    let sink_2 = Collector::default();
    let consumer_2 = consumer("t12_consumer_2", &both, &sink_2).await?;
    sink_2.wait_for_bodies(&acked.bodies()).await?;
    consumer_2.shutdown().await;
    producer_2.shutdown().await;
    compose.run(&["start", "namesrv-1"])?;

    // 6. Restart everything: every acknowledged message is still there.
    consumer_1.shutdown().await;
    producer.shutdown().await;
    compose.run(&["restart"])?;
    compose.wait_healthy().await?;
    let sink_3 = Collector::default();
    let consumer_3 = consumer("t12_consumer_3", &both, &sink_3).await?;
    let want = acked.bodies();
    sink_3.wait_for_bodies(&want).await?;
    let got = sink_3.distinct_bodies().len();
    consumer_3.shutdown().await;
    admin.shutdown().await;
    eprintln!(
        "t12: after `restart`, all {} acknowledged messages (and {cpp_sent} of the C++ client) read back; {got} distinct",
        want.len()
    );
    Ok(())
}
