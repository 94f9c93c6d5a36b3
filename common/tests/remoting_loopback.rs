//! Loopback tests of the remoting transport: a real `RemotingServer` and real `RemotingClient`s (or
//! raw sockets playing a misbehaving peer) on 127.0.0.1 with ports chosen at runtime.
//!
//! No test sleeps to synchronise: processors report through channels and wait on `Notify`s the
//! test controls; `timeout`s are only safety bounds that turn a hang into a failure.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::ensure;
use bytes::BufMut;
use bytes::BytesMut;
use futures::StreamExt;
use raftmq_common::limits::FRAME_SIZE_MAX_BYTES;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::SerializeType;
use raftmq_common::protocol::leader_hint::format_leader_hint;
use raftmq_common::protocol::leader_hint::parse_leader_hint;
use raftmq_common::remoting::CloseReason;
use raftmq_common::remoting::Connection;
use raftmq_common::remoting::ConnectionClosed;
use raftmq_common::remoting::ConnectionContext;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::RemotingCodec;
use raftmq_common::remoting::RemotingError;
use raftmq_common::remoting::RemotingServer;
use raftmq_common::remoting::RequestProcessor;
use raftmq_common::remoting::SHUTTING_DOWN_REMARK;
use raftmq_common::remoting::ServerLimits;
use raftmq_common::remoting::ServerOptions;
use raftmq_common::remoting::processor_fn;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

/// Bounds every wait; reaching it is a failure, never a synchronisation.
const SAFETY: Duration = Duration::from_secs(60);
const RPC: Duration = Duration::from_secs(30);
const LOOPBACK: &str = "127.0.0.1:0";

fn any_port() -> SocketAddr {
    LOOPBACK.parse().expect("loopback address")
}

async fn bounded<F: Future>(what: &str, f: F) -> Result<F::Output> {
    tokio::time::timeout(SAFETY, f).await.with_context(|| format!("{what} did not finish within {SAFETY:?}"))
}

/// Answers SUCCESS echoing `seq` and naming itself in `by`, so a test sees which processor ran.
struct Echo {
    name: &'static str,
}

impl RequestProcessor for Echo {
    async fn process(&self, _ctx: ConnectionContext, request: RemotingCommand) -> Option<RemotingCommand> {
        let mut response = RemotingCommand::success().with_body(request.body.clone());
        if let Some(seq) = request.ext_fields.get("seq") {
            response.ext_fields.insert("seq".into(), seq.clone());
        }
        response.ext_fields.insert("by".into(), self.name.into());
        Some(response)
    }
}

fn echo_table() -> ProcessorTable {
    let mut table = ProcessorTable::new();
    table.register(RequestCode::HeartBeat, Arc::new(Echo { name: "heartbeat" }));
    table.register(RequestCode::SendMessageV2, Arc::new(Echo { name: "send" }));
    table
}

fn request(code: RequestCode, seq: u64) -> RemotingCommand {
    let mut cmd = RemotingCommand::request(code);
    cmd.ext_fields.insert("seq".into(), seq.to_string().into());
    cmd
}

/// A hook that reports closed connections on a bounded channel without ever blocking.
fn closed_events() -> (ServerOptions, mpsc::Receiver<ConnectionClosed>) {
    let (tx, rx) = mpsc::channel(1024);
    let options = ServerOptions::default().on_connection_closed(move |event| {
        // The receiver is drained by the test; a full channel would only lose a report.
        let _ = tx.try_send(event.clone());
    });
    (options, rx)
}

async fn next_bad_frame_close(events: &mut mpsc::Receiver<ConnectionClosed>) -> Result<ConnectionClosed> {
    loop {
        let event = bounded("a connection-closed event", events.recv()).await?.context("hook channel closed")?;
        if matches!(event.reason, CloseReason::BadFrame(_)) {
            return Ok(event);
        }
    }
}

/// Reads until the server closes the socket; a reset counts as closed too.
async fn expect_closed_by_server(stream: &mut TcpStream) -> Result<()> {
    let mut buf = [0u8; 256];
    loop {
        match bounded("the server closing the socket", stream.read(&mut buf)).await? {
            Ok(0) | Err(_) => return Ok(()),
            Ok(_) => continue,
        }
    }
}

