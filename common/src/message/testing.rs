//! proptest strategies shared by the message codec tests (compiled for tests only).

use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::net::Ipv6Addr;
use std::net::SocketAddr;

use bytes::Bytes;
use proptest::prelude::*;

use super::model::Message;
use super::model::MessageExt;
use super::properties::Properties;

/// An IPv4 or IPv6 socket address (flow info and scope id 0: the record has no room for them).
pub(crate) fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
    ]
}

/// Bytes of a length up to `max_len`, filled from a seed: far cheaper to generate than a `Vec` of
/// independent byte strategies, and the length still shrinks.
pub(crate) fn body(max_len: usize) -> impl Strategy<Value = Bytes> {
    (0..max_len, any::<u64>()).prop_map(|(len, mut state)| {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let take = (len - out.len()).min(8);
            out.extend_from_slice(&z.to_le_bytes()[..take]);
        }
        Bytes::from(out)
    })
}

fn string_of(chars: impl Strategy<Value = char>, len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    proptest::collection::vec(chars, len).prop_map(String::from_iter)
}

/// A character of a legal topic or group name: `[%|a-zA-Z0-9_-]`.
fn name_char() -> impl Strategy<Value = char> {
    proptest::sample::select(b"%|_-abcxyzABCXYZ0123456789".map(char::from).to_vec())
}

/// Properties that survive the wire parser: keys without separators, values without U+0002 (U+0001
/// is allowed in values), non-ASCII included.
pub(crate) fn wire_safe_properties() -> impl Strategy<Value = Properties> {
    let key_char = proptest::sample::select(vec!['a', 'K', 'Z', '_', '9', 'é', '中', '😀']);
    let value_char = prop_oneof![
        4 => (0x20u8..0x7F).prop_map(char::from),
        1 => any::<char>().prop_map(|c| if c == '\u{2}' { '\u{1}' } else { c }),
    ];
    proptest::collection::vec((string_of(key_char, 1..12), string_of(value_char, 1..20)), 0..8)
        .prop_map(|pairs| pairs.into_iter().collect())
}

/// A message of `topic` with any flag, properties and a body of up to 512 bytes.
pub(crate) fn message(topic: &'static str) -> impl Strategy<Value = Message> {
    (any::<i32>(), wire_safe_properties(), body(512)).prop_map(move |(flag, properties, body)| Message {
        topic: topic.into(),
        flag,
        properties,
        body,
    })
}

/// Topics for v1 (≤ 127 bytes) and v2 records, ASCII and not.
fn topic() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => string_of(name_char(), 1..128),
        1 => (128usize..300).prop_map(|n| "t".repeat(n)),
        1 => string_of(any::<char>(), 0..40),
    ]
}

/// A stored message with every field arbitrary (store_size and body_crc 0: the encoder computes them).
pub(crate) fn message_ext() -> impl Strategy<Value = MessageExt> {
    let message = (topic(), any::<i32>(), wire_safe_properties(), body(512))
        .prop_map(|(topic, flag, properties, body)| Message { topic: topic.into(), flag, properties, body });
    let numbers = (any::<i32>(), any::<i64>(), any::<i64>(), any::<i32>(), any::<i64>(), any::<i64>());
    let more = (any::<i32>(), any::<i64>(), socket_addr(), socket_addr());
    (message, numbers, more).prop_map(
        |(
            message,
            (queue_id, queue_offset, commit_log_offset, sys_flag, born_timestamp, store_timestamp),
            (reconsume_times, prepared_transaction_offset, born_host, store_host),
        )| MessageExt {
            message,
            queue_id,
            store_size: 0,
            queue_offset,
            commit_log_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            body_crc: 0,
            reconsume_times,
            prepared_transaction_offset,
        },
    )
}
