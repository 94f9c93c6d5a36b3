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
//! Edits over the wire (mqadmin's `updateAclConfig` family, `crate::processors::acl`) change the
//! file's text ([`AclSource`]: each field as written), and every replica installs the resulting
//! document ([`Acl::install`]): it is put in force and written over the file, unless the file in force
//! carries exactly that `dataVersion` (it holds that edit, perhaps edited by hand since).
//!
//! Where things are: [`document`] the `plain_acl.yml` model and its YAML codec (through the
//! restricted reader in `yaml`), [`address`] white-address patterns, [`perm`] permission bits,
//! [`resource`] what each request code touches and needs, [`check`] the request check, [`credentials`]
//! a RocketMQ 5 gRPC call's credentials and their check, [`edit`] the
//! edits over the wire, `file` the file on disk, [`watcher`] the ACL in force and its poller,
//! [`error`] the refusals.
//!
//! Invariants:
//! - A config is all valid or not used (see [`watcher`]), never an open broker.
//! - The check runs in `BrokerProcessor::process` before any header is decoded, for every served
//!   code, oneway included. It reads the request only; a follower relays a request with its extFields
//!   and body unchanged (its relay client signs nothing; only the flag marks it relayed), so the leader checks the client's own signature. A client
//!   admitted by its address alone is checked by the leader against the follower's address, so
//!   its relayed QUERY_CONSUMER_OFFSET needs a signature.
//! - The admin HTTP port is not a way around it: under `aclEnable` every `/api/v1/` call needs
//!   `adminToken` (and the API is closed without one), see `crate::http`.
//! - Signatures are compared in constant time, an empty one never matches, and secret keys never
//!   reach a log or an error.

pub mod address;
pub mod check;
pub mod credentials;
pub mod document;
pub mod edit;
pub mod error;
mod file;
pub mod perm;
pub mod resource;
pub mod watcher;
mod yaml;

pub use address::AddressPattern;
pub use address::Octet;
pub use credentials::GrpcCaller;
pub use credentials::GrpcCredentials;
pub use document::Account;
pub use document::AclConfig;
pub use document::AclDocument;
pub use document::AclSource;
pub use document::AclVersion;
pub use edit::AccountEdit;
pub use error::AclConfigError;
pub use error::AclDenied;
pub use resource::ACL_EDIT_CODES;
pub use resource::ADMIN_CODES;
pub use resource::Resource;
pub use resource::resources;
pub use watcher::Acl;

#[cfg(test)]
mod tests;
