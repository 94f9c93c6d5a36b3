//! What every console test starts from: the browser (first, so a missing Chromium skips before a
//! cluster starts), `raftmq dev` with its web console, an SDK `Admin` and producer for the data.

#![allow(dead_code)]

use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_common::message::Message;
use raftmq_common::protocol::body::topic::TopicConfig;
use tokio::time::Instant;

use super::browser::Browser;
use super::harness::dev::DevCluster;

/// Bound of the set-up steps against the cluster.
pub const SETUP_WAIT: Duration = Duration::from_secs(60);

/// A dev cluster, its console and a browser.
pub struct Fixture {
    /// The browser.
    pub browser: Browser,
    /// `raftmq dev`.
    pub dev: DevCluster,
    /// An admin client of its NameServer.
    pub admin: Admin,
    _data: tempfile::TempDir,
}

impl Fixture {
    /// Everything up, or `None` (SKIP printed) without a browser.
    pub async fn start(test: &str) -> Result<Option<Fixture>> {
        let Some(browser) = Browser::start(test).await? else { return Ok(None) };
        let data = tempfile::tempdir()?;
        let log = browser.out_dir().join("raftmq-dev.log");
        let dev = DevCluster::start(&data.path().join("data"), &log).await?;
        let admin = Admin::new(&dev.namesrv)?;
        println!("dev cluster: NameServer {}, console {}", dev.namesrv, dev.console_url);
        Ok(Some(Fixture { browser, dev, admin, _data: data }))
    }

    /// Creates `topic` with `queues` queues in the dev cluster (retried until its group has a
    /// leader that registered) and waits until the NameServer routes it.
    pub async fn create_topic(&self, topic: &str, queues: i32) -> Result<()> {
        let config = TopicConfig { read_queue_nums: queues, write_queue_nums: queues, ..TopicConfig::new(topic) };
        let deadline = Instant::now() + SETUP_WAIT;
        loop {
            let made = self.admin.create_topic_in_cluster("DefaultCluster", &config).await;
            if made.is_ok() && self.admin.topic_route(topic).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("topic {topic} not created and routed within {SETUP_WAIT:?}: {made:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A started producer.
    pub async fn producer(&self, group: &str) -> Result<Producer> {
        let producer = Producer::builder(group).namesrv_addr(&self.dev.namesrv).build()?;
        producer.start().await?;
        Ok(producer)
    }

    /// Sends `count` messages `<prefix>-<i>` keyed `<prefix>-<i>` to `topic`; their offsetMsgIds.
    pub async fn send(&self, producer: &Producer, topic: &str, prefix: &str, count: usize) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        for i in 0..count {
            let message = Message::new(topic, format!("{prefix}-{i}").into_bytes()).with_keys(format!("{prefix}-{i}"));
            let sent = producer.send(message).await.with_context(|| format!("sending {prefix}-{i}"))?;
            ids.push(sent.offset_msg_id);
        }
        Ok(ids)
    }

    /// Stops the browser and the cluster.
    pub async fn stop(self) -> Result<()> {
        self.admin.shutdown().await;
        self.browser.close().await;
        self.dev.stop().await
    }
}
