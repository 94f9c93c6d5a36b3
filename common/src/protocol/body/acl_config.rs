//! `GetBrokerClusterAclConfigResponseBody`: the plain ACL a broker has in force, its answer to
//! GET_BROKER_CLUSTER_ACL_CONFIG (54; `mqadmin getAccessConfigSubCommand`, the RocketMQ
//! dashboard's ACL page): the global white addresses and every account, secret keys included, as
//! Java sends them. Because of the secrets a raftmq broker answers it to an admin account only.
//!
//! Java's lists may come as `null` (an account without `topicPerms`); they read as empty.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::null_as_default;

/// One account (`org.apache.rocketmq.common.PlainAccessConfig`).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PlainAccessConfigData {
    /// `accessKey`.
    #[serde(deserialize_with = "null_as_default")]
    pub access_key: String,
    /// `secretKey`.
    #[serde(deserialize_with = "null_as_default")]
    pub secret_key: String,
    /// `whiteRemoteAddress`: peers that need no signature for this account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub white_remote_address: Option<String>,
    /// `admin`: may send admin codes.
    pub admin: bool,
    /// `defaultTopicPerm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_topic_perm: Option<String>,
    /// `defaultGroupPerm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_group_perm: Option<String>,
    /// `topicPerms`: `topic=PERM` items.
    #[serde(deserialize_with = "null_as_default")]
    pub topic_perms: Vec<String>,
    /// `groupPerms`: `group=PERM` items.
    #[serde(deserialize_with = "null_as_default")]
    pub group_perms: Vec<String>,
}

impl std::fmt::Debug for PlainAccessConfigData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainAccessConfigData")
            .field("access_key", &self.access_key)
            .field("secret_key", &"******")
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

/// `org.apache.rocketmq.common.protocol.body.GetBrokerClusterAclConfigResponseBody`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetBrokerClusterAclConfigResponseBody {
    /// `globalWhiteAddrs`: peers that pass without any check.
    #[serde(deserialize_with = "null_as_default")]
    pub global_white_addrs: Vec<String>,
    /// `plainAccessConfigs`: every account, in the file's order.
    #[serde(deserialize_with = "null_as_default")]
    pub plain_access_configs: Vec<PlainAccessConfigData>,
}

impl JsonBody for GetBrokerClusterAclConfigResponseBody {
    const NAME: &'static str = "GetBrokerClusterAclConfigResponseBody";
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAVA: &str = r#"{"globalWhiteAddrs":["10.10.103.*"],"plainAccessConfigs":[{"accessKey":"RocketMQ","admin":false,"defaultGroupPerm":"SUB","defaultTopicPerm":"DENY","groupPerms":["groupA=DENY"],"secretKey":"12345678","topicPerms":["topicA=DENY","topicB=PUB|SUB"],"whiteRemoteAddress":"192.168.0.*"},{"accessKey":"rocketmq2","admin":true,"groupPerms":null,"secretKey":"12345678","topicPerms":null}]}"#;

    #[test]
    fn reads_what_java_writes_nulls_as_empty() {
        let body = GetBrokerClusterAclConfigResponseBody::decode(JAVA.as_bytes()).unwrap();
        assert_eq!(body.global_white_addrs, ["10.10.103.*"]);
        let [first, second] = body.plain_access_configs.as_slice() else { panic!("{body:?}") };
        assert_eq!(first.access_key, "RocketMQ");
        assert_eq!(first.topic_perms, ["topicA=DENY", "topicB=PUB|SUB"]);
        assert_eq!(first.white_remote_address.as_deref(), Some("192.168.0.*"));
        assert!(second.admin && second.topic_perms.is_empty() && second.default_topic_perm.is_none());
        let again = GetBrokerClusterAclConfigResponseBody::decode(&body.encode().unwrap()).unwrap();
        assert_eq!(again, body);
    }

    #[test]
    fn the_secret_stays_out_of_debug_output() {
        let config =
            PlainAccessConfigData { access_key: "ak".into(), secret_key: "s3cr3t!!".into(), ..Default::default() };
        assert!(!format!("{config:?}").contains("s3cr3t"));
        assert!(GetBrokerClusterAclConfigResponseBody::decode(b"{\"plainAccessConfigs\":7}").is_err());
    }
}
