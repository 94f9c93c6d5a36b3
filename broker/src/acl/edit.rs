//! Edits over the wire (mqadmin's `updateAclConfig` family): each turns the file as written
//! ([`AclSource`]) into the next one, with Java's merge and validation rules
//! (`PlainPermissionManager.updateAccessConfig`, `deleteAccessConfig`, `updateGlobalWhiteAddrsConfig`).
//!
//! Pure: the caller replicates the resulting document; nothing here touches the file.
//! Invariants: a refused edit's text never echoes a secret; every value an edit writes is printable,
//! so the file it leads to says what the edit said.

use raftmq_common::protocol::acl_account::PlainAccessConfig;

use super::address::AddressPattern;
use super::document::AclSource;
use super::error::AclConfigError;
use super::perm::split_resource_perm;

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

/// Java's `Permission.checkResourcePerms`: every item is `name=PERM` with PERM one of DENY, PUB,
/// SUB, PUB|SUB, SUB|PUB.
pub(crate) fn check_resource_perms(items: &[String]) -> Result<(), AclConfigError> {
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
            None => PlainAccessConfig { access_key: edit.access_key.clone(), ..PlainAccessConfig::default() },
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
}
