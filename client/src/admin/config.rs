//! Server configs as properties text: read and change a broker's or a NameServer's config while it
//! runs. A server takes every key of an update or none.

use std::collections::BTreeMap;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;

use super::client::Admin;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

impl Admin {
    /// The config of the NameServer at `namesrv_addr` (`getNamesrvConfig`, GET_NAMESRV_CONFIG),
    /// key by key as its properties text lists it. NameServers share nothing, so ask each one.
    pub async fn namesrv_config(&self, namesrv_addr: &str) -> Result<BTreeMap<String, String>> {
        self.config_of("getNamesrvConfig", namesrv_addr, RequestCode::GetNamesrvConfig).await
    }

    /// Changes keys of the running NameServer at `namesrv_addr` (`updateNamesrvConfig`,
    /// UPDATE_NAMESRV_CONFIG): all or none; a key that needs a restart is refused. Not written to
    /// its config file.
    pub async fn update_namesrv_config(&self, namesrv_addr: &str, updates: &BTreeMap<String, String>) -> Result<()> {
        self.update_config_of("updateNamesrvConfig", namesrv_addr, RequestCode::UpdateNamesrvConfig, updates).await
    }

    /// The config of the broker at `addr` (`getBrokerConfig`, GET_BROKER_CONFIG): every key with its
    /// value as text, as the broker's properties text lists them (secrets masked by the broker).
    pub async fn broker_config(&self, addr: &str) -> Result<BTreeMap<String, String>> {
        self.config_of("getBrokerConfig", addr, RequestCode::GetBrokerConfig).await
    }

    /// Changes keys of the config of the broker at `addr` while it runs (`updateBrokerConfig`,
    /// UPDATE_BROKER_CONFIG), as Java properties text. The broker takes all of them or none, and
    /// refuses a key that cannot change while it runs.
    pub async fn update_broker_config(&self, addr: &str, updates: &BTreeMap<String, String>) -> Result<()> {
        self.update_config_of("updateBrokerConfig", addr, RequestCode::UpdateBrokerConfig, updates).await
    }

    /// A server's config as the properties text a `code` request answers, key by key.
    async fn config_of(&self, op: &'static str, addr: &str, code: RequestCode) -> Result<BTreeMap<String, String>> {
        let response = self.broker_call(op, addr, RemotingCommand::request(code)).await?;
        let text = std::str::from_utf8(&response.body)
            .map_err(|e| ClientError::new(ErrorKind::Protocol, op, "the config is not UTF-8").with_source(e))?;
        Ok(raftmq_common::protocol::body::properties_text::decode(text))
    }

    /// A `code` request carrying `updates` as properties text.
    async fn update_config_of(
        &self,
        op: &'static str,
        addr: &str,
        code: RequestCode,
        updates: &BTreeMap<String, String>,
    ) -> Result<()> {
        let body = raftmq_common::protocol::body::properties_text::encode(updates);
        let mut request = RemotingCommand::request(code).with_body(body);
        if code == RequestCode::UpdateNamesrvConfig {
            request = self.cluster_signed(request);
        }
        self.broker_call(op, addr, request).await.map(drop)
    }
}
