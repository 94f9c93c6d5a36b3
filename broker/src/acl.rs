//! Plain ACL: who may send what to this broker (RocketMQ 4.x `aclEnable`, `plain_acl.yml`,
//! `PlainAccessValidator` and `PlainPermissionManager`).
//!
//! Pure decisions first ([`AclConfig::parse_yaml`], [`AclConfig::check`]), then the file at the
//! edge ([`Acl`]: loaded at boot, re-read when it changes).
//!
//! A request passes when, in this order (Java's; the ACL edit codes, [`ACL_EDIT_CODES`], skip
//! steps 1 and 3: they need a signed admin whatever the address):
//! 1. its peer address matches a `globalWhiteRemoteAddresses` pattern; otherwise
//! 2. it names an `AccessKey` of a configured account, and
//! 3. its peer address matches the account's `whiteRemoteAddress` (no signature needed); or
//! 4. its `Signature` is the account's HMAC-SHA1 of the request ([`raftmq_common::protocol::acl`]),
//! 5. the account is `admin` when the code needs it ([`ADMIN_CODES`]), and
//! 6. the account holds the permission each resource of the request needs: PUB on the topic a
//!    send names, SUB on a pulled topic and on the consumer group (RocketMQ spells the group as its
//!    `%RETRY%` topic), from `topicPerms` / `groupPerms`, else the account's default perm.
//!
//! A refused request is answered SYSTEM_ERROR with `AclException: <Java's reason>`, as Java's
//! RPC hook answers (a oneway request gets no answer). [`resources`] follows Java 4.9.8 and is
//! stricter in a few places, each marked there: batch sends, sends to a retry topic, send-backs,
//! offset queries and queue locks; our Raft membership codes, the offset-moving admin codes and the
//! read of every account's secret (GET_BROKER_CLUSTER_ACL_CONFIG, which also skips the address
//! shortcuts) need `admin`. As in Java, the other codes need only a valid signature: among them
//! VIEW_MESSAGE_BY_ID and END_TRANSACTION, the monitoring reads (GET_ALL_CONSUMER_OFFSET,
//! GET_CONSUME_STATS, ...) and the calls relayed to a group's clients (GET_CONSUMER_RUNNING_INFO,
//! CONSUME_MESSAGE_DIRECTLY, INVOKE_BROKER_TO_GET_CONSUMER_STATUS). A keyed
//! QUERY_MESSAGE verifies whether or not its client signed `_UNIQUE_KEY_QUERY`.
//!
//! Edits over the wire (mqadmin's `updateAclConfig` family, `crate::acl_processor`) change the
//! file's text ([`AclSource`]: each field as written), and every replica installs the resulting
//! document ([`Acl::install`]): it is put in force and written over the file, unless the file in force
//! carries exactly that `dataVersion` (it holds that edit, perhaps edited by hand since).
//!
//! The file (RocketMQ's layout, one file): `globalWhiteRemoteAddresses`, and `accounts` with
//! `accessKey`, `secretKey` (both longer than 6 characters), `whiteRemoteAddress`, `admin`,
//! `defaultTopicPerm`, `defaultGroupPerm`, `topicPerms` and `groupPerms` (`name=PUB|SUB`). Scalars
//! are read as written (no YAML number conversion); aliases and nesting deeper than
//! [`ACL_FILE_DEPTH_MAX_COUNT`] are refused. It is looked at every [`ACL_FILE_POLL_INTERVAL_MS`]
//! (length and modification time).
//!
//! Invariants:
//! - A config is all valid or not used: a file that does not parse is refused at boot, and a later
//!   edit that does not parse, an emptied file or a removed one leaves the previous config in force
//!   (logged once), never an open broker.
//! - The check runs in `BrokerProcessor::process` before any header is decoded, for every served
//!   code, oneway included. It reads the request only; a follower relays a request with its extFields
//!   and body unchanged (its relay client signs nothing; only the flag marks it relayed), so the leader checks the client's own signature. A client
//!   admitted by its address alone is checked by the leader against the follower's address, so
//!   its relayed QUERY_CONSUMER_OFFSET needs a signature.
//! - The admin HTTP port is not a way around it: under `aclEnable` every `/api/v1/` call needs
//!   `adminToken` (and the API is closed without one), see `crate::http`.
//! - Signatures are compared in constant time, an empty one never matches, and secret keys never
//!   reach a log or an error.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::RwLock;
use std::time::Duration;

use raftmq_common::limits::ACL_FILE_DEPTH_MAX_COUNT;
use raftmq_common::limits::ACL_FILE_POLL_INTERVAL_MS;
use raftmq_common::limits::ACL_FILE_SIZE_MAX_BYTES;
use raftmq_common::message::validate::RETRY_GROUP_TOPIC_PREFIX;
use raftmq_common::message::validate::RMQ_SYS_TRACE_TOPIC as TRACE_TOPIC;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::acl::ACCESS_KEY;
use raftmq_common::protocol::acl::SIGNATURE;
use raftmq_common::protocol::acl::UNIQUE_MSG_QUERY_FLAG;
use raftmq_common::protocol::acl::signature_of;
use raftmq_common::protocol::acl::signatures_match;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::acl_config::GetBrokerClusterAclConfigResponseBody;
use raftmq_common::protocol::body::acl_config::PlainAccessConfigData;
use raftmq_common::protocol::body::decode_lenient;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::lock_batch::LockBatchRequestBody;
use raftmq_common::protocol::body::lock_batch::UnlockBatchRequestBody;
use tokio_util::sync::CancellationToken;

/// Permission bits (`org.apache.rocketmq.acl.common.Permission`).
pub mod perm {
    /// Denied, whatever else is set.
    pub const DENY: u8 = 1;
    /// Needs PUB or SUB.
    pub const ANY: u8 = 1 << 1;
    /// Publish.
    pub const PUB: u8 = 1 << 2;
    /// Subscribe.
    pub const SUB: u8 = 1 << 3;

    /// `Permission.parsePermFromString`: `PUB`, `SUB`, `PUB|SUB` / `SUB|PUB` (exactly, as Java
    /// matches them), anything else DENY.
    pub fn parse(text: &str) -> u8 {
        match text.trim() {
            "PUB" => PUB,
            "SUB" => SUB,
            "PUB|SUB" | "SUB|PUB" => PUB | SUB,
            _ => DENY,
        }
    }

    /// `Permission.checkPermission`: whether `owned` grants `needed`.
    pub fn grants(needed: u8, owned: u8) -> bool {
        if owned & DENY != 0 {
            return false;
        }
        if needed & ANY != 0 {
            return owned & (PUB | SUB) != 0;
        }
        needed & owned != 0
    }
}

/// The codes that edit the ACL, and the one that reads every account's secret (which would let
/// its reader sign as an admin): they need a signed `admin` account whatever the peer's address
/// (stricter than Java, which lets any signed or white-listed client send them).
pub const ACL_EDIT_CODES: &[RequestCode] = &[
    RequestCode::UpdateAndCreateAclConfig,
    RequestCode::DeleteAclConfig,
    RequestCode::UpdateGlobalWhiteAddrsConfig,
    RequestCode::GetBrokerClusterAclConfig,
];

/// Codes only an `admin: true` account may send: Java 4.9's `Permission.ADMIN_CODE`; our Raft
/// membership codes (a removal notice unroutes a replica); and, stricter than Java, the two that
/// move any group's offsets (`resetOffsetByTime`, `cloneGroupOffset`), the one that puts any
/// producer group's half back for checking (`resumeCheckHalfMessage`), the one that reads every
/// account's secret (`getAccessConfigSubCommand`), and the three that edit
/// the ACL itself, which Java leaves to any signed account (`crate::acl_processor`).
pub const ADMIN_CODES: &[RequestCode] = &[
    RequestCode::UpdateAndCreateTopic,
    RequestCode::UpdateBrokerConfig,
    RequestCode::DeleteTopicInBroker,
    RequestCode::UpdateAndCreateSubscriptiongroup,
    RequestCode::DeleteSubscriptiongroup,
    RequestCode::RaftAddNode,
    RequestCode::RaftRemoveNode,
    RequestCode::RaftTransferLeadership,
    RequestCode::RaftNodeRemoved,
    RequestCode::InvokeBrokerToResetOffset,
    RequestCode::CloneGroupOffset,
    RequestCode::ResumeCheckHalfMessage,
    RequestCode::GetBrokerClusterAclConfig,
    RequestCode::UpdateAndCreateAclConfig,
    RequestCode::DeleteAclConfig,
    RequestCode::UpdateGlobalWhiteAddrsConfig,
];

/// What a request touches: a topic, or a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resource {
    /// A topic.
    Topic(String),
    /// A consumer group (RocketMQ writes it as the group's `%RETRY%` topic).
    Group(String),
}

impl Resource {
    /// A topic as a request names it: `%RETRY%g` is the group `g`, as Java reads it.
    fn of_topic(topic: &str) -> Self {
        match topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
            Some(group) => Resource::Group(group.to_owned()),
            None => Resource::Topic(topic.to_owned()),
        }
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Topic(t) => write!(f, "topic:{t}"),
            Resource::Group(g) => write!(f, "group:{g}"),
        }
    }
}

/// Which peer addresses a pattern admits (`RemoteAddressStrategyFactory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressPattern {
    /// `*` or `*.*.*.*`: every address.
    Any,
    /// One address, IPv4 or IPv6.
    Exact(IpAddr),
    /// Any of several addresses: `1.1.1.1,2.2.2.2`.
    List(Vec<IpAddr>),
    /// IPv4 with per-octet rules: `192.168.1.*`, `192.168.1.10-20`, `192.168.0.{1,2,3}`.
    Ipv4([Octet; 4]),
}

