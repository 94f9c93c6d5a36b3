//! Headers of the plain ACL's administration requests (RocketMQ 4.9.8, `mqadmin updateAclConfig`,
//! `deleteAclConfig`, `updateGlobalWhiteAddr`, `clusterAclConfigVersion`).
//!
//! Java sends `topicPerms` and `groupPerms` as one string, the list joined with `,`
//! ([`join_list`], [`split_list`]), and `admin` always (a primitive `boolean`). The lower-case
//! `accessKey` / `secretKey` here name the account being edited; the request's own signature travels
//! under `AccessKey` / `Signature` ([`crate::protocol::acl`]).

use super::ext_header::ext_header;

ext_header! {
    /// UPDATE_AND_CREATE_ACL_CONFIG (50) request (`CreateAccessConfigRequestHeader`).
    pub struct CreateAccessConfigRequestHeader {
        /// The account.
        required access_key: String => "accessKey",
        /// Its secret (Java requires one on every update too).
        optional secret_key: Option<String> => "secretKey",
        /// Peers that need no signature for this account.
        optional white_remote_address: Option<String> => "whiteRemoteAddress",
        /// Whether the account may send admin codes (Java always sends it; absent reads as false).
        optional admin: Option<bool> => "admin",
        /// `DENY`, `PUB`, `SUB` or `PUB|SUB`.
        optional default_topic_perm: Option<String> => "defaultTopicPerm",
        /// `DENY`, `PUB`, `SUB` or `PUB|SUB`.
        optional default_group_perm: Option<String> => "defaultGroupPerm",
        /// `topic=PERM` items joined with `,`.
        optional topic_perms: Option<String> => "topicPerms",
        /// `group=PERM` items joined with `,`.
        optional group_perms: Option<String> => "groupPerms",
    }
}

ext_header! {
    /// DELETE_ACL_CONFIG (51) request (`DeleteAccessConfigRequestHeader`).
    pub struct DeleteAccessConfigRequestHeader {
        /// The account.
        required access_key: String => "accessKey",
    }
}

ext_header! {
    /// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) request (`UpdateGlobalWhiteAddrsConfigRequestHeader`).
    pub struct UpdateGlobalWhiteAddrsConfigRequestHeader {
        /// Address patterns joined with `,` (they replace the list).
        required global_white_addrs: String => "globalWhiteAddrs",
        /// The ACL file to change (4.9.4+; absent or empty: the broker's one file).
        optional acl_file_full_path: Option<String> => "aclFileFullPath",
    }
}

ext_header! {
    /// GET_BROKER_CLUSTER_ACL_INFO (52) response (`GetBrokerAclConfigResponseHeader`); the request
    /// has no header.
    pub struct GetBrokerAclConfigResponseHeader {
        /// The ACL file's `DataVersion` JSON (`{"counter":3,"timestamp":...}`).
        required version: String => "version",
        /// `{"<file path>": DataVersion}` JSON (4.9.3+).
        optional all_acl_file_version: Option<String> => "allAclFileVersion",
        /// The broker group.
        required broker_name: String => "brokerName",
        /// This broker's remoting address.
        required broker_addr: String => "brokerAddr",
        /// The cluster.
        required cluster_name: String => "clusterName",
    }
}

/// Java's `UtilAll.split(s, ",")`: the items of a `,`-joined list, empty items dropped.
pub fn split_list(joined: &str) -> Vec<String> {
    joined.split(',').filter(|s| !s.trim().is_empty()).map(str::to_owned).collect()
}

/// Java's `UtilAll.join(list, ",")`.
pub fn join_list(items: &[String]) -> String {
    items.join(",")
}

#[cfg(test)]
mod tests {
    use super::super::ext_header::testing::check_header;
    use super::*;

    #[test]
    fn acl_headers_hold_the_shared_properties() {
        check_header::<CreateAccessConfigRequestHeader>();
        check_header::<DeleteAccessConfigRequestHeader>();
        check_header::<UpdateGlobalWhiteAddrsConfigRequestHeader>();
        check_header::<GetBrokerAclConfigResponseHeader>();
    }

    #[test]
    fn lists_travel_comma_joined() {
        let items = vec!["topicA=DENY".to_owned(), "topicB=PUB|SUB".to_owned()];
        assert_eq!(join_list(&items), "topicA=DENY,topicB=PUB|SUB");
        assert_eq!(split_list("topicA=DENY,topicB=PUB|SUB"), items);
        assert_eq!(split_list(""), Vec::<String>::new());
        assert_eq!(split_list("a=SUB,,b=PUB"), vec!["a=SUB".to_owned(), "b=PUB".to_owned()]);
    }
}
