//! The plain ACL's administration requests (RocketMQ 4.9.8's `mqadmin updateAclConfig`,
//! `deleteAclConfig`, `updateGlobalWhiteAddr`, `clusterAclConfigVersion`), replicated through Raft.
//!
//! | code | what |
//! |---|---|
//! | UPDATE_AND_CREATE_ACL_CONFIG (50) | create or update an account (Java's merge rules, [`AclSource::upsert`]) |
//! | DELETE_ACL_CONFIG (51) | remove an account (an absent one is already removed: success) |
//! | UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) | replace `globalWhiteRemoteAddresses` |
//! | GET_BROKER_CLUSTER_ACL_INFO (52) | this replica's ACL file version (`dataVersion`) |
//! | GET_BROKER_CLUSTER_ACL_CONFIG (54) | this replica's file in force: white addresses, accounts with secret keys masked (an admin account only) |
//!
//! An edit runs on the leader (a follower relays it there once, signature intact): it takes the
//! group's last replicated file (before the first edit, the leader's own), applies the change,
//! counts the version one past it, and proposes the whole new file as one ACL_DOCUMENT entry,
//! applied only if the group's last edit is still the one it was built on. Every replica applies it by putting it in force and
//! writing it to its `aclFile` ([`crate::acl::Acl::install`]); the leader does so before it answers,
//! so the account works as soon as the call returns. Java changes one broker's file per call, which is
//! why `mqadmin -c` sends it to every broker; here any one replica's call reaches the whole group,
//! and the calls to the others repeat it harmlessly (a second delete of one account succeeds).
//!
//! Invariants:
//! - Edits on one leader are serialised ([`crate::acl::Acl::lock_edits`]), and an edit is applied
//!   only on top of the edit it was built from (a compare-and-set every replica decides alike), so
//!   none is lost across a leader change and versions only grow.
//! - An edit that would write a file this broker cannot read back is refused before it is proposed.
//! - Stricter than Java: the three edit codes and the read of the whole file (54, secret keys masked)
//!   need a signed `admin` account whatever the peer's address (`crate::acl::ADMIN_CODES`,
//!   `ACL_EDIT_CODES`); Java lets any signed account create accounts. Without `aclEnable` they are refused with a
//!   remark saying so, where Java fails on a null validator.

use std::sync::Arc;

use raftmq_common::limits::ACL_FILE_SIZE_MAX_BYTES;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::header::acl::CreateAccessConfigRequestHeader;
use raftmq_common::protocol::header::acl::DeleteAccessConfigRequestHeader;
use raftmq_common::protocol::header::acl::GetBrokerAclConfigResponseHeader;
use raftmq_common::protocol::header::acl::UpdateGlobalWhiteAddrsConfigRequestHeader;
use raftmq_common::protocol::header::acl::split_list;
use raftmq_common::remoting::RemotingClient;

use crate::acl::AccountEdit;
use crate::acl::Acl;
use crate::acl::AclConfig;
use crate::acl::AclDocument;
use crate::acl::AclSource;
use crate::acl::AclVersion;
use crate::config::broker_config::BrokerConfig;
use crate::config::broker_config::SECRET_MASK;
use crate::processors::client_manage::forward;
use crate::processors::refusal::refuse;
use crate::services::replica::Replica;
use crate::services::replica::WriteError;
use crate::state::entry::BrokerCommand;
use crate::state::store::MessageStore;
use crate::state::store::now_ms;

/// The remark of every ACL administration request to a broker without `aclEnable`.
pub const ACL_DISABLED_REMARK: &str = "the plain ACL is not enabled on this broker (aclEnable = false)";

fn header<H: raftmq_common::protocol::header::CommandHeader>(
    request: &RemotingCommand,
    failed: ResponseCode,
) -> Result<H, RemotingCommand> {
    request.decode_header().map_err(|e| refuse(failed, format!("the request header is invalid: {e}")))
}

/// What the ACL administration requests use: the plain ACL, the replica's leader view and proposals,
/// the replicated ACL document, and the relay to the leader. Built once by the router.
#[derive(Debug)]
pub struct AclHandles {
    /// The plain ACL (`aclEnable`); without it every ACL request is refused.
    pub acl: Option<Arc<Acl>>,
    /// The config the broker booted with (names, addresses).
    pub config: Arc<BrokerConfig>,
    /// Leader view and proposals.
    pub replica: Arc<Replica>,
    /// The replicated ACL document.
    pub store: Arc<MessageStore>,
    /// Unsigned client relaying a follower's request to the leader.
    pub forwarder: RemotingClient,
}

