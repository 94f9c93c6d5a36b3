//! RocketMQ 4.x plain-ACL request signatures (`AclClientRPCHook`, `PlainAccessValidator`): what a
//! signed request carries and how its signature is computed, shared by the client that signs and
//! the broker that checks.
//!
//! A signed request carries `AccessKey`, `Signature` and, with temporary credentials,
//! `SecurityToken` in its `extFields`. The signature is HMAC-SHA1 keyed by the secret key over the
//! request's content, Base64-encoded with padding. The content is the values of every `extFields`
//! entry except `Signature`, concatenated in the order of their keys as a Java
//! `TreeMap<String, String>` sorts them (UTF-16 code units), as UTF-8, followed by the body (Java's
//! client from 4.9.4 on, and `rocketmq-client-rust`).
//!
//! Invariants:
//! - The client signs what Java's client signs: every field but `Signature`.
//! - Java 4.9.8's broker leaves `_UNIQUE_KEY_QUERY` out of the content it recomputes, while every
//!   client signs it (QUERY_MESSAGE adds it before the hook runs; RocketMQ issues #5310, #5636;
//!   RocketMQ 5 leaves it out only for clients of 4.9.3 or older). [`signature_of`] computes either
//!   form; our broker accepts both.
//! - A secret key never leaves [`SessionCredentials`] except into the HMAC; `Debug` masks it.

use base64::Engine as _;
use hmac::KeyInit;
use hmac::Mac;

use super::command::RemotingCommand;
use super::ext_fields::ExtFields;
use super::ext_fields::FieldStr;
use crate::message::msg_id::hex_nibble;

/// `extFields` key of the account's access key (`SessionCredentials.ACCESS_KEY`).
pub const ACCESS_KEY: &str = "AccessKey";
/// `extFields` key of the request's signature (`SessionCredentials.SIGNATURE`).
pub const SIGNATURE: &str = "Signature";
/// `extFields` key of a temporary credential's token (`SessionCredentials.SECURITY_TOKEN`).
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// `extFields` key QUERY_MESSAGE adds to its header (`MixAll.UNIQUE_MSG_QUERY_FLAG`).
pub const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

/// An account's credentials, as a client signs with them (`SessionCredentials`).
#[derive(Clone, PartialEq, Eq)]
pub struct SessionCredentials {
    access_key: String,
    secret_key: String,
    security_token: Option<String>,
}

/// Why credentials were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// A key is empty.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// A key has a character that cannot travel in a header value.
    #[error("{0} must not contain control characters")]
    ControlCharacter(&'static str),
}

impl SessionCredentials {
    /// Credentials of `access_key` / `secret_key`; both must be non-empty and free of control
    /// characters.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Result<Self, CredentialsError> {
        let access_key = access_key.into();
        let secret_key = secret_key.into();
        check_key("accessKey", &access_key)?;
        check_key("secretKey", &secret_key)?;
        Ok(SessionCredentials { access_key, secret_key, security_token: None })
    }

    /// The same credentials carrying a security token (temporary credentials).
    pub fn with_security_token(mut self, token: impl Into<String>) -> Result<Self, CredentialsError> {
        let token = token.into();
        check_key("securityToken", &token)?;
        self.security_token = Some(token);
        Ok(self)
    }

    /// The access key.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Adds `AccessKey` (and `SecurityToken`) to `command` and signs it, replacing any signature
    /// it carried (`AclClientRPCHook.doBeforeRequest`).
    pub fn sign(&self, command: &mut RemotingCommand) {
        command.ext_fields.insert(FieldStr::const_new(ACCESS_KEY), FieldStr::from(self.access_key.as_str()));
        if let Some(token) = &self.security_token {
            command.ext_fields.insert(FieldStr::const_new(SECURITY_TOKEN), FieldStr::from(token.as_str()));
        }
        let signature = signature_of(&command.ext_fields, &command.body, true, &self.secret_key);
        command.ext_fields.insert(FieldStr::const_new(SIGNATURE), FieldStr::from(signature));
    }
}

impl std::fmt::Debug for SessionCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCredentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"******")
            .field("security_token", &self.security_token.as_ref().map(|_| "******"))
            .finish()
    }
}

fn check_key(name: &'static str, value: &str) -> Result<(), CredentialsError> {
    if value.is_empty() {
        return Err(CredentialsError::Empty(name));
    }
    if value.chars().any(char::is_control) {
        return Err(CredentialsError::ControlCharacter(name));
    }
    Ok(())
}

