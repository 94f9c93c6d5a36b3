//! The [`Admin`] handle: its connections (shared by clones), its per-call deadline, and the two ways
//! a call goes out: to one NameServer (failover, last good first) or to one broker address. Every
//! non-SUCCESS answer becomes an `ErrorKind::Broker` error carrying the code and remark.

use std::sync::Arc;
use std::time::Duration;

use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::acl::SessionCredentials;
use raftmq_common::protocol::cluster_signature::ClusterKey;
use raftmq_common::protocol::cluster_signature::ClusterSigner;
use raftmq_common::protocol::cluster_signature::wall_clock_ms;
use raftmq_common::remoting::ClientTls;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::tls_settings::TlsClientSettings;

use super::response::success;
use crate::error::ClientError;
use crate::error::Result;
use crate::namesrv::NamesrvClient;
use crate::namesrv::parse_namesrv_addrs;

/// An admin client; clones share connections.
#[derive(Debug, Clone)]
pub struct Admin {
    pub(super) remoting: RemotingClient,
    pub(super) namesrv: NamesrvClient,
    pub(super) timeout: Duration,
    /// Signs NameServer calls with the cluster secret (writes need it on a NameServer that has one).
    pub(super) cluster_signer: Option<Arc<ClusterSigner>>,
}

impl Admin {
    /// An admin for the NameServers in `namesrv_addr` (`"ip:port;ip:port"`), 3 s per call.
    pub fn new(namesrv_addr: &str) -> Result<Self> {
        Self::with_credentials(namesrv_addr, None)
    }

    /// [`Self::new`] signing every request with `credentials` (plain ACL; admin requests need an
    /// account with `admin: true` on a broker with `aclEnable`).
    pub fn with_credentials(namesrv_addr: &str, credentials: Option<SessionCredentials>) -> Result<Self> {
        Self::with_tls(namesrv_addr, credentials, None)
    }

    /// [`Self::with_credentials`] connecting with TLS when `tls` is set (`useTLS`; the settings'
    /// trust root checks the servers).
    pub fn with_tls(
        namesrv_addr: &str,
        credentials: Option<SessionCredentials>,
        tls: Option<TlsClientSettings>,
    ) -> Result<Self> {
        let tls = match tls {
            Some(settings) => Some(
                ClientTls::from_settings(&settings)
                    .map_err(|e| ClientError::invalid_argument("buildAdmin", format!("use_tls: {e}")))?,
            ),
            None => None,
        };
        let remoting = RemotingClient::with_tls(ProcessorTable::new(), false, credentials.map(Arc::new), tls);
        let namesrv = NamesrvClient::new(remoting.clone(), parse_namesrv_addrs(namesrv_addr))?;
        let timeout = Duration::from_millis(RPC_TIMEOUT_DEFAULT_MS);
        Ok(Admin { remoting, namesrv, timeout, cluster_signer: None })
    }

    /// Signs every NameServer call with the cluster secret `key`: a NameServer that has the secret
    /// refuses its writes (`updateKvConfig`, `wipeWritePerm`, `updateNamesrvConfig`, ...) without it.
    pub fn with_cluster_key(mut self, key: Option<ClusterKey>) -> Self {
        let signer = key.map(|k| Arc::new(ClusterSigner::new(k, "admin")));
        self.namesrv = self.namesrv.with_cluster_signer(signer.clone());
        self.cluster_signer = signer;
        self
    }

    /// `request`, cluster-signed when this admin has the secret (a NameServer addressed directly).
    pub(super) fn cluster_signed(&self, mut request: RemotingCommand) -> RemotingCommand {
        if let Some(signer) = &self.cluster_signer {
            signer.sign(&mut request, wall_clock_ms());
        }
        request
    }

    /// Sets the deadline of each call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Closes every connection.
    pub async fn shutdown(&self) {
        self.remoting.close().await;
    }

    /// `request` to one NameServer (failover, last good first); a non-SUCCESS answer is an error.
    pub(super) async fn namesrv_call(&self, op: &'static str, request: RemotingCommand) -> Result<RemotingCommand> {
        let response = self.namesrv.invoke(op, request, self.timeout).await?;
        success(op, response)
    }

    /// `request` to the broker (or NameServer) at `addr`; a non-SUCCESS answer is an error naming it.
    pub(super) async fn broker_call(
        &self,
        op: &'static str,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand> {
        let response = self
            .remoting
            .invoke(addr, request, self.timeout)
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", addr))?;
        success(op, response).map_err(|e| e.with_context("addr", addr))
    }
}
