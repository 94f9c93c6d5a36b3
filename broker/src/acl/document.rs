//! The `plain_acl.yml` model and its codec: [`AclConfig`] (the rules in force, with the file as
//! written in [`AclSource`]), its `dataVersion` ([`AclVersion`]), the replicated whole-file edit
//! ([`AclDocument`]); reading the file ([`AclConfig::parse_yaml`]), writing it
//! ([`AclSource::to_yaml`]) and answering it (GET_BROKER_CLUSTER_ACL_CONFIG).
//!
//! The file (RocketMQ's layout, one file): `globalWhiteRemoteAddresses`, and `accounts` with
//! `accessKey`, `secretKey` (both longer than 6 characters), `whiteRemoteAddress`, `admin`,
//! `defaultTopicPerm`, `defaultGroupPerm`, `topicPerms` and `groupPerms` (`name=PUB|SUB`). Scalars
//! are read as written (no YAML number conversion).
//!
//! Invariants: a config is all valid or an error; what [`AclSource::to_yaml`] writes parses back to
//! the same config and source; secret keys never reach `Debug`.

use std::collections::HashMap;

use raftmq_common::protocol::acl_account::PlainAccessConfig;
use raftmq_common::protocol::body::acl_config::GetBrokerClusterAclConfigResponseBody;
use raftmq_common::protocol::body::acl_config::PlainAccessConfigData;

use super::address::AddressPattern;
use super::error::AclConfigError;
use super::perm;
use super::perm::split_resource_perm;
use super::resource::Resource;
use super::yaml::Node;
use super::yaml::parse_tree;

/// One account of `plain_acl.yml` (`PlainAccessConfig`).
#[derive(Clone, PartialEq, Eq)]
pub struct Account {
    /// `accessKey`.
    pub access_key: String,
    pub(crate) secret_key: String,
    /// `whiteRemoteAddress`: peers that need no signature for this account (except for
    /// [`ACL_EDIT_CODES`](super::resource::ACL_EDIT_CODES)).
    pub white_remote_address: Option<AddressPattern>,
    /// `admin`: may send [`ADMIN_CODES`](super::resource::ADMIN_CODES); with no explicit perms, may touch everything.
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

/// `plain_acl.yml` as written, in file order (each account as [`PlainAccessConfig`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSource {
    /// `globalWhiteRemoteAddresses`.
    pub global_white: Vec<String>,
    /// `accounts`, in file order.
    pub accounts: Vec<PlainAccessConfig>,
    /// `dataVersion`.
    pub version: Option<AclVersion>,
}

impl AclSource {
    /// The file as GET_BROKER_CLUSTER_ACL_CONFIG answers it: white addresses and every account,
    /// secrets included (only an admin account gets the answer).
    pub fn to_response_body(&self) -> GetBrokerClusterAclConfigResponseBody {
        GetBrokerClusterAclConfigResponseBody {
            global_white_addrs: self.global_white.clone(),
            plain_access_configs: self.accounts.iter().map(PlainAccessConfigData::from).collect(),
        }
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

    fn parse_account(item: &Node) -> Result<(Account, PlainAccessConfig), AclConfigError> {
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
        let mut written = PlainAccessConfig {
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
}

/// One replicated edit: the whole file it leads to and its version (the entry every replica
/// applies, `crate::state::entry::BrokerCommand::AclDocument`).
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
