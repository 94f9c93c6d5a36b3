//! JSON bodies of remoting commands (`common/.../protocol/body/**` in RocketMQ).
//!
//! RocketMQ serializes bodies with fastjson (`RemotingSerializable.encode`): camelCase keys in
//! alphabetical order, no `null` members. Every body here declares its fields in that order, so
//! [`JsonBody::encode`] emits what a Java broker emits. Decoding is lenient the way fastjson is: unknown
//! keys are ignored (newer clients add fields) and missing keys take Java's field defaults.
//!
//! fastjson also writes map keys that are not strings (bare integers, whole objects), and reads
//! values of another JSON type than the field's (numbers from strings, enums by ordinal); the
//! default [`JsonBody::decode`] reads both ([`fastjson::normalize`], [`lenient`]) when strict JSON
//! fails. Encoding never changes.
//!
//! Invariant: [`JsonBody::decode`] never panics; any input that is not the body yields a [`BodyError`].

pub mod acl_config;
pub mod broker_stats;
pub mod connection;
pub mod consume_directly;
pub mod consume_queue_data;
pub mod consume_stats;
pub mod consume_time_span;
pub mod consumer_list;
pub mod consumer_offset;
pub mod consumer_running_info;
pub mod consumer_status;
pub mod fastjson;
pub mod group_list;
pub mod heartbeat;
pub mod lenient;
pub mod lock_batch;
pub mod membership;
pub mod message_queue;
pub mod properties_text;
pub mod register;
pub mod reset_offset;
pub mod route;
pub mod subscription_group;
#[cfg(test)]
pub(crate) mod testing;
pub mod topic;
pub mod topic_stats;

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::error::Category;
use thiserror::Error;

/// Why a body could not be encoded or decoded.
#[derive(Debug, Error)]
pub enum BodyError {
    /// The bytes are not JSON of the expected shape.
    #[error("the {body} body is invalid: {source}")]
    Json {
        /// The body type, e.g. `HeartbeatData`.
        body: &'static str,
        /// What serde_json reported.
        #[source]
        source: serde_json::Error,
    },
}

/// A body that travels as (fastjson-compatible) JSON.
pub trait JsonBody: Serialize + DeserializeOwned {
    /// RocketMQ's class name, for error messages.
    const NAME: &'static str;

    /// The body as JSON bytes, keys as fastjson orders them.
    fn encode(&self) -> Result<Vec<u8>, BodyError> {
        serde_json::to_vec(self).map_err(|source| BodyError::Json { body: Self::NAME, source })
    }

    /// Reads the body; unknown keys are ignored, missing keys take their defaults, and fastjson's
    /// non-string map keys are accepted.
    fn decode(bytes: &[u8]) -> Result<Self, BodyError> {
        decode_lenient(bytes, Self::NAME)
    }
}

/// Strict JSON first. When that fails, the body is read as fastjson reads it: after
/// [`fastjson::normalize`] if it is not plain JSON, and with fastjson's value conversions
/// ([`lenient`]: numbers from strings, enums by ordinal, ...). When the bytes are not JSON even
/// after normalizing, the strict error is reported: it points into the bytes the peer actually sent.
pub fn decode_lenient<T: DeserializeOwned>(bytes: &[u8], body: &'static str) -> Result<T, BodyError> {
    let strict = match serde_json::from_slice(bytes) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let value: serde_json::Value = match strict.classify() {
        Category::Data => serde_json::from_slice(bytes).map_err(|source| BodyError::Json { body, source })?,
        Category::Syntax => match fastjson::normalize(bytes) {
            Ok(normalized) => match serde_json::from_slice(&normalized) {
                Ok(value) => value,
                Err(_) => return Err(BodyError::Json { body, source: strict }),
            },
            Err(_) => return Err(BodyError::Json { body, source: strict }),
        },
        Category::Io | Category::Eof => return Err(BodyError::Json { body, source: strict }),
    };
    lenient::from_value(value).map_err(|source| BodyError::Json { body, source })
}

/// serde `deserialize_with` helper: an explicit `null` reads as the type's default, as fastjson
/// leaves a Java field at its initial value. Non-Java clients send `null` for empty strings and sets.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
