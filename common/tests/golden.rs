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
use raftmq_common::message::model::Message;
use raftmq_common::message::model::MessageExt;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::message::record::encode_record;
use raftmq_common::protocol::LanguageCode;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::TopicConfigSerializeWrapper;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageResponseHeader;
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

/// A 4.9.8 broker answering PULL_MESSAGE (opaque 11) with two records of `TopicTest` queue 0.
/// `PullMessageProcessor` sets the remark to the GetMessageStatus name (`FOUND`).
const PULL_HEADER: &str = concat!(
    r#"{"code":0,"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"2","maxOffset":"2","minOffset":"0"},"#,
    r#""flag":1,"language":"JAVA","opaque":11,"remark":"FOUND","serializeTypeCurrentRPC":"JSON","version":409}"#
);
/// total = 4 + 208 (header) + 2 × 178 (records) = 568 = 0x238; header length 208 = 0xD0.
const PULL_LENGTHS: [u8; 8] = [0x00, 0x00, 0x02, 0x38, 0x00, 0x00, 0x00, 0xD0];

/// One record written out by hand from `CommitLog.calMsgLength` / `MessageDecoder.decode`:
/// TOTALSIZE = 91 + body 16 + topic 9 + properties 62 = 178 (0xB2). Born host 192.168.1.20:50000,
/// store host 192.168.1.10:10911, born 1700000000000 (0x18BCFE56800), stored 123 ms later.
fn java_record(fixed_88: [u8; 88], body: &[u8], properties: &str) -> Vec<u8> {
    let mut v = fixed_88.to_vec(); // TOTALSIZE .. BODYLEN (offsets 0..88)
    v.extend_from_slice(body); // 88 BODY
    v.push(9); // TOPICLEN (v1: one byte)
    v.extend_from_slice(b"TopicTest");
    v.extend_from_slice(&(properties.len() as i16).to_be_bytes()); // PROPLEN
    v.extend_from_slice(properties.as_bytes());
    assert_eq!(v.len(), 178);
    v
}

#[rustfmt::skip]
const RECORD_0_FIXED: [u8; 88] = [
    0x00, 0x00, 0x00, 0xB2, // TOTALSIZE 178
    0xDA, 0xA3, 0x20, 0xA7, // MAGICCODE v1
    0x24, 0x8C, 0x77, 0x4F, // BODYCRC crc32("Hello RocketMQ 0") & 0x7FFFFFFF
    0x00, 0x00, 0x00, 0x00, // QUEUEID 0
    0x00, 0x00, 0x00, 0x00, // FLAG 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // QUEUEOFFSET 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // PHYSICALOFFSET 0
    0x00, 0x00, 0x00, 0x00, // SYSFLAG 0
    0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x00, // BORNTIMESTAMP
    0xC0, 0xA8, 0x01, 0x14, 0x00, 0x00, 0xC3, 0x50, // BORNHOST 192.168.1.20:50000
    0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B, // STORETIMESTAMP
    0xC0, 0xA8, 0x01, 0x0A, 0x00, 0x00, 0x2A, 0x9F, // STOREHOST 192.168.1.10:10911
    0x00, 0x00, 0x00, 0x00, // RECONSUMETIMES 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // PREPARED_TX_OFFSET 0
    0x00, 0x00, 0x00, 0x10, // BODYLEN 16
];

#[rustfmt::skip]
const RECORD_1_FIXED: [u8; 88] = [
    0x00, 0x00, 0x00, 0xB2, // TOTALSIZE 178
    0xDA, 0xA3, 0x20, 0xA7, // MAGICCODE v1
    0x53, 0x8B, 0x47, 0xD9, // BODYCRC crc32("Hello RocketMQ 1") & 0x7FFFFFFF
    0x00, 0x00, 0x00, 0x00, // QUEUEID 0
    0x00, 0x00, 0x00, 0x00, // FLAG 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // QUEUEOFFSET 1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xB2, // PHYSICALOFFSET 178
    0x00, 0x00, 0x00, 0x00, // SYSFLAG 0
    0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x00, // BORNTIMESTAMP
    0xC0, 0xA8, 0x01, 0x14, 0x00, 0x00, 0xC3, 0x50, // BORNHOST
    0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B, // STORETIMESTAMP
    0xC0, 0xA8, 0x01, 0x0A, 0x00, 0x00, 0x2A, 0x9F, // STOREHOST
    0x00, 0x00, 0x00, 0x00, // RECONSUMETIMES 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // PREPARED_TX_OFFSET 0
    0x00, 0x00, 0x00, 0x10, // BODYLEN 16
];

const PROPS_0: &str = "UNIQ_KEY\u{1}C0A8011400002A9F0000000000000000\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}";
const PROPS_1: &str = "UNIQ_KEY\u{1}C0A8011400002A9F0000000000000001\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagB\u{2}";

