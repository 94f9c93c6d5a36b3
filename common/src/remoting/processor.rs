//! Request processors (`NettyRequestProcessor`) and the table that picks one by request code.
//!
//! A processor receives a request and the [`ConnectionContext`] it arrived on and returns the
//! response, or `None` when it answers nothing (oneway handling, or a reply sent later through the
//! context). The transport, not the processor, ties the response to the request: it copies the
//! request's opaque and serialize type and sets the response flag, so a processor cannot answer a
//! different call by mistake.
//!
//! [`ProcessorTable`] maps request codes to processors, with an optional default for codes nobody
//! registered; anything else is answered REQUEST_CODE_NOT_SUPPORTED with RocketMQ's remark
//! (`NettyRemotingAbstract.processRequestCommand`), and the connection stays open. Those answers are
//! refusals like any other: the table's [`RefusalLog`] logs them once per connection and code.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::connection::Connection;
use super::refusal_log::RefusalLog;
use crate::protocol::RemotingCommand;
use crate::protocol::RequestCode;
use crate::protocol::ResponseCode;

/// The connection a request arrived on, handed to its processor.
#[derive(Debug, Clone)]
pub struct ConnectionContext {
    connection: Connection,
}

impl ConnectionContext {
    pub(crate) fn new(connection: Connection) -> Self {
        Self { connection }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.connection.peer_addr()
    }

    /// The process-unique id of the connection.
    pub fn connection_id(&self) -> u64 {
        self.connection.id()
    }

    /// The connection itself: keep a clone to send requests back to the peer later (the broker's
    /// NOTIFY_CONSUMER_IDS_CHANGED and CHECK_TRANSACTION_STATE travel on the client's connection).
    pub fn connection(&self) -> &Connection {
        &self.connection
    }
}

/// Handles requests of the codes it is registered for.
pub trait RequestProcessor: Send + Sync + 'static {
    /// Processes one request; `None` sends no response. Oneway requests never get one, whatever
    /// this returns.
    fn process(
        &self,
        ctx: ConnectionContext,
        request: RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>> + Send;
}

/// Object-safe form of [`RequestProcessor`], so processors of different types share one table.
trait DynRequestProcessor: Send + Sync + 'static {
    fn process_boxed(
        self: Arc<Self>,
        ctx: ConnectionContext,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>>;
}

impl<P: RequestProcessor> DynRequestProcessor for P {
    fn process_boxed(
        self: Arc<Self>,
        ctx: ConnectionContext,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        Box::pin(async move { self.process(ctx, request).await })
    }
}

/// A [`RequestProcessor`] made from an async closure; see [`processor_fn`].
pub struct ProcessorFn<F> {
    f: F,
}

/// Wraps `f(ctx, request) -> impl Future<Output = Option<RemotingCommand>>` as a processor.
pub fn processor_fn<F, Fut>(f: F) -> ProcessorFn<F>
where
    F: Fn(ConnectionContext, RemotingCommand) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<RemotingCommand>> + Send + 'static,
{
    ProcessorFn { f }
}

impl<F, Fut> RequestProcessor for ProcessorFn<F>
where
    F: Fn(ConnectionContext, RemotingCommand) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<RemotingCommand>> + Send + 'static,
{
    fn process(
        &self,
        ctx: ConnectionContext,
        request: RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>> + Send {
        (self.f)(ctx, request)
    }
}

/// Processors by request code, plus an optional default. Built before a server or client starts
/// and read-only afterwards, so dispatch takes no lock.
#[derive(Clone, Default)]
pub struct ProcessorTable {
    by_code: HashMap<i32, Arc<dyn DynRequestProcessor>>,
    default: Option<Arc<dyn DynRequestProcessor>>,
    /// Codes nobody serves, as an operator sees them (the processors log their own refusals).
    refusals: Arc<RefusalLog>,
}

impl std::fmt::Debug for ProcessorTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut codes: Vec<i32> = self.by_code.keys().copied().collect();
        codes.sort_unstable();
        f.debug_struct("ProcessorTable").field("codes", &codes).field("default", &self.default.is_some()).finish()
    }
}

