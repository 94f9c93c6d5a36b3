//! Plain ACL administration (RocketMQ 4.9.8's): account and global-white-address edits (the leader
//! replicates them to every replica's ACL file), the ACL in force, its file versions. The account's
//! secret never appears in debug output.

use std::collections::BTreeMap;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::acl_config::GetBrokerClusterAclConfigResponseBody;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::header::acl::CreateAccessConfigRequestHeader;
use raftmq_common::protocol::header::acl::DeleteAccessConfigRequestHeader;
use raftmq_common::protocol::header::acl::GetBrokerAclConfigResponseHeader;
use raftmq_common::protocol::header::acl::UpdateGlobalWhiteAddrsConfigRequestHeader;
use raftmq_common::protocol::header::acl::join_list;

use super::client::Admin;
use super::response::decode_body;
use super::response::decode_header;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

/// A plain ACL account to create or update (the one type client and broker share).
pub use raftmq_common::protocol::acl_account::PlainAccessConfig;

/// One broker's plain ACL version (Java's `ClusterAclVersionInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclVersionInfo {
    /// The cluster.
    pub cluster_name: String,
    /// The broker group.
    pub broker_name: String,
    /// The broker.
    pub broker_addr: String,
    /// The ACL file's `dataVersion`.
    pub version: DataVersion,
    /// Each ACL file's `dataVersion`, by path.
    pub files: BTreeMap<String, DataVersion>,
}

impl Admin {
    /// Creates or updates an account of the plain ACL of the group the broker at `addr` belongs to
    /// (`updateAclConfig`, UPDATE_AND_CREATE_ACL_CONFIG). The leader replicates the edit to every
    /// replica's ACL file; a follower relays it there. Needs an `admin` account when the broker
    /// checks signatures. An existing account keeps the fields left `None`; `admin` is always set.
    pub async fn update_acl_config(&self, addr: &str, config: &PlainAccessConfig) -> Result<()> {
        let op = "updateAclConfig";
        let join = |list: &Option<Vec<String>>| list.as_deref().map(join_list);
        let header = CreateAccessConfigRequestHeader {
            access_key: config.access_key.clone(),
            secret_key: Some(config.secret_key.clone()),
            white_remote_address: config.white_remote_address.clone(),
            admin: Some(config.admin),
            default_topic_perm: config.default_topic_perm.clone(),
            default_group_perm: config.default_group_perm.clone(),
            topic_perms: join(&config.topic_perms),
            group_perms: join(&config.group_perms),
        };
        let request = RemotingCommand::request_with_header(RequestCode::UpdateAndCreateAclConfig, &header);
        self.broker_call(op, addr, request).await.map(drop).map_err(|e| e.with_context("accessKey", &config.access_key))
    }

    /// Removes account `access_key` from the plain ACL of the group the broker at `addr` belongs to
    /// (`deleteAclConfig`, DELETE_ACL_CONFIG). Removing an absent account succeeds.
    pub async fn delete_acl_config(&self, addr: &str, access_key: &str) -> Result<()> {
        let op = "deleteAclConfig";
        let header = DeleteAccessConfigRequestHeader { access_key: access_key.to_owned() };
        let request = RemotingCommand::request_with_header(RequestCode::DeleteAclConfig, &header);
        self.broker_call(op, addr, request).await.map(drop).map_err(|e| e.with_context("accessKey", access_key))
    }

    /// Replaces the plain ACL's `globalWhiteRemoteAddresses` of the group the broker at `addr`
    /// belongs to (`updateGlobalWhiteAddr`, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG).
    pub async fn update_global_white_addrs(&self, addr: &str, addresses: &[String]) -> Result<()> {
        let op = "updateGlobalWhiteAddr";
        let header = UpdateGlobalWhiteAddrsConfigRequestHeader {
            global_white_addrs: join_list(addresses),
            acl_file_full_path: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::UpdateGlobalWhiteAddrsConfig, &header);
        self.broker_call(op, addr, request).await.map(drop)
    }

    /// The plain ACL in force on the broker at `addr`: its global white addresses and every
    /// account, secret keys included (`getAccessConfigSubCommand`, GET_BROKER_CLUSTER_ACL_CONFIG);
    /// a raftmq broker answers an admin account only.
    pub async fn acl_config(&self, addr: &str) -> Result<GetBrokerClusterAclConfigResponseBody> {
        let op = "getAccessConfigSubCommand";
        let response =
            self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetBrokerClusterAclConfig)).await?;
        decode_body(op, &response)
    }

    /// The version of the plain ACL file in force on the broker at `addr` (`clusterAclConfigVersion`,
    /// GET_BROKER_CLUSTER_ACL_INFO): every replica of a group shows the same one once it has applied
    /// the group's last edit.
    pub async fn acl_version(&self, addr: &str) -> Result<AclVersionInfo> {
        let op = "clusterAclConfigVersion";
        let response =
            self.broker_call(op, addr, RemotingCommand::request(RequestCode::GetBrokerClusterAclInfo)).await?;
        let h: GetBrokerAclConfigResponseHeader = decode_header(op, &response)?;
        let version: DataVersion = serde_json::from_str(&h.version)
            .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "bad version JSON").with_source(e))?;
        let files: BTreeMap<String, DataVersion> = match h.all_acl_file_version.as_deref() {
            None | Some("") => BTreeMap::new(),
            Some(json) => serde_json::from_str(json)
                .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "bad allAclFileVersion JSON").with_source(e))?,
        };
        Ok(AclVersionInfo {
            cluster_name: h.cluster_name,
            broker_name: h.broker_name,
            broker_addr: h.broker_addr,
            version,
            files,
        })
    }
}