/// One octet's rule of an [`AddressPattern::Ipv4`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Octet {
    /// Any value (`*`).
    Any,
    /// `lo-hi`, inclusive (one value: `lo == hi`).
    Range(u8, u8),
    /// `{a,b,c}` (last octet only, as in Java).
    Set(Vec<u8>),
}

impl AddressPattern {
    /// Parses a pattern; `None` for a blank one (Java's blank strategy admits nobody).
    pub fn parse(text: &str) -> Result<Option<Self>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        if text == "*" || text == "*.*.*.*" || text == "*:*:*:*:*:*:*:*" {
            return Ok(Some(AddressPattern::Any));
        }
        // Canonical forms, as peers are compared: `::ffff:10.0.0.1` is 10.0.0.1.
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Some(AddressPattern::Exact(ip.to_canonical())));
        }
        if text.contains(',') && !text.ends_with('}') {
            let ips: Result<Vec<IpAddr>, _> =
                text.split(',').map(|p| p.trim().parse::<IpAddr>().map(|ip| ip.to_canonical())).collect();
            return ips
                .map(|ips| Some(AddressPattern::List(ips)))
                .map_err(|_| format!("'{text}' is not a list of addresses (1.1.1.1,2.2.2.2)"));
        }
        let bad = || format!("'{text}' is not an address pattern (a.b.c.d, a.b.c.*, a.b.c.10-20, a.b.c.{{1,2}}, *)");
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() != 4 {
            return Err(bad());
        }
        let mut octets = [Octet::Any, Octet::Any, Octet::Any, Octet::Any];
        for (i, part) in parts.iter().enumerate() {
            let last = i == 3;
            octets[i] = if *part == "*" {
                Octet::Any
            } else if let Some(inner) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                if !last {
                    return Err(bad());
                }
                let values: Result<Vec<u8>, _> = inner.split(',').map(|v| v.trim().parse::<u8>()).collect();
                Octet::Set(values.map_err(|_| bad())?)
            } else if let Some((lo, hi)) = part.split_once('-') {
                let (lo, hi) = (lo.parse::<u8>().map_err(|_| bad())?, hi.parse::<u8>().map_err(|_| bad())?);
                if lo > hi {
                    return Err(bad());
                }
                Octet::Range(lo, hi)
            } else {
                let v = part.parse::<u8>().map_err(|_| bad())?;
                Octet::Range(v, v)
            };
        }
        // Java expands `*` only at the end ("192.168.*.*", not "192.*.1.1").
        let first_any = octets.iter().position(|o| *o == Octet::Any).unwrap_or(4);
        if octets[first_any..].iter().any(|o| *o != Octet::Any) {
            return Err(bad());
        }
        Ok(Some(AddressPattern::Ipv4(octets)))
    }

    /// Whether `ip` matches.
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match (self, ip) {
            (AddressPattern::Any, _) => true,
            (AddressPattern::Exact(want), got) => *want == got,
            (AddressPattern::List(ips), got) => ips.contains(&got),
            (AddressPattern::Ipv4(octets), IpAddr::V4(v4)) => {
                octets.iter().zip(v4.octets()).all(|(rule, b)| match rule {
                    Octet::Any => true,
                    Octet::Range(lo, hi) => (*lo..=*hi).contains(&b),
                    Octet::Set(values) => values.contains(&b),
                })
            }
            (AddressPattern::Ipv4(_), IpAddr::V6(_)) => false,
        }
    }
}

/// One account of `plain_acl.yml` (`PlainAccessConfig`).
#[derive(Clone, PartialEq, Eq)]
pub struct Account {
    /// `accessKey`.
    pub access_key: String,
    secret_key: String,
    /// `whiteRemoteAddress`: peers that need no signature for this account (except for
    /// [`ACL_EDIT_CODES`]).
    pub white_remote_address: Option<AddressPattern>,
    /// `admin`: may send [`ADMIN_CODES`]; with no explicit perms, may touch everything.
    pub admin: bool,
    /// `defaultTopicPerm` (DENY when absent).
    pub default_topic_perm: u8,
    /// `defaultGroupPerm` (DENY when absent).
    pub default_group_perm: u8,
    /// `topicPerms` and `groupPerms`, merged (`None` when both are absent).
    pub perms: Option<HashMap<Resource, u8>>,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("access_key", &self.access_key)
            .field("secret_key", &"******")
            .field("white_remote_address", &self.white_remote_address)
            .field("admin", &self.admin)
            .field("perms", &self.perms)
            .finish_non_exhaustive()
    }
}

/// A parsed `plain_acl.yml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclConfig {
    /// `globalWhiteRemoteAddresses`: peers that pass without any check.
    pub global_white: Vec<AddressPattern>,
    /// Accounts by access key.
    pub accounts: HashMap<String, Account>,
    /// The file as written: what an edit over the wire starts from and rewrites.
    pub source: AclSource,
}

/// The file's `dataVersion` (Java writes `[{counter, timestamp}]` on every edit). Replicated edits
/// count up from the group's last one, so a larger counter is a later edit on every replica.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclVersion {
    /// Edits so far.
    pub counter: i64,
    /// When the last edit was proposed (leader clock, ms).
    pub timestamp: i64,
}

impl AclVersion {
    /// Java's `DataVersion` JSON, as GET_BROKER_CLUSTER_ACL_INFO reports it.
    pub fn to_json(&self) -> String {
        format!(r#"{{"counter":{},"timestamp":{}}}"#, self.counter, self.timestamp)
    }
}

/// One account as the file writes it (Java's `PlainAccessConfig`): each field's text, so an edit
/// rewrites the file without changing what it did not touch.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AccountSource {
    /// `accessKey`.
    pub access_key: String,
    secret_key: String,
    /// `whiteRemoteAddress`.
    pub white_remote_address: Option<String>,
    /// `admin`.
    pub admin: bool,
    /// `defaultTopicPerm`.
    pub default_topic_perm: Option<String>,
    /// `defaultGroupPerm`.
    pub default_group_perm: Option<String>,
    /// `topicPerms` (`None`: absent).
    pub topic_perms: Option<Vec<String>>,
    /// `groupPerms` (`None`: absent).
    pub group_perms: Option<Vec<String>>,
}

impl std::fmt::Debug for AccountSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountSource")
            .field("access_key", &self.access_key)
            .field("secret_key", &"******")
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

/// `plain_acl.yml` as written, in file order (see [`AccountSource`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSource {
    /// `globalWhiteRemoteAddresses`.
    pub global_white: Vec<String>,
    /// `accounts`, in file order.
    pub accounts: Vec<AccountSource>,
    /// `dataVersion`.
    pub version: Option<AclVersion>,
}

/// An UPDATE_AND_CREATE_ACL_CONFIG request: the account and the fields it sets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AccountEdit {
    /// The account.
    pub access_key: String,
    /// Its secret (required, as in Java).
    pub secret_key: Option<String>,
    /// Replaces `whiteRemoteAddress` when present.
    pub white_remote_address: Option<String>,
    /// Always replaces `admin` (Java's primitive field).
    pub admin: bool,
    /// Replaces `defaultTopicPerm` when present and not empty.
    pub default_topic_perm: Option<String>,
    /// Replaces `defaultGroupPerm` when present and not empty.
    pub default_group_perm: Option<String>,
    /// Replaces the whole `topicPerms` list when present.
    pub topic_perms: Option<Vec<String>>,
    /// Replaces the whole `groupPerms` list when present.
    pub group_perms: Option<Vec<String>>,
}

impl std::fmt::Debug for AccountEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountEdit").field("access_key", &self.access_key).finish_non_exhaustive()
    }
}

/// `name=PERM` split as Java's `StringUtils.split(item, "=")` splits it: runs of `=` are one
/// separator and empty parts are dropped, so `t==PUB` is `t` and `PUB`, and `=PUB` is one part.
fn split_resource_perm(item: &str) -> Option<(&str, &str)> {
    let mut parts = item.split('=').filter(|p| !p.is_empty());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), Some(perm), None) => Some((name, perm)),
        _ => None,
    }
}

/// Java's `Permission.checkResourcePerms`: every item is `name=PERM` with PERM one of DENY, PUB,
/// SUB, PUB|SUB, SUB|PUB.
fn check_resource_perms(items: &[String]) -> Result<(), AclConfigError> {
    for item in items {
        let valid = split_resource_perm(item)
            .is_some_and(|(_, p)| matches!(p.trim(), "DENY" | "PUB" | "SUB" | "PUB|SUB" | "SUB|PUB"));
        if !valid {
            return Err(AclConfigError(format!("Parse resource permission failed for {item}")));
        }
    }
    Ok(())
}

/// Control characters cannot be written as single-quoted YAML (a newline folds into a space) and
/// Java's loader refuses most of them, so an edit carrying one would write a file that says
/// something else, or that Java cannot read.
fn check_printable<'a>(texts: impl IntoIterator<Item = &'a str>) -> Result<(), AclConfigError> {
    // U+2028/2029 are line breaks to Java's loader, U+FFFE/FFFF characters it refuses.
    let unwritable = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}');
    match texts.into_iter().find(|t| t.chars().any(unwritable)) {
        Some(_) => Err(AclConfigError("a value contains a control character (newline, tab, ...)".into())),
        None => Ok(()),
    }
}

