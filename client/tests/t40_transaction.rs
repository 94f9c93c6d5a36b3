//! TransactionProducer against a real NameServer and a raw-socket fake broker: the half message on
//! the wire (TRAN_MSG, PGROUP, sysFlag PREPARED), the END_TRANSACTION that follows for each local
//! state (commit, rollback, unknown, panic, non-OK store status), HEART_BEAT with the producer group,
//! and CHECK_TRANSACTION_STATE sent by the broker on the producer's own connection, answered with an
//! END_TRANSACTION and never with a response frame.
//!
//! The fake broker reads frames itself (length word + `RemotingCommand::decode_frame`) so that every
//! frame the producer writes, responses included, is seen in order. Waiting is on its event channel,
//! bounded by [`WAIT_MAX`]; nothing sleeps.

mod common;

use std::any::Any;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use bytes::Bytes;
use common::start_namesrv;
use raftmq_client::ErrorKind;
use raftmq_client::LocalTransactionState;
use raftmq_client::Producer;
use raftmq_client::SendStatus;
use raftmq_client::TransactionListener;
use raftmq_client::TransactionProducer;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::message::Properties;
use raftmq_common::message::properties;
use raftmq_common::message::record::encode_record;
use raftmq_common::message::sys_flag;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::topic::perm;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;
use raftmq_common::protocol::header::transaction::CheckTransactionStateRequestHeader;
use raftmq_common::protocol::header::transaction::EndTransactionRequestHeader;
use raftmq_common::remoting::RemotingClient;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const TOPIC: &str = "TxTopic";
const GROUP: &str = "TxProducerGroup";
const BROKER_NAME: &str = "broker-tx";
const HALF_COMMIT_LOG_OFFSET: i64 = 4242;
const HALF_QUEUE_OFFSET: i64 = 17;
const WAIT_MAX: Duration = Duration::from_secs(10);
const FRAME_MAX_BYTES: usize = 16 << 20;

/// One frame the fake broker read, with the connection it came on.
#[derive(Debug)]
struct Seen {
    conn: u64,
    cmd: RemotingCommand,
}

/// How the fake broker answers sends.
#[derive(Debug, Clone)]
struct SendReply {
    code: ResponseCode,
    transaction_id: Option<String>,
}

/// A broker node speaking raw frames: answers SEND_MESSAGE_V2 with a half's offsets, SUCCESS to any
/// other two-way request, nothing to oneway ones; records every frame; can write frames to a client.
struct FakeTxBroker {
    addr: String,
    store_host: SocketAddr,
    seen: mpsc::UnboundedReceiver<Seen>,
    writers: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Bytes>>>>,
    reply: Arc<Mutex<SendReply>>,
    /// Kept: the NameServer drops a broker whose registering connection closes.
    namesrv_client: RemotingClient,
}

