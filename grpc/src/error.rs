//! `GrpcError`: why the gRPC server could not start.

use std::net::SocketAddr;

/// Starting the MessagingService failed.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The port could not be bound.
    #[error("cannot bind the gRPC port {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}