impl AclSource {
    /// The file as GET_BROKER_CLUSTER_ACL_CONFIG answers it: white addresses and every account,
    /// secrets included (only an admin account gets the answer).
    pub fn to_response_body(&self) -> GetBrokerClusterAclConfigResponseBody {
        let account = |a: &AccountSource| PlainAccessConfigData {
            access_key: a.access_key.clone(),
            secret_key: a.secret_key.clone(),
            white_remote_address: a.white_remote_address.clone(),
            admin: a.admin,
            default_topic_perm: a.default_topic_perm.clone(),
            default_group_perm: a.default_group_perm.clone(),
            topic_perms: a.topic_perms.clone().unwrap_or_default(),
            group_perms: a.group_perms.clone().unwrap_or_default(),
        };
        GetBrokerClusterAclConfigResponseBody {
            global_white_addrs: self.global_white.clone(),
            plain_access_configs: self.accounts.iter().map(account).collect(),
        }
    }

    /// Creates or updates an account the way Java's `PlainPermissionManager.updateAccessConfig`
    /// does: both keys longer than 6 characters, each resource item `name=PERM`; an existing account
    /// keeps the fields the edit leaves out (`admin` is always replaced, perm lists replaced whole)
    /// and moves to the end of the list.
    pub fn upsert(&self, edit: &AccountEdit) -> Result<AclSource, AclConfigError> {
        let secret = edit.secret_key.as_deref().unwrap_or_default();
        if edit.access_key.chars().count() <= 6 || secret.chars().count() <= 6 {
            return Err(AclConfigError(format!(
                "The accessKey={} and secretKey cannot be null and length should longer than 6",
                edit.access_key
            )));
        }
        for list in [&edit.topic_perms, &edit.group_perms].into_iter().flatten() {
            check_resource_perms(list)?;
        }
        let optional = [&edit.white_remote_address, &edit.default_topic_perm, &edit.default_group_perm];
        let lists = [&edit.topic_perms, &edit.group_perms].into_iter().flatten().flatten();
        check_printable(
            [edit.access_key.as_str(), secret]
                .into_iter()
                .chain(optional.into_iter().flatten().map(String::as_str))
                .chain(lists.map(String::as_str)),
        )?;
        if let Some(white) = &edit.white_remote_address {
            AddressPattern::parse(white).map_err(|e| AclConfigError(format!("whiteRemoteAddress: {e}")))?;
        }
        let mut next = self.clone();
        let position = next.accounts.iter().position(|a| a.access_key == edit.access_key);
        let mut account = match position {
            Some(i) => next.accounts.remove(i),
            None => AccountSource { access_key: edit.access_key.clone(), ..AccountSource::default() },
        };
        account.secret_key = secret.to_owned();
        if let Some(white) = &edit.white_remote_address {
            account.white_remote_address = Some(white.clone());
        }
        account.admin = edit.admin;
        if let Some(p) = edit.default_topic_perm.as_ref().filter(|p| !p.is_empty()) {
            account.default_topic_perm = Some(p.clone());
        }
        if let Some(p) = edit.default_group_perm.as_ref().filter(|p| !p.is_empty()) {
            account.default_group_perm = Some(p.clone());
        }
        if let Some(list) = &edit.topic_perms {
            account.topic_perms = Some(list.clone());
        }
        if let Some(list) = &edit.group_perms {
            account.group_perms = Some(list.clone());
        }
        next.accounts.push(account);
        Ok(next)
    }

    /// Without the account `access_key`; `None` when there is no such account.
    pub fn delete(&self, access_key: &str) -> Option<AclSource> {
        let i = self.accounts.iter().position(|a| a.access_key == access_key)?;
        let mut next = self.clone();
        next.accounts.remove(i);
        Some(next)
    }

    /// With `addresses` as `globalWhiteRemoteAddresses` (Java replaces the list); each must be a
    /// valid pattern.
    pub fn with_global_white(&self, addresses: Vec<String>) -> Result<AclSource, AclConfigError> {
        check_printable(addresses.iter().map(String::as_str))?;
        for a in &addresses {
            AddressPattern::parse(a).map_err(|e| AclConfigError(format!("globalWhiteRemoteAddresses: {e}")))?;
        }
        Ok(AclSource { global_white: addresses, ..self.clone() })
    }

    /// The file text, RocketMQ's layout in block style (as Java's snakeyaml writes it, comments
    /// gone). Every text is single-quoted, so no value is read back as a number or a boolean.
    pub fn to_yaml(&self) -> String {
        fn quoted(text: &str) -> String {
            format!("'{}'", text.replace('\'', "''"))
        }
        fn list(out: &mut String, indent: &str, items: &[String]) {
            for item in items {
                out.push_str(&format!("{indent}- {}\n", quoted(item)));
            }
        }
        let mut out = String::new();
        if self.global_white.is_empty() {
            out.push_str("globalWhiteRemoteAddresses: []\n");
        } else {
            out.push_str("globalWhiteRemoteAddresses:\n");
            list(&mut out, "  ", &self.global_white);
        }
        if self.accounts.is_empty() {
            out.push_str("accounts: []\n");
        } else {
            out.push_str("accounts:\n");
        }
        for a in &self.accounts {
            out.push_str(&format!("  - accessKey: {}\n", quoted(&a.access_key)));
            out.push_str(&format!("    secretKey: {}\n", quoted(&a.secret_key)));
            if let Some(w) = &a.white_remote_address {
                out.push_str(&format!("    whiteRemoteAddress: {}\n", quoted(w)));
            }
            out.push_str(&format!("    admin: {}\n", a.admin));
            if let Some(p) = &a.default_topic_perm {
                out.push_str(&format!("    defaultTopicPerm: {}\n", quoted(p)));
            }
            if let Some(p) = &a.default_group_perm {
                out.push_str(&format!("    defaultGroupPerm: {}\n", quoted(p)));
            }
            for (key, items) in [("topicPerms", &a.topic_perms), ("groupPerms", &a.group_perms)] {
                match items {
                    None => {}
                    Some(items) if items.is_empty() => out.push_str(&format!("    {key}: []\n")),
                    Some(items) => {
                        out.push_str(&format!("    {key}:\n"));
                        list(&mut out, "      ", items);
                    }
                }
            }
        }
        if let Some(v) = &self.version {
            out.push_str(&format!("dataVersion:\n  - counter: {}\n    timestamp: {}\n", v.counter, v.timestamp));
        }
        out
    }
}

/// Why `plain_acl.yml` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plain ACL config: {0}")]
pub struct AclConfigError(pub String);

/// Why a request was refused; the text is the response's remark.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AclDenied(pub String);

/// A YAML node as `plain_acl.yml` needs it: scalars keep their text exactly as written (YAML 1.2
/// would read `secretKey: 0123456` as the number 123456), and no aliases or deep nesting are
/// accepted, so a small file cannot expand into a large tree or a deep recursion.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    /// A scalar; `plain` when written without quotes (only those can be null).
    Scalar { text: String, plain: bool },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping with text keys; a repeated key keeps its last value, as Java's loader does.
    Map(Vec<(String, Node)>),
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v).filter(|v| !v.is_null()),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { text, plain: true } if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The text of a (non-null) scalar.
    fn text(&self) -> Option<&str> {
        match self {
            Node::Scalar { text, .. } if !self.is_null() => Some(text),
            _ => None,
        }
    }

    /// A list of texts (absent: empty).
    fn texts(node: Option<&Node>, what: &str) -> Result<Vec<String>, AclConfigError> {
        match node {
            None => Ok(Vec::new()),
            Some(Node::Seq(items)) => items
                .iter()
                .filter(|i| !i.is_null())
                .map(|i| {
                    i.text()
                        .map(str::to_owned)
                        .ok_or_else(|| AclConfigError(format!("{what}: every entry must be text")))
                })
                .collect(),
            Some(_) => Err(AclConfigError(format!("{what} must be a list"))),
        }
    }
}

/// A collection being built from parser events.
enum Open {
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>, Option<String>),
}

/// Parses one YAML document into a [`Node`] (`None`: an empty file).
fn parse_tree(text: &str) -> Result<Option<Node>, AclConfigError> {
    use yaml_rust2::Event;
    use yaml_rust2::parser::Parser;
    use yaml_rust2::scanner::TScalarStyle;

    fn place(open: &mut [Open], root: &mut Option<Node>, node: Node) -> Result<(), AclConfigError> {
        match open.last_mut() {
            None if root.is_some() => Err(AclConfigError("one YAML document only".into())),
            None => {
                *root = Some(node);
                Ok(())
            }
            Some(Open::Seq(items)) => {
                items.push(node);
                Ok(())
            }
            Some(Open::Map(entries, pending)) => match pending.take() {
                Some(key) => {
                    entries.push((key, node));
                    Ok(())
                }
                None => match node {
                    Node::Scalar { text, .. } => {
                        *pending = Some(text);
                        Ok(())
                    }
                    _ => Err(AclConfigError("mapping keys must be text".into())),
                },
            },
        }
    }

    let mut parser = Parser::new_from_str(text);
    let mut open: Vec<Open> = Vec::new();
    let mut root = None;
    loop {
        let (event, at) = parser.next_token().map_err(|e| AclConfigError(e.to_string()))?;
        let too_deep =
            || AclConfigError(format!("nested deeper than {ACL_FILE_DEPTH_MAX_COUNT} levels (line {})", at.line()));
        match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {}
            Event::Alias(_) => {
                return Err(AclConfigError(format!("YAML aliases are not accepted (line {})", at.line())));
            }
            Event::Scalar(text, style, _, _) => {
                place(&mut open, &mut root, Node::Scalar { text, plain: style == TScalarStyle::Plain })?
            }
            Event::SequenceStart(..) if open.len() >= ACL_FILE_DEPTH_MAX_COUNT => return Err(too_deep()),
            Event::MappingStart(..) if open.len() >= ACL_FILE_DEPTH_MAX_COUNT => return Err(too_deep()),
            Event::SequenceStart(..) => open.push(Open::Seq(Vec::new())),
            Event::MappingStart(..) => open.push(Open::Map(Vec::new(), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match open.pop() {
                    Some(Open::Seq(items)) => Node::Seq(items),
                    Some(Open::Map(entries, _)) => Node::Map(entries),
                    None => return Err(AclConfigError("unbalanced YAML".into())),
                };
                place(&mut open, &mut root, node)?;
            }
        }
    }
    Ok(root)
}

