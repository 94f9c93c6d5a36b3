//! `BrokerConfig::validate`: what serde cannot express. Ranges, names, sizes that hold a maximal
//! message, TLS and cluster-secret rules, and the Raft group's consistency.
//!
//! Invariants after it passes: `raftSelfId` is one of `raftPeers`; peer ids, remoting and Raft
//! addresses are unique and parse as `host:port`; our own peer's remotingAddr is the advertised
//! `brokerIP1:listenPort`; file sizes hold at least one maximal message; ratios and hours are in
//! range.

use std::collections::BTreeSet;
use std::net::IpAddr;

use raftmq_common::cluster_secret;
use raftmq_common::cluster_secret::ClusterSecret;
use raftmq_common::cluster_secret::ClusterSecretError;
use raftmq_common::limits::ADMIN_TOKEN_MIN_BYTES;
use raftmq_common::limits::BROKER_MAX_MESSAGE_SIZE_MAX_BYTES;
use raftmq_common::limits::BROKER_PULL_TRANSFER_MAX_BYTES;
use raftmq_common::tls_settings::TlsMode;

use super::BrokerConfig;
use super::ConfigError;
use super::TIMER_MAX_DELAY_MAX_SECS;
use super::invalid;

impl BrokerConfig {
    /// Checks what serde cannot express: ranges, and the Raft group's consistency.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_names()?;
        self.validate_sizes()?;
        self.validate_times()?;
        self.validate_peers()?;
        self.validate_cluster_secret()?;
        self.validate_tls()?;
        self.raft_config().validate().map_err(|e| invalid(format!("raft settings: {e}")))?;
        Ok(())
    }

    /// TLS settings that cannot work are refused by the keys to set.
    fn validate_tls(&self) -> Result<(), ConfigError> {
        self.tls_server().validate().map_err(|e| invalid(e.0))?;
        if let Some(client) = self.tls_client() {
            client.validate().map_err(|e| invalid(e.0))?;
        }
        if self.tls_server_mode == TlsMode::Enforcing && !self.tls_enable && self.raft_peers.len() > 1 {
            return Err(invalid(
                "tls.server.mode=enforcing needs tls.enable=true (and tls.client.trustCertPath): the replicas of \
                 a group call each other's remoting port",
            ));
        }
        if self.admin_https_enable && self.admin_https_files().is_none() {
            return Err(invalid(
                "adminHttpsEnable needs a certificate: adminHttpsCertPath and adminHttpsKeyPath, or \
                 tls.server.certPath and tls.server.keyPath",
            ));
        }
        Ok(())
    }

    /// The cluster secret rule without reading any file: not both keys, an inline secret of a
    /// valid length, and one set (or the insecure opt-out) when this replica's Raft port, a peer's
    /// or a NameServer is beyond loopback.
    fn validate_cluster_secret(&self) -> Result<(), ConfigError> {
        let inline = match (&self.cluster_secret, &self.cluster_secret_file) {
            (Some(_), Some(_)) => return Err(invalid(ClusterSecretError::Both.to_string())),
            (Some(s), None) => Some(ClusterSecret::new(s.as_bytes().to_vec()).map_err(|e| invalid(e.to_string()))?),
            _ => None,
        };
        let configured = inline.is_some() || self.cluster_secret_file.is_some();
        let addrs = self
            .raft_peers
            .iter()
            .map(|p| ("raftAddr", p.raft_addr.as_str()))
            .chain(self.namesrv_addrs().map(|a| ("namesrvAddr", a)));
        cluster_secret::require_secret(None, configured || self.insecure_cluster_without_secret, addrs)
            .map_err(|e| invalid(e.to_string()))
    }

    pub(super) fn validate_names(&self) -> Result<(), ConfigError> {
        if self.broker_cluster_name.trim().is_empty() {
            return Err(invalid("brokerClusterName is empty"));
        }
        if self.broker_name.trim().is_empty() {
            return Err(invalid("brokerName is empty"));
        }
        if let Some(token) = &self.admin_token {
            // The token opens the admin API to every interface; a guessable one is no guard.
            if token.len() < ADMIN_TOKEN_MIN_BYTES || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(invalid(format!(
                    "adminToken must be at least {ADMIN_TOKEN_MIN_BYTES} bytes without spaces (e.g. `openssl rand -hex 16`)"
                )));
            }
        }
        if self.listen_port == 0 {
            return Err(invalid("listenPort must not be 0"));
        }
        if let Some(ip) = &self.broker_ip1
            && ip.parse::<IpAddr>().is_err()
        {
            return Err(invalid(format!("brokerIP1 {ip:?} is not an IP address")));
        }
        for addr in self.namesrv_addrs() {
            if !is_host_port(addr) {
                return Err(invalid(format!("namesrvAddr entry {addr:?} is not host:port")));
            }
        }
        // Trace records separate their fields with U+0001 and U+0002; a region holding one would
        // split every record a traced producer writes.
        if self.region_id.trim().is_empty() || self.region_id.contains(['\u{1}', '\u{2}']) {
            return Err(invalid(format!("regionId {:?} is empty or holds a control character", self.region_id)));
        }
        if !(0..=15).contains(&self.broker_permission) {
            return Err(invalid(format!("brokerPermission {} is not a PermName bit set", self.broker_permission)));
        }
        self.inner_credentials()?;
        Ok(())
    }

    fn validate_sizes(&self) -> Result<(), ConfigError> {
        if self.max_message_size == 0 || self.max_message_size as usize > BROKER_MAX_MESSAGE_SIZE_MAX_BYTES {
            return Err(invalid(format!(
                "maxMessageSize {} must be positive and at most {BROKER_MAX_MESSAGE_SIZE_MAX_BYTES}: one message \
                 must fit one Raft entry",
                self.max_message_size
            )));
        }
        // A segment must hold one maximal record plus the Raft entry header and a blank filler.
        let segment_min = u64::from(self.max_message_size) * 2;
        if self.mapped_file_size_commit_log < segment_min {
            return Err(invalid(format!(
                "mappedFileSizeCommitLog {} is below 2 × maxMessageSize ({segment_min})",
                self.mapped_file_size_commit_log
            )));
        }
        let units = self.consume_queue_units_per_file();
        if units == 0 || units > u64::from(u32::MAX) {
            return Err(invalid(format!(
                "mappedFileSizeConsumeQueue {} must hold 1..=2^32-1 units of 20 bytes",
                self.mapped_file_size_consume_queue
            )));
        }
        if !(1..=1024).contains(&self.default_topic_queue_nums) {
            return Err(invalid(format!("defaultTopicQueueNums {} is not in 1..=1024", self.default_topic_queue_nums)));
        }
        if !(10..=95).contains(&self.disk_max_used_space_ratio) {
            return Err(invalid(format!("diskMaxUsedSpaceRatio {} is not in 10..=95", self.disk_max_used_space_ratio)));
        }
        let (clean, force, refuse) =
            (self.disk_max_used_space_ratio, self.disk_space_clean_forcibly_ratio, self.disk_space_warning_level_ratio);
        if !(10..=99).contains(&force) || !(10..=99).contains(&refuse) || clean > force || force > refuse {
            return Err(invalid(format!(
                "disk ratios must be 10..=99 and diskMaxUsedSpaceRatio ({clean}) <= diskSpaceCleanForciblyRatio \
                 ({force}) <= diskSpaceWarningLevelRatio ({refuse})"
            )));
        }
        if !(1..=100).contains(&self.access_message_in_memory_max_ratio) {
            return Err(invalid("accessMessageInMemoryMaxRatio is not in 1..=100"));
        }
        self.index_file_sizes().validate().map_err(|e| invalid(format!("maxHashSlotNum / maxIndexNum: {e}")))?;
        let no_cap = u32::MAX;
        for (key, n, max) in [
            (
                "maxTransferBytesOnMessageInMemory",
                self.max_transfer_bytes_on_message_in_memory,
                BROKER_PULL_TRANSFER_MAX_BYTES,
            ),
            ("maxTransferCountOnMessageInMemory", self.max_transfer_count_on_message_in_memory, no_cap),
            (
                "maxTransferBytesOnMessageInDisk",
                self.max_transfer_bytes_on_message_in_disk,
                BROKER_PULL_TRANSFER_MAX_BYTES,
            ),
            ("maxTransferCountOnMessageInDisk", self.max_transfer_count_on_message_in_disk, no_cap),
        ] {
            if n == 0 {
                return Err(invalid(format!("{key} must be greater than zero")));
            }
            if n > max {
                return Err(invalid(format!("{key} {n} is above {max}: a pull body must fit one remoting frame")));
            }
        }
        Ok(())
    }

    fn validate_times(&self) -> Result<(), ConfigError> {
        for (key, d) in [
            ("registerBrokerTimeoutMills", self.register_broker_timeout_mills),
            ("registerNameServerPeriod", self.register_name_server_period),
            ("shortPollingTimeMills", self.short_polling_time_mills),
            ("cleanResourceInterval", self.clean_resource_interval),
            ("transactionTimeOut", self.transaction_time_out),
            ("transactionCheckInterval", self.transaction_check_interval),
        ] {
            if d.is_zero() || u64::try_from(d.as_millis()).is_err() {
                return Err(invalid(format!("{key} must be greater than zero and fit u64 milliseconds")));
            }
        }
        if self.transaction_check_max == 0 {
            return Err(invalid("transactionCheckMax must be at least 1"));
        }
        if self.file_reserved_time == 0 {
            return Err(invalid("fileReservedTime must be at least 1 hour"));
        }
        if self.file_reserved_time_ms == Some(0) {
            return Err(invalid("fileReservedTimeMs must be greater than zero"));
        }
        self.delete_when_hours()?;
        self.message_delay_levels_ms()?;
        if self.timer_max_delay_sec == 0 || self.timer_max_delay_sec > TIMER_MAX_DELAY_MAX_SECS {
            return Err(invalid(format!("timerMaxDelaySec must be 1..={TIMER_MAX_DELAY_MAX_SECS}")));
        }
        Ok(())
    }

    fn validate_peers(&self) -> Result<(), ConfigError> {
        if self.raft_peers.is_empty() {
            return Err(invalid("raftPeers is empty"));
        }
        let mut ids = BTreeSet::new();
        let mut addrs = BTreeSet::new();
        for peer in &self.raft_peers {
            if !ids.insert(peer.id) {
                return Err(invalid(format!("raftPeers: id {} appears twice", peer.id)));
            }
            for (key, addr) in [("remotingAddr", &peer.remoting_addr), ("raftAddr", &peer.raft_addr)] {
                if !is_host_port(addr) {
                    return Err(invalid(format!("raftPeers id {}: {key} {addr:?} is not host:port", peer.id)));
                }
                // A node's remoting and Raft listeners, and two nodes, never share an address.
                if !addrs.insert(addr.as_str()) {
                    return Err(invalid(format!("raftPeers: address {addr} is used twice")));
                }
            }
        }
        let me = self
            .self_peer()
            .ok_or_else(|| invalid(format!("raftSelfId {} is not among raftPeers ids {ids:?}", self.raft_self_id)))?;
        let advertised = self.broker_addr();
        if me.remoting_addr != advertised {
            return Err(invalid(format!(
                "raftPeers id {}: remotingAddr {} differs from the advertised brokerIP1:listenPort {advertised}",
                me.id, me.remoting_addr
            )));
        }
        Ok(())
    }
}

fn is_host_port(addr: &str) -> bool {
    match addr.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0),
        None => false,
    }
}
