//! Golden frames from real clients: one request frame per request code (and per send variant) that
//! Apache's C++ client 1.2.x and rocketmq-client-rust sent to raftmq, captured on the wire by
//! `tests/interop_cpp/capture_proxy.py` (how: `tests/golden/clients/README.md`).
//!
//! Every fixture must decode as the broker or NameServer decodes that code: the frame, the typed
//! header and the JSON body. A fixture whose code has no decoder here fails, so a newly captured
//! code is never silently skipped. The C++ client's peculiarities are pinned down explicitly:
//! booleans written `0`/`1` (read as Java's `Boolean.parseBoolean` reads them), integers as bare
//! JSON numbers in `extFields`, enums in the heartbeat as ordinals, `subVersion` as a string.

use std::path::PathBuf;

use bytes::Bytes;
use raftmq_common::message::batch::decode_batch;
use raftmq_common::protocol::LanguageCode;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::heartbeat::CheckClientRequestBody;
use raftmq_common::protocol::body::heartbeat::ConsumeFromWhere;
use raftmq_common::protocol::body::heartbeat::ConsumeType;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::MessageModel;
use raftmq_common::protocol::body::lock_batch::LockBatchRequestBody;
use raftmq_common::protocol::body::lock_batch::UnlockBatchRequestBody;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::client::ConsumerSendMsgBackRequestHeader;
use raftmq_common::protocol::header::client::GetConsumerListByGroupRequestHeader;
use raftmq_common::protocol::header::client::UnregisterClientRequestHeader;
use raftmq_common::protocol::header::namesrv::GetKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::protocol::header::offset::GetMaxOffsetRequestHeader;
use raftmq_common::protocol::header::offset::GetMinOffsetRequestHeader;
use raftmq_common::protocol::header::offset::QueryConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::offset::SearchOffsetRequestHeader;
use raftmq_common::protocol::header::offset::UpdateConsumerOffsetRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::protocol::header::transaction::EndTransactionRequestHeader;

/// One captured frame: the file name (`<client>-<namesrv|broker>-<code>[-<variant>].hex`) and bytes.
struct Fixture {
    name: String,
    frame: Vec<u8>,
}

fn fixtures() -> Vec<Fixture> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/clients");
    let mut out: Vec<Fixture> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "hex"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable fixture");
            let hex: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            Fixture { name: path.file_name().unwrap().to_string_lossy().into_owned(), frame: unhex(&hex) }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn unhex(hex: &str) -> Vec<u8> {
    assert!(hex.len().is_multiple_of(2), "odd hex length");
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digits")).collect()
}

fn header<H: CommandHeader>(cmd: &RemotingCommand, name: &str) -> H {
    cmd.decode_header::<H>().unwrap_or_else(|e| panic!("{name}: the header does not decode: {e}"))
}

fn body<B: JsonBody>(cmd: &RemotingCommand, name: &str) -> B {
    B::decode(&cmd.body).unwrap_or_else(|e| panic!("{name}: the body does not decode: {e}"))
}