/// The values a signature covers, in order (see [`signed_content`]).
fn signed_values(fields: &ExtFields, with_unique_flag: bool) -> Vec<&FieldStr> {
    let mut signed: Vec<(&FieldStr, &FieldStr)> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != SIGNATURE && (with_unique_flag || k.as_str() != UNIQUE_MSG_QUERY_FLAG))
        .collect();
    // Java compares strings by UTF-16 code unit; UTF-8 byte order differs above U+FFFF only, so
    // the usual ASCII keys compare as bytes.
    signed.sort_by(|(a, _), (b, _)| {
        if a.is_ascii() && b.is_ascii() {
            a.as_bytes().cmp(b.as_bytes())
        } else {
            a.encode_utf16().cmp(b.encode_utf16())
        }
    });
    signed.into_iter().map(|(_, v)| v).collect()
}

/// The signature of a request with `fields` and `body` under `secret_key`: [`signature`] of
/// [`signed_content`], hashed piece by piece instead of copying a body of up to 4 MiB.
pub fn signature_of(fields: &ExtFields, body: &[u8], with_unique_flag: bool, secret_key: &str) -> String {
    let values = signed_values(fields, with_unique_flag);
    hmac_base64(secret_key, values.iter().map(|v| v.as_bytes()).chain(std::iter::once(body)))
}

/// The bytes a signature covers: the values of `fields` but `Signature` (and `_UNIQUE_KEY_QUERY`
/// unless `with_unique_flag`), in Java `TreeMap` key order, then `body`
/// (`AclUtils.combineRequestContent`).
pub fn signed_content(fields: &ExtFields, body: &[u8], with_unique_flag: bool) -> Vec<u8> {
    let values = signed_values(fields, with_unique_flag);
    let len = values.iter().map(|v| v.len()).sum::<usize>() + body.len();
    let mut content = Vec::with_capacity(len);
    for value in values {
        content.extend_from_slice(value.as_bytes());
    }
    content.extend_from_slice(body);
    content
}

/// Base64 (standard alphabet, padded) of HMAC-SHA1 of `content` keyed by `secret_key`'s UTF-8
/// bytes (`AclUtils.calSignature`).
pub fn signature(content: &[u8], secret_key: &str) -> String {
    hmac_base64(secret_key, std::iter::once(content))
}

