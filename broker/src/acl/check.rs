//! The request check (`PlainAccessValidator.validate`): whether a request from a peer may be
//! served under an [`AclConfig`], in Java's order (see the `acl` module header).
//!
//! Invariants: signatures are compared in constant time and an empty one never matches; the ACL
//! edit codes pass no address shortcut; a refusal's text is Java's reason, never a secret.

use std::net::IpAddr;

use raftmq_common::message::validate::RMQ_SYS_TRACE_TOPIC as TRACE_TOPIC;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::acl::ACCESS_KEY;
use raftmq_common::protocol::acl::SIGNATURE;
use raftmq_common::protocol::acl::UNIQUE_MSG_QUERY_FLAG;
use raftmq_common::protocol::acl::signature_of;
use raftmq_common::protocol::acl::signatures_match;

use super::document::Account;
use super::document::AclConfig;
use super::error::AclDenied;
use super::perm;
use super::resource::ACL_EDIT_CODES;
use super::resource::ADMIN_CODES;
use super::resource::Resource;
use super::resource::resources;

impl AclConfig {
    /// Whether `request` from `peer` may be served (the module header gives the order).
    pub fn check(&self, request: &RemotingCommand, peer: IpAddr) -> Result<(), AclDenied> {
        // An edit of the ACL itself passes no address shortcut: a white-listed host or account
        // could otherwise make itself an admin.
        let edits_acl = ACL_EDIT_CODES.contains(&request.request_code());
        if !edits_acl && self.global_white.iter().any(|p| p.matches(peer)) {
            return Ok(());
        }
        let Some(access_key) = request.ext_fields.get(ACCESS_KEY) else {
            return Err(AclDenied("No accessKey is configured".into()));
        };
        let Some(account) = self.accounts.get(access_key.as_str()) else {
            return Err(AclDenied(format!("No acl config for {access_key}")));
        };
        if !edits_acl && account.white_remote_address.as_ref().is_some_and(|p| p.matches(peer)) {
            return Ok(());
        }
        let presented = request.ext_fields.get(SIGNATURE).map(|s| s.as_str()).unwrap_or_default();
        let signed_as = |with_unique_flag| {
            let expected = signature_of(&request.ext_fields, &request.body, with_unique_flag, &account.secret_key);
            !presented.is_empty() && signatures_match(presented, &expected)
        };
        // Clients sign `_UNIQUE_KEY_QUERY`; Java's broker does not (see `raftmq_common::protocol::acl`).
        let verified = signed_as(true) || (request.ext_fields.contains_key(UNIQUE_MSG_QUERY_FLAG) && signed_as(false));
        if !verified {
            return Err(AclDenied(format!("Check signature failed for accessKey={access_key}")));
        }
        let needed = resources(request)?;
        let admin_code = ADMIN_CODES.contains(&request.request_code());
        authorize(account, admin_code, request.code, &needed)
    }
}

/// Whether `account`, authenticated, holds what a request needs: `admin` for an admin code
/// (`code` only names it in the refusal), and each resource's permission from its perms or its
/// defaults. Shared by remoting requests and gRPC calls (`super::credentials`).
pub(super) fn authorize(
    account: &Account,
    admin_code: bool,
    code: i32,
    needed: &[(Resource, u8)],
) -> Result<(), AclDenied> {
    let access_key = &account.access_key;
    // Message traces go to the trace topic from every client (`PlainPermissionManager`): PUB on it
    // needs nothing, but it never vouches for another resource of the same request (a gRPC
    // `Settings` may list several topics).
    let is_trace = |(r, p): &&(Resource, u8)| *p == perm::PUB && matches!(r, Resource::Topic(t) if t == TRACE_TOPIC);
    if !needed.is_empty() && needed.iter().all(|n| is_trace(&n)) {
        return Ok(());
    }
    if admin_code && !account.admin {
        return Err(AclDenied(format!(
            "Need admin permission for request code={code}, but accessKey={access_key} is not"
        )));
    }
    let mut needs = needed.iter().filter(|n| !is_trace(n));
    let Some(owned) = &account.perms else {
        if account.admin {
            return Ok(());
        }
        return needs.try_for_each(|(resource, need)| check_default(account, resource, *need));
    };
    for (resource, need) in needs {
        match owned.get(resource) {
            Some(have) if perm::grants(*need, *have) => {}
            // Java's wording for a listed resource too.
            Some(_) => return Err(AclDenied(format!("No default permission for {resource}"))),
            None => check_default(account, resource, *need)?,
        }
    }
    Ok(())
}

fn check_default(account: &Account, resource: &Resource, need: u8) -> Result<(), AclDenied> {
    let default = match resource {
        Resource::Topic(_) => account.default_topic_perm,
        Resource::Group(_) => account.default_group_perm,
    };
    if !perm::grants(need, default) {
        return Err(AclDenied(format!("No default permission for {resource}")));
    }
    Ok(())
}
