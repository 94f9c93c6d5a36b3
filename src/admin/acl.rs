//! Plain ACL administration (RocketMQ 4.9.8's commands): `updateAclConfig`, `deleteAclConfig`,
//! `updateGlobalWhiteAddr` go to each target group's leader, which replicates the edit to every
//! replica's ACL file; `clusterAclConfigVersion` asks every replica, `getAccessConfigSubCommand` the
//! leaders. The account's secret never appears in debug output.

use anyhow::Result;
use clap::ArgGroup;
use clap::Args;
use raftmq_client::Admin;
use raftmq_client::admin::PlainAccessConfig;
use raftmq_common::protocol::RequestCode;
use serde_json::json;

use super::explain::explain;
use super::out::Out;
use super::target::Target;
use super::target::replica_addrs;
use super::target::write_targets;
use crate::namesrv_addr::human_time_ms;
use crate::table::Table;

#[derive(Args)]
pub(super) struct UpdateAclConfigArgs {
    #[command(flatten)]
    target: Target,
    /// The account's access key, more than 6 characters (mqadmin's `-a`; `--accessKey` is the key
    /// that signs this request).
    #[arg(short = 'a', long = "aclAccessKey")]
    account: String,
    /// The account's secret key, more than 6 characters, required on updates too (mqadmin's `-s`).
    #[arg(short = 's', long = "aclSecretKey")]
    account_secret: String,
    /// Peers that need no signature for this account (e.g. `192.168.1.*`).
    #[arg(short = 'w', long = "whiteRemoteAddress")]
    white_remote_address: Option<String>,
    /// Default topic permission: DENY, PUB, SUB or PUB|SUB.
    #[arg(short = 'i', long = "defaultTopicPerm")]
    default_topic_perm: Option<String>,
    /// Default group permission: DENY, PUB, SUB or PUB|SUB.
    #[arg(short = 'u', long = "defaultGroupPerm")]
    default_group_perm: Option<String>,
    /// Topic permissions, `topicA=DENY,topicB=PUB|SUB` (replaces the account's list).
    #[arg(short = 't', long = "topicPerms")]
    topic_perms: Option<String>,
    /// Group permissions, `groupA=DENY,groupB=SUB` (replaces the account's list).
    #[arg(short = 'g', long = "groupPerms")]
    group_perms: Option<String>,
    /// Whether the account may send admin requests (always set, as in Java: default false).
    #[arg(short = 'm', long = "admin", action = clap::ArgAction::Set, default_value_t = false)]
    admin: bool,
}

impl std::fmt::Debug for UpdateAclConfigArgs {
    // The account's secret stays out of any debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpdateAclConfigArgs")
            .field("target", &self.target)
            .field("account", &self.account)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Args)]
pub(super) struct DeleteAclConfigArgs {
    #[command(flatten)]
    target: Target,
    /// The account's access key (mqadmin's `-a`; `--accessKey` is the key that signs this request).
    #[arg(short = 'a', long = "aclAccessKey")]
    account: String,
}

#[derive(Debug, Args)]
pub(super) struct UpdateGlobalWhiteAddrArgs {
    #[command(flatten)]
    target: Target,
    /// The new global white addresses, comma-separated (they replace the list).
    #[arg(short = 'g', long = "globalWhiteRemoteAddresses")]
    addresses: String,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("acl_target").required(true).args(["cluster", "broker"])))]
pub(super) struct ClusterAclConfigVersionArgs {
    /// Cluster name: every replica of every group of the cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// One broker address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
}

/// Sends one ACL edit to each target group's leader (which replicates it to the group), printing
/// `line` (its `{addr}` filled in) per group; the `{brokerName, addr}` of each, for `--json`.
async fn acl_edit_each(
    admin: &Admin,
    out: Out,
    target: &Target,
    op: &'static str,
    code: RequestCode,
    line: &str,
    edit: impl AsyncFn(&str) -> raftmq_client::Result<()>,
) -> Result<Vec<serde_json::Value>> {
    let mut written = Vec::new();
    for (name, addr) in write_targets(admin, target).await? {
        edit(&addr).await.map_err(|e| explain(op, code, e))?;
        if !out.json {
            println!("{}", line.replace("{addr}", &addr));
        }
        written.push(json!({"brokerName": name, "addr": addr}));
    }
    Ok(written)
}

/// Java's `UpdateAccessConfigSubCommand`: to each target group's leader, which replicates it.
pub(super) async fn update_acl_config(admin: &Admin, out: Out, a: UpdateAclConfigArgs) -> Result<()> {
    let split = |list: &Option<String>| list.as_deref().map(raftmq_common::protocol::header::acl::split_list);
    let config = PlainAccessConfig {
        access_key: a.account.clone(),
        secret_key: a.account_secret.clone(),
        white_remote_address: a.white_remote_address.clone(),
        admin: a.admin,
        default_topic_perm: a.default_topic_perm.clone(),
        default_group_perm: a.default_group_perm.clone(),
        topic_perms: split(&a.topic_perms),
        group_perms: split(&a.group_perms),
    };
    let (op, code) = ("updateAclConfig", RequestCode::UpdateAndCreateAclConfig);
    let line = "create or update plain access config to {addr} success.";
    let written =
        acl_edit_each(admin, out, &a.target, op, code, line, async |addr| admin.update_acl_config(addr, &config).await)
            .await?;
    if out.json {
        out.json(&json!({"accessKey": a.account, "admin": a.admin, "written": written}));
    }
    Ok(())
}