impl AclConfig {
    /// Parses `plain_acl.yml` (RocketMQ 4.x layout: `globalWhiteRemoteAddresses`, `accounts`).
    pub fn parse_yaml(text: &str) -> Result<Self, AclConfigError> {
        let root = match parse_tree(text)? {
            None => return Ok(AclConfig::default()),
            Some(node) if node.is_null() => return Ok(AclConfig::default()),
            Some(node @ Node::Map(_)) => node,
            Some(_) => return Err(AclConfigError("the document must be a mapping".into())),
        };
        let mut global_white = Vec::new();
        for text in Node::texts(root.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")? {
            if let Some(p) =
                AddressPattern::parse(&text).map_err(|e| AclConfigError(format!("globalWhiteRemoteAddresses: {e}")))?
            {
                global_white.push(p);
            }
        }
        let mut accounts = HashMap::new();
        let mut source = AclSource {
            global_white: Node::texts(root.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses")?,
            accounts: Vec::new(),
            version: Self::data_version(root.get("dataVersion")),
        };
        let items = match root.get("accounts") {
            None => &[][..],
            Some(Node::Seq(items)) => &items[..],
            Some(_) => return Err(AclConfigError("accounts must be a list".into())),
        };
        for (i, item) in items.iter().enumerate() {
            let (account, written) =
                Self::parse_account(item).map_err(|e| AclConfigError(format!("accounts[{i}]: {}", e.0)))?;
            if accounts.contains_key(&account.access_key) {
                return Err(AclConfigError(format!("accounts[{i}]: accessKey {} is listed twice", account.access_key)));
            }
            accounts.insert(account.access_key.clone(), account);
            source.accounts.push(written);
        }
        Ok(AclConfig { global_white, accounts, source })
    }

    /// `dataVersion: [{counter, timestamp}]`, read leniently: anything else is no version.
    fn data_version(node: Option<&Node>) -> Option<AclVersion> {
        let Some(Node::Seq(items)) = node else { return None };
        let first = items.first()?;
        let number = |key: &str| first.get(key)?.text()?.trim().parse::<i64>().ok();
        Some(AclVersion { counter: number("counter")?, timestamp: number("timestamp").unwrap_or(0) })
    }

    fn parse_account(item: &Node) -> Result<(Account, AccountSource), AclConfigError> {
        if !matches!(item, Node::Map(_)) {
            return Err(AclConfigError("must be a mapping".into()));
        }
        let text = |name: &str| -> Result<Option<String>, AclConfigError> {
            match item.get(name) {
                None => Ok(None),
                Some(node) => node
                    .text()
                    .map(|t| Some(t.to_owned()))
                    .ok_or_else(|| AclConfigError(format!("{name} must be text"))),
            }
        };
        let access_key = text("accessKey")?.unwrap_or_default();
        let secret_key = text("secretKey")?.unwrap_or_default();
        // PlainPermissionManager.buildPlainAccessResource: both keys longer than 6 characters.
        if access_key.chars().count() <= 6 {
            return Err(AclConfigError(format!("accessKey '{access_key}' must be longer than 6 characters")));
        }
        if secret_key.chars().count() <= 6 {
            return Err(AclConfigError(format!("secretKey of {access_key} must be longer than 6 characters")));
        }
        let white_remote_address = match text("whiteRemoteAddress")? {
            Some(t) => AddressPattern::parse(&t).map_err(|e| AclConfigError(format!("whiteRemoteAddress: {e}")))?,
            None => None,
        };
        let admin = match text("admin")? {
            None => false,
            Some(t) if t.eq_ignore_ascii_case("true") => true,
            Some(t) if t.eq_ignore_ascii_case("false") => false,
            Some(t) => return Err(AclConfigError(format!("admin must be true or false, not '{t}'"))),
        };
        let default_topic_perm = text("defaultTopicPerm")?.map_or(perm::DENY, |t| perm::parse(&t));
        let default_group_perm = text("defaultGroupPerm")?.map_or(perm::DENY, |t| perm::parse(&t));
        // Java fills groups first and topics after, so a `%RETRY%g` topic entry wins over `g`.
        let mut perms = HashMap::new();
        let mut written = AccountSource {
            access_key: access_key.clone(),
            secret_key: secret_key.clone(),
            white_remote_address: text("whiteRemoteAddress")?,
            admin,
            default_topic_perm: text("defaultTopicPerm")?,
            default_group_perm: text("defaultGroupPerm")?,
            topic_perms: None,
            group_perms: None,
        };
        for (list, group) in [("groupPerms", true), ("topicPerms", false)] {
            let entries = Node::texts(item.get(list), list)?;
            if item.get(list).is_some() {
                let slot = if group { &mut written.group_perms } else { &mut written.topic_perms };
                *slot = Some(entries.clone());
            }
            for entry in entries {
                let Some((name, p)) = split_resource_perm(&entry) else {
                    return Err(AclConfigError(format!(
                        "{list}: '{entry}' is not name=PERM (PUB, SUB, PUB|SUB, DENY)"
                    )));
                };
                let name = name.trim();
                let resource = if group { Resource::Group(name.to_owned()) } else { Resource::of_topic(name) };
                perms.insert(resource, perm::parse(p));
            }
        }
        let account = Account {
            access_key,
            secret_key,
            white_remote_address,
            admin,
            default_topic_perm,
            default_group_perm,
            // No entries at all is Java's null map: an admin then passes every resource check.
            perms: if perms.is_empty() { None } else { Some(perms) },
        };
        Ok((account, written))
    }

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
        // Message traces go to the trace topic from every client (`PlainPermissionManager`).
        if needed.iter().any(|(r, p)| *p == perm::PUB && matches!(r, Resource::Topic(t) if t == TRACE_TOPIC)) {
            return Ok(());
        }
        if ADMIN_CODES.contains(&request.request_code()) && !account.admin {
            return Err(AclDenied(format!(
                "Need admin permission for request code={}, but accessKey={access_key} is not",
                request.code
            )));
        }
        let Some(owned) = &account.perms else {
            if account.admin {
                return Ok(());
            }
            return check_defaults(account, &needed);
        };
        for (resource, need) in &needed {
            match owned.get(resource) {
                Some(have) if perm::grants(*need, *have) => {}
                // Java's wording for a listed resource too.
                Some(_) => return Err(AclDenied(format!("No default permission for {resource}"))),
                None => check_defaults(account, std::slice::from_ref(&(resource.clone(), *need)))?,
            }
        }
        Ok(())
    }
}

fn check_defaults(account: &Account, needed: &[(Resource, u8)]) -> Result<(), AclDenied> {
    for (resource, need) in needed {
        let default = match resource {
            Resource::Topic(_) => account.default_topic_perm,
            Resource::Group(_) => account.default_group_perm,
        };
        if !perm::grants(*need, default) {
            return Err(AclDenied(format!("No default permission for {resource}")));
        }
    }
    Ok(())
}

/// The resources `request` touches and the permission each needs (`PlainAccessValidator.parse`
/// of 4.9.8).
pub fn resources(request: &RemotingCommand) -> Result<Vec<(Resource, u8)>, AclDenied> {
    fn topic(out: &mut Vec<(Resource, u8)>, name: Option<&str>, p: u8) {
        if let Some(t) = name {
            out.push((Resource::of_topic(t), p));
        }
    }
    fn group(out: &mut Vec<(Resource, u8)>, name: Option<&str>, p: u8) {
        if let Some(g) = name {
            out.push((Resource::Group(g.to_owned()), p));
        }
    }
    let field = |name: &str| request.ext_fields.get(name).map(|v| v.as_str());
    let mut out = Vec::new();
    // A send to a retry topic is a consumer's re-delivery: SUB on the sending group (Java 4.9.4+)
    // and, stricter than Java, SUB on the group whose retry topic it is.
    let send = |out: &mut Vec<(Resource, u8)>, topic_field: &str, group_field: &str| match field(topic_field) {
        Some(t) if t.starts_with(RETRY_GROUP_TOPIC_PREFIX) => {
            group(out, field(group_field), perm::SUB);
            topic(out, Some(t), perm::SUB);
        }
        t => topic(out, t, perm::PUB),
    };
    match request.request_code() {
        // Java reads `group`, which SEND_MESSAGE's header does not have (`producerGroup`).
        RequestCode::SendMessage => send(&mut out, "topic", "group"),
        // Java 4.9 checks V2 only; a batch travels with the same header, so it is checked alike.
        RequestCode::SendMessageV2 | RequestCode::SendBatchMessage => send(&mut out, "b", "a"),
        // Java checks no resource on replies (only the signature); an ACL that let a consumer read
        // the request keeps letting it answer, whatever `<cluster>_REPLY_TOPIC`'s permission.
        RequestCode::SendReplyMessage | RequestCode::SendReplyMessageV2 => {}
        // Stricter than Java: SUB on the original topic too (the broker copies the message at an
        // offset the request names; `send_back` also checks that it is of that topic).
        RequestCode::ConsumerSendMsgBack => {
            group(&mut out, field("group"), perm::SUB);
            topic(&mut out, field("originTopic"), perm::SUB);
        }
        RequestCode::PullMessage => {
            topic(&mut out, field("topic"), perm::SUB);
            group(&mut out, field("consumerGroup"), perm::SUB);
        }
        RequestCode::QueryMessage => topic(&mut out, field("topic"), perm::SUB),
        RequestCode::HeartBeat => {
            let data = HeartbeatData::decode(&request.body)
                .map_err(|e| AclDenied(format!("the heartbeat body does not decode: {e}")))?;
            for consumer in &data.consumer_data_set {
                group(&mut out, Some(&consumer.group_name), perm::SUB);
                for sub in &consumer.subscription_data_set {
                    topic(&mut out, Some(&sub.topic), perm::SUB);
                }
            }
        }
        RequestCode::UnregisterClient | RequestCode::GetConsumerListByGroup => {
            group(&mut out, field("consumerGroup"), perm::SUB)
        }
        // QUERY_CONSUMER_OFFSET is stricter than Java, which reads any group's offsets.
        RequestCode::UpdateConsumerOffset | RequestCode::QueryConsumerOffset => {
            group(&mut out, field("consumerGroup"), perm::SUB);
            topic(&mut out, field("topic"), perm::SUB);
        }
        // Stricter than Java: a queue lock is the group's.
        RequestCode::LockBatchMq => {
            let body: LockBatchRequestBody = decode_lenient(&request.body, LockBatchRequestBody::NAME)
                .map_err(|e| AclDenied(format!("the lock body does not decode: {e}")))?;
            group(&mut out, Some(&body.consumer_group), perm::SUB);
        }
        RequestCode::UnlockBatchMq => {
            let body: UnlockBatchRequestBody = decode_lenient(&request.body, UnlockBatchRequestBody::NAME)
                .map_err(|e| AclDenied(format!("the unlock body does not decode: {e}")))?;
            group(&mut out, Some(&body.consumer_group), perm::SUB);
        }
        _ => {}
    }
    Ok(out)
}

