//! `SubscriptionGroupTable`: consumer groups' broker-side settings (RocketMQ's
//! `SubscriptionGroupManager`), preloaded with 4.9.8's system groups, changed only by applied replicated
//! commands, plus the pure "find or auto-create" decision.
//!
//! Invariant: as for topics, the `DataVersion` moves once per applied change with the leader's timestamp.
//! Auto-creation is a decision, not a mutation: the caller proposes the returned config, so replicas
//! never diverge on which groups exist.

use std::collections::BTreeMap;

use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
use raftmq_common::protocol::body::subscription_group::SubscriptionGroupWrapper;
use raftmq_common::protocol::body::topic::DataVersion;

/// Prefix of system consumer groups, always auto-created (`MixAll.CID_SYS_RMQ_TRANS` family).
pub const SYS_CONSUMER_GROUP_PREFIX: &str = "CID_RMQ_SYS_";

/// Groups `SubscriptionGroupManager.init` creates (4.9.8).
pub const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
];

/// `MixAll.isSysConsumerGroup`.
pub fn is_sys_consumer_group(group: &str) -> bool {
    group.starts_with(SYS_CONSUMER_GROUP_PREFIX)
}

/// Every consumer group's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionGroupTable {
    table: BTreeMap<String, SubscriptionGroupConfig>,
    data_version: DataVersion,
}

impl Default for SubscriptionGroupTable {
    fn default() -> Self {
        let table = SYSTEM_GROUPS.iter().map(|g| ((*g).to_owned(), SubscriptionGroupConfig::new(*g))).collect();
        SubscriptionGroupTable { table, data_version: DataVersion::default() }
    }
}

/// Outcome of [`SubscriptionGroupTable::find_or_create`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupLookup<'a> {
    /// The group exists.
    Found(&'a SubscriptionGroupConfig),
    /// Unknown but may be created: propose this upsert (RocketMQ creates it with defaults).
    Create(SubscriptionGroupConfig),
    /// Unknown and auto-creation is off: SUBSCRIPTION_GROUP_NOT_EXIST.
    NotExist,
}

impl SubscriptionGroupTable {
    /// A table with the system groups.
    pub fn new() -> Self {
        SubscriptionGroupTable::default()
    }

    /// A group's config.
    pub fn get(&self, group: &str) -> Option<&SubscriptionGroupConfig> {
        self.table.get(group)
    }

    /// `findSubscriptionGroupConfig`: existing, or a default config when `autoCreateSubscriptionGroup`
    /// is on or the group is a system group.
    pub fn find_or_create(&self, group: &str, auto_create: bool) -> GroupLookup<'_> {
        match self.table.get(group) {
            Some(config) => GroupLookup::Found(config),
            None if auto_create || is_sys_consumer_group(group) => {
                GroupLookup::Create(SubscriptionGroupConfig::new(group))
            }
            None => GroupLookup::NotExist,
        }
    }

    /// Groups in name order.
    pub fn iter(&self) -> impl Iterator<Item = &SubscriptionGroupConfig> {
        self.table.values()
    }

    /// The table's version.
    pub fn data_version(&self) -> DataVersion {
        self.data_version
    }

    /// Applies a replicated upsert.
    pub fn upsert(&mut self, config: SubscriptionGroupConfig, proposed_at_ms: i64) {
        self.table.insert(config.group_name.clone(), config);
        self.data_version.next_version(proposed_at_ms);
    }

    /// Applies a replicated delete; returns the removed config.
    pub fn delete(&mut self, group: &str, proposed_at_ms: i64) -> Option<SubscriptionGroupConfig> {
        let removed = self.table.remove(group);
        if removed.is_some() {
            self.data_version.next_version(proposed_at_ms);
        }
        removed
    }

    /// GET_ALL_SUBSCRIPTIONGROUP_CONFIG body (`subscriptionGroup.json`).
    pub fn to_wrapper(&self) -> SubscriptionGroupWrapper {
        SubscriptionGroupWrapper { data_version: self.data_version, subscription_group_table: self.table.clone() }
    }

    /// Restores a table from a wrapper (snapshot manifest), adding missing system groups.
    pub fn from_wrapper(wrapper: SubscriptionGroupWrapper) -> Self {
        let mut t =
            SubscriptionGroupTable { table: wrapper.subscription_group_table, data_version: wrapper.data_version };
        for g in SYSTEM_GROUPS {
            t.table.entry((*g).to_owned()).or_insert_with(|| SubscriptionGroupConfig::new(*g));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_groups_and_auto_create() {
        let t = SubscriptionGroupTable::new();
        assert!(t.get("TOOLS_CONSUMER").is_some());
        assert_eq!(t.iter().count(), SYSTEM_GROUPS.len());
        assert!(matches!(t.find_or_create("TOOLS_CONSUMER", false), GroupLookup::Found(_)));
        assert_eq!(t.find_or_create("cg", true), GroupLookup::Create(SubscriptionGroupConfig::new("cg")));
        assert_eq!(t.find_or_create("cg", false), GroupLookup::NotExist);
        assert!(matches!(t.find_or_create("CID_RMQ_SYS_X", false), GroupLookup::Create(_)));
    }

    #[test]
    fn replicated_changes_and_wrapper_round_trip() {
        let mut t = SubscriptionGroupTable::new();
        t.upsert(SubscriptionGroupConfig { retry_max_times: 3, ..SubscriptionGroupConfig::new("cg") }, 10);
        assert_eq!(t.get("cg").map(|c| c.retry_max_times), Some(3));
        assert!(t.delete("nope", 11).is_none());
        assert_eq!(t.data_version(), DataVersion { counter: 1, timestamp: 10 });
        let restored = SubscriptionGroupTable::from_wrapper(t.to_wrapper());
        assert_eq!(restored, t);
        assert!(t.delete("cg", 12).is_some());
        assert_eq!(t.data_version().counter, 2);
    }
}
