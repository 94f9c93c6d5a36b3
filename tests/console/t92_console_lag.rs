//! Issue 36: a consumer group's lag appears on its page (offsets committed at the start of a topic
//! holding messages) and falls to zero once a consumer has consumed them; the lag chart has the
//! samples of both. Screenshots under `$CARGO_TARGET_TMPDIR/console/t92_console_lag/`.

use crate::fixture;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use fantoccini::Locator;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::MessageExt;

use fixture::Fixture;

const TOPIC: &str = "T92_CONSOLE";
const GROUP: &str = "t92-group";
const QUEUES: i32 = 4;
const MESSAGES: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_lag_appears_then_falls_after_consumption() -> Result<()> {
    let Some(f) = Fixture::start("t92_console_lag").await? else { return Ok(()) };
    let result = scenario(&f).await;
    f.stop().await?;
    result
}

/// The lag chart's number of samples and its latest value, from its accessible label.
fn chart_label(label: &str) -> Option<(usize, String)> {
    let (_, rest) = label.split_once(": ")?;
    let (samples, latest) = rest.split_once(" samples, latest ")?;
    Some((samples.parse().ok()?, latest.to_owned()))
}

async fn scenario(f: &Fixture) -> Result<()> {
    f.create_topic(TOPIC, QUEUES).await?;
    let producer = f.producer("t92-producer").await?;
    f.send(&producer, TOPIC, "t92", MESSAGES).await?;
    // The group exists with offsets at the start of every queue: all messages are its lag.
    let route = f.admin.topic_route(TOPIC).await?;
    let leader = raftmq_client::Admin::leaders_of_route(&route)
        .into_iter()
        .find_map(|(_, addr)| addr)
        .context("a leader in the route")?;
    for queue in 0..QUEUES {
        f.admin.update_consumer_offset(&leader, GROUP, TOPIC, queue, 0).await?;
    }

    let b = &f.browser;
    b.open_page(&f.dev.console_url, "#/groups/t92-group", "group").await?;
    let want = MESSAGES.to_string();
    b.wait_text("#lag-total", "the whole topic as lag", |t| t == want).await?;
    b.wait_css("tr[data-queue=\"broker-a-T92_CONSOLE-0\"]").await?;
    // Two samples of the full lag in the chart before consuming (the console samples every few seconds).
    b.until("two lag samples in the chart", || async {
        let chart = b.client().find(Locator::Id("lag-chart")).await?;
        let label = chart.attr("aria-label").await?.unwrap_or_default();
        Ok(chart_label(&label).filter(|(n, latest)| *n >= 2 && *latest == want).map(|_| ()))
    })
    .await?;
    b.screenshot("lag-before").await?;

    let consumer = PushConsumer::builder(GROUP)
        .namesrv_addr(&f.dev.namesrv)
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .listener_concurrently(|_: &[MessageExt], _: &mut ConsumeConcurrentlyContext| {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;
    b.wait_text("#lag-total", "the lag fallen to zero", |t| t == "0").await?;
    b.until("a zero lag sample in the chart", || async {
        let chart = b.client().find(Locator::Id("lag-chart")).await?;
        let label = chart.attr("aria-label").await?.unwrap_or_default();
        Ok(chart_label(&label).filter(|(_, latest)| latest == "0").map(|_| ()))
    })
    .await?;
    b.wait_css("#group-clients table").await?;
    b.screenshot("lag-after").await?;
    let errors = b.console_errors().await?;
    ensure!(errors.is_empty(), "console errors: {errors:?}");
    consumer.shutdown().await;
    producer.shutdown().await;
    Ok(())
}