/// Java's `ClusterAclConfigVersionListSubCommand`, on every replica (Java asks masters only): a
/// replica still behind its group's last edit shows an older counter.
pub(super) async fn cluster_acl_config_version(admin: &Admin, out: Out, a: ClusterAclConfigVersionArgs) -> Result<()> {
    let addrs = replica_addrs(admin, "clusterAclConfigVersion", a.broker.as_deref(), a.cluster.as_deref()).await?;
    let mut rows = Vec::new();
    let mut table = Table::new(&[
        "#Cluster Name",
        "#Broker Name",
        "#Broker Addr",
        "#AclFilePath",
        "#AclConfigVersionNum",
        "#AclLastUpdateTime",
    ]);
    for addr in &addrs {
        let info = admin
            .acl_version(addr)
            .await
            .map_err(|e| explain("clusterAclConfigVersion", RequestCode::GetBrokerClusterAclInfo, e))?;
        for (path, version) in &info.files {
            table.row(vec![
                info.cluster_name.clone(),
                info.broker_name.clone(),
                info.broker_addr.clone(),
                path.clone(),
                version.counter.to_string(),
                human_time_ms(version.timestamp),
            ]);
        }
        rows.push(json!({
            "clusterName": info.cluster_name,
            "brokerName": info.broker_name,
            "brokerAddr": info.broker_addr,
            "files": info.files.iter().map(|(p, v)| (p.clone(), json!({"counter": v.counter, "timestamp": v.timestamp}))).collect::<serde_json::Map<_, _>>(),
        }));
    }
    if out.json {
        out.json(&json!(rows));
    } else {
        out.table(&table);
    }
    Ok(())
}

/// Java's `GetAccessConfigSubCommand`: for `-b` that broker, for `-c` each group's leader, the
/// global white addresses and every account field by field (Java's layout; absent fields empty).
pub(super) async fn get_access_config(admin: &Admin, out: Out, a: ClusterAclConfigVersionArgs) -> Result<()> {
    let cmd = "getAccessConfigSubCommand";
    let addrs: Vec<String> = match &a.broker {
        Some(b) => vec![b.clone()],
        None => write_targets(admin, &Target { cluster: a.cluster.clone(), broker: None })
            .await?
            .into_iter()
            .map(|(_, addr)| addr)
            .collect(),
    };
    let mut docs = Vec::new();
    for addr in &addrs {
        let config =
            admin.acl_config(addr).await.map_err(|e| explain(cmd, RequestCode::GetBrokerClusterAclConfig, e))?;
        if out.json {
            docs.push(json!({"brokerAddr": addr, "globalWhiteAddrs": config.global_white_addrs,
                "accounts": config.plain_access_configs.iter().map(|c| json!({
                    "accessKey": c.access_key, "secretKey": c.secret_key, "whiteRemoteAddress": c.white_remote_address,
                    "admin": c.admin, "defaultTopicPerm": c.default_topic_perm, "defaultGroupPerm": c.default_group_perm,
                    "topicPerms": c.topic_perms, "groupPerms": c.group_perms})).collect::<Vec<_>>()}));
            continue;
        }
        if addrs.len() > 1 {
            println!("{addr}:");
        }
        println!();
        println!("{:<20}: [{}]", "globalWhiteRemoteAddresses", config.global_white_addrs.join(", "));
        println!();
        println!("accounts:");
        let field = |name: &str, value: &str| println!("  {name:<18}: {value}");
        for c in &config.plain_access_configs {
            field("accessKey", &c.access_key);
            field("secretKey", &c.secret_key);
            field("whiteRemoteAddress", c.white_remote_address.as_deref().unwrap_or(""));
            field("admin", &c.admin.to_string());
            field("defaultTopicPerm", c.default_topic_perm.as_deref().unwrap_or(""));
            field("defaultGroupPerm", c.default_group_perm.as_deref().unwrap_or(""));
            field("topicPerms", &format!("[{}]", c.topic_perms.join(", ")));
            field("groupPerms", &format!("[{}]", c.group_perms.join(", ")));
            println!();
        }
    }
    if out.json {
        out.json(&json!(docs));
    }
    Ok(())
}

/// Java's `DeleteAccessConfigSubCommand`: from each target group's leader, which replicates it.
pub(super) async fn delete_acl_config(admin: &Admin, out: Out, a: DeleteAclConfigArgs) -> Result<()> {
    let (op, code) = ("deleteAclConfig", RequestCode::DeleteAclConfig);
    let line = "delete plain access config account from {addr} success.";
    let written = acl_edit_each(admin, out, &a.target, op, code, line, async |addr| {
        admin.delete_acl_config(addr, &a.account).await
    })
    .await?;
    if out.json {
        out.json(&json!({"accessKey": a.account, "written": written}));
    }
    Ok(())
}

/// Java's `UpdateGlobalWhiteAddrSubCommand`: on each target group's leader, which replicates it.
pub(super) async fn update_global_white_addr(admin: &Admin, out: Out, a: UpdateGlobalWhiteAddrArgs) -> Result<()> {
    let addresses = raftmq_common::protocol::header::acl::split_list(&a.addresses);
    let (op, code) = ("updateGlobalWhiteAddr", RequestCode::UpdateGlobalWhiteAddrsConfig);
    let line = "update global white remote addresses to {addr} success.";
    let written = acl_edit_each(admin, out, &a.target, op, code, line, async |addr| {
        admin.update_global_white_addrs(addr, &addresses).await
    })
    .await?;
    if out.json {
        out.json(&json!({"globalWhiteRemoteAddresses": addresses, "written": written}));
    }
    Ok(())
}