fn acl(ctx: &AclHandles, failed: ResponseCode) -> Result<&Arc<Acl>, RemotingCommand> {
    ctx.acl.as_ref().ok_or_else(|| refuse(failed, ACL_DISABLED_REMARK))
}

/// UPDATE_AND_CREATE_ACL_CONFIG.
pub async fn update_and_create_acl_config(
    ctx: &AclHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let failed = ResponseCode::UPDATE_AND_CREATE_ACL_CONFIG_FAILED;
    let h: CreateAccessConfigRequestHeader = header(request, failed)?;
    let edit = AccountEdit {
        access_key: h.access_key,
        secret_key: h.secret_key,
        white_remote_address: h.white_remote_address,
        admin: h.admin.unwrap_or(false),
        default_topic_perm: h.default_topic_perm,
        default_group_perm: h.default_group_perm,
        topic_perms: h.topic_perms.as_deref().map(split_list),
        group_perms: h.group_perms.as_deref().map(split_list),
    };
    edit_acl(ctx, request, failed, |source| source.upsert(&edit).map(Some).map_err(|e| e.0)).await
}

/// DELETE_ACL_CONFIG.
pub async fn delete_acl_config(
    ctx: &AclHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let failed = ResponseCode::DELETE_ACL_CONFIG_FAILED;
    let h: DeleteAccessConfigRequestHeader = header(request, failed)?;
    if h.access_key.is_empty() {
        return Err(refuse(failed, "accessKey is empty"));
    }
    edit_acl(ctx, request, failed, |source| Ok(source.delete(&h.access_key))).await
}

/// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG.
pub async fn update_global_white_addrs_config(
    ctx: &AclHandles,
    request: &RemotingCommand,
) -> Result<RemotingCommand, RemotingCommand> {
    let failed = ResponseCode::UpdateGlobalWhiteAddrsConfigFailed;
    let h: UpdateGlobalWhiteAddrsConfigRequestHeader = header(request, failed)?;
    let file = acl(ctx, failed)?.path().to_owned();
    if let Some(asked) = h.acl_file_full_path.as_deref().filter(|p| !p.is_empty())
        && std::path::Path::new(asked) != file
    {
        return Err(refuse(failed, format!("this broker has one ACL file, {}; not {asked}", file.display())));
    }
    let addresses = split_list(&h.global_white_addrs);
    edit_acl(ctx, request, failed, |source| source.with_global_white(addresses).map(Some).map_err(|e| e.0)).await
}

/// GET_BROKER_CLUSTER_ACL_INFO: the version of the ACL file in force on this replica.
pub fn broker_cluster_acl_info(ctx: &AclHandles) -> Result<RemotingCommand, RemotingCommand> {
    let acl = acl(ctx, ResponseCode::SystemError)?;
    let version = acl.current().source.version.unwrap_or_default();
    let path = acl.path().display().to_string();
    let all = serde_json::json!({ path: { "counter": version.counter, "timestamp": version.timestamp } });
    Ok(RemotingCommand::success().with_header(&GetBrokerAclConfigResponseHeader {
        version: version.to_json(),
        all_acl_file_version: Some(all.to_string()),
        broker_name: ctx.config.broker_name.clone(),
        broker_addr: ctx.config.broker_addr(),
        cluster_name: ctx.config.broker_cluster_name.clone(),
    }))
}

/// GET_BROKER_CLUSTER_ACL_CONFIG (`mqadmin getAccessConfigSubCommand`, the dashboard's ACL page):
/// the file in force on this replica, every account with its secret key masked (Java sends the
/// secrets; a signed request without a timestamp can be replayed by whoever captured it, so a
/// secret never travels in an answer). Secrets are set with UPDATE_ACL_CONFIG, never read back.
pub fn broker_cluster_acl_config(ctx: &AclHandles) -> Result<RemotingCommand, RemotingCommand> {
    let acl = acl(ctx, ResponseCode::SystemError)?;
    let mut body = acl.current().source.to_response_body();
    for account in &mut body.plain_access_configs {
        account.secret_key = SECRET_MASK.to_owned();
    }
    let encoded = body.encode().map_err(|e| refuse(ResponseCode::SystemError, e.to_string()))?;
    Ok(RemotingCommand::success().with_body(encoded))
}

