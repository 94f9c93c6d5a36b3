//! A RocketMQ 5 gRPC call's credentials and their check: the `authorization` and `x-mq-date-time`
//! metadata every rocketmq-clients SDK sends when given an access key and secret, checked as Java
//! 5.1's proxy checks them under `enableACL` (`AuthorizationHeader`, then
//! `PlainAccessResource.parse(GeneratedMessageV3, …)` and the plain ACL's `validate`).
//!
//! ```text
//! authorization: MQv2-HMAC-SHA1 Credential=<accessKey>[/…], SignedHeaders=x-mq-date-time, Signature=<hex>
//! x-mq-date-time: <whatever date-time text the client chose>
//! Signature = hex(HMAC-SHA1(secretKey, the x-mq-date-time text))
//! ```
//!
//! The client signs its date-time text, not its request, so a signature proves the secret but not
//! the call; as in Java nothing bounds its age (the clients format local time, Rust's as RFC 3339,
//! Java's and Python's as `yyyyMMdd'T'HHmmss'Z'`, so the text is not a clock to trust). TLS
//! (`docs/security.md`) is what keeps it from being replayed by someone on the path.
//!
//! The order of the check is the remoting one ([`super::check`]): a globally white-listed peer
//! passes, else the named account must exist, and its own white address or a valid signature
//! admits it, and then it must hold what the call needs ([`super::check::authorize`]). What each
//! RPC needs is the caller's to say (`raftmq-grpc`), from Java's table. The account a call proved
//! (by signature, or by its white address) is who it acts as: the remoting requests it turns into
//! are signed with that account's secret, also for a globally white-listed peer that proved one.
//!
//! Invariants: signatures are compared in constant time and an empty one never matches; a refusal's
//! text never carries a secret or the presented signature.

use std::net::IpAddr;

use raftmq_common::protocol::acl::base64_of_hex;
use raftmq_common::protocol::acl::signature;
use raftmq_common::protocol::acl::signatures_match;

use super::check::authorize;
use super::document::AclConfig;
use super::error::AclDenied;
use super::resource::Resource;

/// The gRPC metadata key of the credentials.
pub const AUTHORIZATION_METADATA_KEY: &str = "authorization";
/// The gRPC metadata key of the signed date-time text.
pub const DATE_TIME_METADATA_KEY: &str = "x-mq-date-time";

/// What a gRPC call presents: the access key it names and its signature over its date-time text.
/// Compared only in tests (`PartialEq` would compare the signature in variable time).
#[derive(Clone)]
#[cfg_attr(test, derive(PartialEq, Eq))]
pub struct GrpcCredentials {
    /// The `Credential`'s access key (what precedes its first `/`), when it names one.
    pub access_key: Option<String>,
    /// The `Signature`, converted from hex to the Base64 form signatures are compared in.
    signature_base64: Option<String>,
    /// The `x-mq-date-time` text the signature covers (empty when the call sent none).
    date_time: String,
}

impl std::fmt::Debug for GrpcCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcCredentials").field("access_key", &self.access_key).finish_non_exhaustive()
    }
}

impl GrpcCredentials {
    /// The credentials of a call's metadata: `None` when it has no `authorization` (an anonymous
    /// call). Parsed as Java's `AuthorizationHeader`: a method, a space, then `key=value` items
    /// split on commas, each trimmed; anything else, or a `Signature` that is not hex, is refused.
    /// A missing `Credential` or `Signature` is not refused here: a white-listed peer needs
    /// neither, and [`AclConfig::check_grpc`] says what is missing in Java's order.
    pub fn from_metadata(authorization: Option<&str>, date_time: Option<&str>) -> Result<Option<Self>, AclDenied> {
        let Some(authorization) = authorization else { return Ok(None) };
        let refused = |why: &str| AclDenied(format!("authorization header is incorrect: {why}"));
        let Some((_method, items)) = authorization.split_once(' ') else {
            return Err(refused("no space after the method"));
        };
        let (mut access_key, mut signature_base64) = (None, None);
        for item in items.split(',') {
            let Some((key, value)) = item.trim().split_once('=') else {
                return Err(refused("an item is not key=value"));
            };
            match key {
                "Credential" => access_key = value.split('/').next().filter(|k| !k.is_empty()).map(str::to_owned),
                "Signature" => {
                    signature_base64 = Some(base64_of_hex(value).ok_or_else(|| refused("the signature is not hex"))?)
                }
                _ => {}
            }
        }
        let date_time = date_time.unwrap_or_default().to_owned();
        Ok(Some(GrpcCredentials { access_key, signature_base64, date_time }))
    }

    /// Whether the signature is `secret_key`'s over the date-time text (an empty one never is).
    fn signed_with(&self, secret_key: &str) -> bool {
        let Some(presented) = self.signature_base64.as_deref().filter(|s| !s.is_empty()) else { return false };
        signatures_match(presented, &signature(self.date_time.as_bytes(), secret_key))
    }
}

