//! The two ways the ACL says no: a file (or edit) that is refused, and a request that is refused.
//! Their texts are what an operator or a client reads; they never carry a secret key.

/// Why `plain_acl.yml` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plain ACL config: {0}")]
pub struct AclConfigError(pub String);

/// Why a request was refused; the text is the response's remark.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AclDenied(pub String);
