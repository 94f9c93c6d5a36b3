//! [`RemotingStream`]: the byte stream under a [`super::Connection`], plain TCP or TLS over TCP,
//! split into a read half for the reader task and a write half for the writer task.
//!
//! Invariant: a plain stream splits into tokio's owned halves (no lock between reader and
//! writer, as before TLS existed); only a TLS stream, whose record layer is one state for both
//! directions, shares it through `tokio::io::split`.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;

use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::ReadBuf;
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::tcp::OwnedWriteHalf;

type Tls = Box<tokio_rustls::TlsStream<TcpStream>>;

/// A connection's byte stream.
#[derive(Debug)]
pub enum RemotingStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP (either side of the handshake).
    Tls(Tls),
}

impl From<TcpStream> for RemotingStream {
    fn from(stream: TcpStream) -> Self {
        RemotingStream::Plain(stream)
    }
}

impl RemotingStream {
    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            RemotingStream::Plain(s) => s,
            RemotingStream::Tls(s) => s.get_ref().0,
        }
    }

    /// Whether the stream is TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, RemotingStream::Tls(_))
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().peer_addr()
    }

    /// This side's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().local_addr()
    }

    pub(crate) fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            RemotingStream::Plain(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Plain(r), WriteHalf::Plain(w))
            }
            RemotingStream::Tls(s) => {
                let (r, w) = tokio::io::split(s);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
        }
    }
}

/// The reading half of a [`RemotingStream`].
pub(crate) enum ReadHalf {
    Plain(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<Tls>),
}

/// The writing half of a [`RemotingStream`].
pub(crate) enum WriteHalf {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<Tls>),
}

impl AsyncRead for ReadHalf {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Plain(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Plain(w) => Pin::new(w).poll_write(cx, buf),
            WriteHalf::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteHalf::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            WriteHalf::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            WriteHalf::Plain(w) => w.is_write_vectored(),
            WriteHalf::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Plain(w) => Pin::new(w).poll_flush(cx),
            WriteHalf::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteHalf::Plain(w) => Pin::new(w).poll_shutdown(cx),
            WriteHalf::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