/// Who a gRPC call acts as once admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrpcCaller {
    /// A globally white-listed peer: nothing was proven about an account.
    Anonymous,
    /// The account of this access key: its white address or its signature admitted the call.
    Account(String),
}

impl AclConfig {
    /// Whether a gRPC call from `peer` presenting `credentials` may do what `needed` lists, and as
    /// whom. No RPC needs an admin (Java's proxy maps each to a code that does not).
    pub fn check_grpc(
        &self,
        credentials: Option<&GrpcCredentials>,
        peer: IpAddr,
        needed: &[(Resource, u8)],
    ) -> Result<GrpcCaller, AclDenied> {
        if self.global_white.iter().any(|p| p.matches(peer)) {
            // Admitted whatever it presents; a proven account still signs what the call relays,
            // so that a leader which does not white-list the relaying replica sees who it is.
            let proven = credentials.and_then(|c| {
                let access_key = c.access_key.as_ref()?;
                c.signed_with(&self.accounts.get(access_key)?.secret_key).then(|| access_key.clone())
            });
            return Ok(proven.map_or(GrpcCaller::Anonymous, GrpcCaller::Account));
        }
        let Some((credentials, access_key)) = credentials.and_then(|c| Some((c, c.access_key.as_ref()?))) else {
            return Err(AclDenied("No accessKey is configured".into()));
        };
        let Some(account) = self.accounts.get(access_key) else {
            return Err(AclDenied(format!("No acl config for {access_key}")));
        };
        let caller = GrpcCaller::Account(access_key.clone());
        if account.white_remote_address.as_ref().is_some_and(|p| p.matches(peer)) {
            return Ok(caller);
        }
        if !credentials.signed_with(&account.secret_key) {
            return Err(AclDenied(format!("Check signature failed for accessKey={access_key}")));
        }
        authorize(account, false, 0, needed)?;
        Ok(caller)
    }