/// One edit: relayed to the leader by a follower; on the leader, `change` applied to the file in
/// force (`Ok(None)`: nothing to change), replicated, and installed here before the answer.
async fn edit_acl(
    ctx: &AclHandles,
    request: &RemotingCommand,
    failed: ResponseCode,
    change: impl FnOnce(&AclSource) -> Result<Option<AclSource>, String>,
) -> Result<RemotingCommand, RemotingCommand> {
    let acl = acl(ctx, failed)?;
    if ctx.replica.ready_term().is_none() {
        return match ctx.replica.leader_addr() {
            Some(leader) if leader != ctx.config.broker_addr() => {
                forward(&ctx.forwarder, &ctx.replica, &ctx.config.broker_name, &leader, request).await
            }
            leader_addr => Err(WriteError::NotLeader { leader_addr }.to_response(&ctx.config.broker_name)),
        };
    }
    let _edits = acl.lock_edits().await;
    if ctx.replica.ready_term().is_none() {
        // Leadership moved while this edit waited for the one before it.
        let leader_addr = ctx.replica.leader_addr();
        return Err(WriteError::NotLeader { leader_addr }.to_response(&ctx.config.broker_name));
    }
    // The group's last edit is the base, not this replica's file: every replica then ends with the
    // same file (a hand edit here lasts until the next edit over the wire). Before the first one,
    // the leader's file is the base.
    let replicated = ctx.store.metadata().acl.clone();
    // The group's last edit in force here before anything is answered (the follower task may not
    // have installed it yet): an edit with nothing to change then answers for what is enforced.
    if let Some(doc) = &replicated {
        install(acl, doc).await;
    }
    let base = match &replicated {
        Some(doc) => AclConfig::parse_yaml(&doc.yaml).map_err(|e| refuse(failed, e.0))?.source,
        None => acl.current().source.clone(),
    };
    let Some(mut next) = change(&base).map_err(|reason| refuse(failed, reason))? else {
        return Ok(RemotingCommand::success());
    };
    let based_on = replicated.as_ref().map(|d| d.version);
    let last = based_on.or(base.version).unwrap_or_default();
    let version = AclVersion { counter: last.counter.saturating_add(1), timestamp: now_ms() as i64 };
    next.version = Some(version);
    let yaml = next.to_yaml();
    if yaml.len() as u64 > ACL_FILE_SIZE_MAX_BYTES {
        let remark = format!("the ACL file would be {} bytes, more than {ACL_FILE_SIZE_MAX_BYTES}", yaml.len());
        return Err(refuse(failed, remark));
    }
    AclConfig::parse_yaml(&yaml).map_err(|e| refuse(failed, e.0))?;
    let doc = Arc::new(AclDocument { version, yaml });
    let command = BrokerCommand::AclDocument { based_on, document: (*doc).clone() };
    match ctx.replica.propose(&command).await {
        Ok(()) => {}
        // The compare-and-set lost (another leader's edit landed first): the caller retries.
        Err(WriteError::Rejected(why)) => return Err(refuse(failed, why)),
        Err(e) => return Err(e.to_response(&ctx.config.broker_name)),
    }
    install(acl, &doc).await;
    Ok(RemotingCommand::success())
}

/// Puts `doc` in force and in the file (blocking I/O off the runtime); a failure is logged: the
/// config is in force anyway, and the write is retried when the entry is applied again.
pub async fn install(acl: &Arc<Acl>, doc: &Arc<AclDocument>) {
    let (acl, doc) = (Arc::clone(acl), Arc::clone(doc));
    match tokio::task::spawn_blocking(move || acl.install(&doc)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "a replicated plain ACL edit could not be written to the ACL file"),
        Err(e) => tracing::error!(error = %e, "the plain ACL install task failed"),
    }
}

/// Puts every replicated ACL edit in force on this replica as it is applied, until `cancel`. It
/// starts once the log this replica booted with (`boot_log_end`) is applied: the replay of older
/// edits after a restart then installs only the group's last one.
pub async fn follow_replicated_edits(
    acl: Arc<Acl>,
    mut documents: tokio::sync::watch::Receiver<Option<Arc<AclDocument>>>,
    mut applied: tokio::sync::watch::Receiver<crate::state::store::AppliedPosition>,
    boot_log_end: u64,
    node: Arc<raftmq_raft::RaftNode>,
    cancel: tokio_util::sync::CancellationToken,
) {
    // Or applied up to the live log end: a tail the new leader truncated never gets applied.
    tokio::select! {
        _ = cancel.cancelled() => return,
        caught_up = applied.wait_for(|a| a.index >= boot_log_end || node.log_end().is_none_or(|end| a.index >= end)) => {
            if caught_up.is_err() {
                return;
            }
        }
    }
    loop {
        let doc = documents.borrow_and_update().clone();
        if let Some(doc) = doc {
            install(&acl, &doc).await;
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = documents.changed() => if changed.is_err() { return },
        }
    }
}
