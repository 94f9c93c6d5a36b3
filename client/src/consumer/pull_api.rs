//! Turning a PULL_MESSAGE response into a [`PullResult`] (`MQClientAPIImpl.processPullResponse` +
//! `PullAPIWrapper.processPullResult`), as a pure function.
//!
//! Invariants:
//! - Response codes map as in 4.x: SUCCESS → Found, PULL_NOT_FOUND → NoNewMsg,
//!   PULL_RETRY_IMMEDIATELY → NoMatchedMsg, PULL_OFFSET_MOVED → OffsetIllegal; anything else is a
//!   broker error. `next_begin_offset` is taken from the header in every case.
//! - Bodies are decoded record by record and decompressed; a malformed body is a protocol error,
//!   never a panic. The tag string is re-checked against the subscription (the broker compares hash
//!   codes only), and `MIN_OFFSET` / `MAX_OFFSET` are set on every message as Java sets them.

use bytes::Bytes;
use compact_str::ToCompactString;
use raftmq_common::message::MessageExt;
use raftmq_common::message::compress::uncompress_stored_body;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::message::sys_flag;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;
use raftmq_common::protocol::header::pull::PullMessageResponseHeader;

use crate::consumer::subscription::tag_matches;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

/// `PullStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullStatus {
    /// Messages were found (possibly all dropped by the tag re-check).
    Found,
    /// Nothing new at the offset.
    NoNewMsg,
    /// Messages exist but none matched the broker-side filter.
    NoMatchedMsg,
    /// The offset is outside the queue; continue at `next_begin_offset`.
    OffsetIllegal,
}

/// The outcome of one pull.
#[derive(Debug, Clone)]
pub struct PullResult {
    /// What the broker found.
    pub status: PullStatus,
    /// Where the next pull of the queue starts.
    pub next_begin_offset: i64,
    /// The queue's smallest offset.
    pub min_offset: i64,
    /// The queue's offset after its last message.
    pub max_offset: i64,
    /// brokerId the broker wants the next pull to go to.
    pub suggest_which_broker_id: i64,
    /// Decoded messages that passed the tag re-check, in queue order.
    pub msgs: Vec<MessageExt>,
}

/// Decodes a PULL_MESSAGE response for `sub`.
pub fn process_pull_response(response: &RemotingCommand, sub: &SubscriptionData) -> Result<PullResult> {
    let status = match response.response_code() {
        ResponseCode::Success => PullStatus::Found,
        ResponseCode::PullNotFound => PullStatus::NoNewMsg,
        ResponseCode::PullRetryImmediately => PullStatus::NoMatchedMsg,
        ResponseCode::PullOffsetMoved => PullStatus::OffsetIllegal,
        code => return Err(ClientError::broker("pullMessage", code, response.remark.clone())),
    };
    let header = response
        .decode_header::<PullMessageResponseHeader>()
        .map_err(|e| ClientError::new(ErrorKind::Protocol, "pullMessage", "bad pull response header").with_source(e))?;
    let msgs = if status == PullStatus::Found { decode_messages(&response.body, sub, &header)? } else { Vec::new() };
    Ok(PullResult {
        status,
        next_begin_offset: header.next_begin_offset,
        min_offset: header.min_offset,
        max_offset: header.max_offset,
        suggest_which_broker_id: header.suggest_which_broker_id,
        msgs,
    })
}

/// The one stored record in `body` (a CONSUME_MESSAGE_DIRECTLY request), as a listener gets it:
/// body decompressed, compression bits cleared.
pub(crate) fn decode_one_stored(body: &Bytes) -> std::result::Result<MessageExt, String> {
    let mut msg = decode_all(body, DecodeOptions::default())
        .map_err(|e| format!("bad message record: {e}"))?
        .into_iter()
        .next()
        .ok_or_else(|| "no message record".to_owned())?;
    if sys_flag::is_compressed(msg.sys_flag) {
        msg.message.body = uncompress_stored_body(msg.sys_flag, &msg.message.body)
            .map_err(|e| format!("message body does not decompress: {e}"))?;
        msg.sys_flag = sys_flag::clear_compressed(msg.sys_flag);
    }
    Ok(msg)
}

