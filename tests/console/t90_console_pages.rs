//! Issue 36: every page of the web console loads against a dev cluster with data — a topic with
//! messages, a consumer group that consumed them, a delayed message waiting — without a console
//! error and without an error banner; the keyboard moves between pages; the cluster page fits a
//! phone's width; a leader transfer started from the cluster page shows the new leader. Each page
//! is saved as a screenshot under `$CARGO_TARGET_TMPDIR/console/t90_console_pages/`.

use crate::fixture;

use anyhow::Result;
use anyhow::ensure;
use fantoccini::Locator;
use fantoccini::actions::InputSource;
use fantoccini::actions::KeyAction;
use fantoccini::actions::KeyActions;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;

use fixture::Fixture;

const TOPIC: &str = "T90_CONSOLE";
const GROUP: &str = "t90-group";
const MESSAGES: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_loads_without_errors_and_a_leader_transfer_shows_the_new_leader() -> Result<()> {
    let Some(f) = Fixture::start("t90_console_pages").await? else { return Ok(()) };
    let result = scenario(&f).await;
    f.stop().await?;
    result
}

async fn scenario(f: &Fixture) -> Result<()> {
    f.create_topic(TOPIC, 4).await?;
    let producer = f.producer("t90-producer").await?;
    f.send(&producer, TOPIC, "t90", MESSAGES).await?;
    let mut delayed = Message::new(TOPIC, b"later".to_vec());
    delayed.set_delay_time_level(18);
    producer.send(delayed).await?;
    let consumed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = consumed.clone();
    let consumer = PushConsumer::builder(GROUP)
        .namesrv_addr(&f.dev.namesrv)
        .subscribe(TOPIC, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .listener_concurrently(move |msgs: &[MessageExt], _: &mut ConsumeConcurrentlyContext| {
            counter.fetch_add(msgs.len(), std::sync::atomic::Ordering::SeqCst);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    consumer.start().await?;

    let b = &f.browser;
    let base = &f.dev.console_url;
    let pages = [
        ("#/cluster", "cluster", "tr[data-role=\"leader\"]"),
        ("#/topics", "topics", "tr[data-topic=\"T90_CONSOLE\"]"),
        ("#/topics/T90_CONSOLE", "topic", "tr[data-queue]"),
        ("#/groups", "groups", "tr[data-group=\"t90-group\"]"),
        ("#/groups/t90-group", "group", "tr[data-queue]"),
        ("#/messages", "messages", "#key-search"),
        ("#/backlog", "backlog", "tr[data-level=\"18\"]"),
    ];
    for (hash, page, data) in pages {
        b.open_page(base, hash, page).await?;
        b.wait_css(data).await?;
        if page == "backlog" {
            b.wait_text(
                "section[data-group] tr[data-level=\"18\"] td:last-child",
                "the delayed message waiting",
                |t| t == "1",
            )
            .await?;
        }
        if page == "group" {
            b.wait_text("#lag-total", "the group's lag after consuming everything", |t| t == "0").await?;
        }
        let banner = b.error_banner().await?;
        ensure!(banner.is_none(), "{page}: an error banner shows: {banner:?}");
        b.screenshot(page).await?;
        let errors = b.console_errors().await?;
        ensure!(errors.is_empty(), "{page}: console errors: {errors:?}");
    }
    ensure!(consumed.load(std::sync::atomic::Ordering::SeqCst) >= MESSAGES, "the group consumed every message");

    // Keyboard: "2" on the cluster page opens the topics page.
    b.open_page(base, "#/cluster", "cluster").await?;
    let keys =
        KeyActions::new("keys".to_owned()).then(KeyAction::Down { value: '2' }).then(KeyAction::Up { value: '2' });
    b.client().perform_actions(keys).await?;
    b.wait_css("body[data-loaded=\"topics\"] tr[data-topic=\"T90_CONSOLE\"]").await?;

    // A phone's width: nothing wider than the screen but the tables' own scroll boxes.
    b.resize(390, 844).await?;
    b.open_page(base, "#/cluster", "cluster").await?;
    b.wait_css("tr[data-role=\"leader\"]").await?;
    let fits = b.script("return document.documentElement.scrollWidth <= window.innerWidth + 1").await?;
    ensure!(fits == serde_json::json!(true), "the cluster page is wider than a phone's screen");
    b.screenshot("cluster-phone").await?;
    b.resize(1280, 900).await?;

    // Leader transfer from the page.
    b.open_page(base, "#/cluster", "cluster").await?;
    let before = b.wait_text(".leader-id", "a leader", |t| t.starts_with('n')).await?;
    let follower = b.wait_css("tr[data-role=\"follower\"]").await?;
    let target = follower.attr("data-node").await?.unwrap_or_default();
    ensure!(format!("n{target}") != before, "the follower is not the leader");
    println!("leader {before}; transferring to n{target}");
    b.client()
        .find(Locator::Css(&format!("tr[data-node=\"{target}\"] button[data-action=\"transfer\"]")))
        .await?
        .click()
        .await?;
    let want = format!("n{target}");
    b.wait_text(".leader-id", "the new leader on the page", |t| t == want).await?;
    b.wait_text("#notice", "the transfer's notice", |t| t.contains("Leadership")).await?;
    b.wait_css(&format!("tr[data-node=\"{target}\"][data-role=\"leader\"]")).await?;
    b.screenshot("cluster-after-transfer").await?;
    let errors = b.console_errors().await?;
    ensure!(errors.is_empty(), "console errors after the transfer: {errors:?}");
    consumer.shutdown().await;
    producer.shutdown().await;
    Ok(())
}
