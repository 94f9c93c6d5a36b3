//! The shipped deployment stays loadable: every `deploy/*.toml` is a valid NameServer or broker config,
//! the broker replicas describe two Raft groups of three (in each, every replica its own member, addresses
//! agreeing with `brokerIP1:listenPort`), and `docker-compose.yml` starts each config it ships at the
//! address that config advertises, with a NameServer at every address of `namesrvAddr`. The sample `deploy/plain_acl.yml` parses and names an admin account for the
//! replicas.

use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use raftmq_broker::BrokerConfig;
use raftmq_namesrv::NamesrvConfig;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn broker_configs() -> Result<Vec<(String, BrokerConfig)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root().join("deploy"))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if name.starts_with("broker-") && name.ends_with(".toml") {
            let config = BrokerConfig::load(Some(&path), &[]).with_context(|| format!("loading {name}"))?;
            config.validate().with_context(|| format!("validating {name}"))?;
            out.push((name, config));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[test]
fn deploy_configs_describe_two_consistent_groups() -> Result<()> {
    let namesrv = NamesrvConfig::load(Some(Path::new(&root().join("deploy/namesrv.toml"))), &[])?;
    namesrv.validate().context("validating namesrv.toml")?;
    let brokers = broker_configs()?;
    let mut groups: std::collections::BTreeMap<String, Vec<&(String, BrokerConfig)>> = Default::default();
    for b in &brokers {
        groups.entry(b.1.broker_name.clone()).or_default().push(b);
    }
    ensure!(
        groups.keys().map(String::as_str).collect::<Vec<_>>() == ["broker-a", "broker-b"],
        "expected groups broker-a and broker-b, found {:?}",
        brokers.iter().map(|b| &b.0).collect::<Vec<_>>()
    );
    for (group, replicas) in &groups {
        ensure!(replicas.len() == 3, "{group}: expected three replicas");
        let first = &replicas[0].1;
        let mut ids = BTreeSet::new();
        for (name, c) in replicas.iter().map(|r| (&r.0, &r.1)) {
            ensure!(c.raft_peers == first.raft_peers, "{name}: raftPeers differ from {}", replicas[0].0);
            ensure!(c.namesrv_addr == brokers[0].1.namesrv_addr, "{name}: other NameServers");
            let me = c.self_peer().with_context(|| format!("{name}: raftSelfId is not a peer"))?;
            ensure!(
                me.remoting_addr == c.broker_addr(),
                "{name}: peer address {} vs {}",
                me.remoting_addr,
                c.broker_addr()
            );
            ensure!(ids.insert(c.raft_self_id), "{name}: raftSelfId {} used twice", c.raft_self_id);
            ensure!(
                c.cluster_secret_file.as_deref() == Some(Path::new(&namesrv.cluster_secret_file)),
                "{name}: clusterSecretFile differs from the NameServer's {:?}",
                namesrv.cluster_secret_file
            );
            ensure!(!c.insecure_cluster_without_secret, "{name}: a shipped config opts out of the cluster secret");
        }
        ensure!(ids.len() == first.raft_peers.len(), "{group}: every peer has a config");
    }
    ensure!(!namesrv.cluster_secret_file.is_empty(), "namesrv.toml binds {} without a secret", namesrv.bind_address);
    Ok(())
}

#[test]
fn compose_starts_every_shipped_config_at_its_address() -> Result<()> {
    let compose = std::fs::read_to_string(root().join("docker-compose.yml"))?;
    ensure!(compose.contains("/etc/raftmq/namesrv.toml"), "the NameServer config is not used");
    let brokers = broker_configs()?;
    for (name, c) in &brokers {
        ensure!(compose.contains(&format!("/etc/raftmq/{name}")), "{name} is not started by docker-compose.yml");
        let ip = c.broker_ip();
        ensure!(compose.contains(&format!("ipv4_address: {ip} ")), "{name} advertises {ip}, which no service has");
    }
    let namesrvs = &brokers.first().context("no broker config")?.1.namesrv_addr;
    ensure!(namesrvs.split(';').count() == 2, "two NameServers in namesrvAddr: {namesrvs}");
    for addr in namesrvs.split(';') {
        let ip = addr.rsplit_once(':').map(|(h, _)| h).context("namesrvAddr")?;
        ensure!(compose.contains(&format!("ipv4_address: {ip} ")), "no service at namesrvAddr {ip}");
    }
    // No admin port is published: without adminToken the admin API serves its own loopback only.
    ensure!(!compose.lines().any(|l| l.trim_start().starts_with("ports:")), "a port is published");
    // The compose file makes the secret every member reads, and mounts it where the configs look.
    ensure!(compose.contains("secret-init:") && compose.contains("/secrets/cluster.secret"), "no secret-init");
    ensure!(compose.matches("cluster-secret:/secrets:ro").count() == 8, "every member mounts the secret");
    Ok(())
}

#[test]
fn the_sample_acl_file_loads_and_names_an_admin_for_the_replicas() -> Result<()> {
    let text = std::fs::read_to_string(root().join("deploy/plain_acl.yml"))?;
    let acl = raftmq_broker::acl::AclConfig::parse_yaml(&text)?;
    let peers = acl.accounts.get("groupPeers").context("the replicas' account")?;
    ensure!(peers.admin, "innerAccessKey must be an admin account");
    let orders = acl.accounts.get("orderService").context("a service account")?;
    ensure!(!orders.admin && orders.perms.as_ref().is_some_and(|p| p.len() == 3), "{orders:?}");
    Ok(())
}