/// One replicated edit: the whole file it leads to and its version (the entry every replica
/// applies, `crate::entry::BrokerCommand::AclDocument`).
#[derive(Clone, PartialEq, Eq)]
pub struct AclDocument {
    /// The file's `dataVersion` after the edit.
    pub version: AclVersion,
    /// The file text ([`AclSource::to_yaml`]).
    pub yaml: String,
}

impl std::fmt::Debug for AclDocument {
    // The text holds every secret key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclDocument").field("version", &self.version).field("bytes", &self.yaml.len()).finish()
    }
}

/// The ACL in force on this broker: `plain_acl.yml`, re-read when it changes.
#[derive(Debug)]
pub struct Acl {
    path: PathBuf,
    config: RwLock<Arc<AclConfig>>,
    /// (length, modification time) of the file the config was read from.
    seen: RwLock<Option<(u64, std::time::SystemTime)>>,
    /// Held across one edit over the wire (read, replicate, install), so two edits on a leader do
    /// not both start from the same file and lose one.
    edit: tokio::sync::Mutex<()>,
    /// Held while a document is installed or the file re-read (the admin call, the replica's
    /// follower task and the poller race); holds the last replicated version installed by this
    /// process.
    install: std::sync::Mutex<Option<AclVersion>>,
}

impl Acl {
    /// Loads `path`; an unreadable or invalid file is an error (the broker does not start open).
    pub fn load(path: &Path) -> Result<Self, AclConfigError> {
        remove_stale_temporaries(path);
        let (config, seen, _) = read_file(path)?;
        Ok(Acl {
            path: path.to_owned(),
            config: RwLock::new(Arc::new(config)),
            seen: RwLock::new(seen),
            edit: tokio::sync::Mutex::new(()),
            install: std::sync::Mutex::new(None),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serialises edits over the wire on this broker (see the field).
    pub async fn lock_edits(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.edit.lock().await
    }

    /// Puts a replicated document in force and writes it to the file. Returns whether it took
    /// effect. Skipped when this process installed that version or a later one already (the admin
    /// call and the follower task both try), and when the file in force carries exactly its
    /// `dataVersion` (the file holds that edit, perhaps edited by hand since: a restart leaves it).
    /// The replica's follower task starts only once the log it booted with is applied, so a restart
    /// installs the group's last edit, never the older ones it replays. The config changes even
    /// when the file cannot be written (the error says so), so every replica enforces the same
    /// edit; the write is retried after a restart.
    pub fn install(&self, doc: &AclDocument) -> Result<bool, AclConfigError> {
        let mut installed = self.install.lock().unwrap_or_else(|p| p.into_inner());
        if installed.is_some_and(|v| v >= doc.version) {
            return Ok(false);
        }
        if self.current().source.version == Some(doc.version) {
            *installed = Some(doc.version);
            return Ok(false);
        }
        let config = AclConfig::parse_yaml(&doc.yaml)?;
        // The file first: once the version shows (GET_BROKER_CLUSTER_ACL_INFO), the file holds it.
        let written = write_atomically(&self.path, doc.yaml.as_bytes());
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
        *installed = Some(doc.version);
        written.map_err(|e| AclConfigError(format!("writing {}: {e}", self.path.display())))?;
        *self.seen.write().unwrap_or_else(|p| p.into_inner()) = file_stamp(&self.path);
        tracing::info!(path = %self.path.display(), counter = doc.version.counter, "replicated plain ACL edit installed");
        Ok(true)
    }

    /// The config in force.
    pub fn current(&self) -> Arc<AclConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Checks `request` from `peer` against the config in force.
    pub fn check(&self, request: &RemotingCommand, peer: IpAddr) -> Result<(), AclDenied> {
        self.current().check(request, peer)
    }

    /// Re-reads the file when its length or modification time changed. Returns whether a new
    /// config took effect. A file that is gone, empty (caught in the middle of a rewrite) or no
    /// longer parses keeps the old config, logged once per change of the file.
    pub fn reload_if_changed(&self) -> bool {
        // Under the install lock: a reload that read the file just before an install replaced it
        // must not put the older text back in force.
        let _installing = self.install.lock().unwrap_or_else(|p| p.into_inner());
        let now = file_stamp(&self.path);
        if now == *self.seen.read().unwrap_or_else(|p| p.into_inner()) {
            return false;
        }
        let read = read_file(&self.path).and_then(|(config, seen, blank)| match blank {
            // A blank file (emptied, or caught mid-write) would lock every client out.
            true => Err(AclConfigError(format!(
                "{} is blank (write it whole, by a rename, to change it)",
                self.path.display()
            ))),
            false => Ok((config, seen)),
        });
        match read {
            Ok((config, seen)) => {
                *self.seen.write().unwrap_or_else(|p| p.into_inner()) = seen;
                let changed = {
                    let mut current = self.config.write().unwrap_or_else(|p| p.into_inner());
                    let changed = **current != config;
                    *current = Arc::new(config);
                    changed
                };
                if changed {
                    tracing::info!(path = %self.path.display(), "plain ACL config reloaded");
                }
                changed
            }
            Err(e) => {
                // Remember the stamp so one bad edit is logged once, not every poll.
                *self.seen.write().unwrap_or_else(|p| p.into_inner()) = now;
                tracing::error!(path = %self.path.display(), error = %e, "plain ACL config not reloaded; the previous one stays in force");
                false
            }
        }
    }

    /// Polls the file every [`ACL_FILE_POLL_INTERVAL_MS`] until `cancel` (Java watches it too).
    pub async fn watch(self: Arc<Self>, cancel: CancellationToken) {
        let period = Duration::from_millis(ACL_FILE_POLL_INTERVAL_MS);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            let acl = Arc::clone(&self);
            if tokio::task::spawn_blocking(move || acl.reload_if_changed()).await.is_err() {
                tracing::error!("plain ACL reload task failed");
            }
        }
    }
}

/// Replaces `path` with `bytes` so a reader (or a crash) sees the old file or the new one whole:
/// a temporary file beside it, fsynced, renamed over it, and the directory fsynced.
/// Removes the temporary files a crash in [`write_atomically`] left beside `path` (they hold every
/// secret key); failures are only logged.
fn remove_stale_temporaries(path: &Path) {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return };
    let prefix = format!(".{name}.");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        if file.starts_with(&prefix)
            && file.ends_with(".tmp")
            && let Err(e) = std::fs::remove_file(entry.path())
        {
            tracing::warn!(file = %entry.path().display(), error = %e, "cannot remove a stale ACL temporary file");
        }
    }
}

/// The temporary file is private to this call (a unique name, created new) and gets the old file's
/// permissions, or owner-only ones: it holds every secret key. It is removed if anything fails.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::PermissionsExt;
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    let sequence = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    name.push(format!(".{}.{sequence}.tmp", std::process::id()));
    let tmp = dir.join(name);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        // Not through `mode` above: the umask would narrow it.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    std::fs::File::open(dir)?.sync_all()
}

/// A file's length and modification time: what tells a changed ACL file.
type FileStamp = (u64, std::time::SystemTime);

fn file_stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// The config in `path`, the file's stamp, and whether it holds no document (blank or comments).
fn read_file(path: &Path) -> Result<(AclConfig, Option<FileStamp>, bool), AclConfigError> {
    let stamp = file_stamp(path);
    let len = std::fs::metadata(path).map_err(|e| AclConfigError(format!("{}: {e}", path.display())))?.len();
    if len > ACL_FILE_SIZE_MAX_BYTES {
        return Err(AclConfigError(format!("{} is {len} bytes, more than {ACL_FILE_SIZE_MAX_BYTES}", path.display())));
    }
    // The file may grow between the two looks; never read more than the limit.
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(|e| AclConfigError(format!("{}: {e}", path.display())))?,
            ACL_FILE_SIZE_MAX_BYTES + 1,
        ),
        &mut text,
    )
    .map_err(|e| AclConfigError(format!("{}: {e}", path.display())))?;
    if text.len() as u64 > ACL_FILE_SIZE_MAX_BYTES {
        return Err(AclConfigError(format!("{} grew past {ACL_FILE_SIZE_MAX_BYTES} bytes", path.display())));
    }
    let blank = matches!(parse_tree(&text), Ok(None));
    let config = AclConfig::parse_yaml(&text).map_err(|e| AclConfigError(format!("{}: {}", path.display(), e.0)))?;
    Ok((config, stamp, blank))
}

