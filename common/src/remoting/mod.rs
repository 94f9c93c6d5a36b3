//! The tokio remoting transport: RocketMQ frames over TCP, with opaque-based correlation.
//!
//! ```text
//!   RemotingClient ──(one Connection per address)──┐        ┌── RemotingServer (TcpListener)
//!                                                  ▼        ▼
//!                      Connection: reader task + writer task (bounded queue), pending[opaque]
//!                                  │ requests from the peer
//!                                  ▼
//!                      ProcessorTable ──code──► RequestProcessor::process(ctx, request)
//! ```
//!
//! - [`codec`]: [`RemotingCodec`], frames on a byte stream (16 MiB max, checked lengths).
//! - [`connection`]: [`Connection`], the one place where requests are correlated with responses and
//!   where requests from the peer are dispatched; used by both sides, since the connection is
//!   bidirectional (brokers send requests to clients on the client's connection).
//! - [`processor`]: [`RequestProcessor`], [`ProcessorTable`], [`ConnectionContext`].
//! - [`server`]: [`RemotingServer`]: accept, dispatch, connection-closed hook, graceful shutdown.
//! - [`client`]: [`RemotingClient`]: lazy connections per address, reconnect after failure.
//! - [`error`]: [`RemotingError`], with `is_outcome_unknown()` and `is_retryable()`.
//! - [`admission`]: [`admission::Admission`], connections counted in all and per host.
//! - [`server_limits`]: [`ServerLimits`], connections, queued response bytes and idle time per peer.
//! - [`refusal_log`]: [`RefusalLog`], refused requests logged once per connection and code.
//! - [`stream`]: [`RemotingStream`], plain TCP or TLS under a connection.
//! - [`tls_server`]: [`ServerTls`], `tls.server.mode` (disabled / permissive / enforcing) by the
//!   first byte; [`tls_client`]: [`ClientTls`] (`tls.enable`, the SDK's `use_tls`);
//!   [`cert_reloader`]: certificates re-read on change; [`tls_files`]: PEM files. rustls with `ring`.

pub mod admission;
pub mod cert_reloader;
pub mod client;
pub mod close_reason;
pub mod codec;
pub mod connection;
pub(crate) mod connection_tasks;
pub mod error;
pub mod processor;
pub mod refusal_log;
pub mod server;
pub mod server_limits;
pub mod stream;
pub mod tls_client;
pub mod tls_files;
pub mod tls_server;

pub use client::RemotingClient;
pub use close_reason::CloseReason;
pub use close_reason::ConnectionClosed;
pub use close_reason::ConnectionClosedHook;
pub use codec::CodecError;
pub use codec::RemotingCodec;
pub use connection::Connection;
pub use connection_tasks::SHUTTING_DOWN_REMARK;
pub use error::RemotingError;
pub use processor::ConnectionContext;
pub use processor::ProcessorFn;
pub use processor::ProcessorTable;
pub use processor::RequestProcessor;
pub use processor::processor_fn;
pub use refusal_log::RefusalLog;
pub use server::RemotingServer;
pub use server::ServerOptions;
pub use server_limits::ServerLimits;
pub use stream::RemotingStream;
pub use tls_client::ClientTls;
pub use tls_files::TlsError;
pub use tls_server::ServerTls;