    /// The secret key of `access_key`'s account, to sign the remoting requests a gRPC call admitted
    /// as that account turns into (they are checked again, on this replica or on the leader).
    pub fn secret_key_of(&self, access_key: &str) -> Option<&str> {
        self.accounts.get(access_key).map(|a| a.secret_key.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::perm;

    const YAML: &str = r#"
globalWhiteRemoteAddresses:
- 10.9.9.*
accounts:
- accessKey: producer
  secretKey: producer-secret
  defaultTopicPerm: DENY
  topicPerms:
  - Orders=PUB
- accessKey: nearby-host
  secretKey: nearby-secret
  whiteRemoteAddress: 192.168.1.*
  defaultTopicPerm: DENY
"#;

    fn config() -> AclConfig {
        AclConfig::parse_yaml(YAML).expect("valid yaml")
    }

    /// What rocketmq-clients sends: the hex HMAC-SHA1 of the date-time text.
    fn authorization(access_key: &str, secret: &str, date_time: &str) -> String {
        let raw =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, signature(date_time.as_bytes(), secret))
                .expect("base64");
        let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        format!("MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, Signature={hex}")
    }

    fn creds(access_key: &str, secret: &str) -> GrpcCredentials {
        let date = "2026-12-07T16:50:01.5+00:00";
        GrpcCredentials::from_metadata(Some(&authorization(access_key, secret, date)), Some(date))
            .expect("parses")
            .expect("present")
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    fn publish(topic: &str) -> Vec<(Resource, u8)> {
        vec![(Resource::Topic(topic.into()), perm::PUB)]
    }

    #[test]
    fn a_signed_call_acts_as_its_account_within_its_perms() {
        let acl = config();
        let c = creds("producer", "producer-secret");
        let caller = acl.check_grpc(Some(&c), ip("127.0.0.1"), &publish("Orders"));
        assert_eq!(caller, Ok(GrpcCaller::Account("producer".into())));
        let e = acl.check_grpc(Some(&c), ip("127.0.0.1"), &publish("Payments")).unwrap_err();
        assert!(e.0.contains("No default permission for topic:Payments"), "{e}");
    }

    #[test]
    fn a_wrong_secret_an_unknown_key_or_no_credentials_are_refused_with_javas_reasons() {
        let acl = config();
        let peer = ip("127.0.0.1");
        let e = acl.check_grpc(Some(&creds("producer", "guessed")), peer, &publish("Orders")).unwrap_err();
        assert_eq!(e.0, "Check signature failed for accessKey=producer");
        let e = acl.check_grpc(Some(&creds("stranger", "x")), peer, &publish("Orders")).unwrap_err();
        assert_eq!(e.0, "No acl config for stranger");
        let e = acl.check_grpc(None, peer, &publish("Orders")).unwrap_err();
        assert_eq!(e.0, "No accessKey is configured");
    }

    #[test]
    fn white_addresses_admit_without_a_signature() {
        let acl = config();
        assert_eq!(acl.check_grpc(None, ip("10.9.9.4"), &publish("Any")), Ok(GrpcCaller::Anonymous));
        let unsigned = creds("nearby-host", "not-the-secret");
        let caller = acl.check_grpc(Some(&unsigned), ip("192.168.1.7"), &publish("Denied"));
        assert_eq!(caller, Ok(GrpcCaller::Account("nearby-host".into())), "the account's own white address");
        assert!(acl.check_grpc(Some(&unsigned), ip("192.168.2.7"), &publish("Denied")).is_err());
    }

    #[test]
    fn the_signature_covers_the_date_time_text_the_call_sent() {
        let acl = config();
        let header = authorization("producer", "producer-secret", "20261207T165001Z");
        let other_time = GrpcCredentials::from_metadata(Some(&header), Some("20261207T165002Z")).unwrap().unwrap();
        let e = acl.check_grpc(Some(&other_time), ip("127.0.0.1"), &publish("Orders")).unwrap_err();
        assert_eq!(e.0, "Check signature failed for accessKey=producer");
        let upper = header
            .to_uppercase()
            .replace("MQV2-HMAC-SHA1 CREDENTIAL=PRODUCER, SIGNEDHEADERS=X-MQ-DATE-TIME, SIGNATURE=", "");
        let java_style =
            format!("MQv2-HMAC-SHA1 Credential=producer/2026/cn, SignedHeaders=x-mq-date-time, Signature={upper}");
        let c = GrpcCredentials::from_metadata(Some(&java_style), Some("20261207T165001Z")).unwrap().unwrap();
        assert!(
            acl.check_grpc(Some(&c), ip("127.0.0.1"), &publish("Orders")).is_ok(),
            "upper-case hex, scoped credential"
        );
    }

    #[test]
    fn malformed_metadata_is_refused_and_absent_parts_are_refused_by_the_check() {
        assert_eq!(GrpcCredentials::from_metadata(None, Some("t")), Ok(None));
        for (auth, why) in [
            ("MQv2-HMAC-SHA1", "no space after the method"),
            ("MQv2-HMAC-SHA1 Credential", "an item is not key=value"),
            ("MQv2-HMAC-SHA1 Credential=ak, Signature=xyz", "the signature is not hex"),
        ] {
            let e = GrpcCredentials::from_metadata(Some(auth), Some("t")).unwrap_err();
            assert_eq!(e.0, format!("authorization header is incorrect: {why}"), "{auth:?}");
        }
        let acl = config();
        let peer = ip("127.0.0.1");
        let parse = |auth: &str, date: Option<&str>| GrpcCredentials::from_metadata(Some(auth), date).unwrap().unwrap();
        let no_key = parse("MQv2-HMAC-SHA1 Signature=00ff", Some("t"));
        assert_eq!(acl.check_grpc(Some(&no_key), peer, &[]).unwrap_err().0, "No accessKey is configured");
        for unsigned in [
            parse("MQv2-HMAC-SHA1 Credential=producer", Some("t")),
            parse("MQv2-HMAC-SHA1 Credential=producer, Signature=", Some("t")),
            parse(&authorization("producer", "producer-secret", "t"), None),
        ] {
            let e = acl.check_grpc(Some(&unsigned), peer, &[]).unwrap_err();
            assert_eq!(e.0, "Check signature failed for accessKey=producer", "{unsigned:?}");
        }
        let white = parse("MQv2-HMAC-SHA1 Credential=nearby-host", None);
        let caller = acl.check_grpc(Some(&white), ip("192.168.1.7"), &[]);
        assert_eq!(caller, Ok(GrpcCaller::Account("nearby-host".into())), "its white address needs no signature");
    }

    #[test]
    fn a_globally_white_peer_that_proves_an_account_acts_as_it() {
        let acl = config();
        let white = ip("10.9.9.4");
        let proven = creds("producer", "producer-secret");
        assert_eq!(acl.check_grpc(Some(&proven), white, &publish("Any")), Ok(GrpcCaller::Account("producer".into())));
        let unproven = creds("producer", "guessed");
        assert_eq!(acl.check_grpc(Some(&unproven), white, &publish("Any")), Ok(GrpcCaller::Anonymous));
    }

    #[test]
    fn the_trace_topic_never_vouches_for_another_topic() {
        use raftmq_common::message::validate::RMQ_SYS_TRACE_TOPIC;
        let acl = config();
        let c = creds("producer", "producer-secret");
        let peer = ip("127.0.0.1");
        assert!(acl.check_grpc(Some(&c), peer, &publish(RMQ_SYS_TRACE_TOPIC)).is_ok(), "traces go anywhere");
        let both = [publish(RMQ_SYS_TRACE_TOPIC), publish("Payments")].concat();
        let e = acl.check_grpc(Some(&c), peer, &both).unwrap_err();
        assert!(e.0.contains("No default permission for topic:Payments"), "{e}");
        let allowed = [publish(RMQ_SYS_TRACE_TOPIC), publish("Orders")].concat();
        assert!(acl.check_grpc(Some(&c), peer, &allowed).is_ok());
    }
}