#[cfg(test)]
mod tests {

    use raftmq_common::protocol::RemotingCommand;
    use raftmq_common::protocol::acl::SessionCredentials;
    use raftmq_common::protocol::acl::signature;
    use raftmq_common::protocol::acl::signed_content;
    use raftmq_common::protocol::command::FieldStr;

    use super::*;

    const YAML: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.{1,2}
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"#;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn config() -> AclConfig {
        AclConfig::parse_yaml(YAML).unwrap()
    }

    fn send(topic: &str) -> RemotingCommand {
        let mut r = RemotingCommand::request(RequestCode::SendMessageV2);
        r.ext_fields.insert(FieldStr::from("a"), FieldStr::from("PG"));
        r.ext_fields.insert(FieldStr::from("b"), FieldStr::from(topic));
        r.body = bytes::Bytes::from_static(b"hello");
        r
    }

    fn pull(topic: &str, group: &str) -> RemotingCommand {
        let mut r = RemotingCommand::request(RequestCode::PullMessage);
        r.ext_fields.insert(FieldStr::from("topic"), FieldStr::from(topic));
        r.ext_fields.insert(FieldStr::from("consumerGroup"), FieldStr::from(group));
        r
    }

    fn signed(mut r: RemotingCommand, ak: &str, sk: &str) -> RemotingCommand {
        SessionCredentials::new(ak, sk).unwrap().sign(&mut r);
        r
    }

    const OUTSIDE: &str = "172.16.0.9";

    #[test]
    fn parses_rocketmqs_sample_file() {
        // Keys keep their text as written: a leading zero is not a number's.
        let zero =
            "accounts:\n  - accessKey: zerokey\n    secretKey: 0123456789\n    topicPerms: []\n    admin: true\n";
        let z = AclConfig::parse_yaml(zero).unwrap();
        assert_eq!(z.accounts["zerokey"].secret_key, "0123456789");
        assert_eq!(z.accounts["zerokey"].perms, None, "an empty list is Java's null map");
        let c = config();
        assert_eq!(c.global_white.len(), 2);
        let a = &c.accounts["RocketMQ"];
        assert_eq!(a.secret_key, "12345678", "an integer secret is read as text");
        assert_eq!((a.admin, a.default_topic_perm, a.default_group_perm), (false, perm::DENY, perm::SUB));
        let perms = a.perms.as_ref().unwrap();
        assert_eq!(perms[&Resource::Topic("topicB".into())], perm::PUB | perm::SUB);
        assert_eq!(perms[&Resource::Group("groupA".into())], perm::DENY);
        assert_eq!(a.white_remote_address, None);
        let admin = &c.accounts["rocketmq2"];
        assert!(admin.admin && admin.perms.is_none());
        assert!(!format!("{a:?}").contains("12345678"), "the secret never reaches a log");
    }

    #[test]
    fn refuses_bad_files_with_the_reason() {
        let bad = [
            ("accounts: 3", "accounts must be a list"),
            ("accounts:\n  - accessKey: sixsix\n    secretKey: 12345678\n", "accessKey 'sixsix' must be longer than 6"),
            ("accounts:\n  - accessKey: longenough\n    secretKey: 123456\n", "secretKey of longenough"),
            (
                "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    groupPerms:\n      - g=SUB=PUB\n",
                "name=PERM",
            ),
            (
                "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    topicPerms:\n      - nope\n",
                "name=PERM",
            ),
            ("globalWhiteRemoteAddresses:\n  - 1.2.300.4\n", "not an address pattern"),
            (
                "accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n  - accessKey: longenough\n    secretKey: 87654321\n",
                "twice",
            ),
            ("accounts: [", ""),
            // An alias would let a few lines expand into a huge tree.
            ("a: &x [1, 2]\nb: *x\n", "aliases are not accepted"),
            ("accounts:\n  - accessKey: longenough\n    secretKey: 12345678\n    admin: maybe\n", "admin must be"),
            ("--- {}\n--- {}\n", "one YAML document"),
        ];
        for (text, why) in bad {
            let e = AclConfig::parse_yaml(text).unwrap_err();
            assert!(e.0.contains(why), "{text:?}: {e}");
        }
        assert_eq!(AclConfig::parse_yaml("").unwrap(), AclConfig::default());
        let deep = format!("{}x", "- ".repeat(ACL_FILE_DEPTH_MAX_COUNT + 1));
        assert!(AclConfig::parse_yaml(&deep).unwrap_err().0.contains("nested deeper"), "deep nesting is refused");
        let deep_flow = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(AclConfig::parse_yaml(&deep_flow).is_err());
    }

    #[test]
    fn address_patterns_follow_javas_forms() {
        let p = |s: &str| AddressPattern::parse(s).unwrap().unwrap();
        assert!(p("*").matches(ip("1.2.3.4")) && p("*.*.*.*").matches(ip("::1")));
        assert!(p("192.168.1.*").matches(ip("192.168.1.77")) && !p("192.168.1.*").matches(ip("192.168.2.77")));
        assert!(p("192.168.*.*").matches(ip("192.168.9.9")));
        assert!(p("192.168.1.10-20").matches(ip("192.168.1.20")) && !p("192.168.1.10-20").matches(ip("192.168.1.21")));
        assert!(p("192.168.0.{1,2}").matches(ip("192.168.0.2")) && !p("192.168.0.{1,2}").matches(ip("192.168.0.3")));
        assert!(p("127.0.0.1").matches(ip("::ffff:127.0.0.1")), "IPv4-mapped peers match IPv4 patterns");
        assert!(p("::ffff:10.0.0.1").matches(ip("10.0.0.1")), "and IPv4-mapped patterns IPv4 peers");
        assert!(p("::1").matches(ip("::1")) && !p("::1").matches(ip("127.0.0.1")));
        assert_eq!(AddressPattern::parse("  ").unwrap(), None);
        for bad in ["192.*.1.1", "1.2.3", "1.2.3.20-10", "1.2.{3}.4", "a.b.c.d"] {
            assert!(AddressPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn permissions_follow_javas_check() {
        assert_eq!(perm::parse("PUB|SUB"), perm::parse(" SUB|PUB "));
        assert_eq!(perm::parse("pub"), perm::DENY, "Java matches the words exactly");
        assert_eq!(perm::parse("typo"), perm::DENY);
        assert!(perm::grants(perm::PUB, perm::PUB | perm::SUB));
        assert!(!perm::grants(perm::PUB, perm::SUB));
        assert!(!perm::grants(perm::SUB, perm::SUB | perm::DENY), "DENY wins");
        assert!(perm::grants(perm::ANY, perm::SUB) && !perm::grants(perm::ANY, perm::DENY));
    }

    #[test]
    fn the_checks_run_in_javas_order() {
        let c = config();
        let outside = ip(OUTSIDE);
        // 1. global white list: no credentials at all.
        assert_eq!(c.check(&send("topicA"), ip("10.10.103.5")), Ok(()));
        // 2. no access key; 3. unknown access key.
        assert_eq!(c.check(&send("topicB"), outside).unwrap_err().0, "No accessKey is configured");
        let unknown = signed(send("topicB"), "Nobody1", "12345678");
        assert_eq!(c.check(&unknown, outside).unwrap_err().0, "No acl config for Nobody1");
        // 4. the account's white address: no signature needed.
        let mut unsigned = send("anything");
        unsigned.ext_fields.insert(FieldStr::from(ACCESS_KEY), FieldStr::from("rocketmq2"));
        assert_eq!(c.check(&unsigned, ip("192.168.1.3")), Ok(()));
        // 5. signatures: a wrong secret, and a request changed after signing.
        let wrong = signed(send("topicB"), "RocketMQ", "87654321");
        assert_eq!(c.check(&wrong, outside).unwrap_err().0, "Check signature failed for accessKey=RocketMQ");
        let mut tampered = signed(send("topicB"), "RocketMQ", "12345678");
        tampered.body = bytes::Bytes::from_static(b"HELLO");
        assert_eq!(c.check(&tampered, outside).unwrap_err().0, "Check signature failed for accessKey=RocketMQ");
        let mut blank = signed(send("topicB"), "RocketMQ", "12345678");
        blank.ext_fields.insert(FieldStr::from(SIGNATURE), FieldStr::from(""));
        assert!(c.check(&blank, outside).is_err(), "an empty signature never matches");
        // 6. admin codes.
        let create = signed(RemotingCommand::request(RequestCode::UpdateAndCreateTopic), "RocketMQ", "12345678");
        assert_eq!(
            c.check(&create, outside).unwrap_err().0,
            "Need admin permission for request code=17, but accessKey=RocketMQ is not"
        );
        let create = signed(RemotingCommand::request(RequestCode::UpdateAndCreateTopic), "rocketmq2", "12345678");
        assert_eq!(c.check(&create, outside), Ok(()));
    }

    #[test]
    fn resources_need_their_perms_with_defaults_behind() {
        let c = config();
        let outside = ip(OUTSIDE);
        let check = |r: RemotingCommand| c.check(&signed(r, "RocketMQ", "12345678"), outside).map_err(|e| e.0);
        assert_eq!(check(send("topicB")), Ok(()));
        assert_eq!(check(send("topicA")), Err("No default permission for topic:topicA".into()), "listed DENY");
        assert_eq!(check(send("topicC")), Err("No default permission for topic:topicC".into()), "SUB only");
        assert_eq!(check(send("other")), Err("No default permission for topic:other".into()));
        assert_eq!(check(pull("topicC", "groupB")), Ok(()));
        assert_eq!(check(pull("topicC", "groupA")), Err("No default permission for group:groupA".into()));
        assert_eq!(check(pull("topicC", "anyGroup")), Ok(()), "defaultGroupPerm SUB");
        // A group's retry topic is the group.
        assert_eq!(check(pull("%RETRY%groupA", "groupB")), Err("No default permission for group:groupA".into()));
        // A send to a retry topic needs SUB on the sending group (a), not PUB (4.9.4+).
        let mut resend = send("%RETRY%groupB");
        resend.ext_fields.insert(FieldStr::from("a"), FieldStr::from("groupA"));
        assert_eq!(
            resources(&resend).unwrap(),
            vec![(Resource::Group("groupA".into()), perm::SUB), (Resource::Group("groupB".into()), perm::SUB)]
        );
        assert_eq!(check(resend), Err("No default permission for group:groupA".into()));
        // Message traces pass whatever the topic perms say.
        assert_eq!(check(send(TRACE_TOPIC)), Ok(()));
        // Codes without resources need only a valid signature.
        assert_eq!(check(RemotingCommand::request(RequestCode::GetBrokerRuntimeInfo)), Ok(()));
    }

    #[test]
    fn a_keyed_query_verifies_signed_with_or_without_the_unique_flag() {
        let c = config();
        let mut query = RemotingCommand::request(RequestCode::QueryMessage);
        query.ext_fields.insert(FieldStr::from("topic"), FieldStr::from("topicC"));
        query.ext_fields.insert(FieldStr::from("key"), FieldStr::from("k1"));
        query.ext_fields.insert(FieldStr::from(UNIQUE_MSG_QUERY_FLAG), FieldStr::from("true"));
        // What every client sends: the flag signed.
        let by_client = signed(query.clone(), "RocketMQ", "12345678");
        assert_eq!(c.check(&by_client, ip(OUTSIDE)), Ok(()));
        // What Java's broker expects: the flag left out.
        let mut by_java_rule = query.clone();
        by_java_rule.ext_fields.insert(FieldStr::from(ACCESS_KEY), FieldStr::from("RocketMQ"));
        let content = signed_content(&by_java_rule.ext_fields, &by_java_rule.body, false);
        by_java_rule.ext_fields.insert(FieldStr::from(SIGNATURE), FieldStr::from(signature(&content, "12345678")));
        assert_eq!(c.check(&by_java_rule, ip(OUTSIDE)), Ok(()));
        // Leaving the flag out is allowed only for the flag: a changed key still fails.
        let mut changed = by_client;
        changed.ext_fields.insert(FieldStr::from("key"), FieldStr::from("k2"));
        assert!(c.check(&changed, ip(OUTSIDE)).is_err());
    }

    #[test]
    fn queue_locks_and_offset_queries_name_their_group() {
        let lock = RemotingCommand::request(RequestCode::LockBatchMq)
            .with_body(bytes::Bytes::from_static(br#"{"clientId":"c","consumerGroup":"groupA","mqSet":[]}"#));
        assert_eq!(resources(&lock).unwrap(), vec![(Resource::Group("groupA".into()), perm::SUB)]);
        let unlock = RemotingCommand::request(RequestCode::UnlockBatchMq).with_body(bytes::Bytes::from_static(b"{}"));
        assert_eq!(
            resources(&unlock).unwrap(),
            vec![(Resource::Group(String::new()), perm::SUB)],
            "no group is group \"\""
        );
        let garbage = RemotingCommand::request(RequestCode::LockBatchMq).with_body(bytes::Bytes::from_static(b"["));
        assert!(resources(&garbage).unwrap_err().0.contains("lock body"));
        let mut query = RemotingCommand::request(RequestCode::QueryConsumerOffset);
        query.ext_fields.insert(FieldStr::from("consumerGroup"), FieldStr::from("groupB"));
        query.ext_fields.insert(FieldStr::from("topic"), FieldStr::from("topicC"));
        assert_eq!(
            resources(&query).unwrap(),
            vec![(Resource::Group("groupB".into()), perm::SUB), (Resource::Topic("topicC".into()), perm::SUB)]
        );
        let mut back = RemotingCommand::request(RequestCode::ConsumerSendMsgBack);
        back.ext_fields.insert(FieldStr::from("group"), FieldStr::from("groupB"));
        back.ext_fields.insert(FieldStr::from("originTopic"), FieldStr::from("topicA"));
        let c = config();
        let back = signed(back, "RocketMQ", "12345678");
        assert_eq!(c.check(&back, ip(OUTSIDE)).unwrap_err().0, "No default permission for topic:topicA");
    }

    #[test]
    fn heartbeats_name_their_groups_and_subscriptions() {
        use raftmq_common::protocol::body::heartbeat::ConsumerData;
        use raftmq_common::protocol::body::heartbeat::SubscriptionData;
        let data = HeartbeatData {
            client_id: "c".into(),
            consumer_data_set: vec![ConsumerData {
                group_name: "groupB".into(),
                subscription_data_set: vec![SubscriptionData { topic: "topicC".into(), ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let request = RemotingCommand::request(RequestCode::HeartBeat).with_body(data.encode().unwrap());
        assert_eq!(
            resources(&request).unwrap(),
            vec![(Resource::Group("groupB".into()), perm::SUB), (Resource::Topic("topicC".into()), perm::SUB)]
        );
        let garbage = RemotingCommand::request(RequestCode::HeartBeat).with_body(bytes::Bytes::from_static(b"{"));
        assert!(resources(&garbage).unwrap_err().0.contains("heartbeat body"));
    }

    #[test]
    fn an_admin_without_perms_may_touch_everything_and_with_perms_only_those() {
        let c = config();
        let ok = signed(send("whatever"), "rocketmq2", "12345678");
        assert_eq!(c.check(&ok, ip(OUTSIDE)), Ok(()));
        let text = format!("{YAML}    topicPerms:\n      - only=PUB\n");
        let c = AclConfig::parse_yaml(&text).unwrap();
        let denied = signed(send("whatever"), "rocketmq2", "12345678");
        assert_eq!(c.check(&denied, ip(OUTSIDE)).unwrap_err().0, "No default permission for topic:whatever");
    }

    #[test]
    fn a_file_is_reloaded_when_it_changes_and_a_bad_edit_keeps_the_old_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        std::fs::write(&path, YAML).unwrap();
        let acl = Acl::load(&path).unwrap();
        assert!(!acl.reload_if_changed(), "unchanged");
        let added = format!("{YAML}  - accessKey: newcomer\n    secretKey: abcdefgh\n    admin: true\n");
        std::fs::write(&path, &added).unwrap();
        assert!(acl.reload_if_changed());
        assert!(acl.current().accounts.contains_key("newcomer"));
        std::fs::write(&path, "accounts: [").unwrap();
        assert!(!acl.reload_if_changed());
        assert!(acl.current().accounts.contains_key("newcomer"), "the previous config stays in force");
        std::fs::write(&path, "").unwrap();
        assert!(!acl.reload_if_changed(), "an empty file is a rewrite in progress, not a config");
        std::fs::write(&path, "\n# only a comment\n").unwrap();
        assert!(!acl.reload_if_changed(), "so is a blank one");
        assert!(acl.current().accounts.contains_key("newcomer"));
        std::fs::remove_file(&path).unwrap();
        assert!(!acl.reload_if_changed());
        assert!(!acl.reload_if_changed(), "a missing file is looked at, not re-read, on the next poll");
        assert!(acl.current().accounts.contains_key("newcomer"));
        std::fs::write(&path, YAML).unwrap();
        assert!(acl.reload_if_changed());
        assert!(!acl.current().accounts.contains_key("newcomer"));
        assert!(Acl::load(&dir.path().join("missing.yml")).is_err());
    }

    #[test]
    fn acl_edits_need_a_signed_admin_whatever_the_address() {
        let c = config();
        let edit_request = |ak: &str| {
            let mut r = RemotingCommand::request(RequestCode::UpdateAndCreateAclConfig);
            r.ext_fields.insert(FieldStr::from("accessKey"), FieldStr::from("intruder1"));
            r.ext_fields.insert(FieldStr::from("admin"), FieldStr::from("true"));
            r.ext_fields.insert(FieldStr::from(ACCESS_KEY), FieldStr::from(ak));
            r
        };
        // A globally white-listed host passes other codes unchecked, but not an ACL edit.
        assert!(c.check(&send("topicA"), ip("10.10.103.7")).is_ok());
        let e = c.check(&edit_request("RocketMQ"), ip("10.10.103.7")).unwrap_err().0;
        assert!(e.starts_with("Check signature failed"), "{e}");
        // An admin account's white address admits it without a signature elsewhere, not here.
        let e = c.check(&edit_request("rocketmq2"), ip("192.168.1.5")).unwrap_err().0;
        assert!(e.starts_with("Check signature failed"), "{e}");
        let mut signed_admin = edit_request("rocketmq2");
        signed_admin.ext_fields.shift_remove(ACCESS_KEY);
        assert!(c.check(&signed(signed_admin, "rocketmq2", "12345678"), ip(OUTSIDE)).is_ok());
        // A signed account that is not an admin may not edit.
        let mut plain = edit_request("RocketMQ");
        plain.ext_fields.shift_remove(ACCESS_KEY);
        let e = c.check(&signed(plain, "RocketMQ", "12345678"), ip(OUTSIDE)).unwrap_err().0;
        assert!(e.starts_with("Need admin permission"), "{e}");
        // Reading every secret is as guarded as an edit: no address shortcut, admin only.
        let mut read = RemotingCommand::request(RequestCode::GetBrokerClusterAclConfig);
        read.ext_fields.insert(FieldStr::from(ACCESS_KEY), FieldStr::from("RocketMQ"));
        let e = c.check(&read, ip("10.10.103.7")).unwrap_err().0;
        assert!(e.starts_with("Check signature failed"), "{e}");
        let read = RemotingCommand::request(RequestCode::GetBrokerClusterAclConfig);
        let e = c.check(&signed(read.clone(), "RocketMQ", "12345678"), ip(OUTSIDE)).unwrap_err().0;
        assert!(e.starts_with("Need admin permission"), "{e}");
        assert!(c.check(&signed(read, "rocketmq2", "12345678"), ip(OUTSIDE)).is_ok());
        // Perm items split as Java's StringUtils.split does.
        assert!(check_resource_perms(&["t==PUB".into()]).is_ok());
        assert!(check_resource_perms(&["=PUB".into()]).is_err());
        assert!(
            AclConfig::default()
                .source
                .upsert(&AccountEdit { secret_key: Some("line\nbreak".into()), ..edit("newcomer") })
                .is_err()
        );
        assert!(AclSource::default().with_global_white(vec!["10.0.0.1\t".into()]).is_err());
    }

    fn edit(ak: &str) -> AccountEdit {
        AccountEdit { access_key: ak.into(), secret_key: Some("secret-key-1".into()), ..AccountEdit::default() }
    }

    #[test]
    fn edits_follow_javas_merge_rules() {
        let base = AclConfig::parse_yaml(YAML).unwrap().source;
        // A new account goes last, with only what the edit names.
        let added = base
            .upsert(&AccountEdit { admin: true, topic_perms: Some(vec!["t1=PUB".into()]), ..edit("newcomer") })
            .unwrap();
        let last = added.accounts.last().unwrap();
        assert_eq!((last.access_key.as_str(), last.admin), ("newcomer", true));
        assert_eq!(last.topic_perms, Some(vec!["t1=PUB".to_owned()]));
        assert_eq!((last.group_perms.as_ref(), last.default_topic_perm.as_ref()), (None, None));
        // An existing one keeps the fields the edit leaves out, moves to the end, and `admin` is
        // always replaced (Java's primitive field).
        let first = base.accounts[0].clone();
        let updated =
            base.upsert(&AccountEdit { default_group_perm: Some("PUB".into()), ..edit(&first.access_key) }).unwrap();
        assert_eq!(updated.accounts.len(), base.accounts.len());
        let moved = updated.accounts.last().unwrap();
        assert_eq!(moved.access_key, first.access_key);
        assert_eq!(moved.default_group_perm.as_deref(), Some("PUB"));
        assert_eq!(moved.default_topic_perm, first.default_topic_perm);
        assert_eq!(moved.topic_perms, first.topic_perms);
        assert!(!moved.admin);
        // Perm lists are replaced whole; an empty default perm leaves the old one.
        let replaced = base
            .upsert(&AccountEdit {
                topic_perms: Some(vec!["only=SUB".into()]),
                default_topic_perm: Some(String::new()),
                ..edit(&first.access_key)
            })
            .unwrap();
        let moved = replaced.accounts.last().unwrap();
        assert_eq!(moved.topic_perms, Some(vec!["only=SUB".to_owned()]));
        assert_eq!(moved.default_topic_perm, first.default_topic_perm);
        // Refusals: short keys (the secret is required on an update too, and never echoed), a bad
        // resource item, a bad address.
        let refused = |e: AccountEdit| base.upsert(&e).unwrap_err().0;
        assert!(refused(AccountEdit { secret_key: None, ..edit("newcomer") }).contains("longer than 6"));
        assert!(refused(edit("short")).contains("longer than 6"));
        let r = refused(AccountEdit { secret_key: Some("123456".into()), ..edit("newcomer") });
        assert!(!r.contains("123456"), "{r}");
        assert!(
            refused(AccountEdit { topic_perms: Some(vec!["t=PUBLISH".into()]), ..edit("newcomer") })
                .contains("t=PUBLISH")
        );
        assert!(refused(AccountEdit { group_perms: Some(vec!["g".into()]), ..edit("newcomer") }).contains("g"));
        assert!(
            refused(AccountEdit { white_remote_address: Some("300.1.1.1".into()), ..edit("newcomer") })
                .contains("whiteRemoteAddress")
        );
        // Delete and the global white list.
        assert_eq!(base.delete("nobody-here"), None);
        let deleted = base.delete(&first.access_key).unwrap();
        assert!(deleted.accounts.iter().all(|a| a.access_key != first.access_key));
        let white = base.with_global_white(vec!["10.0.0.*".into()]).unwrap();
        assert_eq!(white.global_white, vec!["10.0.0.*".to_owned()]);
        assert!(base.with_global_white(vec!["10.0.0.999".into()]).is_err());
    }

    #[test]
    fn a_written_file_reads_back_as_the_same_config_with_its_version() {
        let mut source = AclConfig::parse_yaml(YAML).unwrap().source;
        source = source
            .upsert(&AccountEdit {
                secret_key: Some("it's-0123".into()),
                white_remote_address: Some("192.168.1.*".into()),
                admin: true,
                default_topic_perm: Some("PUB|SUB".into()),
                group_perms: Some(Vec::new()),
                ..edit("0012345")
            })
            .unwrap();
        source.version = Some(AclVersion { counter: 7, timestamp: 1_700_000_000_123 });
        let yaml = source.to_yaml();
        let back = AclConfig::parse_yaml(&yaml).unwrap();
        assert_eq!(back.source, source, "{yaml}");
        let original = AclConfig::parse_yaml(YAML).unwrap();
        for (key, account) in &original.accounts {
            assert_eq!(back.accounts.get(key), Some(account), "{key} unchanged");
        }
        let ak = back.accounts.get("0012345").expect("a numeric-looking key stays text");
        assert!(ak.admin);
        assert_eq!(ak.default_topic_perm, perm::PUB | perm::SUB);
        assert!(yaml.contains("dataVersion:\n  - counter: 7\n    timestamp: 1700000000123\n"), "{yaml}");
        // Java's own layout of the version reads too.
        let java = "accounts: []\ndataVersion:\n- counter: 2\n  timestamp: 1700000000000\n";
        let v = AclConfig::parse_yaml(java).unwrap().source.version;
        assert_eq!(v, Some(AclVersion { counter: 2, timestamp: 1_700_000_000_000 }));
        assert_eq!(v.unwrap().to_json(), r#"{"counter":2,"timestamp":1700000000000}"#);
        // An empty config writes lists Java reads as empty.
        assert_eq!(AclSource::default().to_yaml(), "globalWhiteRemoteAddresses: []\naccounts: []\n");
        assert_eq!(AclConfig::parse_yaml(&AclSource::default().to_yaml()).unwrap(), AclConfig::default());
    }

    #[test]
    fn a_replicated_edit_is_installed_once_and_never_undoes_a_later_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config").join("plain_acl.yml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, YAML).unwrap();
        let acl = Acl::load(&path).unwrap();
        let doc = |counter: i64, ak: &str| {
            let mut s = acl.current().source.upsert(&edit(ak)).unwrap();
            s.version = Some(AclVersion { counter, timestamp: counter * 10 });
            AclDocument { version: s.version.unwrap(), yaml: s.to_yaml() }
        };
        let second = doc(2, "second-account");
        let first = doc(1, "first-account");
        assert!(acl.install(&second).unwrap());
        assert!(acl.current().accounts.contains_key("second-account"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), second.yaml);
        assert!(!acl.reload_if_changed(), "our own write is not a change to reload");
        assert!(!acl.install(&first).unwrap(), "an older edit (a restart re-applying) is skipped");
        assert!(!acl.install(&second).unwrap(), "so is the same one");
        assert!(!acl.current().accounts.contains_key("first-account"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), second.yaml);
        let names: Vec<_> =
            std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("plain_acl.yml")], "no temporary file is left");
        let bad = AclDocument { version: AclVersion { counter: 3, timestamp: 0 }, yaml: "accounts: [".into() };
        assert!(acl.install(&bad).is_err());
        assert!(acl.current().accounts.contains_key("second-account"), "a bad document changes nothing");
    }

    #[test]
    fn a_restart_keeps_a_hand_edit_of_the_last_replicated_file_and_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        std::fs::write(&path, YAML).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let acl = Acl::load(&path).unwrap();
        let mut source = acl.current().source.upsert(&edit("replicated")).unwrap();
        source.version = Some(AclVersion { counter: 4, timestamp: 40 });
        let doc = AclDocument { version: source.version.unwrap(), yaml: source.to_yaml() };
        assert!(acl.install(&doc).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640, "secrets stay private");
        // By hand, keeping the dataVersion line; then a restart replays the same edit.
        let hand = std::fs::read_to_string(&path).unwrap().replace("'replicated'", "'hand-edited'");
        std::fs::write(&path, &hand).unwrap();
        let stale = dir.path().join(".plain_acl.yml.77.0.tmp");
        std::fs::write(&stale, "secrets left by a crash").unwrap();
        let restarted = Acl::load(&path).unwrap();
        assert!(!stale.exists(), "a crash's temporary file goes at load");
        assert!(!restarted.install(&doc).unwrap(), "the file holds that edit");
        assert!(restarted.current().accounts.contains_key("hand-edited"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), hand);
        // A file from elsewhere, with a larger counter of its own, still takes the group's edit.
        let mut foreign = AclConfig::parse_yaml(YAML).unwrap().source;
        foreign.version = Some(AclVersion { counter: 45, timestamp: 1 });
        std::fs::write(&path, foreign.to_yaml()).unwrap();
        let migrated = Acl::load(&path).unwrap();
        assert!(migrated.install(&doc).unwrap());
        assert!(migrated.current().accounts.contains_key("replicated"));
    }
}
