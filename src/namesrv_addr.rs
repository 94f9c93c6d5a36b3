//! The flags every client command shares: `-n/--namesrvAddr` (mqadmin's spelling, `NAMESRV_ADDR`,
//! then `127.0.0.1:9876`), the per-call deadline, and the plain-ACL account every request is signed
//! with (`--accessKey` / `--secretKey`, or `RAFTMQ_ACCESS_KEY` / `RAFTMQ_SECRET_KEY`), and TLS
//! (`--tls` with `--tlsTrustCertPath`, or `RAFTMQ_TLS` / `RAFTMQ_TLS_TRUST_CERT_PATH`).
//!
//! Invariant: the address list is passed to the SDK verbatim (`ip:port;ip:port`); the SDK parses and
//! fails over, so no command has its own notion of "which NameServer".

use std::time::Duration;

use clap::Args;
use raftmq_client::Admin;
use raftmq_client::SessionCredentials;
use raftmq_client::TlsClientSettings;

/// Where a command finds the NameServers and how long each call may take.
#[derive(Debug, Clone, Args)]
pub struct NamesrvAddrArgs {
    /// NameServer addresses, `host:port;host:port`.
    #[arg(
        short = 'n',
        long = "namesrvAddr",
        value_name = "ADDRS",
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876",
        global = true
    )]
    pub namesrv_addr: String,

    /// Deadline of each remote call, e.g. `3s`, `500ms`.
    #[arg(long = "timeout", value_name = "DURATION", default_value = "3s", value_parser = humantime::parse_duration, global = true)]
    pub timeout: Duration,

    /// Plain-ACL access key every request is signed with (brokers with `aclEnable`).
    #[arg(long = "accessKey", value_name = "KEY", env = "RAFTMQ_ACCESS_KEY", global = true, requires = "secret_key")]
    pub access_key: Option<String>,

    /// Secret of `--accessKey` (prefer the environment variable: a flag shows in `ps`).
    #[arg(
        long = "secretKey",
        value_name = "SECRET",
        env = "RAFTMQ_SECRET_KEY",
        hide_env_values = true,
        global = true,
        requires = "access_key"
    )]
    pub secret_key: Option<String>,

    /// File holding the cluster secret (the brokers' and NameServers' `clusterSecretFile`): a
    /// NameServer that has one refuses its writes (updateKvConfig, wipeWritePerm, ...) without it.
    #[arg(long = "clusterSecretFile", value_name = "FILE", env = "RAFTMQ_CLUSTER_SECRET_FILE", global = true)]
    pub cluster_secret_file: Option<std::path::PathBuf>,

    /// Connect to NameServers and brokers with TLS (their `tls.server.mode` permissive or
    /// enforcing), as a Java client with `tls.enable=true`.
    #[arg(long = "tls", env = "RAFTMQ_TLS", global = true)]
    pub tls: bool,

    /// The CA certificate (PEM) the servers' certificates are checked against
    /// (`tls.client.trustCertPath`); `raftmq dev --tls` prints the one it made.
    #[arg(long = "tlsTrustCertPath", value_name = "FILE", env = "RAFTMQ_TLS_TRUST_CERT_PATH", global = true)]
    pub tls_trust_cert_path: Option<std::path::PathBuf>,
}

impl NamesrvAddrArgs {
    /// The account to sign with, if one was given.
    pub fn credentials(&self) -> anyhow::Result<Option<SessionCredentials>> {
        match (&self.access_key, &self.secret_key) {
            (Some(ak), Some(sk)) => Ok(Some(SessionCredentials::new(ak.as_str(), sk.as_str())?)),
            (None, None) => Ok(None),
            _ => anyhow::bail!("--accessKey and --secretKey go together"),
        }
    }

    /// The TLS settings when `--tls` is on.
    pub fn tls(&self) -> Option<TlsClientSettings> {
        self.tls.then(|| TlsClientSettings {
            trust_cert_path: self.tls_trust_cert_path.clone(),
            ..TlsClientSettings::default()
        })
    }

    /// An admin client for these NameServers, deadline and account.
    pub fn admin(&self) -> anyhow::Result<Admin> {
        let file = self.cluster_secret_file.as_ref().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let key = raftmq_common::cluster_secret::ClusterSecret::from_config("", &file)?.map(|s| s.key());
        Ok(Admin::with_tls(&self.namesrv_addr, self.credentials()?, self.tls())?
            .with_timeout(self.timeout)
            .with_cluster_key(key))
    }
}

/// The local time as RocketMQ's tools print it (`UtilAll.timeMillisToHumanString2`).
pub fn human_time_ms(epoch_ms: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_millis_opt(epoch_ms) {
        chrono::LocalResult::Single(t) | chrono::LocalResult::Ambiguous(t, _) => {
            t.format("%Y-%m-%d %H:%M:%S,%3f").to_string()
        }
        chrono::LocalResult::None => epoch_ms.to_string(),
    }
}

/// Milliseconds since the epoch, by the wall clock (what message timestamps are measured in).
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}
