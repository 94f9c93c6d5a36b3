//! Issue 36: a topic is created from the Topics page; a message sent to it with a key is found
//! through the Messages page and its body shown — as pretty-printed JSON, and as hex — and the
//! same message is found again by its offsetMsgId. Screenshots under
//! `$CARGO_TARGET_TMPDIR/console/t91_console_messages/`.

use crate::fixture;

use std::time::Duration;

use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use fantoccini::Locator;
use raftmq_common::message::Message;
use tokio::time::Instant;

use fixture::Fixture;
use fixture::SETUP_WAIT;

const TOPIC: &str = "T91_CONSOLE";
const KEY: &str = "order-91";
const BODY: &str = r#"{"order":91,"item":"book","qty":2}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_made_on_the_page_holds_a_message_found_by_its_key() -> Result<()> {
    let Some(f) = Fixture::start("t91_console_messages").await? else { return Ok(()) };
    let result = scenario(&f).await;
    f.stop().await?;
    result
}

async fn scenario(f: &Fixture) -> Result<()> {
    let b = &f.browser;
    let base = &f.dev.console_url;

    // Create the topic on the page (retried while the group elects its first leader).
    b.open_page(base, "#/topics", "topics").await?;
    b.until("the topic created from the page", || async {
        if !b.client().find_all(Locator::Css("tr[data-topic=\"T91_CONSOLE\"]")).await?.is_empty() {
            return Ok(Some(()));
        }
        let name = b.client().find(Locator::Id("new-topic")).await?;
        name.clear().await?;
        name.send_keys(TOPIC).await?;
        b.client().find(Locator::Id("create-topic")).await?.click().await?;
        b.wait_css("#notice:not([hidden]), #error:not([hidden])").await?;
        Ok(None)
    })
    .await?;
    b.screenshot("topics").await?;

    // Send a keyed message (the route appears with the group's next registration).
    let producer = f.producer("t91-producer").await?;
    let deadline = Instant::now() + SETUP_WAIT;
    let sent = loop {
        match producer.send(Message::new(TOPIC, BODY.as_bytes().to_vec()).with_keys(KEY).with_tags("TagA")).await {
            Ok(sent) => break sent,
            Err(e) if Instant::now() < deadline => {
                println!("send not yet possible: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => bail!("no send to {TOPIC} within {SETUP_WAIT:?}: {e}"),
        }
    };
    println!("sent {} ({})", sent.offset_msg_id, sent.msg_id);

    // Find it by key.
    b.open_page(base, "#/messages", "messages").await?;
    b.client().find(Locator::Id("key-topic")).await?.send_keys(TOPIC).await?;
    b.client().find(Locator::Id("key-key")).await?.send_keys(KEY).await?;
    b.client().find(Locator::Id("key-search")).await?.click().await?;
    let card = format!(".message[data-msg-id=\"{}\"]", sent.offset_msg_id);
    b.wait_css(&card).await?;
    let body = b.wait_text(&format!("{card} pre.body"), "the body as JSON", |t| t.contains("\"order\": 91")).await?;
    ensure!(body.contains("\"item\": \"book\""), "pretty JSON body: {body}");
    b.screenshot("message-by-key").await?;
    b.client().find(Locator::Css(&format!("{card} button[data-view=\"hex\"]"))).await?.click().await?;
    let hex = b.wait_text(&format!("{card} pre.body"), "the body as hex", |t| t.starts_with("7B 22")).await?;
    ensure!(hex.split(' ').count() == BODY.len(), "one hex pair per body byte: {hex}");
    b.client().find(Locator::Css(&format!("{card} button[data-view=\"text\"]"))).await?.click().await?;
    b.wait_text(&format!("{card} pre.body"), "the body as text", |t| t == BODY).await?;

    // And by its offsetMsgId.
    b.client().find(Locator::Id("id-msgid")).await?.send_keys(&sent.offset_msg_id).await?;
    b.client().find(Locator::Id("id-search")).await?.click().await?;
    b.wait_text("#found-count", "the message found by id", |t| t.contains("1 message(s) found by id")).await?;
    b.wait_css(&card).await?;
    b.screenshot("message-by-id").await?;

    let errors = b.console_errors().await?;
    ensure!(errors.is_empty(), "console errors: {errors:?}");
    producer.shutdown().await;
    Ok(())
}
