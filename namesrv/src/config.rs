//! `NamesrvConfig`: what `raftmq namesrv` reads from its config file (`-c`: TOML when named `*.toml`,
//! else Java properties as RocketMQ's `namesrv.properties`) and flag overrides.
//!
//! The file is read by `raftmq_common::config_file` (shared with the broker). Keys are RocketMQ's camelCase names (`NamesrvConfig`, `NettyServerConfig`); unknown keys fail at
//! startup. Durations accept RocketMQ's plain milliseconds (`10000`) or a string with a unit
//! (`"10s"`, `"500ms"`, `"2m"`, `"1h"`). Layering: defaults < file < overrides.
//!
//! ```toml
//! listenPort = 9876                        # RocketMQ's NameServer port
//! bindAddress = "0.0.0.0"                  # default 127.0.0.1; beyond loopback needs a cluster secret
//! clusterSecretFile = "/etc/raftmq/cluster.secret"   # the brokers' secret: REGISTER_BROKER and other
//!                                          #   writes must be signed with it (reads stay open)
//! scanNotActiveBrokerInterval = "10s"      # liveness scan period (4.x: 10 s)
//! brokerChannelExpiredTime = "120s"        # a broker silent this long is dropped
//! kvConfigPath = "/home/me/namesrv/kvConfig.json"   # "" keeps KV config in memory only
//! orderMessageEnable = false               # fill orderTopicConf from the ORDER_TOPIC_CONFIG namespace
//! deleteTopicWithBrokerRegistration = false
//! enableAllTopicList = true                # serve GET_ALL_TOPIC_LIST_FROM_NAMESERVER
//! enableTopicList = true                   # serve GET_TOPICS_BY_CLUSTER
//! ```
//!
//! Invariants after [`NamesrvConfig::validate`]: both durations are non-zero and fit `u64` ms.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use raftmq_common::cluster_secret;
use raftmq_common::cluster_secret::ClusterSecret;
use raftmq_common::cluster_secret::ClusterSecretError;
use raftmq_common::config_file;
use raftmq_common::config_file::FileError;
use raftmq_common::tls_settings::ClientAuth;
use raftmq_common::tls_settings::TlsMode;
use raftmq_common::tls_settings::TlsServerSettings;
use serde::Deserialize;
use serde::Serialize;
use thiserror::Error;

/// RocketMQ's NameServer port.
pub const LISTEN_PORT_DEFAULT: u16 = 9876;
/// Liveness scan period (RocketMQ 4.x scans every 10 s).
pub const SCAN_NOT_ACTIVE_BROKER_INTERVAL_DEFAULT: Duration = Duration::from_secs(10);
/// Broker expiry (`RouteInfoManager.BROKER_CHANNEL_EXPIRED_TIME`, 120 s).
pub const BROKER_CHANNEL_EXPIRED_TIME_DEFAULT: Duration = Duration::from_secs(120);