fn decode_messages(
    body: &Bytes,
    sub: &SubscriptionData,
    header: &PullMessageResponseHeader,
) -> Result<Vec<MessageExt>> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        ClientError::new(ErrorKind::Protocol, "pullMessage", format!("{what}: {e}")).with_context("topic", &sub.topic)
    };
    let mut out = decode_all(body, DecodeOptions::default()).map_err(|e| bad("bad message records", &e))?;
    // Filtered in place: a message is a few hundred bytes, and most pulls keep every one.
    out.retain(|msg| tag_matches(sub, msg));
    // Formatted once per pull; both fit inline, so each message's copy allocates nothing.
    let (min_offset, max_offset) = (header.min_offset.to_compact_string(), header.max_offset.to_compact_string());
    for msg in &mut out {
        // Listeners get the original body (`MessageDecoder.decodes(.., deCompressBody=true)`); the
        // compression bits are cleared so the flag keeps describing the body it sits next to.
        if sys_flag::is_compressed(msg.sys_flag) {
            msg.message.body = uncompress_stored_body(msg.sys_flag, &msg.message.body)
                .map_err(|e| bad("message body does not decompress", &e))?;
            msg.sys_flag = sys_flag::clear_compressed(msg.sys_flag);
        }
        msg.message.properties.insert(properties::MIN_OFFSET, min_offset.clone());
        msg.message.properties.insert(properties::MAX_OFFSET, max_offset.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use raftmq_common::message::Message;
    use raftmq_common::message::compress::compress_body;
    use raftmq_common::message::record::encode_record;

    use super::*;
    use crate::consumer::subscription::build_subscription_data;

    fn record(offset: i64, tag: &str, body: &[u8], compressed: bool) -> BytesMut {
        let mut msg = MessageExt {
            message: Message::new("T", Bytes::copy_from_slice(body)).with_tags(tag),
            queue_offset: offset,
            store_host: "127.0.0.1:10911".parse().unwrap(),
            born_host: "127.0.0.1:5000".parse().unwrap(),
            ..Default::default()
        };
        if compressed {
            msg.message.body = Bytes::from(compress_body(body));
            msg.sys_flag = sys_flag::COMPRESSED;
        }
        encode_record(&msg).unwrap()
    }

    fn found(body: Bytes) -> RemotingCommand {
        RemotingCommand::success()
            .with_header(&PullMessageResponseHeader {
                suggest_which_broker_id: 0,
                next_begin_offset: 3,
                min_offset: 0,
                max_offset: 9,
            })
            .with_body(body)
    }

    #[test]
    fn found_decodes_decompresses_and_rechecks_tags() {
        let mut body = BytesMut::new();
        body.extend_from_slice(&record(0, "Aa", b"one", false));
        body.extend_from_slice(&record(1, "BB", b"two", false));
        body.extend_from_slice(&record(2, "Aa", &[7u8; 5000], true));
        let sub = build_subscription_data("T", "Aa", 0);
        let result = process_pull_response(&found(body.freeze()), &sub).unwrap();
        assert_eq!(result.status, PullStatus::Found);
        assert_eq!(result.next_begin_offset, 3);
        let offsets: Vec<i64> = result.msgs.iter().map(|m| m.queue_offset).collect();
        assert_eq!(offsets, vec![0, 2], "BB has Aa's hash code but not its tag");
        assert_eq!(result.msgs[1].message.body.len(), 5000);
        assert!(!sys_flag::is_compressed(result.msgs[1].sys_flag));
        assert_eq!(result.msgs[0].message.property(properties::MAX_OFFSET), Some("9"));
    }

    #[test]
    fn codes_map_to_statuses_and_garbage_is_an_error() {
        let header = PullMessageResponseHeader {
            suggest_which_broker_id: 1,
            next_begin_offset: 42,
            min_offset: 0,
            max_offset: 42,
        };
        let sub = build_subscription_data("T", "*", 0);
        for (code, status) in [
            (ResponseCode::PullNotFound, PullStatus::NoNewMsg),
            (ResponseCode::PullRetryImmediately, PullStatus::NoMatchedMsg),
            (ResponseCode::PullOffsetMoved, PullStatus::OffsetIllegal),
        ] {
            let r = process_pull_response(&RemotingCommand::response(code, None).with_header(&header), &sub).unwrap();
            assert_eq!((r.status, r.next_begin_offset, r.suggest_which_broker_id), (status, 42, 1));
        }
        let err = process_pull_response(&RemotingCommand::response(ResponseCode::SubscriptionNotExist, None), &sub);
        assert_eq!(err.unwrap_err().response_code(), Some(ResponseCode::SubscriptionNotExist));
        assert_eq!(
            process_pull_response(&found(Bytes::from_static(b"garbage")), &sub).unwrap_err().kind,
            ErrorKind::Protocol
        );
        let no_header = RemotingCommand::success();
        assert_eq!(process_pull_response(&no_header, &sub).unwrap_err().kind, ErrorKind::Protocol);
    }
}
