//! Golden compatibility: frames byte-identical to what Apache RocketMQ 4.9.8 (Java) puts on the wire.
//!
//! The expected bytes are derived by hand from RocketMQ's Java layout, not produced by our encoder:
//! - the frame: `RemotingCommand.encode()` = `i32 total | (serializeType << 24 | headerLen) | header | body`;
//! - the JSON header: fastjson's `JSON.toJSONString(cmd)` writes bean properties in alphabetical order
//!   (`code, extFields, flag, language, opaque, [remark,] serializeTypeCurrentRPC, version`), omits
//!   nulls, writes enums by name and control characters as `\u00XX`;
//! - `extFields` is the `HashMap` filled by `makeCustomHeaderToNet()` in field-declaration order; its
//!   iteration order was printed by OpenJDK 17 for exactly these keys (see `java.rs` tests);
//! - message properties come from `MessageDecoder.messageProperties2String`, which writes
//!   `name \u0001 value \u0002` for every entry (a trailing `\u0002` included) in the iteration order
//!   of the message's `HashMap` (printed by OpenJDK 17: `KEYS, UNIQ_KEY, WAIT, TAGS`);
//! - lengths and the CRC below were computed from those strings (Python `len`, `zlib.crc32 & 0x7FFFFFFF`).
//!
//! Each test decodes the Java bytes, checks the typed view, and re-encodes to the same bytes.

use bytes::Bytes;
use raftmq_common::protocol::LanguageCode;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;

fn frame(length_words: [u8; 8], header: &str, body: &[u8]) -> Vec<u8> {
    let mut out = length_words.to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    out
}

/// Java's quickstart producer: `new Message("TopicTest", "TagA", "order-1", body)` sent with
/// SEND_MESSAGE_V2 to queue 3, opaque 7, by a 4.9.8 client (version 409).
const SEND_V2_HEADER: &str = concat!(
    r#"{"code":310,"extFields":{"a":"please_rename_unique_group_name","b":"TopicTest","c":"TBW102","d":"4","e":"3","f":"0","g":"1700000000000","h":"0","#,
    r#""i":"KEYS\u0001order-1\u0002UNIQ_KEY\u0001C0A8010A5F1C18B4AAC2736E47A30000\u0002WAIT\u0001true\u0002TAGS\u0001TagA\u0002","#,
    r#""j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}"#
);
const SEND_V2_BODY: &[u8] = b"Hello RocketMQ 0";
/// total = 4 + 384 (header) + 16 (body) = 404 = 0x194; header length 384 = 0x180, JSON = type 0.
const SEND_V2_LENGTHS: [u8; 8] = [0x00, 0x00, 0x01, 0x94, 0x00, 0x00, 0x01, 0x80];

#[test]
fn send_message_v2_request_matches_java() {
    let java = frame(SEND_V2_LENGTHS, SEND_V2_HEADER, SEND_V2_BODY);
    let cmd = RemotingCommand::decode(&java).expect("the Java frame decodes");
    assert_eq!(cmd.request_code(), RequestCode::SendMessageV2);
    assert_eq!(cmd.language, LanguageCode::Java);
    assert_eq!(cmd.version, 409);
    assert_eq!(cmd.opaque, 7);
    assert!(!cmd.is_response() && !cmd.is_oneway());
    assert_eq!(&cmd.body[..], SEND_V2_BODY);

    let v2: SendMessageRequestHeaderV2 = cmd.decode_header().expect("typed V2 header");
    let v1 = SendMessageRequestHeader::from(v2.clone());
    assert_eq!(v1.producer_group, "please_rename_unique_group_name");
    assert_eq!(v1.topic, "TopicTest");
    assert_eq!(v1.default_topic, "TBW102");
    assert_eq!(v1.default_topic_queue_nums, 4);
    assert_eq!(v1.queue_id, 3);
    assert_eq!(v1.born_timestamp, 1_700_000_000_000);
    assert_eq!(v1.reconsume_times, Some(0));
    assert_eq!(v1.batch, Some(false));
    assert!(v1.properties.as_deref().unwrap().contains("TAGS\u{1}TagA\u{2}"));

    // Built from the typed header, as our producer builds it, the frame is the Java frame.
    let mut ours =
        RemotingCommand::request_with_header(RequestCode::SendMessageV2, &SendMessageRequestHeaderV2::from(v1))
            .with_body(Bytes::from_static(SEND_V2_BODY));
    ours.language = LanguageCode::Java;
    ours.opaque = 7;
    assert_eq!(String::from_utf8(ours.encode_header().unwrap()).unwrap(), SEND_V2_HEADER);
    assert_eq!(ours.encode().unwrap().to_vec(), java);
}

/// A 4.9.8 broker `broker-a` registering one topic with an uncompressed body, opaque 3.
const REGISTER_HEADER: &str = concat!(
    r#"{"code":103,"extFields":{"brokerId":"0","bodyCrc32":"833265715","clusterName":"DefaultCluster","#,
    r#""brokerAddr":"192.168.1.10:10911","haServerAddr":"192.168.1.10:10912","compressed":"false","brokerName":"broker-a"},"#,
    r#""flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":409}"#
);
const REGISTER_BODY: &str = concat!(
    r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":1700000000000},"#,
    r#""topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","#,
    r#""topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}"#
);
/// total = 4 + 296 (header) + 276 (body) = 576 = 0x240; header length 296 = 0x128.
const REGISTER_LENGTHS: [u8; 8] = [0x00, 0x00, 0x02, 0x40, 0x00, 0x00, 0x01, 0x28];

#[test]
fn register_broker_request_matches_java() {
    let java = frame(REGISTER_LENGTHS, REGISTER_HEADER, REGISTER_BODY.as_bytes());
    let cmd = RemotingCommand::decode(&java).expect("the Java frame decodes");
    assert_eq!(cmd.request_code(), RequestCode::RegisterBroker);
    let header: RegisterBrokerRequestHeader = cmd.decode_header().expect("typed header");
    assert_eq!(header.broker_name, "broker-a");
    assert_eq!(header.broker_id, 0);
    assert_eq!(header.body_crc32, 833_265_715);
    assert_eq!(header.raft, None, "a Java broker sends no Raft fields");
    assert_eq!(raftmq_common::protocol::body::register::body_crc32(&cmd.body), header.body_crc32);
    let body = RegisterBrokerBody::decode_body(&cmd.body, header.compressed).expect("typed body");

    let mut topic = TopicConfig::new("TopicTest");
    topic.read_queue_nums = 4;
    topic.write_queue_nums = 4;
    let expected_body = RegisterBrokerBody {
        filter_server_list: vec![],
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 1, timestamp: 1_700_000_000_000 },
            topic_config_table: [("TopicTest".to_owned(), topic)].into_iter().collect(),
        },
    };
    assert_eq!(body, expected_body);

    let mut ours = RemotingCommand::request_with_header(RequestCode::RegisterBroker, &header)
        .with_body(JsonBody::encode(&expected_body).unwrap());
    ours.language = LanguageCode::Java;
    ours.opaque = 3;
    assert_eq!(ours.encode().unwrap().to_vec(), java);
    assert_eq!(header.to_ext_fields(), cmd.ext_fields);
}
