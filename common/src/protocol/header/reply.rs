//! Header of PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a reply of request/reply
//! messaging to the requesting client (`ReplyMessageRequestHeader`). The replies themselves arrive
//! as SEND_REPLY_MESSAGE (324, a [`super::send::SendMessageRequestHeader`]) or SEND_REPLY_MESSAGE_V2
//! (325, its V2 form).

use super::ext_header::ext_header;

ext_header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (326) request, broker to requesting client; the body is the
    /// reply's body.
    pub struct ReplyMessageRequestHeader {
        /// The replier's producer group.
        required producer_group: String => "producerGroup",
        /// The reply topic (`<cluster>_REPLY_TOPIC`).
        required topic: String => "topic",
        /// The replier's template topic.
        required default_topic: String => "defaultTopic",
        /// Queue count of the template topic.
        required default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        /// Queue the reply was sent to.
        required queue_id: i32 => "queueId",
        /// Message sysFlag.
        required sys_flag: i32 => "sysFlag",
        /// Replier's clock at send, ms.
        required born_timestamp: i64 => "bornTimestamp",
        /// User flag.
        required flag: i32 => "flag",
        /// Message properties (`key\u{1}value\u{2}` pairs): CORRELATION_ID, REPLY_TO_CLIENT, ...
        optional properties: Option<String> => "properties",
        /// Retry count.
        optional reconsume_times: Option<i32> => "reconsumeTimes",
        /// Unit mode.
        optional unit_mode: Option<bool> => "unitMode",
        /// The replier's address, `ip:port`.
        required born_host: String => "bornHost",
        /// The broker's address, `ip:port`.
        required store_host: String => "storeHost",
        /// The broker's clock when it took the reply, ms.
        required store_timestamp: i64 => "storeTimestamp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RemotingCommand;
    use crate::protocol::RequestCode;
    use crate::protocol::header::CommandHeader;
    use crate::protocol::header::ext_header::testing::check_header;

    #[test]
    fn reply_header_satisfies_header_properties() {
        check_header::<ReplyMessageRequestHeader>();
    }

    #[test]
    fn reply_header_uses_rocketmq_keys_and_round_trips() {
        let h = ReplyMessageRequestHeader {
            producer_group: "replier".into(),
            topic: "DefaultCluster_REPLY_TOPIC".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 0,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("CORRELATION_ID\u{1}c-1\u{2}".into()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            born_host: "10.0.0.5:50000".into(),
            store_host: "10.0.0.1:10911".into(),
            store_timestamp: 1_700_000_000_123,
        };
        let cmd = RemotingCommand::request_with_header(RequestCode::PushReplyMessageToClient, &h);
        for key in ["producerGroup", "defaultTopicQueueNums", "bornHost", "storeHost", "storeTimestamp"] {
            assert!(cmd.ext_fields.keys().any(|k| k.as_str() == key), "{key} missing");
        }
        assert_eq!(ReplyMessageRequestHeader::read_ext_fields(&cmd.ext_fields).unwrap(), h);
    }
}
