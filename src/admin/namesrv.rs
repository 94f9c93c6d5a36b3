//! NameServer state: `getNamesrvConfig`, `updateNamesrvConfig`, `wipeWritePerm`, `addWritePerm`,
//! `updateKvConfig`, `deleteKvConfig`. NameServers share nothing, so every one is told on its own.

use std::collections::BTreeMap;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::protocol::RequestCode;
use serde_json::json;

use super::config_update::UpdateLines;
use super::config_update::update_config_each;
use super::explain::explain;
use super::out::Out;
use super::out::done;
use super::render::print_key_values;

#[derive(Debug, Args)]
pub(super) struct UpdateNamesrvConfigArgs {
    /// The config key (e.g. `enableAllTopicList`).
    #[arg(short = 'k', long = "key")]
    key: String,
    /// The new value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

#[derive(Debug, Args)]
pub(super) struct BrokerNameArgs {
    /// The broker group's name (`brokerName`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
}

#[derive(Debug, Args)]
pub(super) struct KvConfigArgs {
    /// Namespace (`ORDER_TOPIC_CONFIG`, ...).
    #[arg(short = 's', long = "namespace")]
    namespace: String,
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// Value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

#[derive(Debug, Args)]
pub(super) struct KvKeyArgs {
    /// Namespace.
    #[arg(short = 's', long = "namespace")]
    namespace: String,
    /// Key.
    #[arg(short = 'k', long = "key")]
    key: String,
}

/// Java's `GetNamesrvConfigCommand`: each NameServer's config; one that cannot answer fails the
/// command, after the others are shown.
pub(super) async fn namesrv_config(admin: &Admin, out: Out) -> Result<()> {
    let addrs = admin.namesrv_addrs().to_vec();
    let mut all = BTreeMap::new();
    let mut failed = Vec::new();
    for addr in &addrs {
        match admin.namesrv_config(addr).await {
            Ok(config) => {
                all.insert(addr.clone(), config);
            }
            Err(e) => failed.push(format!("{addr}: {}", explain("getNamesrvConfig", RequestCode::GetNamesrvConfig, e))),
        }
    }
    let answered: Vec<String> = addrs.iter().filter(|a| all.contains_key(*a)).cloned().collect();
    print_key_values(out, &answered, &all);
    if !failed.is_empty() {
        bail!("getNamesrvConfig: {}", failed.join("; "));
    }
    Ok(())
}

/// Java's `UpdateNamesrvConfigCommand`: every NameServer is told on its own (they share nothing);
/// every one is tried and the command fails if any refused.
pub(super) async fn update_namesrv_config(admin: &Admin, out: Out, a: UpdateNamesrvConfigArgs) -> Result<()> {
    let addrs = admin.namesrv_addrs().to_vec();
    let lines = UpdateLines { op: "updateNamesrvConfig", noun: "name server", ok: "success!", servers: "NameServers" };
    update_config_each(out, &addrs, lines, (&a.key, &a.value), async |addr, updates| {
        admin.update_namesrv_config(addr, updates).await
    })
    .await
}

/// Java's `WipeWritePermSubCommand` / `AddWritePermSubCommand`: every NameServer is told on its own
/// (they share nothing); one line per NameServer with the number of topics changed.
pub(super) async fn write_perm(admin: &Admin, out: Out, a: BrokerNameArgs, add: bool) -> Result<()> {
    let broker_name = a.broker_name.as_str();
    let (verb, command) = if add { ("add", "addWritePerm") } else { ("wipe", "wipeWritePerm") };
    let mut results = BTreeMap::new();
    let mut failed = 0;
    for namesrv in admin.namesrv_addrs() {
        let result = if add {
            admin.add_write_perm(namesrv, broker_name).await
        } else {
            admin.wipe_write_perm(namesrv, broker_name).await
        };
        let code = if add { RequestCode::AddWritePermOfBroker } else { RequestCode::WipeWritePermOfBroker };
        let result = result.map_err(|e| explain(command, code, e));
        if !out.json {
            match &result {
                Ok(n) => println!("{verb} write perm of broker[{broker_name}] in name server[{namesrv}] OK, {n}"),
                Err(e) => {
                    println!("{verb} write perm of broker[{broker_name}] in name server[{namesrv}] Failed: {e:#}")
                }
            }
        }
        failed += usize::from(result.is_err());
        results.insert(namesrv.clone(), result.map_or_else(|e| json!({"error": format!("{e:#}")}), |n| json!(n)));
    }
    if out.json {
        out.json(&json!(results));
    }
    if failed > 0 {
        bail!("{command}: {failed} of {} NameServers failed", admin.namesrv_addrs().len());
    }
    Ok(())
}

/// Java's `UpdateKvConfigCommand`: the KV config is set in every NameServer.
pub(super) async fn update_kv_config(admin: &Admin, out: Out, a: KvConfigArgs) -> Result<()> {
    admin.put_kv_config(&a.namespace, &a.key, &a.value).await.context("updateKvConfig")?;
    done(out, "create or update kv config to namespace success.", json!({"namespace": a.namespace, "key": a.key}))
}

/// Java's `DeleteKvConfigCommand`: the KV config is deleted from every NameServer.
pub(super) async fn delete_kv_config(admin: &Admin, out: Out, a: KvKeyArgs) -> Result<()> {
    admin.delete_kv_config(&a.namespace, &a.key).await.context("deleteKvConfig")?;
    done(out, "delete kv config from namespace success.", json!({"namespace": a.namespace, "key": a.key}))
}
