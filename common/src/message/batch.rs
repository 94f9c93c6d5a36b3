//! The SEND_BATCH_MESSAGE (320) body and the batch rules (docs/wire-format.md#batch-body).
//!
//! ```text
//! per message: TOTALSIZE i32 | MAGICCODE i32 (0) | BODYCRC i32 (0) | FLAG i32 | BODYLEN i32 | BODY
//!              | PROPLEN i16 | PROPERTIES                      (`MessageDecoder.encodeMessage`)
//! body = concatenation; the topic and batch-level fields travel in the SEND header.
//! ```
//!
//! Invariants: the encoder writes MAGICCODE and BODYCRC as 0, as Java does; the decoder ignores their
//! values (the broker computes CRCs itself) but checks TOTALSIZE against the fields, trusts no length,
//! and never panics. [`validate_batch`] is the client-side rule set (`MessageBatch.generateFromList`
//! plus the size check) as a pure function.

use bytes::BufMut;
use bytes::Bytes;
use bytes::BytesMut;
use thiserror::Error;

use super::model::Message;
use super::properties::Properties;
use super::properties::PropertiesError;
use super::validate::is_retry_topic;
use crate::limits::BATCH_BODY_SIZE_MAX_BYTES;
use crate::limits::PROPERTIES_SIZE_MAX_BYTES;
use crate::protocol::ResponseCode;

/// Fixed bytes per batch entry: TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN, PROPLEN.
pub const BATCH_ENTRY_OVERHEAD_BYTES: usize = 4 + 4 + 4 + 4 + 4 + 2;

/// Why a batch could not be built, encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BatchError {
    /// No messages.
    #[error("the batch is empty")]
    Empty,
    /// Messages for more than one topic.
    #[error("The topic of the messages in one batch should be the same")]
    TopicMismatch,
    /// Mixed waitStoreMsgOK.
    #[error("The waitStoreMsgOK of the messages in one batch should the same")]
    WaitStoreMsgOkMismatch,
    /// A delayed message.
    #[error("TimeDelayLevel is not supported for batching")]
    DelayNotSupported,
    /// A retry topic.
    #[error("Retry Group is not supported for batching")]
    RetryTopicNotSupported,
    /// The encoded batch is too large.
    #[error("the message body size over max value, MAX: {max}")]
    TooLarge {
        /// Encoded size in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A message's properties cannot be carried.
    #[error("message {index} of the batch: {source}")]
    Properties {
        /// Index in the batch.
        index: usize,
        /// The problem.
        source: PropertiesError,
    },
    /// The body ends inside an entry.
    #[error("batch entry {index} truncated: {field} needs {needed} bytes at byte {at}")]
    Truncated {
        /// Entry index.
        index: usize,
        /// The field being read.
        field: &'static str,
        /// Its offset in the batch body.
        at: usize,
        /// Bytes it needs.
        needed: usize,
    },
    /// A negative length field.
    #[error("batch entry {index}: illegal {field} {value}")]
    BadLength {
        /// Entry index.
        index: usize,
        /// The field.
        field: &'static str,
        /// Its value.
        value: i32,
    },
    /// TOTALSIZE disagrees with the fields.
    #[error("batch entry {index}: TOTALSIZE is {total_size} but the fields add up to {computed}")]
    SizeMismatch {
        /// Entry index.
        index: usize,
        /// TOTALSIZE as sent.
        total_size: i32,
        /// Length implied by the fields.
        computed: usize,
    },
    /// PROPERTIES is not UTF-8.
    #[error("batch entry {index}: properties are not valid UTF-8")]
    NotUtf8 {
        /// Entry index.
        index: usize,
    },
}

impl BatchError {
    /// The response code a broker answers this error with (all are MESSAGE_ILLEGAL).
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode::MessageIllegal
    }
}

/// Encoded size of one entry.
pub fn encoded_entry_len(msg: &Message) -> usize {
    BATCH_ENTRY_OVERHEAD_BYTES + msg.body.len() + msg.properties.wire_len()
}

/// Encoded size of a whole batch.
pub fn encoded_batch_len(messages: &[Message]) -> usize {
    messages.iter().map(encoded_entry_len).sum()
}

