//! `raftmq healthcheck [URL]`: exit 0 when an HTTP GET of URL answers 200, 1 otherwise. It is the
//! container health check (docker-compose.yml, deploy/Dockerfile*): the image built from the host
//! binary has no shell and no curl, so the binary probes its own `/readyz`.
//!
//! Plain HTTP/1.0 over a std `TcpStream`, bounded by one timeout for connect, write and read: a
//! health check must never hang, and it needs no runtime.

use std::io::Read;
use std::io::Write;
use std::net::TcpStream;
use std::net::ToSocketAddrs;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use clap::Args;

/// How long the whole probe may take; Docker's own `timeout` is the outer bound.
const HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// The most of the answer read: the status line is all that counts.
const HEALTHCHECK_ANSWER_MAX_BYTES: u64 = 4096;

/// `raftmq healthcheck` flags.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// What to GET: `http://host:port/path`.
    #[arg(default_value = "http://127.0.0.1:8080/readyz")]
    pub url: String,
}

/// Probes the URL; an error (printed by main, exit code 1) unless it answers 200.
pub fn run(args: &HealthcheckArgs) -> Result<()> {
    let (authority, path) = split_url(&args.url)?;
    let addr = authority
        .to_socket_addrs()
        .with_context(|| format!("resolving {authority}"))?
        .next()
        .with_context(|| format!("{authority} resolves to no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, HEALTHCHECK_TIMEOUT).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(HEALTHCHECK_TIMEOUT))?;
    stream.set_write_timeout(Some(HEALTHCHECK_TIMEOUT))?;
    // One write: `write!` on an unbuffered stream sends each formatted piece as its own segment,
    // and a server that answers after its first read then closes with the rest unread resets the
    // connection, losing its answer.
    let request = format!("GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).context("sending the request")?;
    let mut answer = Vec::new();
    stream.take(HEALTHCHECK_ANSWER_MAX_BYTES).read_to_end(&mut answer).context("reading the answer")?;
    let status = status_code(&answer).with_context(|| format!("{} answered no HTTP status line", args.url))?;
    if status != 200 {
        bail!("{} answered {status}", args.url);
    }
    Ok(())
}

/// `http://host:port/path` as (`host:port`, `/path`); the path defaults to `/`.
fn split_url(url: &str) -> Result<(&str, &str)> {
    let rest = url.strip_prefix("http://").with_context(|| format!("{url:?}: only http:// URLs are probed"))?;
    Ok(match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    })
}

/// The status code of an HTTP answer's first line (`HTTP/1.x 200 OK`).
fn status_code(answer: &[u8]) -> Option<u16> {
    let line = answer.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_authority_and_path() {
        assert_eq!(split_url("http://127.0.0.1:8080/readyz").unwrap(), ("127.0.0.1:8080", "/readyz"));
        assert_eq!(split_url("http://broker:8080").unwrap(), ("broker:8080", "/"));
        assert!(split_url("https://x/readyz").is_err());
    }

    #[test]
    fn the_status_code_comes_from_the_first_line_only() {
        assert_eq!(status_code(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"), Some(200));
        assert_eq!(status_code(b"HTTP/1.0 503 Service Unavailable\r\n\r\n"), Some(503));
        assert_eq!(status_code(b"garbage 200\r\n"), None);
        assert_eq!(status_code(b""), None);
    }

    #[test]
    fn a_closed_port_is_unhealthy() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        assert!(run(&HealthcheckArgs { url: format!("http://{addr}/readyz") }).is_err());
    }

    #[test]
    fn a_200_is_healthy_and_a_503_is_not() {
        for (answer, healthy) in
            [("HTTP/1.1 200 OK\r\n\r\n", true), ("HTTP/1.1 503 Service Unavailable\r\n\r\n", false)]
        {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let server = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                // The whole request is read before answering, as an HTTP server does: closing
                // with unread bytes would reset the connection.
                let mut request = Vec::new();
                let mut buf = [0u8; 512];
                while !request.ends_with(b"\r\n\r\n") {
                    let n = s.read(&mut buf).unwrap();
                    assert!(n > 0, "the probe closed before its request ended: {request:?}");
                    request.extend_from_slice(&buf[..n]);
                }
                s.write_all(answer.as_bytes()).unwrap();
            });
            assert_eq!(run(&HealthcheckArgs { url: format!("http://{addr}/readyz") }).is_ok(), healthy);
            server.join().unwrap();
        }
    }
}
