//! Test harness for the broker end-to-end tests: a NameServer and a Raft group of in-process
//! `Broker`s over real loopback sockets, plus raw PULL_MESSAGE / offset calls (the consumer SDK is
//! written separately; these tests speak the wire directly).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use raftmq_broker::Broker;
use raftmq_broker::BrokerConfig;
use raftmq_broker::config::broker_config::RaftPeer;
use raftmq_common::message::MessageExt;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetResponseHeader;
use raftmq_common::protocol::header::offset::UpdateConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageResponseHeader;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use raftmq_common::remoting::RemotingClient;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;

pub const BROKER_NAME: &str = "broker-a";
pub const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a new group may take to form (every replica heard from the others).
const WAIT_FORMED: Duration = Duration::from_secs(30);

pub use super::ports::free_port;

/// The configs of an `n`-replica group (ids 1..=n) on free loopback ports, stores under `dir`, small
/// CommitLog segments and IndexFiles, ephemeral admin HTTP ports.
pub fn replica_configs(dir: &std::path::Path, namesrv_addr: &str, n: u64) -> Result<BTreeMap<u64, BrokerConfig>> {
    let peers: Vec<RaftPeer> = (1..=n)
        .map(|id| RaftPeer {
            id,
            remoting_addr: format!("127.0.0.1:{}", free_port()),
            raft_addr: format!("127.0.0.1:{}", free_port()),
        })
        .collect();
    let mut configs = BTreeMap::new();
    for peer in &peers {
        let port: u16 = peer.remoting_addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).context("port")?;
        let config = BrokerConfig {
            broker_name: BROKER_NAME.into(),
            broker_ip1: Some("127.0.0.1".into()),
            listen_port: port,
            namesrv_addr: namesrv_addr.to_owned(),
            store_path_root_dir: dir.join(format!("node-{}", peer.id)),
            mapped_file_size_commit_log: 64 << 20,
            // Small index files: the defaults make a 420 MB (sparse) file per replica.
            max_hash_slot_num: 4_096,
            max_index_num: 16_384,
            raft_self_id: peer.id,
            raft_peers: peers.clone(),
            // Ephemeral admin HTTP ports: replicas of parallel tests never collide on 8080.
            admin_port: 0,
            // Checkpoints within a test's lifetime: every restart here starts from one.
            raft_checkpoint_interval_ms: 500,
            ..BrokerConfig::default()
        };
        configs.insert(peer.id, config);
    }
    Ok(configs)
}

/// A NameServer and a broker group.
pub struct Group {
    pub namesrv: NameServer,
    pub namesrv_addr: String,
    pub configs: BTreeMap<u64, BrokerConfig>,
    pub brokers: BTreeMap<u64, Broker>,
    pub dir: tempfile::TempDir,
}

impl Group {
    /// Starts a NameServer and `n` replicas (ids 1..=n) of one group.
    pub async fn start(n: u64) -> Result<Group> {
        Self::start_with(n, |_| {}).await
    }

    /// [`Group::start`] with every replica's config adjusted by `customize` first.
    pub async fn start_with(n: u64, customize: impl FnMut(&mut BrokerConfig)) -> Result<Group> {
        Self::start_custom(n, |_| {}, customize).await
    }

    /// [`Group::start_with`], the NameServer's config adjusted by `namesrv_tweak` first.
    pub async fn start_custom(
        n: u64,
        namesrv_tweak: impl FnOnce(&mut NamesrvConfig),
        customize: impl FnMut(&mut BrokerConfig),
    ) -> Result<Group> {
        let mut namesrv_config = NamesrvConfig {
            listen_port: 0,
            bind_address: "127.0.0.1".into(),
            kv_config_path: String::new(),
            ..NamesrvConfig::default()
        };
        namesrv_tweak(&mut namesrv_config);
        let namesrv = NameServer::start(namesrv_config).await?;
        let namesrv_addr = namesrv.local_addr().to_string();
        let dir = tempfile::tempdir()?;
        let mut configs = replica_configs(dir.path(), &namesrv_addr, n)?;
        configs.values_mut().for_each(customize);
        let mut group = Group { namesrv, namesrv_addr, configs, brokers: BTreeMap::new(), dir };
        let starts = group.configs.values().cloned().map(Broker::start);
        for broker in futures::future::join_all(starts).await {
            let broker = broker?;
            group.brokers.insert(broker.node_id(), broker);
        }
        group.wait_formed(WAIT_FORMED).await?;
        Ok(group)
    }

    /// Waits until no replica's vote guard restricts it any more: a new group is formed only once
    /// every replica has heard from enough of the others (`raft::vote_guard`), and a test that
    /// stops one before then leaves the others waiting for it, as an operator would.
    pub async fn wait_formed(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let guarded: Vec<(u64, String)> =
                self.brokers.iter().filter_map(|(id, b)| b.raft().vote_guard().map(|g| (*id, g))).collect();
            if guarded.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the group did not form within {within:?}: {guarded:?}");
            }
            // The guard is replica-internal state with no subscription API: poll it.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Remoting address of replica `id`.
    pub fn addr(&self, id: u64) -> String {
        self.configs[&id].broker_addr()
    }