/// The NameServer's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NamesrvConfig {
    /// TCP port for remoting (default 9876).
    pub listen_port: u16,
    /// Interface to listen on (default `127.0.0.1`; any other needs a cluster secret).
    pub bind_address: String,
    /// The cluster secret (`clusterSecret`), the brokers' own: REGISTER_BROKER, UNREGISTER_BROKER and
    /// every other write must carry its signature. Masked in GET_NAMESRV_CONFIG; prefer the file.
    pub cluster_secret: String,
    /// A file holding the cluster secret (trailing newline dropped).
    pub cluster_secret_file: String,
    /// Bind beyond loopback without a cluster secret: anyone who reaches the port can then
    /// register a broker and take its routes. For trusted test networks only.
    pub insecure_cluster_without_secret: bool,
    /// Period of the scan that drops silent brokers (default 10 s).
    #[serde(with = "raftmq_common::config_duration")]
    pub scan_not_active_broker_interval: Duration,
    /// A broker not heard from for longer than this is dropped (default 120 s), unless its
    /// registration carries `heartbeatTimeoutMillis`.
    #[serde(with = "raftmq_common::config_duration")]
    pub broker_channel_expired_time: Duration,
    /// Where KV config is persisted (default `$HOME/namesrv/kvConfig.json`, as RocketMQ); empty = memory only.
    pub kv_config_path: String,
    /// Put the `ORDER_TOPIC_CONFIG` value into routes' `orderTopicConf` (default false).
    pub order_message_enable: bool,
    /// Remove a group's topics missing from its leader's newer registration (default false).
    pub delete_topic_with_broker_registration: bool,
    /// Serve GET_ALL_TOPIC_LIST_FROM_NAMESERVER (default true).
    pub enable_all_topic_list: bool,
    /// Serve GET_TOPICS_BY_CLUSTER (default true).
    pub enable_topic_list: bool,
    /// `tls.server.mode`: disabled, permissive (default: TLS and plaintext on one port, TLS only
    /// with a certificate) or enforcing.
    #[serde(rename = "tls.server.mode")]
    pub tls_server_mode: TlsMode,
    /// `tls.server.certPath`: the certificate chain (PEM), re-read when it changes.
    #[serde(rename = "tls.server.certPath", skip_serializing_if = "Option::is_none")]
    pub tls_server_cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: its private key (PEM, unencrypted).
    #[serde(rename = "tls.server.keyPath", skip_serializing_if = "Option::is_none")]
    pub tls_server_key_path: Option<PathBuf>,
    /// `tls.server.trustCertPath`: the CA client certificates are checked against.
    #[serde(rename = "tls.server.trustCertPath", skip_serializing_if = "Option::is_none")]
    pub tls_server_trust_cert_path: Option<PathBuf>,
    /// `tls.server.need.client.auth`: none (default), optional or require.
    #[serde(rename = "tls.server.need.client.auth")]
    pub tls_server_need_client_auth: ClientAuth,
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        NamesrvConfig {
            listen_port: LISTEN_PORT_DEFAULT,
            bind_address: "127.0.0.1".to_owned(),
            cluster_secret: String::new(),
            cluster_secret_file: String::new(),
            insecure_cluster_without_secret: false,
            scan_not_active_broker_interval: SCAN_NOT_ACTIVE_BROKER_INTERVAL_DEFAULT,
            broker_channel_expired_time: BROKER_CHANNEL_EXPIRED_TIME_DEFAULT,
            kv_config_path: home.join("namesrv").join("kvConfig.json").to_string_lossy().into_owned(),
            order_message_enable: false,
            delete_topic_with_broker_registration: false,
            enable_all_topic_list: true,
            enable_topic_list: true,
            tls_server_mode: TlsMode::default(),
            tls_server_cert_path: None,
            tls_server_key_path: None,
            tls_server_trust_cert_path: None,
            tls_server_need_client_auth: ClientAuth::None,
        }
    }
}

/// Why the configuration could not be built.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file or an override is not valid TOML for this config (unknown key, wrong type, ...).
    #[error("invalid NameServer config{origin}: {source}")]
    Parse {
        /// ` in <file>` or empty.
        origin: String,
        /// What toml reported.
        #[source]
        source: toml::de::Error,
    },
    /// An override is not `key=value`.
    #[error("invalid override {0:?}: expected key=value")]
    Override(String),
    /// A value is out of range.
    #[error("invalid NameServer config: {0}")]
    Invalid(String),
}

impl From<FileError> for ConfigError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Read { path, source } => ConfigError::Read { path, source },
            FileError::Toml { origin, source } => ConfigError::Parse { origin, source },
            e @ FileError::Properties { .. } => ConfigError::Invalid(e.to_string()),
        }
    }
}