fn our_record(queue_offset: i64, body: &'static [u8], properties: &str) -> MessageExt {
    MessageExt {
        message: Message {
            topic: "TopicTest".into(),
            flag: 0,
            properties: Properties::from_wire_str(properties),
            body: Bytes::from_static(body),
        },
        queue_id: 0,
        store_size: 0,
        queue_offset,
        commit_log_offset: queue_offset * 178,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "192.168.1.20:50000".parse().unwrap(),
        store_timestamp: 1_700_000_000_123,
        store_host: "192.168.1.10:10911".parse().unwrap(),
        body_crc: 0,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
    }
}

#[test]
fn pull_message_response_with_two_records_matches_java() {
    let mut body = java_record(RECORD_0_FIXED, b"Hello RocketMQ 0", PROPS_0);
    body.extend(java_record(RECORD_1_FIXED, b"Hello RocketMQ 1", PROPS_1));
    let java = frame(PULL_LENGTHS, PULL_HEADER, &body);

    let cmd = RemotingCommand::decode(&java).expect("the Java frame decodes");
    assert!(cmd.is_response());
    assert_eq!(cmd.response_code(), ResponseCode::Success);
    let header: PullMessageResponseHeader = cmd.decode_header().expect("typed header");
    assert_eq!((header.next_begin_offset, header.min_offset, header.max_offset), (2, 0, 2));
    let records = decode_all(&cmd.body, DecodeOptions::verify_crc()).expect("records decode with valid CRCs");
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].commit_log_offset, 178);
    assert_eq!(records[1].message.tags(), Some("TagB"));
    assert_eq!(records[0].offset_msg_id().to_string(), "C0A8010A00002A9F0000000000000000");

    // Our broker's response: the records encoded by our codec, the header typed.
    let mut ours_body = encode_record(&our_record(0, b"Hello RocketMQ 0", PROPS_0)).unwrap();
    ours_body.extend_from_slice(&encode_record(&our_record(1, b"Hello RocketMQ 1", PROPS_1)).unwrap());
    assert_eq!(&ours_body[..], &body[..], "records are byte-identical to the Java layout");
    let request = {
        let mut r = RemotingCommand::request(RequestCode::PullMessage);
        r.opaque = 11;
        r
    };
    let mut ours = RemotingCommand::response(ResponseCode::Success, Some("FOUND".to_owned()))
        .with_header(&PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: 2,
            min_offset: 0,
            max_offset: 2,
        })
        .with_body(ours_body.freeze())
        .answering(&request);
    ours.language = LanguageCode::Java;
    assert_eq!(ours.encode().unwrap().to_vec(), java);
}

/// The body `golden/compression/RocketMq5Bodies.java` compresses: 150 numbered lines.
fn rocketmq5_plain_body() -> Vec<u8> {
    (0..150).map(|i| format!("line {i}: orderly and compressed\n")).collect::<String>().into_bytes()
}

/// Bodies a RocketMQ 5 producer stores with `compressType` LZ4 and ZSTD, written by the library
/// calls of its `Lz4Compressor` and `ZstdCompressor` (lz4-java 1.8.0's `LZ4FrameOutputStream`,
/// zstd-jni 1.5.2's `ZstdOutputStream` at level 5, flushed then closed:
/// `golden/compression/RocketMq5Bodies.java`), stored in a record with 5.x's sysFlag (bit 0, and the
/// type in bits 8–10: LZ4 = 0x100, ZSTD = 0x200): the record keeps the bits and the body, and the
/// SDK's read gives the original.
#[test]
fn rocketmq5_lz4_and_zstd_bodies_decode() {
    use raftmq_common::message::compress::uncompress_stored_body;
    use raftmq_common::message::sys_flag;

    let plain = rocketmq5_plain_body();
    assert_eq!(plain.len(), 4840);
    let lz4: &[u8] = include_bytes!("golden/compression/lz4_body.bin");
    let zstd: &[u8] = include_bytes!("golden/compression/zstd_body.bin");
    // lz4-java's frame: magic, FLG 0x60 (version 1, independent blocks), BD 0x70 (4 MiB blocks), HC.
    assert_eq!(&lz4[..7], &[0x04, 0x22, 0x4D, 0x18, 0x60, 0x70, 0x73]);
    assert_eq!(&zstd[..4], &[0x28, 0xB5, 0x2F, 0xFD], "zstd frame magic");
    for (body, flag) in [(lz4, 0x101), (zstd, 0x201)] {
        assert_eq!(
            flag,
            sys_flag::COMPRESSED
                | if flag == 0x101 { sys_flag::COMPRESSION_LZ4_TYPE } else { sys_flag::COMPRESSION_ZSTD_TYPE }
        );
        let mut msg = our_record(7, b"", "");
        msg.message.body = Bytes::copy_from_slice(body);
        msg.sys_flag = flag;
        let record = encode_record(&msg).unwrap().freeze();
        let back = decode_all(&record, DecodeOptions::default()).expect("the record decodes");
        assert_eq!(back[0].sys_flag & 0x701, flag, "the 5.x compression bits survive the record");
        assert_eq!(&back[0].message.body[..], body);
        assert_eq!(uncompress_stored_body(back[0].sys_flag, &back[0].message.body).unwrap(), plain);
    }
}
