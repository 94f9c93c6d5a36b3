//! Headers of SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320)
//! (`SendMessageRequestHeader`, `SendMessageRequestHeaderV2`, `SendMessageResponseHeader`).
//!
//! V2 is V1 with one-letter keys `a`..`n` to save bytes; 4.x clients send V2 by default
//! (`sendSmartMsg=true`) and always for batches. The conversions between the two are lossless: V1's
//! `bname` (from Java's `RpcRequestHeader`) is V2's `n`. V2 has no `bname` of its own because the Java
//! broker reads V2 with `SendMessageRequestHeaderV2.decode`, which looks only at `a`..`n`.
//! Processors read either form with [`SendMessageRequestHeader::read_request`].

use super::CommandHeader;
use super::HeaderError;
use super::ext_header::ext_header;
use crate::protocol::RemotingCommand;
use crate::protocol::RequestCode;
use crate::protocol::ext_fields::FieldStr;

ext_header! {
    /// SEND_MESSAGE (10) request, with RocketMQ's full field names.
    pub struct SendMessageRequestHeader {
        /// Producer group.
        required producer_group: FieldStr => "producerGroup",
        /// Target topic.
        required topic: FieldStr => "topic",
        /// Template topic for auto-creation (`TBW102`).
        required default_topic: FieldStr => "defaultTopic",
        /// Queue count for an auto-created topic.
        required default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        /// Target queue.
        required queue_id: i32 => "queueId",
        /// Message sysFlag (compressed, multi-tags, transaction type).
        required sys_flag: i32 => "sysFlag",
        /// Client clock at send, ms.
        required born_timestamp: i64 => "bornTimestamp",
        /// User flag.
        required flag: i32 => "flag",
        /// Message properties (`key\u{1}value\u{2}` pairs).
        optional properties: Option<String> => "properties",
        /// Retry count, for messages sent back to `%RETRY%` topics.
        optional reconsume_times: Option<i32> => "reconsumeTimes",
        /// Unit (cell) mode; Java sends `false` when unset.
        optional unit_mode: Option<bool> => "unitMode",
        /// The body is a batch of encoded messages.
        optional batch: Option<bool> => "batch",
        /// Retries before the DLQ (Java comment: "consumeRetryTimes").
        optional max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        /// Target broker name (`RpcRequestHeader.bname`).
        optional bname: Option<FieldStr> => "bname",
    }
}