impl NamesrvConfig {
    /// Defaults, then the file at `path` (if any: TOML when named `*.toml`, else Java properties as
    /// RocketMQ's `namesrv.properties`), then `overrides` as `(key, value)` pairs
    /// (camelCase keys; a value is read as TOML when it parses, else as a string, so `9877`,
    /// `true` and `10s` all work). The result is validated.
    pub fn load(path: Option<&Path>, overrides: &[(String, String)]) -> Result<Self, ConfigError> {
        // Every NameServer value is typed by its TOML form (no text keys that look like numbers).
        let (mut table, origin) = config_file::read_table(path, |text| {
            Ok(config_file::properties_table(text, |_, raw| config_file::value_of(raw)))
        })?;
        config_file::apply(&mut table, overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())), |_, raw| {
            config_file::value_of(raw)
        });
        let config: NamesrvConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|source| ConfigError::Parse { origin: origin.clone(), source })?;
        config.validate()?;
        Ok(config)
    }

    /// Parses a TOML document (no overrides) and validates it.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: NamesrvConfig =
            toml::from_str(text).map_err(|source| ConfigError::Parse { origin: String::new(), source })?;
        config.validate()?;
        Ok(config)
    }

    /// Splits `key=value` flag arguments into pairs for [`Self::load`].
    pub fn parse_overrides<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Vec<(String, String)>, ConfigError> {
        config_file::split_overrides(args).map_err(ConfigError::Override)
    }

    /// Checks ranges serde cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, d) in [
            ("scanNotActiveBrokerInterval", self.scan_not_active_broker_interval),
            ("brokerChannelExpiredTime", self.broker_channel_expired_time),
        ] {
            if d.is_zero() {
                return Err(ConfigError::Invalid(format!("{key} must be greater than zero")));
            }
            if u64::try_from(d.as_millis()).is_err() {
                return Err(ConfigError::Invalid(format!("{key} is too large")));
            }
        }
        if self.bind_address.trim().is_empty() {
            return Err(ConfigError::Invalid("bindAddress is empty".to_owned()));
        }
        if !self.cluster_secret.is_empty() && !self.cluster_secret_file.trim().is_empty() {
            return Err(ConfigError::Invalid(ClusterSecretError::Both.to_string()));
        }
        if !self.cluster_secret.is_empty() {
            ClusterSecret::new(self.cluster_secret.as_bytes().to_vec())
                .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        }
        self.tls_server().validate().map_err(|e| ConfigError::Invalid(e.0))?;
        let configured = !self.cluster_secret.is_empty() || !self.cluster_secret_file.trim().is_empty();
        cluster_secret::require_secret(
            None,
            configured || self.insecure_cluster_without_secret,
            [("bindAddress", self.bind_address.trim())],
        )
        .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// The `tls.server.*` keys as one value.
    pub fn tls_server(&self) -> TlsServerSettings {
        TlsServerSettings {
            mode: self.tls_server_mode,
            cert_path: self.tls_server_cert_path.clone(),
            key_path: self.tls_server_key_path.clone(),
            trust_cert_path: self.tls_server_trust_cert_path.clone(),
            need_client_auth: self.tls_server_need_client_auth,
        }
    }

    /// The cluster secret (`clusterSecret`, or read from `clusterSecretFile`); `None` when neither.
    pub fn load_cluster_secret(&self) -> Result<Option<ClusterSecret>, ConfigError> {
        ClusterSecret::from_config(&self.cluster_secret, &self.cluster_secret_file)
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// The merged configuration as TOML (`-p/--printConfigItem`).
    pub fn to_toml_string(&self) -> String {
        // Every field is a string, bool, integer or duration string: serialization cannot fail.
        let mut shown = self.clone();
        if !shown.cluster_secret.is_empty() {
            shown.cluster_secret = SECRET_MASK.to_owned();
        }
        toml::to_string(&shown).unwrap_or_else(|e| format!("# cannot print config: {e}\n"))
    }

    /// The KV-config file, `None` for memory only.
    pub fn kv_config_file(&self) -> Option<PathBuf> {
        if self.kv_config_path.is_empty() { None } else { Some(PathBuf::from(&self.kv_config_path)) }
    }

    /// `brokerChannelExpiredTime` in ms (validated to fit).
    pub fn broker_channel_expired_ms(&self) -> u64 {
        u64::try_from(self.broker_channel_expired_time.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Keys UPDATE_NAMESRV_CONFIG may change while the NameServer runs; the others need a restart
/// (the listener, the scan timer) or are Java's black-listed paths.
pub const RUNTIME_UPDATABLE_KEYS: [&str; 5] = [
    "orderMessageEnable",
    "deleteTopicWithBrokerRegistration",
    "enableAllTopicList",
    "enableTopicList",
    "brokerChannelExpiredTime",
];

/// Why an UPDATE_NAMESRV_CONFIG was refused.
#[derive(Debug, Error)]
pub enum UpdateError {
    /// A known key that cannot change at runtime (Java answers its black-listed keys so too).
    #[error("{0} cannot change while the NameServer runs; set it in the config file and restart")]
    NotRuntimeUpdatable(String),
    /// A key no NameServer config has.
    #[error("unknown NameServer config key {0}")]
    UnknownKey(String),
    /// The new value does not parse or is out of range.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

impl NamesrvConfig {
    /// Every key with its value as Java's `properties2String` writes it (GET_NAMESRV_CONFIG):
    /// durations in milliseconds, as RocketMQ's own interval keys are.
    pub fn to_properties(&self) -> BTreeMap<String, String> {
        let Ok(Some(table)) = config_file::table_of(self) else {
            return BTreeMap::new();
        };
        let mut properties = config_file::properties_of(table, &DURATION_KEYS);
        if let Some(secret) = properties.get_mut("clusterSecret")
            && !secret.is_empty()
        {
            *secret = SECRET_MASK.to_owned();
        }
        properties
    }

    /// This config with `updates` applied (values read as in [`Self::load`]'s overrides), all or
    /// none: every key must be one of [`RUNTIME_UPDATABLE_KEYS`] and the result must validate.
    pub fn with_updates(&self, updates: &BTreeMap<String, String>) -> Result<NamesrvConfig, UpdateError> {
        let Ok(Some(mut table)) = config_file::table_of(self) else {
            return Err(UpdateError::Invalid(ConfigError::Invalid("the config cannot be written out".to_owned())));
        };
        for (key, raw) in updates {
            if RUNTIME_UPDATABLE_KEYS.contains(&key.as_str()) {
                table.insert(key.clone(), config_file::value_of(raw));
            } else if table.contains_key(key) || JAVA_BLACK_LISTED_KEYS.contains(&key.as_str()) {
                return Err(UpdateError::NotRuntimeUpdatable(key.clone()));
            } else {
                return Err(UpdateError::UnknownKey(key.clone()));
            }
        }
        let config: NamesrvConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|source| ConfigError::Parse { origin: " update".to_owned(), source })?;
        config.validate()?;
        Ok(config)
    }
}

/// What GET_NAMESRV_CONFIG shows for a set `clusterSecret`.
pub const SECRET_MASK: &str = "******";

/// Keys whose TOML form is a duration string.
const DURATION_KEYS: [&str; 2] = ["scanNotActiveBrokerInterval", "brokerChannelExpiredTime"];

/// Java's `configBlackList` default: never changed over the wire.
const JAVA_BLACK_LISTED_KEYS: [&str; 3] = ["configBlackList", "configStorePath", "kvConfigPath"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rocketmqs() {
        let c = NamesrvConfig::load(None, &[]).expect("defaults");
        assert_eq!(c.listen_port, 9876);
        assert_eq!(c.scan_not_active_broker_interval, Duration::from_secs(10));
        assert_eq!(c.broker_channel_expired_time, Duration::from_secs(120));
        assert!(c.kv_config_path.ends_with("kvConfig.json"));
        assert!(!c.delete_topic_with_broker_registration);
    }

    #[test]
    fn file_then_overrides() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("namesrv.toml");
        std::fs::write(
            &path,
            "listenPort = 9000\nscanNotActiveBrokerInterval = 5000\nbrokerChannelExpiredTime = \"30s\"\nkvConfigPath = \"\"\n",
        )
        .expect("write");
        let overrides =
            NamesrvConfig::parse_overrides(["listenPort=9001", "scanNotActiveBrokerInterval=2s"]).expect("ok");
        let c = NamesrvConfig::load(Some(&path), &overrides).expect("load");
        assert_eq!(c.listen_port, 9001);
        assert_eq!(c.scan_not_active_broker_interval, Duration::from_secs(2));
        assert_eq!(c.broker_channel_expired_time, Duration::from_secs(30));
        assert_eq!(c.kv_config_file(), None);
        // The printed form reads back to the same config.
        assert_eq!(NamesrvConfig::from_toml_str(&c.to_toml_string()).expect("round trip"), c);
    }

    #[test]
    fn a_rocketmq_namesrv_properties_file_reads_as_the_same_toml() {
        let dir = tempfile::tempdir().expect("tempdir");
        let props = dir.path().join("namesrv.properties");
        std::fs::write(&props, "# namesrv.properties\nlistenPort=9000\nscanNotActiveBrokerInterval : 5000 \nbrokerChannelExpiredTime 30s\n")
            .expect("write");
        let toml = dir.path().join("namesrv.toml");
        std::fs::write(
            &toml,
            "listenPort = 9000\nscanNotActiveBrokerInterval = 5000\nbrokerChannelExpiredTime = \"30s\"\n",
        )
        .expect("write");
        let c = NamesrvConfig::load(Some(&props), &[]).expect("properties");
        assert_eq!(c.listen_port, 9000);
        assert_eq!(c.scan_not_active_broker_interval, Duration::from_secs(5));
        assert_eq!(c, NamesrvConfig::load(Some(&toml), &[]).expect("toml"));
        std::fs::write(&props, "listenPrt=1\n").expect("write");
        let err = NamesrvConfig::load(Some(&props), &[]).unwrap_err();
        assert!(format!("{err:?}").contains("listenPrt"), "{err:?}");
    }

    #[test]
    fn unknown_keys_bad_values_and_zero_durations_fail() {
        assert!(matches!(NamesrvConfig::from_toml_str("listenPortt = 1"), Err(ConfigError::Parse { .. })));
        assert!(matches!(NamesrvConfig::from_toml_str("listenPort = 70000"), Err(ConfigError::Parse { .. })));
        assert!(matches!(
            NamesrvConfig::from_toml_str("scanNotActiveBrokerInterval = \"10 parsecs\""),
            Err(ConfigError::Parse { .. })
        ));
        assert!(matches!(NamesrvConfig::from_toml_str("brokerChannelExpiredTime = 0"), Err(ConfigError::Invalid(_))));
        assert!(matches!(NamesrvConfig::parse_overrides(["novalue"]), Err(ConfigError::Override(_))));
        assert!(matches!(
            NamesrvConfig::load(Some(Path::new("/nonexistent/namesrv.toml")), &[]),
            Err(ConfigError::Read { .. })
        ));
    }

    #[test]
    fn tls_keys_read_as_rocketmq_names_them_from_properties_toml_and_overrides() {
        let dir = tempfile::tempdir().expect("tempdir");
        let props = dir.path().join("namesrv.properties");
        std::fs::write(&props, "tls.server.mode=enforcing\ntls.server.certPath=/c.pem\ntls.server.keyPath=/k.pem\n")
            .expect("write");
        let c = NamesrvConfig::load(Some(&props), &[]).expect("properties");
        assert_eq!(c.tls_server_mode, TlsMode::Enforcing);
        assert_eq!(c.tls_server_cert_path.as_deref(), Some(Path::new("/c.pem")));
        let toml = dir.path().join("namesrv.toml");
        std::fs::write(&toml, "[tls.server]\nmode = \"enforcing\"\ncertPath = \"/c.pem\"\nkeyPath = \"/k.pem\"\n")
            .expect("write");
        assert_eq!(NamesrvConfig::load(Some(&toml), &[]).expect("toml"), c);
        let overrides = NamesrvConfig::parse_overrides(["tls.server.mode=disabled"]).expect("ok");
        assert_eq!(NamesrvConfig::load(Some(&props), &overrides).expect("override").tls_server_mode, TlsMode::Disabled);
        let err =
            NamesrvConfig::load(None, &NamesrvConfig::parse_overrides(["tls.server.mode=enforcing"]).expect("ok"))
                .unwrap_err();
        assert!(err.to_string().contains("tls.server.certPath"), "{err}");
        assert!(c.to_properties().contains_key("tls.server.mode"));
    }

    #[test]
    fn duration_units() {
        assert_eq!(raftmq_common::config_duration::parse("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(raftmq_common::config_duration::parse("3m"), Some(Duration::from_secs(180)));
        assert_eq!(raftmq_common::config_duration::parse("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(raftmq_common::config_duration::parse("42"), Some(Duration::from_millis(42)));
        assert_eq!(raftmq_common::config_duration::parse("s"), None);
        assert_eq!(raftmq_common::config_duration::parse("99999999999999999999h"), None);
    }
}