    /// `127.0.0.1:<bound admin HTTP port>` of running replica `id`.
    pub fn admin_addr(&self, id: u64) -> Result<String> {
        let broker = self.brokers.get(&id).with_context(|| format!("replica {id} is not running"))?;
        let addr = broker.admin_addr().context("admin HTTP is off")?;
        Ok(format!("127.0.0.1:{}", addr.port()))
    }

    /// Waits until a running replica is a ready leader; its id.
    pub async fn wait_leader(&self, within: Duration) -> Result<u64> {
        let deadline = Instant::now() + within;
        loop {
            if let Some((id, _)) = self.brokers.iter().find(|(_, b)| b.is_ready_leader()) {
                return Ok(*id);
            }
            if Instant::now() > deadline {
                bail!("no ready leader within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops replica `id` (graceful shutdown).
    pub async fn stop(&mut self, id: u64) {
        if let Some(b) = self.brokers.remove(&id) {
            b.shutdown().await;
        }
    }

    /// Stops everything.
    pub async fn shutdown(mut self) {
        let ids: Vec<u64> = self.brokers.keys().copied().collect();
        for id in ids {
            self.stop(id).await;
        }
        self.namesrv.shutdown().await;
    }
}

/// One PULL_MESSAGE; the response code, header and decoded messages.
pub struct Pulled {
    pub code: ResponseCode,
    pub remark: Option<String>,
    pub header: Option<PullMessageResponseHeader>,
    pub messages: Vec<MessageExt>,
}

/// PULL_MESSAGE with the subscription in the request (`*` unless `sub` is given).
#[allow(clippy::too_many_arguments)]
pub async fn pull(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max: i32,
    suspend_ms: Option<i64>,
) -> Result<Pulled> {
    let sys_flag = pull_sys_flag::build(false, suspend_ms.is_some(), true, false, false);
    let header = PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: max,
        sys_flag,
        commit_offset: 0,
        suspend_timeout_millis: suspend_ms.unwrap_or(0),
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        bname: None,
    };
    let request = RemotingCommand::request_with_header(RequestCode::PullMessage, &header);
    let timeout = RPC_TIMEOUT + Duration::from_millis(u64::try_from(suspend_ms.unwrap_or(0)).unwrap_or(0));
    let response = client.invoke(addr, request, timeout).await?;
    let code = response.response_code();
    let header = response.decode_header::<PullMessageResponseHeader>().ok();
    let messages = if code == ResponseCode::Success {
        decode_all(&response.body, DecodeOptions::verify_crc())?
    } else {
        Vec::new()
    };
    Ok(Pulled { code, remark: response.remark, header, messages })
}

/// [`pull`] as a RocketMQ consumer does it: PULL_RETRY_IMMEDIATELY (a replica that cannot yet
/// decide an out-of-range offset, e.g. a leader whose apply runs behind its commit) is asked again
/// until it answers otherwise or `wait` runs out.
#[allow(clippy::too_many_arguments)]
pub async fn pull_settled(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max: i32,
    wait: Duration,
) -> Result<Pulled> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let p = pull(client, addr, group, topic, queue_id, offset, max, None).await?;
        if p.code != ResponseCode::PullRetryImmediately || tokio::time::Instant::now() >= deadline {
            return Ok(p);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a whole queue from `offset` to its end.
pub async fn drain_queue(client: &RemotingClient, addr: &str, topic: &str, queue_id: i32) -> Result<Vec<MessageExt>> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let p = pull(client, addr, "drain_group", topic, queue_id, offset, 32, None).await?;
        match p.code {
            ResponseCode::Success => {
                out.extend(p.messages);
                offset = p.header.context("header")?.next_begin_offset;
            }
            ResponseCode::PullNotFound => return Ok(out),
            ResponseCode::PullRetryImmediately => {}
            other => bail!("pull {topic}:{queue_id}@{offset} answered {other:?}: {:?}", p.remark),
        }
    }
}

/// UPDATE_CONSUMER_OFFSET (two-way, so the commit is replicated when it returns).
pub async fn update_offset(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> Result<RemotingCommand> {
    let header = UpdateConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        commit_offset: offset,
        bname: None,
    };
    let request = RemotingCommand::request_with_header(RequestCode::UpdateConsumerOffset, &header);
    Ok(client.invoke(addr, request, RPC_TIMEOUT).await?)
}

/// QUERY_CONSUMER_OFFSET; `None` for QUERY_NOT_FOUND.
pub async fn query_offset(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> Result<Option<i64>> {
    let header = QueryConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        set_zero_if_not_found: None,
        bname: None,
    };
    let request = RemotingCommand::request_with_header(RequestCode::QueryConsumerOffset, &header);
    let response = client.invoke(addr, request, RPC_TIMEOUT).await?;
    match response.response_code() {
        ResponseCode::Success => Ok(Some(response.decode_header::<QueryConsumerOffsetResponseHeader>()?.offset)),
        ResponseCode::QueryNotFound => Ok(None),
        other => bail!("QUERY_CONSUMER_OFFSET answered {other:?}: {:?}", response.remark),
    }
}