ext_header! {
    /// SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) request: [`SendMessageRequestHeader`] with
    /// one-letter keys.
    pub struct SendMessageRequestHeaderV2 {
        /// producerGroup.
        required a: FieldStr => "a",
        /// topic.
        required b: FieldStr => "b",
        /// defaultTopic.
        required c: FieldStr => "c",
        /// defaultTopicQueueNums.
        required d: i32 => "d",
        /// queueId.
        required e: i32 => "e",
        /// sysFlag.
        required f: i32 => "f",
        /// bornTimestamp.
        required g: i64 => "g",
        /// flag.
        required h: i32 => "h",
        /// properties.
        optional i: Option<String> => "i",
        /// reconsumeTimes.
        optional j: Option<i32> => "j",
        /// unitMode.
        optional k: Option<bool> => "k",
        /// maxReconsumeTimes.
        optional l: Option<i32> => "l",
        /// batch.
        optional m: Option<bool> => "m",
        /// brokerName.
        optional n: Option<FieldStr> => "n",
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(v1: SendMessageRequestHeader) -> Self {
        SendMessageRequestHeaderV2 {
            a: v1.producer_group,
            b: v1.topic,
            c: v1.default_topic,
            d: v1.default_topic_queue_nums,
            e: v1.queue_id,
            f: v1.sys_flag,
            g: v1.born_timestamp,
            h: v1.flag,
            i: v1.properties,
            j: v1.reconsume_times,
            k: v1.unit_mode,
            l: v1.max_reconsume_times,
            m: v1.batch,
            n: v1.bname,
        }
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        SendMessageRequestHeader {
            producer_group: v2.a,
            topic: v2.b,
            default_topic: v2.c,
            default_topic_queue_nums: v2.d,
            queue_id: v2.e,
            sys_flag: v2.f,
            born_timestamp: v2.g,
            flag: v2.h,
            properties: v2.i,
            reconsume_times: v2.j,
            unit_mode: v2.k,
            batch: v2.m,
            max_reconsume_times: v2.l,
            bname: v2.n,
        }
    }
}

impl SendMessageRequestHeader {
    /// Reads the header of a send request in whichever form its code implies, as the Java broker's
    /// `AbstractSendMessageProcessor.parseRequestHeader` does: V2 for SEND_MESSAGE_V2,
    /// SEND_BATCH_MESSAGE and SEND_REPLY_MESSAGE_V2, V1 otherwise.
    pub fn read_request(request: &RemotingCommand) -> Result<Self, HeaderError> {
        match request.request_code() {
            RequestCode::SendMessageV2 | RequestCode::SendBatchMessage | RequestCode::SendReplyMessageV2 => {
                SendMessageRequestHeaderV2::read_ext_fields(&request.ext_fields).map(Into::into)
            }
            _ => SendMessageRequestHeader::read_ext_fields(&request.ext_fields),
        }
    }

    /// Whether this send carries a batch body.
    pub fn is_batch(&self) -> bool {
        self.batch.unwrap_or(false)
    }

    /// Whether unit mode is on.
    pub fn is_unit_mode(&self) -> bool {
        self.unit_mode.unwrap_or(false)
    }
}

ext_header! {
    /// Response to every send code.
    pub struct SendMessageResponseHeader {
        /// The offsetMsgId (store host + physical offset, hex); comma-joined for a batch.
        required msg_id: String => "msgId",
        /// The queue the message went to.
        required queue_id: i32 => "queueId",
        /// ConsumeQueue offset of the (first) message.
        required queue_offset: i64 => "queueOffset",
        /// Transaction id of a half message.
        optional transaction_id: Option<String> => "transactionId",
    }
}

/// Extra `extFields` key the broker adds to send responses: the broker's region (`MSG_REGION`).
pub const MSG_REGION_KEY: &str = "MSG_REGION";
/// Extra `extFields` key the broker adds to send responses: whether tracing is on (`TRACE_ON`).
pub const TRACE_ON_KEY: &str = "TRACE_ON";

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::ext_fields::ExtFields;
    use crate::protocol::header::ext_header::testing::TestHeader;
    use crate::protocol::header::ext_header::testing::check_header;
    use crate::protocol::header::ext_header::testing::runner;

    #[test]
    fn send_headers_satisfy_header_properties() {
        check_header::<SendMessageRequestHeader>();
        check_header::<SendMessageRequestHeaderV2>();
        check_header::<SendMessageResponseHeader>();
    }

    #[test]
    fn v1_v2_conversion_is_lossless_both_ways() {
        let mut runner = runner("v1_v2_conversion");
        let result = runner.run(
            &(SendMessageRequestHeader::arbitrary(), SendMessageRequestHeaderV2::arbitrary()),
            |(v1, v2)| {
                prop_assert_eq!(
                    SendMessageRequestHeader::from(SendMessageRequestHeaderV2::from(v1.clone())),
                    v1.clone()
                );
                prop_assert_eq!(SendMessageRequestHeaderV2::from(SendMessageRequestHeader::from(v2.clone())), v2);
                // The same number of keys in both encodings: no field is dropped.
                prop_assert_eq!(v1.to_ext_fields().len(), SendMessageRequestHeaderV2::from(v1).to_ext_fields().len());
                Ok(())
            },
        );
        if let Err(e) = result {
            panic!("{e}");
        }
    }

    fn java_v2_fields() -> ExtFields {
        // What a 4.9.x DefaultMQProducer sends for a plain send (MQClientAPIImpl + SendMessageRequestHeaderV2).
        [
            ("a", "please_rename_unique_group_name"),
            ("b", "TopicTest"),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "3"),
            ("f", "0"),
            ("g", "1700000000123"),
            ("h", "0"),
            ("i", "TAGS\u{1}TagA\u{2}WAIT\u{1}true\u{2}UNIQ_KEY\u{1}7F00000100002A9F0000000000000001"),
            ("j", "0"),
            ("k", "false"),
            ("m", "false"),
            ("n", "broker-a"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    #[test]
    fn java_v2_send_decodes_through_read_request() {
        let mut request = RemotingCommand::request(RequestCode::SendMessageV2);
        request.ext_fields = java_v2_fields();
        let header = SendMessageRequestHeader::read_request(&request).expect("valid V2 header");
        assert_eq!(header.producer_group, "please_rename_unique_group_name");
        assert_eq!(header.topic, "TopicTest");
        assert_eq!(header.default_topic_queue_nums, 4);
        assert_eq!(header.queue_id, 3);
        assert_eq!(header.born_timestamp, 1_700_000_000_123);
        assert_eq!(header.max_reconsume_times, None);
        assert_eq!(header.bname.as_deref(), Some("broker-a"));
        assert!(!header.is_batch());
        assert!(!header.is_unit_mode());

        // The same fields under a V1 code are not a V1 header.
        let mut v1_request = RemotingCommand::request(RequestCode::SendMessage);
        v1_request.ext_fields = java_v2_fields();
        assert_eq!(
            SendMessageRequestHeader::read_request(&v1_request),
            Err(HeaderError::Missing { field: "producerGroup" })
        );
    }

    #[test]
    fn unparsable_number_names_the_key() {
        let mut fields = java_v2_fields();
        fields.insert("e".into(), "three".into());
        let err = SendMessageRequestHeaderV2::read_ext_fields(&fields).expect_err("queueId is not a number");
        assert!(matches!(err, HeaderError::Invalid { field: "e", expected: "i32", .. }), "{err:?}");
    }

    /// A rocketmq-client-cpp 1.2.x SEND_MESSAGE_V2 header as its `RemotingCommand::Encode` writes it:
    /// JsonCpp FastWriter (keys sorted, trailing newline), ints as JSON numbers, `bool`s through
    /// `ostringstream` as `"0"`/`"1"`, empty credentials. Java's broker takes it; so must we.
    const CPP_SEND_V2_HEADER: &str = concat!(
        r#"{"code":310,"extFields":{"AccessKey":"","ONSChannelKey":"","Signature":"","a":"pg","b":"T","#,
        r#""c":"TBW102","d":4,"e":1,"f":0,"g":"1733000000000","h":0,"i":"KEYS\u0001k1\u0002","j":"0","#,
        r#""k":"0","l":0,"m":"0"},"flag":0,"language":1,"opaque":7,"remark":"","version":0}"#,
        "\n"
    );

    #[test]
    fn cpp_client_send_with_unit_mode_0_decodes() {
        let header = CPP_SEND_V2_HEADER.as_bytes();
        let mut frame = Vec::new();
        frame.extend_from_slice(&u32::try_from(4 + header.len()).expect("small").to_be_bytes());
        frame.extend_from_slice(&u32::try_from(header.len()).expect("small").to_be_bytes());
        frame.extend_from_slice(header);
        let request = RemotingCommand::decode(&frame).expect("the C++ frame decodes");
        let header = SendMessageRequestHeader::read_request(&request).expect("the C++ send header is valid");
        assert_eq!(header.topic, "T");
        assert_eq!(header.queue_id, 1);
        assert_eq!(header.born_timestamp, 1_733_000_000_000);
        assert_eq!(header.unit_mode, Some(false));
        assert_eq!(header.batch, Some(false));
        assert!(!header.is_unit_mode());

        // Boolean.parseBoolean, field by field: only "true" in any case is true; "1" is false.
        for (raw, unit_mode) in
            [("0", false), ("1", false), ("TRUE", true), ("true", true), ("False", false), ("", false)]
        {
            let mut fields = java_v2_fields();
            fields.insert("k".into(), raw.into());
            let header = SendMessageRequestHeaderV2::read_ext_fields(&fields).expect("never refused");
            assert_eq!(header.k, Some(unit_mode), "k={raw:?}");
        }
    }
}