impl FakeTxBroker {
    async fn start() -> Result<FakeTxBroker> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let store_host = listener.local_addr()?;
        let (seen_tx, seen) = mpsc::unbounded_channel();
        let writers: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<Bytes>>>> = Arc::default();
        let reply = Arc::new(Mutex::new(SendReply { code: ResponseCode::Success, transaction_id: None }));
        let (accept_writers, accept_reply) = (writers.clone(), reply.clone());
        tokio::spawn(async move {
            let mut next_conn = 0u64;
            while let Ok((stream, _)) = listener.accept().await {
                next_conn += 1;
                let conn = next_conn;
                let (mut read, mut write) = stream.into_split();
                let (frames_tx, mut frames_rx) = mpsc::unbounded_channel::<Bytes>();
                accept_writers.lock().unwrap().insert(conn, frames_tx.clone());
                tokio::spawn(async move {
                    while let Some(frame) = frames_rx.recv().await {
                        if write.write_all(&frame).await.is_err() {
                            return;
                        }
                    }
                });
                let (seen_tx, reply) = (seen_tx.clone(), accept_reply.clone());
                tokio::spawn(async move {
                    while let Ok(cmd) = read_frame(&mut read).await {
                        if let Some(answer) = answer(&cmd, &reply.lock().unwrap(), store_host) {
                            let Ok(frame) = answer.encode() else { return };
                            let _ = frames_tx.send(frame.freeze());
                        }
                        if seen_tx.send(Seen { conn, cmd }).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Ok(FakeTxBroker {
            addr: store_host.to_string(),
            store_host,
            seen,
            writers,
            reply,
            namesrv_client: RemotingClient::new(),
        })
    }

    /// REGISTER_BROKER as brokerId 0 of [`BROKER_NAME`] with [`TOPIC`] (4 queues, read-write).
    async fn register(&self, namesrv: &str) -> Result<()> {
        common::register_broker(
            &self.namesrv_client,
            namesrv,
            BROKER_NAME,
            0,
            &self.addr,
            &[(TOPIC, 4, perm::READ_WRITE)],
        )
        .await
    }

    fn set_reply(&self, code: ResponseCode, transaction_id: Option<&str>) {
        *self.reply.lock().unwrap() = SendReply { code, transaction_id: transaction_id.map(str::to_owned) };
    }

    /// Frames until one matches `want`; returns it and every frame skipped before it.
    async fn wait_for(&mut self, what: &str, want: impl Fn(&Seen) -> bool) -> Result<(Seen, Vec<Seen>)> {
        let mut skipped = Vec::new();
        let deadline = tokio::time::Instant::now() + WAIT_MAX;
        loop {
            let seen = tokio::time::timeout_at(deadline, self.seen.recv())
                .await
                .with_context(|| format!("no {what} within {WAIT_MAX:?}; saw {skipped:?}"))?
                .context("fake broker stopped")?;
            if want(&seen) {
                return Ok((seen, skipped));
            }
            skipped.push(seen);
        }
    }

    async fn wait_for_code(&mut self, code: RequestCode) -> Result<(Seen, Vec<Seen>)> {
        self.wait_for(&code.to_string(), |s| !s.cmd.is_response() && s.cmd.request_code() == code).await
    }

    /// Writes `cmd` (opaque and flags as given) on connection `conn`.
    fn send_on(&self, conn: u64, cmd: &RemotingCommand) -> Result<()> {
        let frame = cmd.encode()?.freeze();
        let writers = self.writers.lock().unwrap();
        writers.get(&conn).context("no such connection")?.send(frame).ok().context("connection gone")
    }

    async fn shutdown(&self) {
        self.namesrv_client.close().await;
    }
}

async fn read_frame(read: &mut (impl AsyncReadExt + Unpin)) -> Result<RemotingCommand> {
    let len = usize::try_from(read.read_u32().await?)?;
    if len > FRAME_MAX_BYTES {
        bail!("frame of {len} bytes");
    }
    let mut buf = vec![0u8; len];
    read.read_exact(&mut buf).await?;
    Ok(RemotingCommand::decode_frame(Bytes::from(buf))?)
}

/// The fake broker's answer to one frame; `None` for responses and oneway requests.
fn answer(cmd: &RemotingCommand, reply: &SendReply, store_host: SocketAddr) -> Option<RemotingCommand> {
    if cmd.is_response() || cmd.is_oneway() {
        return None;
    }
    let response = match cmd.request_code() {
        RequestCode::SendMessageV2 => {
            let queue_id = SendMessageRequestHeader::read_request(cmd).map(|h| h.queue_id).unwrap_or(0);
            RemotingCommand::response(reply.code, None).with_header(&SendMessageResponseHeader {
                msg_id: OffsetMsgId::new(store_host, HALF_COMMIT_LOG_OFFSET).to_string(),
                queue_id,
                queue_offset: HALF_QUEUE_OFFSET,
                transaction_id: reply.transaction_id.clone(),
            })
        }
        _ => RemotingCommand::success(),
    };
    Some(response.answering(cmd))
}

/// A listener whose local transaction answers with the message body's text ("commit", "rollback",
/// "unknown", "panic"), reporting every call on a channel.
struct ScriptedListener {
    executed: mpsc::UnboundedSender<(Message, String)>,
    checked: mpsc::UnboundedSender<MessageExt>,
}

fn decide(body: &[u8]) -> LocalTransactionState {
    match body {
        b"commit" => LocalTransactionState::CommitMessage,
        b"rollback" => LocalTransactionState::RollbackMessage,
        b"panic" => panic!("local transaction failed"),
        _ => LocalTransactionState::Unknown,
    }
}

impl TransactionListener for ScriptedListener {
    fn execute_local_transaction(&self, msg: &Message, arg: &(dyn Any + Send + Sync)) -> LocalTransactionState {
        let arg = arg.downcast_ref::<&str>().map(|s| (*s).to_owned()).unwrap_or_default();
        let _ = self.executed.send((msg.clone(), arg));
        decide(&msg.body)
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let _ = self.checked.send(msg.clone());
        decide(&msg.message.body)
    }
}

struct Fixture {
    broker: FakeTxBroker,
    producer: TransactionProducer,
    executed: mpsc::UnboundedReceiver<(Message, String)>,
    checked: mpsc::UnboundedReceiver<MessageExt>,
    _namesrv: raftmq_namesrv::NameServer,
}

async fn fixture() -> Result<Fixture> {
    let namesrv = start_namesrv().await?;
    let namesrv_addr = namesrv.local_addr().to_string();
    let broker = FakeTxBroker::start().await?;
    broker.register(&namesrv_addr).await?;
    let (executed_tx, executed) = mpsc::unbounded_channel();
    let (checked_tx, checked) = mpsc::unbounded_channel();
    let listener = Arc::new(ScriptedListener { executed: executed_tx, checked: checked_tx });
    let builder =
        Producer::builder(GROUP).namesrv_addr(&namesrv_addr).client_ip("127.0.0.1".parse()?).instance_name("tx");
    let producer = TransactionProducer::builder(builder, listener).build()?;
    producer.start().await?;
    Ok(Fixture { broker, producer, executed, checked, _namesrv: namesrv })
}

impl Fixture {
    async fn shutdown(self) {
        self.producer.shutdown().await;
        self.broker.shutdown().await;
    }
}

fn end_header(seen: &Seen) -> Result<EndTransactionRequestHeader> {
    Ok(seen.cmd.decode_header::<EndTransactionRequestHeader>()?)
}

async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> Result<T> {
    tokio::time::timeout(WAIT_MAX, rx.recv()).await.with_context(|| format!("no {what}"))?.context("channel closed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_sends_a_prepared_half_then_end_transaction_8() -> Result<()> {
    let mut f = fixture().await?;
    f.broker.set_reply(ResponseCode::Success, Some("TX-1"));
    let msg = Message::new(TOPIC, "commit").with_tags("TagA").with_keys("order-1");
    let result = f.producer.send_message_in_transaction(msg, &"the-arg").await?;
    assert_eq!(result.local_transaction_state, LocalTransactionState::CommitMessage);
    assert_eq!(result.send_result.status, SendStatus::SendOk);
    assert_eq!(result.send_result.queue_offset, HALF_QUEUE_OFFSET);

    let (send, _) = f.broker.wait_for_code(RequestCode::SendMessageV2).await?;
    let header = SendMessageRequestHeader::read_request(&send.cmd)?;
    assert_eq!(header.producer_group, GROUP);
    assert_eq!(header.topic, TOPIC);
    assert_eq!(header.sys_flag & 0xC, sys_flag::TRANSACTION_PREPARED_TYPE);
    let props = Properties::from_wire_str(header.properties.as_deref().unwrap_or_default());
    assert_eq!(props.get(properties::TRAN_MSG), Some("true"));
    assert_eq!(props.get(properties::PGROUP), Some(GROUP));
    let uniq = props.get(properties::UNIQ_KEY).context("UNIQ_KEY")?.to_owned();
    assert_eq!(result.send_result.msg_id, uniq);

    // The listener saw the message as sent, the broker's transactionId and the caller's arg.
    let (seen_msg, arg) = recv(&mut f.executed, "executeLocalTransaction").await?;
    assert_eq!(arg, "the-arg");
    assert_eq!(seen_msg.uniq_key(), Some(uniq.as_str()));
    assert_eq!(seen_msg.property("__transactionId__"), Some("TX-1"));
    assert!(seen_msg.is_transaction_prepared());

    let (end, _) = f.broker.wait_for_code(RequestCode::EndTransaction).await?;
    assert!(end.cmd.is_oneway(), "END_TRANSACTION is oneway");
    assert_eq!(end.conn, send.conn, "same connection as the send");
    let h = end_header(&end)?;
    assert_eq!(h.producer_group, GROUP);
    assert_eq!(h.commit_or_rollback, 8);
    assert_eq!(h.commit_log_offset, HALF_COMMIT_LOG_OFFSET);
    assert_eq!(h.tran_state_table_offset, HALF_QUEUE_OFFSET);
    assert_eq!(h.from_transaction_check, Some(false));
    assert_eq!(h.msg_id, uniq);
    assert_eq!(h.transaction_id.as_deref(), Some("TX-1"));
    assert_eq!(h.bname.as_deref(), Some(BROKER_NAME));
    f.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_unknown_panic_and_non_ok_statuses_end_with_12_or_0() -> Result<()> {
    let mut f = fixture().await?;
    // (body, store status, expected state, whether the listener runs)
    let cases = [
        ("rollback", ResponseCode::Success, LocalTransactionState::RollbackMessage, true),
        ("unknown", ResponseCode::Success, LocalTransactionState::Unknown, true),
        ("panic", ResponseCode::Success, LocalTransactionState::Unknown, true),
        ("commit", ResponseCode::FlushDiskTimeout, LocalTransactionState::RollbackMessage, false),
        ("commit", ResponseCode::SlaveNotAvailable, LocalTransactionState::RollbackMessage, false),
    ];
    for (body, code, want, listener_runs) in cases {
        f.broker.set_reply(code, None);
        let result = f.producer.send_message_in_transaction(Message::new(TOPIC, body), &()).await?;
        assert_eq!(result.local_transaction_state, want, "{body} / {code}");
        if listener_runs {
            let (seen_msg, _) = recv(&mut f.executed, "executeLocalTransaction").await?;
            assert_eq!(seen_msg.body.as_ref(), body.as_bytes());
            assert_eq!(seen_msg.property("__transactionId__"), None, "no transactionId from this broker");
        }
        let (end, _) = f.broker.wait_for_code(RequestCode::EndTransaction).await?;
        let h = end_header(&end)?;
        assert_eq!(h.commit_or_rollback, want.commit_or_rollback(), "{body} / {code}");
        assert_eq!((h.commit_log_offset, h.tran_state_table_offset), (HALF_COMMIT_LOG_OFFSET, HALF_QUEUE_OFFSET));
        assert_eq!(h.msg_id, result.send_result.msg_id);
        assert_eq!(h.transaction_id, None);
        if body == "panic" {
            let remark = end.cmd.remark.clone().unwrap_or_default();
            assert!(remark.contains("local transaction failed"), "remark {remark:?}");
        }
    }
    // Only the three SEND_OK cases ran the listener.
    assert!(f.executed.try_recv().is_err());

    // A delayed transactional message is refused before anything is sent.
    let mut delayed = Message::new(TOPIC, "commit");
    delayed.set_delay_time_level(3);
    let err = f.producer.send_message_in_transaction(delayed, &()).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidArgument);
    f.shutdown().await;
    Ok(())
}

/// A half as the broker's check sends it: topic and queue restored, PGROUP, TRAN_MSG, UNIQ_KEY kept.
fn half_record(group: &str, uniq: &str, body: &str, store_host: SocketAddr) -> Result<Bytes> {
    let mut message = Message::new(TOPIC, body.to_owned());
    message.properties.insert(properties::PGROUP, group);
    message.properties.insert(properties::TRAN_MSG, "true");
    message.properties.insert(properties::UNIQ_KEY, uniq);
    message.properties.insert(properties::REAL_TOPIC, TOPIC);
    message.properties.insert(properties::REAL_QID, "1");
    let half = MessageExt {
        message,
        queue_id: 1,
        queue_offset: HALF_QUEUE_OFFSET,
        commit_log_offset: HALF_COMMIT_LOG_OFFSET,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:50000".parse()?,
        store_timestamp: 1_700_000_000_001,
        store_host,
        ..MessageExt::default()
    };
    Ok(encode_record(&half)?.freeze())
}

fn check_request(
    opaque: i32,
    uniq: &str,
    transaction_id: &str,
    record: Bytes,
    store_host: SocketAddr,
) -> RemotingCommand {
    let header = CheckTransactionStateRequestHeader {
        tran_state_table_offset: HALF_QUEUE_OFFSET,
        commit_log_offset: HALF_COMMIT_LOG_OFFSET,
        msg_id: Some(uniq.to_owned()),
        transaction_id: Some(transaction_id.to_owned()),
        offset_msg_id: Some(OffsetMsgId::new(store_host, HALF_COMMIT_LOG_OFFSET).to_string()),
        bname: None,
    };
    let mut cmd = RemotingCommand::request_with_header(RequestCode::CheckTransactionState, &header)
        .with_body(record)
        .into_oneway();
    cmd.opaque = opaque;
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_check_is_answered_by_end_transaction_on_the_same_connection() -> Result<()> {
    let mut f = fixture().await?;
    f.broker.set_reply(ResponseCode::Success, None);
    let sent = f.producer.send_message_in_transaction(Message::new(TOPIC, "unknown"), &()).await?;
    assert_eq!(sent.local_transaction_state, LocalTransactionState::Unknown);

    // The first route use triggers a heartbeat naming the group: only then can the broker check.
    let (heartbeat, before_heartbeat) = f.broker.wait_for_code(RequestCode::HeartBeat).await?;
    let data = HeartbeatData::decode(&heartbeat.cmd.body)?;
    assert_eq!(data.client_id, f.producer.producer().client_id());
    assert!(data.consumer_data_set.is_empty());
    assert_eq!(data.producer_data_set.iter().map(|p| p.group_name.as_str()).collect::<Vec<_>>(), vec![GROUP]);
    // The heartbeat runs on a task of its own, so the END_TRANSACTION may have come first.
    let is_end = |s: &Seen| !s.cmd.is_response() && s.cmd.request_code() == RequestCode::EndTransaction;
    let first_end = match before_heartbeat.into_iter().find(is_end) {
        Some(end) => end,
        None => f.broker.wait_for_code(RequestCode::EndTransaction).await?.0,
    };
    assert_eq!(end_header(&first_end)?.commit_or_rollback, 0);
    let conn = heartbeat.conn;

    // A check for another group is dropped; the two real ones are answered (the transport runs
    // request processors concurrently, so their order is not fixed).
    let store = f.broker.store_host;
    let uniq = sent.send_result.msg_id.clone();
    let other = check_request(900_001, "OTHER", "TX-O", half_record("OtherGroup", "OTHER", "commit", store)?, store);
    let commit = check_request(900_002, &uniq, "TX-C", half_record(GROUP, &uniq, "commit", store)?, store);
    let panics = check_request(900_003, &uniq, "TX-P", half_record(GROUP, &uniq, "panic", store)?, store);
    f.broker.send_on(conn, &other)?;
    f.broker.send_on(conn, &commit)?;
    f.broker.send_on(conn, &panics)?;

    let mut before = Vec::new();
    let mut answers = std::collections::BTreeMap::new();
    while answers.len() < 2 {
        let (end, skipped) = f.broker.wait_for_code(RequestCode::EndTransaction).await?;
        before.extend(skipped);
        assert_eq!(end.conn, conn, "answered on the connection the check came on");
        assert!(end.cmd.is_oneway());
        let h = end_header(&end)?;
        assert_eq!(h.from_transaction_check, Some(true));
        assert_eq!(h.producer_group, GROUP);
        assert_eq!((h.commit_log_offset, h.tran_state_table_offset), (HALF_COMMIT_LOG_OFFSET, HALF_QUEUE_OFFSET));
        assert_eq!(h.msg_id, uniq);
        answers.insert(h.transaction_id.clone().unwrap_or_default(), (h.commit_or_rollback, end.cmd.remark.clone()));
    }
    assert_eq!(answers.get("TX-C").map(|a| a.0), Some(8));
    let (panicked, remark) = answers.get("TX-P").cloned().context("TX-P answered")?;
    assert_eq!(panicked, 0, "a panicking check listener answers UNKNOW");
    assert!(remark.unwrap_or_default().contains("local transaction failed"));
    assert!(!answers.contains_key("TX-O"), "the OtherGroup check got no answer");

    // The listener saw both real halves, as stored, and never the other group's.
    let mut checked = vec![recv(&mut f.checked, "checkLocalTransaction").await?];
    checked.push(recv(&mut f.checked, "checkLocalTransaction").await?);
    assert!(f.checked.try_recv().is_err(), "the OtherGroup check reached the listener");
    for msg in &checked {
        assert_eq!(msg.msg_id(), uniq, "the transaction id is the UNIQ_KEY");
        assert_eq!((msg.topic(), msg.queue_id), (TOPIC, 1));
        assert_eq!(msg.commit_log_offset, HALF_COMMIT_LOG_OFFSET);
    }

    // A plain send after the answers: any frame the producer wrote for the checks is read before it.
    f.producer.producer().send(Message::new(TOPIC, "plain")).await?;
    let (_, skipped) = f.broker.wait_for_code(RequestCode::SendMessageV2).await?;
    before.extend(skipped);
    let stray: Vec<&Seen> =
        before.iter().filter(|s| s.cmd.is_response() && (900_001..=900_003).contains(&s.cmd.opaque)).collect();
    assert!(stray.is_empty(), "no response frame to a oneway check: {stray:?}");
    f.shutdown().await;
    Ok(())
}