/// Decodes `cmd` as the server that serves its code does; a short description of what it read.
fn decode_as_served(cmd: &RemotingCommand, name: &str) -> String {
    match cmd.request_code() {
        RequestCode::SendMessage => format!("{:?}", header::<SendMessageRequestHeader>(cmd, name)),
        RequestCode::SendMessageV2 | RequestCode::SendBatchMessage | RequestCode::SendReplyMessageV2 => {
            format!("{:?}", SendMessageRequestHeader::from(header::<SendMessageRequestHeaderV2>(cmd, name)))
        }
        RequestCode::PullMessage => format!("{:?}", header::<PullMessageRequestHeader>(cmd, name)),
        RequestCode::QueryConsumerOffset => format!("{:?}", header::<QueryConsumerOffsetRequestHeader>(cmd, name)),
        RequestCode::UpdateConsumerOffset => {
            format!("{:?}", header::<UpdateConsumerOffsetRequestHeader>(cmd, name))
        }
        RequestCode::GetMaxOffset => format!("{:?}", header::<GetMaxOffsetRequestHeader>(cmd, name)),
        RequestCode::GetMinOffset => format!("{:?}", header::<GetMinOffsetRequestHeader>(cmd, name)),
        RequestCode::SearchOffsetByTimestamp => format!("{:?}", header::<SearchOffsetRequestHeader>(cmd, name)),
        RequestCode::HeartBeat => format!("{:?}", body::<HeartbeatData>(cmd, name)),
        RequestCode::UnregisterClient => format!("{:?}", header::<UnregisterClientRequestHeader>(cmd, name)),
        RequestCode::ConsumerSendMsgBack => format!("{:?}", header::<ConsumerSendMsgBackRequestHeader>(cmd, name)),
        RequestCode::EndTransaction => format!("{:?}", header::<EndTransactionRequestHeader>(cmd, name)),
        RequestCode::GetConsumerListByGroup => {
            format!("{:?}", header::<GetConsumerListByGroupRequestHeader>(cmd, name))
        }
        RequestCode::LockBatchMq => format!("{:?}", body::<LockBatchRequestBody>(cmd, name)),
        RequestCode::UnlockBatchMq => format!("{:?}", body::<UnlockBatchRequestBody>(cmd, name)),
        RequestCode::GetRouteinfoByTopic => format!("{:?}", header::<GetRouteInfoRequestHeader>(cmd, name)),
        RequestCode::GetKvConfig => format!("{:?}", header::<GetKvConfigRequestHeader>(cmd, name)),
        RequestCode::CheckClientConfig => format!("{:?}", body::<CheckClientRequestBody>(cmd, name)),
        // Served without a header or body.
        RequestCode::GetBrokerClusterInfo | RequestCode::GetAllTopicListFromNameserver => "no header".to_owned(),
        other => panic!("{name}: no decoder for {other}; add the one the serving processor uses"),
    }
}

#[test]
fn every_captured_client_frame_decodes_as_the_server_decodes_it() {
    let fixtures = fixtures();
    assert!(fixtures.iter().any(|f| f.name.starts_with("cpp-")), "no C++ client fixtures");
    assert!(fixtures.iter().any(|f| f.name.starts_with("rust-")), "no rocketmq-client-rust fixtures");
    for f in &fixtures {
        let cmd =
            RemotingCommand::decode(&f.frame).unwrap_or_else(|e| panic!("{}: the frame does not decode: {e}", f.name));
        assert!(!cmd.is_response(), "{}: captured a response", f.name);
        let code: i32 = f.name.split('-').nth(2).and_then(|c| c.trim_end_matches(".hex").parse().ok()).expect("a code");
        assert_eq!(cmd.code, code, "{}: the file name's code", f.name);
        let read = decode_as_served(&cmd, &f.name);
        println!("{}: {} -> {}", f.name, cmd.request_code(), read.chars().take(160).collect::<String>());
        // The frame survives our encoder: decode, encode, decode gives the same command.
        let again = RemotingCommand::decode(&cmd.encode().expect("re-encodes")).expect("re-decodes");
        assert_eq!(again.ext_fields, cmd.ext_fields, "{}", f.name);
        assert_eq!(again.body, cmd.body, "{}", f.name);
    }
}

fn cpp(name: &str) -> RemotingCommand {
    let f = fixtures().into_iter().find(|f| f.name == name).unwrap_or_else(|| panic!("fixture {name} missing"));
    let cmd = RemotingCommand::decode(&f.frame).expect("the frame decodes");
    assert_eq!(cmd.language, LanguageCode::Cpp, "{name}");
    cmd
}

