//! [`NamesrvClient`]: calls "a" NameServer out of the configured list, as RocketMQ's
//! `NettyRemotingClient.getAndCreateNameserverChannel` does.
//!
//! Invariants:
//! - The last NameServer that answered is asked first next time; on a transport failure the next one
//!   in the list is tried, each at most once per call, all within one deadline.
//! - No NameServer takes the whole deadline while others are left to ask: each attempt gets an even
//!   share of what remains. A NameServer whose host is gone does not refuse a connect, it never
//!   answers; without the share, the first one in the list would time the call out alone.
//! - An answer of any response code counts as "answered": NameServers share nothing, so an error
//!   from one (TOPIC_NOT_EXIST) is not retried on another, matching the Java client.
//! - [`NamesrvClient::invoke_all`] sends to every NameServer (writes such as KV config and topic
//!   deletion, which Java also fans out) and reports the first failure.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::cluster_signature::ClusterSigner;
use raftmq_common::protocol::cluster_signature::wall_clock_ms;
use raftmq_common::remoting::RemotingClient;
use tokio::time::Instant;

use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

/// Parses RocketMQ's `namesrvAddr` form: `"ip:port;ip:port"` (commas and spaces also accepted).
pub fn parse_namesrv_addrs(s: &str) -> Vec<String> {
    s.split([';', ',', ' ']).map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect()
}

/// A NameServer list plus the index of the last one that answered. Clones share that index.
#[derive(Debug, Clone)]
pub struct NamesrvClient {
    client: RemotingClient,
    addrs: Arc<Vec<String>>,
    last_good: Arc<AtomicUsize>,
    /// Signs every request with the cluster secret (an operator's NameServer writes).
    signer: Option<Arc<ClusterSigner>>,
}

impl NamesrvClient {
    /// A client for `addrs` over `client`'s connections. An empty list is refused.
    pub fn new(client: RemotingClient, addrs: Vec<String>) -> Result<Self> {
        if addrs.is_empty() {
            return Err(ClientError::invalid_argument("namesrv", "no NameServer address configured"));
        }
        Ok(NamesrvClient { client, addrs: Arc::new(addrs), last_good: Arc::new(AtomicUsize::new(0)), signer: None })
    }

    /// This client with every request cluster-signed by `signer`: a NameServer with a cluster
    /// secret refuses writes (PUT_KV_CONFIG, WIPE_WRITE_PERM_OF_BROKER, ...) without it.
    pub fn with_cluster_signer(mut self, signer: Option<Arc<ClusterSigner>>) -> Self {
        self.signer = signer;
        self
    }

    fn signed(&self, mut request: RemotingCommand) -> RemotingCommand {
        if let Some(signer) = &self.signer {
            signer.sign(&mut request, wall_clock_ms());
        }
        request
    }

    /// The configured addresses.
    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// The address asked first by the next call.
    pub fn preferred_addr(&self) -> &str {
        let i = self.last_good.load(Ordering::Relaxed) % self.addrs.len();
        &self.addrs[i]
    }

    /// Sends `request` to one NameServer, failing over on transport errors, all within `timeout`.
    /// Returns the raw response, whatever its code.
    pub async fn invoke(
        &self,
        operation: &'static str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let request = self.signed(request);
        let deadline = Instant::now() + timeout;
        let start = self.last_good.load(Ordering::Relaxed);
        let mut last_err = None;
        for step in 0..self.addrs.len() {
            let i = (start + step) % self.addrs.len();
            let addr = &self.addrs[i];
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break;
            }
            let left = u32::try_from(self.addrs.len() - step).unwrap_or(u32::MAX);
            match self.client.invoke(addr, request.clone(), remaining / left).await {
                Ok(response) => {
                    self.last_good.store(i, Ordering::Relaxed);
                    return Ok(response);
                }
                Err(e) => {
                    tracing::debug!(namesrv = %addr, error = %e, "NameServer call failed; trying the next one");
                    last_err = Some(ClientError::remoting(operation, e).with_context("namesrv", addr));
                }
            }
        }
        Err(last_err.unwrap_or_else(|| {
            ClientError::new(ErrorKind::DeadlineExceeded, operation, "no time left to ask a NameServer")
        }))
    }

    /// Sends `request` to every NameServer; all must answer SUCCESS.
    pub async fn invoke_all(&self, operation: &'static str, request: RemotingCommand, timeout: Duration) -> Result<()> {
        let request = self.signed(request);
        let mut first_err = None;
        for addr in self.addrs.iter() {
            let result = match self.client.invoke(addr, request.clone(), timeout).await {
                Ok(response) if response.response_code() == ResponseCode::Success => Ok(()),
                Ok(response) => Err(ClientError::broker(operation, response.response_code(), response.remark)),
                Err(e) => Err(ClientError::remoting(operation, e)),
            };
            if let Err(e) = result {
                first_err.get_or_insert(e.with_context("namesrv", addr));
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rocketmq_namesrv_lists() {
        assert_eq!(parse_namesrv_addrs("a:9876;b:9876"), vec!["a:9876", "b:9876"]);
        assert_eq!(parse_namesrv_addrs(" a:1 , b:2;; "), vec!["a:1", "b:2"]);
        assert!(parse_namesrv_addrs("").is_empty());
    }

    #[test]
    fn empty_list_is_refused() {
        let err = NamesrvClient::new(RemotingClient::new(), vec![]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgument);
    }
}
