//! A config update sent to each of several servers on its own (brokers, NameServers): one line or JSON
//! entry per server; every server is tried and the command fails if any refused.

use std::collections::BTreeMap;

use anyhow::Result;
use anyhow::bail;
use serde_json::json;

use super::out::Out;

/// The words of a config update's lines: `update {noun} config {ok}{addr}` (Java's), the command's
/// name and what the servers are called when some refused.
pub(super) struct UpdateLines {
    pub(super) op: &'static str,
    pub(super) noun: &'static str,
    pub(super) ok: &'static str,
    pub(super) servers: &'static str,
}

/// Sends `key=value` to each of `addrs` on its own, one line (or a JSON entry) per server; every
/// server is tried and the command fails if any refused.
pub(super) async fn update_config_each(
    out: Out,
    addrs: &[String],
    lines: UpdateLines,
    (key, value): (&str, &str),
    update: impl AsyncFn(&str, &BTreeMap<String, String>) -> raftmq_client::Result<()>,
) -> Result<()> {
    let updates = BTreeMap::from([(key.to_owned(), value.to_owned())]);
    let mut results = BTreeMap::new();
    let mut failed = 0;
    for addr in addrs {
        let result = update(addr, &updates).await;
        if !out.json {
            match &result {
                Ok(()) => println!("update {} config {}{addr}", lines.noun, lines.ok),
                Err(e) => println!("update {} config failed, {addr}: {e}", lines.noun),
            }
        }
        failed += usize::from(result.is_err());
        results.insert(addr.clone(), result.map_or_else(|e| json!({"error": e.to_string()}), |()| json!("OK")));
    }
    if out.json {
        out.json(&json!(results));
    }
    if failed > 0 {
        bail!("{}: {failed} of {} {} refused {key}={value}", lines.op, addrs.len(), lines.servers);
    }
    Ok(())
}