/// Encodes `messages` as a SEND_BATCH_MESSAGE body (topics are not part of it).
pub fn encode_batch(messages: &[Message]) -> Result<Bytes, BatchError> {
    let len = encoded_batch_len(messages);
    if len > BATCH_BODY_SIZE_MAX_BYTES {
        return Err(BatchError::TooLarge { len, max: BATCH_BODY_SIZE_MAX_BYTES });
    }
    let mut out = BytesMut::with_capacity(len);
    for (index, msg) in messages.iter().enumerate() {
        let properties = msg.properties.to_wire_string();
        if properties.len() > PROPERTIES_SIZE_MAX_BYTES {
            let source = PropertiesError::TooLong { len: properties.len(), max: PROPERTIES_SIZE_MAX_BYTES };
            return Err(BatchError::Properties { index, source });
        }
        // Bounded by BATCH_BODY_SIZE_MAX_BYTES (< i32::MAX) and PROPERTIES_SIZE_MAX_BYTES above.
        out.put_i32(encoded_entry_len(msg) as i32);
        out.put_i32(0);
        out.put_i32(0);
        out.put_i32(msg.flag);
        out.put_i32(msg.body.len() as i32);
        out.put_slice(&msg.body);
        out.put_i16(properties.len() as i16);
        out.put_slice(properties.as_bytes());
    }
    Ok(out.freeze())
}

struct EntryReader<'a> {
    buf: &'a Bytes,
    pos: usize,
    index: usize,
}