/// Base64 of HMAC-SHA1 over `parts` in order, keyed by `secret_key`.
fn hmac_base64<'a>(secret_key: &str, parts: impl Iterator<Item = &'a [u8]>) -> String {
    let Ok(mut mac) = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret_key.as_bytes()) else {
        // HMAC takes keys of any length; an empty answer never matches a presented signature.
        return String::new();
    };
    for part in parts {
        mac.update(part);
    }
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// The Base64 form of a hex-encoded signature (either case), as [`signature`] writes it: RocketMQ 5's
/// gRPC clients send theirs in hex (`MQv2-HMAC-SHA1 … Signature=<hex>`), and Java's proxy converts
/// it before comparing. `None` for anything that is not an even run of hex digits.
pub fn base64_of_hex(hex: &str) -> Option<String> {
    let digits = hex.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let bytes = digits
        .chunks_exact(2)
        .map(|p| Some(hex_nibble(p[0])? << 4 | hex_nibble(p[1])?))
        .collect::<Option<Vec<u8>>>()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Whether `candidate` equals `expected`, in time independent of where they first differ.
pub fn signatures_match(candidate: &str, expected: &str) -> bool {
    let (a, b) = (candidate.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RequestCode;

    fn f(s: &str) -> FieldStr {
        FieldStr::from(s)
    }

    #[test]
    fn hmac_sha1_base64_matches_the_rfc_2202_vector() {
        // RFC 2202 test case 2: key "Jefe", data "what do ya want for nothing?".
        // HMAC-SHA1 = effcdf6ae5eb2fa2d27416d5f184df9c259a7c79.
        assert_eq!(signature(b"what do ya want for nothing?", "Jefe"), "7/zfauXrL6LSdBbV8YTfnCWafHk=");
    }

    #[test]
    fn a_hex_signature_reads_as_the_base64_one_in_either_case() {
        let hex = "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79";
        assert_eq!(base64_of_hex(hex).as_deref(), Some("7/zfauXrL6LSdBbV8YTfnCWafHk="));
        assert_eq!(base64_of_hex(&hex.to_uppercase()).as_deref(), Some("7/zfauXrL6LSdBbV8YTfnCWafHk="));
        assert_eq!(base64_of_hex(""), Some(String::new()));
        for bad in ["abc", "zz", "7/zfauXr", "e\u{e9}"] {
            assert_eq!(base64_of_hex(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn javas_test_vector() {
        // extFields {AccessKey=ak, SecurityToken=token, a=first, z=last}, body "body", secret
        // "secret": what Java's AclClientRPCHook (4.9.4+) and rocketmq-client-rust sign.
        let fields: ExtFields =
            [(f("z"), f("last")), (f(ACCESS_KEY), f("ak")), (f("a"), f("first")), (f(SECURITY_TOKEN), f("token"))]
                .into_iter()
                .collect();
        let content = signed_content(&fields, b"body", true);
        assert_eq!(content, b"aktokenfirstlastbody".to_vec());
        assert_eq!(signature(&content, "secret"), "wuJkFDNRMKY6aFXTDwT/vg0UC8M=");
        assert_eq!(signature_of(&fields, b"body", true, "secret"), "wuJkFDNRMKY6aFXTDwT/vg0UC8M=");
    }

    #[test]
    fn content_is_values_in_java_key_order_then_the_body_without_signature() {
        let fields: ExtFields = [
            (f("b"), f("TopicA")),
            (f(ACCESS_KEY), f("ak")),
            (f("a"), f("PG")),
            (f(SIGNATURE), f("old")),
            (f(UNIQUE_MSG_QUERY_FLAG), f("true")),
            (f("Z"), f("upper")),
        ]
        .into_iter()
        .collect();
        // "AccessKey" < "Z" < "a" < "b": upper case sorts before lower case, as in Java.
        assert_eq!(signed_content(&fields, b"body", false), b"akupperPGTopicAbody".to_vec());
        // `_UNIQUE_KEY_QUERY` sorts first ('_' is 0x5F, after 'Z' and before 'a').
        assert_eq!(signed_content(&fields, b"body", true), b"akuppertruePGTopicAbody".to_vec());
    }

    #[test]
    fn java_order_is_by_utf16_units_not_utf8_bytes() {
        // U+FF5E (one UTF-16 unit, 0xFF5E) sorts after U+1F600 (surrogates 0xD83D…) in Java,
        // though its UTF-8 bytes (EF BD 9E) sort before F0 9F 98 80.
        let fields: ExtFields = [(f("\u{ff5e}"), f("1")), (f("\u{1f600}"), f("2"))].into_iter().collect();
        assert_eq!(signed_content(&fields, b"", true), b"21".to_vec());
    }

    #[test]
    fn sign_adds_access_key_token_and_a_signature_the_broker_recomputes() {
        let creds = SessionCredentials::new("RocketMQ", "12345678").unwrap().with_security_token("tok").unwrap();
        let mut request = RemotingCommand::request(RequestCode::SendMessageV2);
        request.ext_fields.insert(f("b"), f("TopicTest"));
        request.body = bytes::Bytes::from_static(b"hello");
        creds.sign(&mut request);
        assert_eq!(request.ext_fields.get(ACCESS_KEY).map(FieldStr::as_str), Some("RocketMQ"));
        assert_eq!(request.ext_fields.get(SECURITY_TOKEN).map(FieldStr::as_str), Some("tok"));
        // What the broker recomputes: "RocketMQ" (AccessKey), "tok" (SecurityToken), "TopicTest" (b), body.
        let content = signed_content(&request.ext_fields, &request.body, true);
        assert_eq!(content, b"RocketMQtokTopicTesthello".to_vec());
        let sig = request.ext_fields.get(SIGNATURE).unwrap().to_string();
        assert!(signatures_match(&sig, &signature(&content, "12345678")));
        assert!(!signatures_match(&sig, &signature(&content, "12345679")));
        // Signing again (a retry) replaces the signature instead of signing the old one.
        creds.sign(&mut request);
        assert_eq!(request.ext_fields.get(SIGNATURE).unwrap().as_str(), sig);
    }

    #[test]
    fn credentials_refuse_empty_or_control_characters_and_hide_the_secret() {
        assert_eq!(SessionCredentials::new("", "s").unwrap_err(), CredentialsError::Empty("accessKey"));
        assert_eq!(SessionCredentials::new("a", "").unwrap_err(), CredentialsError::Empty("secretKey"));
        assert_eq!(SessionCredentials::new("a", "s\n").unwrap_err(), CredentialsError::ControlCharacter("secretKey"));
        let shown = format!("{:?}", SessionCredentials::new("ak", "topsecret").unwrap());
        assert!(shown.contains("ak") && !shown.contains("topsecret"), "{shown}");
    }

    #[test]
    fn signatures_match_only_when_equal() {
        assert!(signatures_match("abc=", "abc="));
        assert!(!signatures_match("abc=", "abd="));
        assert!(!signatures_match("abc", "abc="));
    }
}