impl ProcessorTable {
    /// An empty table: every request is answered REQUEST_CODE_NOT_SUPPORTED.
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes `code` to `processor`, replacing an earlier registration. One processor may be
    /// registered for several codes (pass clones of the same `Arc`).
    pub fn register<P: RequestProcessor>(&mut self, code: RequestCode, processor: Arc<P>) -> &mut Self {
        self.by_code.insert(code.as_i32(), processor);
        self
    }

    /// Routes every code without its own processor to `processor`.
    pub fn register_default<P: RequestProcessor>(&mut self, processor: Arc<P>) -> &mut Self {
        self.default = Some(processor);
        self
    }

    /// Whether `code` has a processor (its own or the default).
    pub fn handles(&self, code: i32) -> bool {
        self.default.is_some() || self.by_code.contains_key(&code)
    }

    /// Runs the processor for `request`, or answers REQUEST_CODE_NOT_SUPPORTED. The result is not
    /// yet tied to the request; the connection does that.
    pub(crate) fn dispatch(
        &self,
        ctx: ConnectionContext,
        request: RemotingCommand,
    ) -> BoxFuture<'static, Option<RemotingCommand>> {
        match self.by_code.get(&request.code).or(self.default.as_ref()) {
            Some(processor) => processor.clone().process_boxed(ctx, request),
            None => {
                // Which codes peers send that we refuse is what interop work needs to know.
                tracing::debug!(request_code = %RequestCode::from_i32(request.code), server = %ctx.connection().local_addr(),
                    peer = %ctx.peer_addr(), "request code not supported");
                let response = not_supported(&request);
                self.refusals.note(ctx.connection_id(), ctx.peer_addr(), &request, &response);
                Box::pin(async move { Some(response) })
            }
        }
    }
}

/// RocketMQ's answer to a code without a processor; the remark is Java's text, leading space included.
pub fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response(
        ResponseCode::RequestCodeNotSupported,
        Some(format!(" request type {} not supported", request.code)),
    )
    .answering(request)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::remoting::connection::tests::loopback_pair;

    fn named(name: &'static str) -> Arc<impl RequestProcessor> {
        Arc::new(processor_fn(move |_ctx, _request| async move { Some(RemotingCommand::success().with_remark(name)) }))
    }

    #[tokio::test]
    async fn dispatch_prefers_the_code_then_the_default_then_not_supported() {
        let mut with_default = ProcessorTable::new();
        with_default.register(RequestCode::HeartBeat, named("heartbeat"));
        with_default.register_default(named("default"));
        let mut without_default = ProcessorTable::new();
        without_default.register(RequestCode::HeartBeat, named("heartbeat"));
        assert!(with_default.handles(999) && !without_default.handles(999) && without_default.handles(34));

        let timeout = Duration::from_secs(30);
        let (to_default, _far) = loopback_pair(ProcessorTable::new(), with_default).await;
        let (to_plain, _far) = loopback_pair(ProcessorTable::new(), without_default).await;
        let remark = |r: RemotingCommand| r.remark.unwrap_or_default();
        let heartbeat = || RemotingCommand::request(RequestCode::HeartBeat);
        let unknown = || RemotingCommand::request(RequestCode::Unknown(999));
        assert_eq!(remark(to_default.invoke(heartbeat(), timeout).await.unwrap()), "heartbeat");
        assert_eq!(remark(to_default.invoke(unknown(), timeout).await.unwrap()), "default");
        assert_eq!(remark(to_plain.invoke(heartbeat(), timeout).await.unwrap()), "heartbeat");
        let refused = to_plain.invoke(unknown(), timeout).await.unwrap();
        assert_eq!(refused.response_code(), ResponseCode::RequestCodeNotSupported);
        assert_eq!(refused.remark.as_deref(), Some(" request type 999 not supported"));
    }
}