impl EntryReader<'_> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<Bytes, BatchError> {
        let at = self.pos;
        match at.checked_add(n).filter(|&end| end <= self.buf.len()) {
            Some(end) => {
                self.pos = end;
                Ok(self.buf.slice(at..end))
            }
            None => Err(BatchError::Truncated { index: self.index, field, at, needed: n }),
        }
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, BatchError> {
        let b = self.take(4, field)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, BatchError> {
        let b = self.take(2, field)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn len(&self, value: i32, field: &'static str) -> Result<usize, BatchError> {
        usize::try_from(value).map_err(|_| BatchError::BadLength { index: self.index, field, value })
    }
}

/// Decodes a SEND_BATCH_MESSAGE body into messages of `topic` (bodies share `body`'s memory).
pub fn decode_batch(body: &Bytes, topic: &str) -> Result<Vec<Message>, BatchError> {
    let mut out = Vec::new();
    let mut r = EntryReader { buf: body, pos: 0, index: 0 };
    while r.pos < body.len() {
        let start = r.pos;
        let total_size = r.i32("TOTALSIZE")?;
        r.i32("MAGICCODE")?;
        r.i32("BODYCRC")?;
        let flag = r.i32("FLAG")?;
        let body_len = r.i32("BODYLEN")?;
        let body_len = r.len(body_len, "BODYLEN")?;
        let msg_body = r.take(body_len, "BODY")?;
        let properties_len = r.i16("PROPLEN")?;
        let properties_len = r.len(i32::from(properties_len), "PROPLEN")?;
        let properties = r.take(properties_len, "PROPERTIES")?;
        let computed = r.pos - start;
        if usize::try_from(total_size).ok() != Some(computed) {
            return Err(BatchError::SizeMismatch { index: r.index, total_size, computed });
        }
        let properties =
            Properties::from_wire_bytes(&properties).map_err(|_| BatchError::NotUtf8 { index: r.index })?;
        out.push(Message { topic: topic.into(), flag, properties, body: msg_body });
        r.index += 1;
    }
    Ok(out)
}

/// Checks the batch rules: non-empty, one topic, one waitStoreMsgOK, no delay level, no retry topic,
/// wire-safe properties, and an encoded size ≤ [`BATCH_BODY_SIZE_MAX_BYTES`].
pub fn validate_batch(messages: &[Message]) -> Result<(), BatchError> {
    let first = messages.first().ok_or(BatchError::Empty)?;
    for (index, msg) in messages.iter().enumerate() {
        if msg.delay_time_level() > 0 {
            return Err(BatchError::DelayNotSupported);
        }
        if is_retry_topic(&msg.topic) {
            return Err(BatchError::RetryTopicNotSupported);
        }
        if msg.topic != first.topic {
            return Err(BatchError::TopicMismatch);
        }
        if msg.wait_store_msg_ok() != first.wait_store_msg_ok() {
            return Err(BatchError::WaitStoreMsgOkMismatch);
        }
        msg.properties.check_wire_safe().map_err(|source| BatchError::Properties { index, source })?;
    }
    let len = encoded_batch_len(messages);
    if len > BATCH_BODY_SIZE_MAX_BYTES {
        return Err(BatchError::TooLarge { len, max: BATCH_BODY_SIZE_MAX_BYTES });
    }
    Ok(())
}

/// Properties of a stored batch entry: the entry's own, then the batch-level ones from the SEND
/// header (`CommitLog.MessageExtBatchEncoder` appends them; a batch key overrides an entry key, as
/// the later pair wins when Java parses the concatenation).
pub fn merge_batch_properties(entry: &Properties, batch: &Properties) -> Properties {
    let mut merged = entry.clone();
    merged.extend(batch.iter());
    merged
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::message::properties;
    use crate::message::testing::message;

    #[test]
    fn golden_entry_layout() {
        let mut m = Message::new("T", &b"ab"[..]);
        m.flag = 5;
        m.properties.insert("K", "V");
        let bytes = encode_batch(std::slice::from_ref(&m)).unwrap();
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0, 0, 0, 28,    // TOTALSIZE = 22 + 2 + 4
            0, 0, 0, 0,     // MAGICCODE
            0, 0, 0, 0,     // BODYCRC
            0, 0, 0, 5,     // FLAG
            0, 0, 0, 2,     // BODYLEN
            b'a', b'b',     // BODY
            0, 4,           // PROPLEN
            b'K', 1, b'V', 2, // PROPERTIES, each pair ends with U+0002 as in Java
        ];
        assert_eq!(&bytes[..], expected);
        assert_eq!(decode_batch(&bytes, "T").unwrap(), vec![m]);
    }

    #[test]
    fn malformed_batches_fail() {
        let m = Message::new("T", &b"ab"[..]);
        let good = encode_batch(&[m.clone(), m]).unwrap();
        let cut = good.slice(..good.len() - 1);
        assert!(matches!(decode_batch(&cut, "T"), Err(BatchError::Truncated { index: 1, .. })));
        let mut bad = good.to_vec();
        bad[3] = 99;
        assert!(matches!(
            decode_batch(&Bytes::from(bad), "T"),
            Err(BatchError::SizeMismatch { index: 0, total_size: 99, computed: 24 })
        ));
        let mut neg = good.to_vec();
        neg[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(decode_batch(&Bytes::from(neg), "T"), Err(BatchError::BadLength { field: "BODYLEN", .. })));
        assert_eq!(decode_batch(&Bytes::new(), "T").unwrap(), vec![]);
    }

    #[test]
    fn batch_rules_table() {
        let m = |topic: &str| Message::new(topic, &b"x"[..]);
        assert_eq!(validate_batch(&[]), Err(BatchError::Empty));
        assert_eq!(validate_batch(&[m("T"), m("T")]), Ok(()));
        assert_eq!(validate_batch(&[m("T"), m("U")]), Err(BatchError::TopicMismatch));
        let mut delayed = m("T");
        delayed.set_delay_time_level(2);
        assert_eq!(validate_batch(&[m("T"), delayed]), Err(BatchError::DelayNotSupported));
        assert_eq!(validate_batch(&[m("%RETRY%g")]), Err(BatchError::RetryTopicNotSupported));
        let mut no_wait = m("T");
        no_wait.set_wait_store_msg_ok(false);
        assert_eq!(validate_batch(&[m("T"), no_wait]), Err(BatchError::WaitStoreMsgOkMismatch));
        let big = Message::new("T", vec![0u8; BATCH_BODY_SIZE_MAX_BYTES]);
        let err = validate_batch(std::slice::from_ref(&big)).unwrap_err();
        assert!(matches!(err, BatchError::TooLarge { .. }));
        assert_eq!(err.response_code(), ResponseCode::MessageIllegal);
        assert!(matches!(encode_batch(&[big]), Err(BatchError::TooLarge { .. })));
        let mut bad_props = m("T");
        bad_props.properties.insert("k", "");
        assert!(matches!(validate_batch(&[bad_props]), Err(BatchError::Properties { index: 0, .. })));
    }

    #[test]
    fn batch_properties_are_appended_and_override() {
        let entry: Properties = [(properties::UNIQ_KEY, "U1"), (properties::WAIT, "true")].into_iter().collect();
        let batch: Properties = [(properties::WAIT, "false"), (properties::CLUSTER, "c")].into_iter().collect();
        let merged = merge_batch_properties(&entry, &batch);
        assert_eq!(merged.iter().collect::<Vec<_>>(), vec![("UNIQ_KEY", "U1"), ("WAIT", "false"), ("CLUSTER", "c")]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]

        #[test]
        fn round_trip(msgs in proptest::collection::vec(message("TopicTest"), 0..6)) {
            let bytes = encode_batch(&msgs).unwrap();
            prop_assert_eq!(bytes.len(), encoded_batch_len(&msgs));
            prop_assert_eq!(decode_batch(&bytes, "TopicTest").unwrap(), msgs);
        }

    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]

        #[test]
        fn arbitrary_bodies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_batch(&Bytes::from(bytes), "T");
        }
    }
}