#[test]
fn cpp_send_reads_zero_one_booleans_and_bare_numbers_as_java_does() {
    let cmd = cpp("cpp-broker-10.hex");
    assert_eq!(cmd.request_code(), RequestCode::SendMessage);
    // Written as `"unitMode":"0"`, `"batch":"0"`, `"defaultTopicQueueNums":4` (a JSON number).
    assert_eq!(cmd.ext_fields.get("unitMode").map(|v| v.as_str()), Some("0"));
    assert_eq!(cmd.ext_fields.get("defaultTopicQueueNums").map(|v| v.as_str()), Some("4"));
    let h: SendMessageRequestHeader = header(&cmd, "send");
    assert_eq!(h.unit_mode, Some(false));
    assert_eq!(h.batch, Some(false));
    assert_eq!(h.default_topic_queue_nums, 4);
    let properties = h.properties.expect("properties");
    assert!(properties.contains("TAGS\u{1}TagA\u{2}") && properties.contains("interopSeq\u{1}"), "{properties:?}");
}

#[test]
fn cpp_batch_flag_one_reads_false_as_on_a_java_broker() {
    // librocketmq 1.2.x writes the batch flag as `1`; `Boolean.parseBoolean("1")` is false, so a
    // Java broker (and raftmq) stores the batch as one message whose body is the batch encoding.
    let cmd = cpp("cpp-broker-10-batch.hex");
    assert_eq!(cmd.ext_fields.get("batch").map(|v| v.as_str()), Some("1"));
    let h: SendMessageRequestHeader = header(&cmd, "batch");
    assert_eq!(h.batch, Some(false));
    let inner = decode_batch(&Bytes::copy_from_slice(&cmd.body), &h.topic).expect("the body is a batch encoding");
    assert!(inner.len() >= 2, "{inner:?}");
    for m in &inner {
        assert_eq!(m.tags(), Some("TagBatch"));
        assert!(m.keys().is_some_and(|k| k.starts_with("batch-")), "{m:?}");
    }
}

#[test]
fn cpp_heartbeat_enums_by_ordinal_and_sub_version_as_string() {
    let cmd = cpp("cpp-broker-34.hex");
    let text = String::from_utf8_lossy(&cmd.body);
    assert!(text.contains(r#""consumeType":1"#) && text.contains(r#""subVersion":""#), "{text}");
    let hb: HeartbeatData = body(&cmd, "heartbeat");
    let consumer = hb.consumer_data_set.first().expect("a consumer");
    assert_eq!(consumer.consume_type, ConsumeType::ConsumePassively);
    assert_eq!(consumer.message_model, MessageModel::Clustering);
    assert_eq!(consumer.consume_from_where, ConsumeFromWhere::ConsumeFromLastOffset);
    assert!(consumer.subscription_data_set.iter().all(|s| s.sub_version > 0), "{consumer:?}");
    assert!(consumer.subscription_data_set.iter().any(|s| s.topic.starts_with("%RETRY%")), "{consumer:?}");
}

#[test]
fn cpp_send_back_and_pull_read_as_java_reads_them() {
    let back: ConsumerSendMsgBackRequestHeader = header(&cpp("cpp-broker-36.hex"), "send back");
    assert_eq!(back.delay_level, 0, "the C++ client leaves the level to the broker");
    assert!(back.offset >= 0);
    let pull: PullMessageRequestHeader = header(&cpp("cpp-broker-11.hex"), "pull");
    assert_eq!(pull.max_msg_nums, 32);
    assert!(pull.suspend_timeout_millis > 0);
}

#[test]
fn rust_client_batch_is_a_batch() {
    // rocketmq-client-rust sends SEND_BATCH_MESSAGE with `"m":"true"`, as Java's client does.
    let f = fixtures().into_iter().find(|f| f.name == "rust-broker-320-batch.hex").expect("fixture");
    let cmd = RemotingCommand::decode(&f.frame).expect("the frame decodes");
    assert_eq!(cmd.language, LanguageCode::Rust);
    let h = SendMessageRequestHeader::from(header::<SendMessageRequestHeaderV2>(&cmd, &f.name));
    assert_eq!(h.batch, Some(true));
    let inner = decode_batch(&Bytes::copy_from_slice(&cmd.body), &h.topic).expect("the body is a batch encoding");
    let bodies: Vec<&[u8]> = inner.iter().map(|m| &m.body[..]).collect();
    assert_eq!(bodies, [&b"batch-0"[..], b"batch-1", b"batch-2", b"batch-3", b"batch-4"]);
}
