//! [`PlainAccessConfig`]: one plain-ACL account as `plain_acl.yml` and UPDATE_AND_CREATE_ACL_CONFIG
//! write it (Java's `org.apache.rocketmq.common.PlainAccessConfig`), field by field as text, shared
//! by the client that sends an edit and the broker that keeps the file.
//!
//! Invariants:
//! - Every field keeps its text as written: the broker rewrites the file from it without changing
//!   what an edit did not touch, and checks the text only when it turns it into a rule.
//! - `Debug` masks the secret key, so the type can reach a log.

use super::body::acl_config::PlainAccessConfigData;

/// A plain ACL account (Java's `PlainAccessConfig`): what the client creates or updates, and one
/// entry of the broker's `plain_acl.yml` as written.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PlainAccessConfig {
    /// `accessKey` (more than 6 characters).
    pub access_key: String,
    /// `secretKey` (more than 6 characters; required on every update, as in Java).
    pub secret_key: String,
    /// `whiteRemoteAddress`: peers that need no signature for this account.
    pub white_remote_address: Option<String>,
    /// `admin`: whether it may send admin codes.
    pub admin: bool,
    /// `defaultTopicPerm`: `DENY`, `PUB`, `SUB` or `PUB|SUB`.
    pub default_topic_perm: Option<String>,
    /// `defaultGroupPerm`: `DENY`, `PUB`, `SUB` or `PUB|SUB`.
    pub default_group_perm: Option<String>,
    /// `topicPerms`: `topic=PERM` items (`None`: absent; an edit then leaves the account's list).
    pub topic_perms: Option<Vec<String>>,
    /// `groupPerms`: `group=PERM` items (`None`: absent; an edit then leaves the account's list).
    pub group_perms: Option<Vec<String>>,
}

impl std::fmt::Debug for PlainAccessConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainAccessConfig")
            .field("access_key", &self.access_key)
            .field("secret_key", &"******")
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

impl From<&PlainAccessConfig> for PlainAccessConfigData {
    /// The account as GET_BROKER_CLUSTER_ACL_CONFIG's body carries it (absent lists as empty).
    fn from(a: &PlainAccessConfig) -> Self {
        PlainAccessConfigData {
            access_key: a.access_key.clone(),
            secret_key: a.secret_key.clone(),
            white_remote_address: a.white_remote_address.clone(),
            admin: a.admin,
            default_topic_perm: a.default_topic_perm.clone(),
            default_group_perm: a.default_group_perm.clone(),
            topic_perms: a.topic_perms.clone().unwrap_or_default(),
            group_perms: a.group_perms.clone().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_masks_the_secret_and_the_body_keeps_every_field() {
        let account = PlainAccessConfig {
            access_key: "account1".into(),
            secret_key: "secret-key-1".into(),
            topic_perms: Some(vec!["t=PUB".into()]),
            ..PlainAccessConfig::default()
        };
        assert!(!format!("{account:?}").contains("secret-key-1"));
        let data = PlainAccessConfigData::from(&account);
        assert_eq!((data.secret_key.as_str(), data.topic_perms), ("secret-key-1", vec!["t=PUB".to_owned()]));
        assert!(data.group_perms.is_empty());
    }
}