async fn assert_served(client: &RemotingClient, addr: &str, seq: u64) -> Result<()> {
    let response = client.invoke(addr, request(RequestCode::HeartBeat, seq), RPC).await?;
    ensure!(response.response_code() == ResponseCode::Success, "unexpected {response:?}");
    ensure!(
        response.ext_fields.get("seq").map(|s| s.as_str()) == Some(seq.to_string().as_str()),
        "wrong seq in {response:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t10_many_clients_every_response_matches_its_request() -> Result<()> {
    const CLIENTS: u64 = 64;
    const REQUESTS_PER_CLIENT: u64 = 10_000;
    const PIPELINE_DEPTH: usize = 64;

    // Coalesced writes on the server and on half of the clients (the other tests cover the
    // plain writer): batching frames must never lose, reorder across calls or mix up responses.
    let server =
        RemotingServer::bind_with(any_port(), echo_table(), ServerOptions::default().coalesce_writes(true)).await?;
    let addr = server.local_addr().to_string();
    let started = Instant::now();
    let mut workers = Vec::new();
    for client_no in 0..CLIENTS {
        let addr = addr.clone();
        workers.push(tokio::spawn(async move {
            let client = RemotingClient::with_options(ProcessorTable::new(), client_no % 2 == 1);
            // Both header codecs must be echoed back; JSON is the slower one in debug builds, so a
            // quarter of the clients use it.
            let serialize_type = if client_no % 4 == 0 { SerializeType::Json } else { SerializeType::RocketMq };
            let calls = futures::stream::iter(0..REQUESTS_PER_CLIENT).map(|i| {
                let client = &client;
                let addr = addr.as_str();
                async move {
                    let seq = client_no * REQUESTS_PER_CLIENT + i;
                    let (code, by) = if i % 2 == 0 {
                        (RequestCode::HeartBeat, "heartbeat")
                    } else {
                        (RequestCode::SendMessageV2, "send")
                    };
                    let mut cmd = request(code, seq);
                    cmd.serialize_type = serialize_type;
                    let response = client.invoke(addr, cmd, RPC).await?;
                    ensure!(response.response_code() == ResponseCode::Success, "{response:?}");
                    ensure!(
                        response.ext_fields.get("seq").map(|s| s.as_str()) == Some(seq.to_string().as_str()),
                        "seq {seq}: {response:?}"
                    );
                    ensure!(response.ext_fields.get("by").map(|s| s.as_str()) == Some(by), "seq {seq}: {response:?}");
                    ensure!(response.serialize_type == serialize_type, "seq {seq}: serialize type not echoed");
                    Ok(())
                }
            });
            let mut calls = calls.buffer_unordered(PIPELINE_DEPTH);
            let mut answered = 0u64;
            while let Some(result) = calls.next().await {
                result?;
                answered += 1;
            }
            let connection = client.cached_connection(&addr).context("client lost its connection")?;
            ensure!(connection.pending_count() == 0, "pending calls left behind");
            anyhow::Ok(answered)
        }));
    }
    let mut answered = 0;
    for worker in workers {
        answered += bounded("a load client", worker).await???;
    }
    ensure!(answered == CLIENTS * REQUESTS_PER_CLIENT);
    println!("{answered} requests over {CLIENTS} connections in {:?}", started.elapsed());
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t11_oneway_gets_no_response() -> Result<()> {
    let (seen_tx, mut seen_rx) = mpsc::channel::<String>(16);
    let oneways = Arc::new(AtomicU64::new(0));
    let mut table = echo_table();
    let counter = oneways.clone();
    table.register(
        RequestCode::UpdateConsumerOffset,
        Arc::new(processor_fn(move |_ctx, request: RemotingCommand| {
            let seen_tx = seen_tx.clone();
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                let seq = request.ext_fields.get("seq").map(|s| s.to_string()).unwrap_or_default();
                let _ = seen_tx.send(seq).await;
                // Answering anyway proves the transport, not the processor, suppresses oneway replies.
                Some(RemotingCommand::success())
            }
        })),
    );
    let counter = oneways.clone();
    table.register(
        RequestCode::QueryConsumerOffset,
        Arc::new(processor_fn(move |_ctx, _request| {
            let counter = counter.clone();
            async move {
                let mut response = RemotingCommand::success();
                response.ext_fields.insert("oneways".into(), counter.load(Ordering::SeqCst).to_string().into());
                Some(response)
            }
        })),
    );
    let server = RemotingServer::bind(any_port(), table).await?;
    let addr = server.local_addr().to_string();

    // Through the client: the processor observes the call, the later sync call sees its effect.
    let client = RemotingClient::new();
    client.invoke_oneway(&addr, request(RequestCode::UpdateConsumerOffset, 1), RPC).await?;
    ensure!(bounded("the oneway processor", seen_rx.recv()).await? == Some("1".into()));
    let response = client.invoke(&addr, RemotingCommand::request(RequestCode::QueryConsumerOffset), RPC).await?;
    ensure!(response.ext_fields.get("oneways").map(|s| s.as_str()) == Some("1"), "{response:?}");
    ensure!(client.cached_connection(&addr).context("connection")?.pending_count() == 0);

    // On a raw socket: the first frame back must be the sync call's response, not one for the oneway.
    let mut stream = TcpStream::connect(&addr).await?;
    let mut oneway = request(RequestCode::UpdateConsumerOffset, 2).into_oneway();
    oneway.opaque = 100;
    stream.write_all(&oneway.encode()?).await?;
    ensure!(bounded("the oneway processor", seen_rx.recv()).await? == Some("2".into()));
    let mut sync = RemotingCommand::request(RequestCode::QueryConsumerOffset);
    sync.opaque = 101;
    stream.write_all(&sync.encode()?).await?;
    let mut frames = FramedRead::new(stream, RemotingCodec::new());
    let first = bounded("the sync response", frames.next()).await?.context("server closed the socket")??;
    ensure!(first.opaque == 101, "a frame answered the oneway: {first:?}");
    ensure!(first.ext_fields.get("oneways").map(|s| s.as_str()) == Some("2"), "{first:?}");
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t12_oversized_frame_closes_only_that_connection() -> Result<()> {
    let (options, mut closed) = closed_events();
    let server = RemotingServer::bind_with(any_port(), echo_table(), options).await?;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::new();
    assert_served(&client, &addr, 1).await?;

    let mut rogue = TcpStream::connect(&addr).await?;
    let declared = i32::try_from(FRAME_SIZE_MAX_BYTES + 1)?;
    rogue.write_all(&declared.to_be_bytes()).await?;
    // The server may already have hung up; the close is checked below either way.
    let _ = rogue.write_all(&[0u8; 1024]).await;
    expect_closed_by_server(&mut rogue).await?;
    let event = next_bad_frame_close(&mut closed).await?;
    ensure!(event.peer_addr == rogue.local_addr()?, "the wrong connection closed: {event:?}");

    for seq in 2..10 {
        assert_served(&client, &addr, seq).await?;
    }
    ensure!(RemotingClient::new().invoke(&addr, request(RequestCode::HeartBeat, 1), RPC).await.is_ok());
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t13_garbage_closes_the_connection_without_a_panic() -> Result<()> {
    let (options, mut closed) = closed_events();
    let server = RemotingServer::bind_with(any_port(), echo_table(), options).await?;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::new();

    let mut undecodable_header = BytesMut::new();
    undecodable_header.put_i32(4 + 9);
    undecodable_header.put_u32(9);
    undecodable_header.put_slice(b"{not json");
    let mut unknown_serialize_type = BytesMut::new();
    unknown_serialize_type.put_i32(4);
    unknown_serialize_type.put_u32(7 << 24);
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("negative length", (-1i32).to_be_bytes().to_vec()),
        ("length below 4", vec![0, 0, 0, 2, 9, 9]),
        ("undecodable header", undecodable_header.to_vec()),
        ("unknown serialize type", unknown_serialize_type.to_vec()),
        ("header length past the frame", vec![0, 0, 0, 4, 0, 0, 0, 200]),
    ];
    for (what, bytes) in inputs {
        let mut rogue = TcpStream::connect(&addr).await?;
        rogue.write_all(&bytes).await?;
        expect_closed_by_server(&mut rogue).await.context(what)?;
        let event = next_bad_frame_close(&mut closed).await.context(what)?;
        ensure!(event.peer_addr == rogue.local_addr()?, "{what}: the wrong connection closed: {event:?}");
        assert_served(&client, &addr, 7).await.context(what)?;
    }
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t14_unknown_code_is_not_supported_and_the_connection_stays() -> Result<()> {
    let server = RemotingServer::bind(any_port(), echo_table()).await?;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::new();
    assert_served(&client, &addr, 1).await?;
    let before = client.cached_connection(&addr).context("connection")?;

    let mut unknown = RemotingCommand::request(RequestCode::Unknown(999));
    unknown.serialize_type = SerializeType::RocketMq;
    let response = client.invoke(&addr, unknown, RPC).await?;
    ensure!(response.response_code() == ResponseCode::RequestCodeNotSupported, "{response:?}");
    ensure!(response.remark.as_deref().is_some_and(|r| r.contains("request type 999 not supported")), "{response:?}");
    ensure!(response.serialize_type == SerializeType::RocketMq, "serialize type not echoed");

    assert_served(&client, &addr, 2).await?;
    let after = client.cached_connection(&addr).context("connection")?;
    ensure!(before.id() == after.id() && !after.is_closed(), "the connection was replaced");
    server.shutdown().await;
    Ok(())
}

/// [`echo_table`] whose PULL_MESSAGE never answers; each one that starts is reported on the channel.
fn silent_pull_table() -> (ProcessorTable, mpsc::Receiver<()>) {
    let (entered_tx, entered_rx) = mpsc::channel::<()>(4);
    let mut table = echo_table();
    table.register(
        RequestCode::PullMessage,
        Arc::new(processor_fn(move |_ctx, _request| {
            let entered_tx = entered_tx.clone();
            async move {
                let _ = entered_tx.send(()).await;
                std::future::pending::<Option<RemotingCommand>>().await
            }
        })),
    );
    (table, entered_rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t15_timeout_is_outcome_unknown_and_cleans_the_pending_map() -> Result<()> {
    let (table, mut entered_rx) = silent_pull_table();
    let server = RemotingServer::bind(any_port(), table).await?;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::new();
    let connection = client.connection(&addr).await?;

    let err = client
        .invoke(&addr, RemotingCommand::request(RequestCode::PullMessage), Duration::from_millis(200))
        .await
        .err()
        .context("a processor that never answers produced a response")?;
    ensure!(matches!(err, RemotingError::Timeout { timeout_ms: 200, .. }), "{err}");
    ensure!(err.is_outcome_unknown() && err.is_retryable(), "{err}");
    bounded("the processor to start", entered_rx.recv()).await?;
    ensure!(connection.pending_count() == 0, "the timed-out call is still pending");
    // Nothing came back on the connection while the call waited: it is presumed dead and closed
    // (RocketMQ's client closes on any timeout), and the next call dials a new one.
    ensure!(connection.close_reason() == Some(CloseReason::Unresponsive(200)), "{:?}", connection.close_reason());
    assert_served(&client, &addr, 3).await?;
    let again = client.cached_connection(&addr).context("a new connection")?;
    ensure!(again.id() != connection.id(), "the dead connection was reused");
    // The server's request task never ends; drop the server instead of draining it for 5 s.
    drop(server);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t15b_a_timeout_keeps_a_connection_the_peer_still_answers_on() -> Result<()> {
    let (table, mut entered_rx) = silent_pull_table();
    let server = RemotingServer::bind(any_port(), table).await?;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::new();
    let connection = client.connection(&addr).await?;
    // The slow call's timeout only bounds how long the test waits for it; another call is
    // answered on the same connection after it began, long before that.
    let slow = {
        let (client, addr) = (client.clone(), addr.clone());
        tokio::spawn(async move {
            client.invoke(&addr, RemotingCommand::request(RequestCode::PullMessage), Duration::from_secs(3)).await
        })
    };
    bounded("the slow processor to start", entered_rx.recv()).await?;
    assert_served(&client, &addr, 4).await?;
    let err = bounded("the slow call", slow).await??.err().context("the slow call was answered")?;
    ensure!(matches!(err, RemotingError::Timeout { .. }), "{err}");
    ensure!(!connection.is_closed(), "closed although the peer answered meanwhile: {:?}", connection.close_reason());
    let same = client.cached_connection(&addr).context("connection")?;
    ensure!(same.id() == connection.id(), "the connection was replaced");
    drop(server);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t16_connection_loss_fails_pending_calls_with_unknown_outcome() -> Result<()> {
    let listener = TcpListener::bind(LOOPBACK).await?;
    let addr = listener.local_addr()?.to_string();
    let peer = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await?;
        let mut length_word = [0u8; 4];
        stream.read_exact(&mut length_word).await?;
        anyhow::Ok(())
        // Dropping the stream here closes the connection with the request unanswered.
    });
    let client = RemotingClient::new();
    let err = client
        .invoke(&addr, request(RequestCode::SendMessageV2, 1), RPC)
        .await
        .err()
        .context("a peer that hung up produced a response")?;
    ensure!(matches!(err, RemotingError::ConnectionClosed { .. }), "{err}");
    ensure!(err.is_outcome_unknown() && err.is_retryable(), "{err}");
    bounded("the fake peer", peer).await???;
    ensure!(client.cached_connection(&addr).is_none(), "a closed connection is still offered");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t20_restarted_server_on_the_same_port_gets_a_new_connection() -> Result<()> {
    let first = RemotingServer::bind(any_port(), echo_table()).await?;
    let bound = first.local_addr();
    let addr = bound.to_string();
    let client = RemotingClient::new();
    assert_served(&client, &addr, 1).await?;
    let old = client.cached_connection(&addr).context("connection")?;

    first.shutdown().await;
    let reason = bounded("the client noticing the shutdown", old.closed()).await?;
    ensure!(matches!(reason, CloseReason::PeerClosed | CloseReason::Io(_)), "{reason}");
    let err = client.invoke(&addr, request(RequestCode::HeartBeat, 2), RPC).await.err().context("nobody listens")?;
    ensure!(matches!(err, RemotingError::Connect { .. }) && !err.is_outcome_unknown(), "{err}");

    let second = RemotingServer::bind(bound, echo_table()).await?;
    assert_served(&client, &addr, 3).await?;
    let new = client.cached_connection(&addr).context("connection")?;
    ensure!(new.id() != old.id(), "the dead connection was reused");
    second.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t21_graceful_shutdown_finishes_in_flight_requests() -> Result<()> {
    let (entered_tx, mut entered_rx) = mpsc::channel::<()>(4);
    let release = Arc::new(Notify::new());
    let mut table = echo_table();
    let gate = release.clone();
    table.register(
        RequestCode::PullMessage,
        Arc::new(processor_fn(move |_ctx, _request| {
            let entered_tx = entered_tx.clone();
            let gate = gate.clone();
            async move {
                let _ = entered_tx.send(()).await;
                gate.notified().await;
                Some(RemotingCommand::success().with_remark("slow but done"))
            }
        })),
    );
    let (options, mut closed) = closed_events();
    let server = Arc::new(RemotingServer::bind_with(any_port(), table, options).await?);
    let addr = server.local_addr().to_string();
    let client = RemotingClient::new();
    let slow_client = client.clone();
    let slow_addr = addr.clone();
    let slow = tokio::spawn(async move {
        slow_client.invoke(&slow_addr, RemotingCommand::request(RequestCode::PullMessage), RPC).await
    });
    bounded("the slow processor to start", entered_rx.recv()).await?;

    // A stopping broker names its group's new leader in the refusals.
    server.set_refusal_remark(format!("{SHUTTING_DOWN_REMARK}; {}", format_leader_hint("10.0.0.2:10911")));
    let stopping = server.clone();
    let shutdown = tokio::spawn(async move { stopping.shutdown().await });
    // Once connects are refused the listener is gone, so shutdown has reached the drain.
    bounded("the listener to close", async {
        while TcpStream::connect(&addr).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await?;
    ensure!(!shutdown.is_finished(), "shutdown did not wait for the in-flight request");
    let refused = client.invoke(&addr, request(RequestCode::HeartBeat, 1), RPC).await?;
    ensure!(refused.response_code() == ResponseCode::ServiceNotAvailable, "new request during drain: {refused:?}");
    ensure!(
        refused.remark.as_deref().and_then(parse_leader_hint) == Some("10.0.0.2:10911"),
        "the refusal names the new leader: {refused:?}"
    );
    let connection = client.cached_connection(&addr).context("the client connection closed during the drain")?;

    release.notify_one();
    let response = bounded("the slow response", slow).await??;
    let response = response.context("the in-flight request failed during shutdown")?;
    ensure!(response.remark.as_deref() == Some("slow but done"), "{response:?}");
    bounded("shutdown", shutdown).await??;
    // The connect probes above may have been accepted and dropped; skip their events.
    loop {
        let event = bounded("the connection to close", closed.recv()).await?.context("hook channel closed")?;
        if event.peer_addr == connection.local_addr() {
            ensure!(event.reason == CloseReason::Shutdown, "{event:?}");
            break;
        }
    }
    ensure!(server.connection_count() == 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t30_server_sends_requests_back_on_the_client_connection() -> Result<()> {
    // The server keeps the channel of the client that sent a heartbeat, as a broker does.
    let channel: Arc<Mutex<Option<Connection>>> = Arc::default();
    let mut table = echo_table();
    let keep = channel.clone();
    table.register(
        RequestCode::HeartBeat,
        Arc::new(processor_fn(move |ctx: ConnectionContext, _request| {
            let keep = keep.clone();
            async move {
                *keep.lock().unwrap_or_else(|p| p.into_inner()) = Some(ctx.connection().clone());
                Some(RemotingCommand::success())
            }
        })),
    );
    let server = RemotingServer::bind(any_port(), table).await?;
    let addr = server.local_addr().to_string();

    let (seen_tx, mut seen_rx) = mpsc::channel::<i32>(16);
    let client = RemotingClient::with_processor(Arc::new(processor_fn(move |ctx: ConnectionContext, request| {
        let seen_tx = seen_tx.clone();
        async move {
            let _ = seen_tx.send(request.code).await;
            let mut response = RemotingCommand::success();
            response.ext_fields.insert("peer".into(), ctx.peer_addr().to_string().into());
            Some(response)
        }
    })));
    client.invoke(&addr, RemotingCommand::request(RequestCode::HeartBeat), RPC).await?;
    let to_client = channel.lock().unwrap_or_else(|p| p.into_inner()).clone().context("no channel kept")?;
    let client_side = client.cached_connection(&addr).context("connection")?;
    ensure!(to_client.peer_addr() == client_side.local_addr(), "the server kept another connection");

    to_client.invoke_oneway(RemotingCommand::request(RequestCode::NotifyConsumerIdsChanged), RPC).await?;
    let code = bounded("the client processor", seen_rx.recv()).await?;
    ensure!(code == Some(RequestCode::NotifyConsumerIdsChanged.as_i32()), "{code:?}");

    let response = to_client.invoke(RemotingCommand::request(RequestCode::GetConsumerRunningInfo), RPC).await?;
    ensure!(response.response_code() == ResponseCode::Success, "{response:?}");
    ensure!(response.ext_fields.get("peer").map(|s| s.as_str()) == Some(addr.as_str()), "{response:?}");
    ensure!(to_client.pending_count() == 0);

    // A client without a processor answers REQUEST_CODE_NOT_SUPPORTED instead of hanging up.
    let plain = RemotingClient::new();
    plain.invoke(&addr, RemotingCommand::request(RequestCode::HeartBeat), RPC).await?;
    let to_plain = channel.lock().unwrap_or_else(|p| p.into_inner()).clone().context("no channel kept")?;
    let response = to_plain.invoke(RemotingCommand::request(RequestCode::GetConsumerRunningInfo), RPC).await?;
    ensure!(response.response_code() == ResponseCode::RequestCodeNotSupported, "{response:?}");
    let response = plain.invoke(&addr, request(RequestCode::SendMessageV2, 1), RPC).await?;
    ensure!(response.response_code() == ResponseCode::Success, "{response:?}");
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t31_client_close_is_reported_by_the_server_hook() -> Result<()> {
    let (options, mut closed) = closed_events();
    let server = RemotingServer::bind_with(any_port(), echo_table(), options).await?;
    let addr = server.local_addr().to_string();
    let client = RemotingClient::new();
    assert_served(&client, &addr, 1).await?;
    let local = client.cached_connection(&addr).context("connection")?.local_addr();
    ensure!(server.connection_count() == 1);

    client.close().await;
    let event = bounded("the close event", closed.recv()).await?.context("hook channel closed")?;
    ensure!(event.peer_addr == local && event.reason == CloseReason::PeerClosed, "{event:?}");
    ensure!(server.connection_count() == 0);
    let err = client.invoke(&addr, request(RequestCode::HeartBeat, 2), RPC).await.err().context("closed client")?;
    ensure!(matches!(err, RemotingError::ClientClosed), "{err}");
    server.shutdown().await;
    Ok(())
}

/// Connects to `addr` from the loopback address `from` (any 127.x.y.z is this host on Linux).
async fn connect_from(from: &str, addr: SocketAddr) -> Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(format!("{from}:0").parse()?)?;
    Ok(socket.connect(addr).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t40_connections_beyond_the_per_host_limit_are_closed_and_other_hosts_still_served() -> Result<()> {
    let limits =
        ServerLimits { connections_per_host_max_count: 3, connections_max_count: 5, ..ServerLimits::default() };
    let server = RemotingServer::bind_with(any_port(), echo_table(), ServerOptions::default().limits(limits)).await?;
    let addr = server.local_addr();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from("127.0.0.2", addr).await?);
    }
    bounded("three connections listed", async {
        while server.connection_count() < 3 {
            tokio::task::yield_now().await;
        }
    })
    .await?;
    let mut fourth = connect_from("127.0.0.2", addr).await?;
    expect_closed_by_server(&mut fourth).await?;
    ensure!(server.connection_count() == 3, "the fourth from one host is not kept");

    let client = RemotingClient::new();
    assert_served(&client, &addr.to_string(), 1).await?;
    // Five in all: one more from a third host is refused too.
    let _fifth = connect_from("127.0.0.3", addr).await?;
    bounded("five connections listed", async {
        while server.connection_count() < 5 {
            tokio::task::yield_now().await;
        }
    })
    .await?;
    let mut sixth = connect_from("127.0.0.4", addr).await?;
    expect_closed_by_server(&mut sixth).await?;
    // A closed connection gives its place back.
    drop(held.pop());
    bounded("a slot freed", async {
        while server.connection_count() > 4 {
            tokio::task::yield_now().await;
        }
    })
    .await?;
    let mut again = connect_from("127.0.0.2", addr).await?;
    let frame = request(RequestCode::HeartBeat, 7).encode()?;
    again.write_all(&frame).await?;
    let mut frames = FramedRead::new(again, RemotingCodec::new());
    let response = bounded("an answer on the freed slot", frames.next()).await?.context("closed")??;
    ensure!(response.response_code() == ResponseCode::Success, "{response:?}");
    server.shutdown().await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn t41_an_idle_connection_is_closed_after_120_s_and_a_busy_one_is_not() -> Result<()> {
    let (options, mut closed) = closed_events();
    let server = RemotingServer::bind_with(any_port(), echo_table(), options).await?;
    let addr = server.local_addr();
    let started = tokio::time::Instant::now();
    let mut idle = TcpStream::connect(addr).await?;
    let client = RemotingClient::new();
    // The client calls every 30 s (a heartbeat); the raw socket says nothing.
    let heartbeats = client.clone();
    let busy = tokio::spawn(async move {
        for seq in 0.. {
            assert_served(&heartbeats, &addr.to_string(), seq).await?;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        anyhow::Ok(())
    });
    // Virtual time: the bound is past the 120 s under test.
    let event = tokio::time::timeout(Duration::from_secs(600), closed.recv())
        .await
        .context("no idle close within 600 s")?
        .context("hook channel closed")?;
    let waited = started.elapsed();
    ensure!(event.reason == CloseReason::Idle(120), "{event:?}");
    ensure!(event.peer_addr == idle.local_addr()?, "the idle socket is the one closed: {event:?}");
    ensure!(waited >= Duration::from_secs(120) && waited < Duration::from_secs(240), "closed after {waited:?}");
    expect_closed_by_server(&mut idle).await?;
    ensure!(server.connection_count() == 1, "the heartbeating client stays");
    ensure!(!busy.is_finished(), "heartbeats failed: {:?}", busy.await);
    busy.abort();
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t42_a_peer_that_never_reads_is_closed_before_its_answers_pass_the_bound() -> Result<()> {
    const ANSWER_BYTES: usize = 1024 * 1024;
    let limits = ServerLimits {
        read_pause_queued_bytes: 2 * ANSWER_BYTES,
        queued_max_bytes: 8 * ANSWER_BYTES,
        ..ServerLimits::default()
    };
    let release = Arc::new(Notify::new());
    let parked = Arc::new(AtomicU64::new(0));
    let mut table = echo_table();
    let (gate, count) = (release.clone(), parked.clone());
    table.register(
        RequestCode::PullMessage,
        Arc::new(processor_fn(move |_ctx, _request| {
            let (gate, count) = (gate.clone(), count.clone());
            async move {
                count.fetch_add(1, Ordering::SeqCst);
                gate.notified().await;
                Some(RemotingCommand::success().with_body(vec![7u8; ANSWER_BYTES]))
            }
        })),
    );
    let (options, mut closed) = closed_events();
    let server = RemotingServer::bind_with(any_port(), table, options.limits(limits)).await?;
    let addr = server.local_addr();
    // 32 parked requests whose answers (32 MiB) all become due at once, on a socket never read.
    let mut silent = connect_from("127.0.0.2", addr).await?;
    for seq in 0..32 {
        silent.write_all(&request(RequestCode::PullMessage, seq).encode()?).await?;
    }
    bounded("32 requests parked", async {
        while parked.load(Ordering::SeqCst) < 32 {
            tokio::task::yield_now().await;
        }
    })
    .await?;
    let connection = server.connections().into_iter().next().context("the silent connection")?;
    release.notify_waiters();
    let event = bounded("the close event", closed.recv()).await?.context("hook channel closed")?;
    ensure!(matches!(event.reason, CloseReason::SlowReader(q) if q > 8 * ANSWER_BYTES), "{event:?}");
    ensure!(connection.queued_bytes() <= 8 * ANSWER_BYTES, "queued {}", connection.queued_bytes());
    // Everyone else is still served.
    let client = RemotingClient::new();
    assert_served(&client, &addr.to_string(), 1).await?;
    drop(silent);
    server.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t43_a_peer_that_never_reads_gets_no_more_requests_read() -> Result<()> {
    const ANSWER_BYTES: usize = 256 * 1024;
    let limits = ServerLimits { read_pause_queued_bytes: ANSWER_BYTES, ..ServerLimits::default() };
    let answered = Arc::new(AtomicU64::new(0));
    let count = answered.clone();
    let mut table = echo_table();
    table.register(
        RequestCode::PullMessage,
        Arc::new(processor_fn(move |_ctx, _request| {
            count.fetch_add(1, Ordering::SeqCst);
            async move { Some(RemotingCommand::success().with_body(vec![7u8; ANSWER_BYTES])) }
        })),
    );
    let (options, mut closed) = closed_events();
    let server = RemotingServer::bind_with(any_port(), table, options.limits(limits)).await?;
    let addr = server.local_addr();
    let silent = connect_from("127.0.0.2", addr).await?;
    let (_read_half, mut write_half) = silent.into_split();
    // 2,000 requests (500 MiB of answers); the writer stops once the sockets are full.
    let sender = tokio::spawn(async move {
        for seq in 0..2_000 {
            if write_half.write_all(&request(RequestCode::PullMessage, seq).encode()?).await.is_err() {
                break;
            }
        }
        anyhow::Ok(write_half)
    });
    // The answers stop once both sockets' buffers are full and the queue passed the pause.
    let mut last = u64::MAX;
    let stalled = bounded("answers stop", async {
        loop {
            let now = answered.load(Ordering::SeqCst);
            if now == last && now > 0 {
                return now;
            }
            last = now;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await?;
    ensure!(stalled < 2_000, "every request was read from a peer that reads nothing");
    // Either reading paused with the queue under the bound, or answers of requests read before the
    // pause passed the bound and the connection was closed.
    match server.connections().into_iter().next() {
        Some(connection) => {
            let queued = connection.queued_bytes();
            ensure!(queued <= limits.queued_max_bytes, "queued {queued}, more than {}", limits.queued_max_bytes);
        }
        None => {
            let event = closed.try_recv().context("closed without a close event")?;
            ensure!(matches!(event.reason, CloseReason::SlowReader(_)), "{event:?}");
        }
    }
    let client = RemotingClient::new();
    assert_served(&client, &addr.to_string(), 1).await?;
    sender.abort();
    server.shutdown().await;
    Ok(())
}
