//! `TopicRouteData` and its parts, `QueueData` and `BrokerData`: the GET_ROUTEINFO_BY_TOPIC (105)
//! response body, which every RocketMQ client parses to find where a topic lives.
//!
//! ```json
//! {"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.2:10911","2":"127.0.0.3:10911"},"brokerName":"broker-a",
//!   "cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},
//!  "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}
//! ```
//!
//! Encoding: standard JSON, keys in fastjson's alphabetical order, `brokerAddrs` keys quoted
//! (fastjson parses the quoted form, and 4.9.4+ clients ask for it). `enableActingMaster` (a 5.x
//! field) is always written: 4.x clients ignore it and some 5.x-modelled clients require it.
//! `filterServerTable` is always written for the same reason.
//!
//! Decoding accepts both the standard form and fastjson's default form, which writes integer map
//! keys unquoted (`{0:"127.0.0.1:10911"}`) — what a Java NameServer sends to clients older than
//! V4_9_4: [`JsonBody::decode`] tries strict JSON first and, on a syntax error, parses again after
//! [`super::fastjson::normalize`] has quoted such keys; serde_json then reads `"0"` as the `i64` key.
//!
//! Invariants: brokerId 0 in `brokerAddrs` is the group's writable address (the Raft leader);
//! decoders never panic on any input.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;

/// `MixAll.MASTER_ID`: the brokerId of a group's writable address.
pub const MASTER_ID: i64 = 0;

/// One broker group's share of a topic (`org.apache.rocketmq.common.protocol.route.QueueData`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueData {
    /// The broker group.
    pub broker_name: String,
    /// Permission bits (`crate::protocol::body::topic::perm`).
    pub perm: i32,
    /// Queues consumers read.
    pub read_queue_nums: i32,
    /// Topic sysFlag; releases before 4.9 spelled the key `topicSynFlag`, accepted on input.
    #[serde(alias = "topicSynFlag")]
    pub topic_sys_flag: i32,
    /// Queues producers write.
    pub write_queue_nums: i32,
}

/// One broker group's addresses (`org.apache.rocketmq.common.protocol.route.BrokerData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    /// brokerId → `ip:port`; id 0 ([`MASTER_ID`]) is the writable address, ids ≥ 1 are replicas.
    pub broker_addrs: BTreeMap<i64, String>,
    /// The broker group.
    pub broker_name: String,
    /// The cluster the group belongs to.
    pub cluster: String,
    /// 5.x acting-master flag; always false for raftmq (Raft elects a real leader).
    pub enable_acting_master: bool,
}

impl BrokerData {
    /// `BrokerData.selectBrokerAddr` without the randomness: the master's address, else the
    /// replica with the lowest id.
    pub fn select_broker_addr(&self) -> Option<&str> {
        self.broker_addrs.get(&MASTER_ID).or_else(|| self.broker_addrs.values().next()).map(String::as_str)
    }
}

impl JsonBody for BrokerData {
    const NAME: &'static str = "BrokerData";
}

/// Where a topic lives (`org.apache.rocketmq.common.protocol.route.TopicRouteData`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRouteData {
    /// Groups serving the topic, one entry per group.
    pub broker_datas: Vec<BrokerData>,
    /// Filter servers per broker address (4.x filter servers; always empty in raftmq).
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// Ordered-topic config from the `ORDER_TOPIC_CONFIG` KV namespace (`brokerName:queueNum;...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    /// Queue layout per group.
    pub queue_datas: Vec<QueueData>,
}

impl JsonBody for TopicRouteData {
    const NAME: &'static str = "TopicRouteData";
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample() -> TopicRouteData {
        TopicRouteData {
            broker_datas: vec![BrokerData {
                broker_addrs: BTreeMap::from([
                    (0, "127.0.0.2:10911".to_owned()),
                    (1, "127.0.0.3:10911".to_owned()),
                    (2, "127.0.0.4:10911".to_owned()),
                ]),
                broker_name: "broker-a".into(),
                cluster: "DefaultCluster".into(),
                enable_acting_master: false,
            }],
            filter_server_table: BTreeMap::new(),
            order_topic_conf: None,
            queue_datas: vec![QueueData {
                broker_name: "broker-a".into(),
                perm: 6,
                read_queue_nums: 8,
                topic_sys_flag: 0,
                write_queue_nums: 8,
            }],
        }
    }

    #[test]
    fn encodes_standard_json_in_fastjson_key_order() {
        let json = String::from_utf8(sample().encode().expect("encode")).expect("utf8");
        assert_eq!(
            json,
            concat!(
                r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.2:10911","1":"127.0.0.3:10911","2":"127.0.0.4:10911"},"#,
                r#""brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"#,
                r#""filterServerTable":{},"#,
                r#""queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#
            )
        );
    }

    #[test]
    fn decodes_fastjson_default_form_with_unquoted_keys() {
        // Byte for byte what a 4.9.x Java NameServer sends to a pre-4.9.4 client (no
        // enableActingMaster, unquoted brokerId keys).
        let java = concat!(
            r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.2:10911",1:"127.0.0.3:10911",2:"127.0.0.4:10911"},"#,
            r#""brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},"#,
            r#""queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#
        );
        assert_eq!(TopicRouteData::decode(java.as_bytes()).expect("decode"), sample());
    }

    #[test]
    fn decodes_java_standard_form_and_old_field_names() {
        let java = concat!(
            r#"{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.2:10911","1":"127.0.0.3:10911","2":"127.0.0.4:10911"},"#,
            r#""brokerName":"broker-a","cluster":"DefaultCluster","zoneName":"z"}],"filterServerTable":{},"#,
            r#""queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSynFlag":0,"writeQueueNums":8}],"#,
            r#""topicQueueMappingByBroker":null}"#
        );
        assert_eq!(TopicRouteData::decode(java.as_bytes()).expect("decode"), sample());
    }

    #[test]
    fn order_topic_conf_is_written_only_when_present() {
        let mut route = sample();
        route.order_topic_conf = Some("broker-a:8".into());
        let json = String::from_utf8(route.encode().expect("encode")).expect("utf8");
        assert!(json.contains(r#""orderTopicConf":"broker-a:8""#));
        assert_eq!(TopicRouteData::decode(json.as_bytes()).expect("decode"), route);
    }

    #[test]
    fn malformed_bodies_are_errors() {
        let bad_bodies: [&[u8]; 7] = [b"", b"{", b"{0:", b"[", b"\xff\xfe", b"{\"brokerDatas\":7}", b"{0:\"a\"}}"];
        for bad in bad_bodies {
            assert!(TopicRouteData::decode(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = TopicRouteData::decode(&bytes);
        }

        #[test]
        fn route_round_trips_in_both_key_forms(
            addrs in proptest::collection::btree_map(0i64..64, "[0-9.:]{1,21}", 0..5),
            perm in 0i32..8,
            nums in 0i32..1024,
        ) {
            let route = TopicRouteData {
                broker_datas: vec![BrokerData {
                    broker_addrs: addrs,
                    broker_name: "b".into(),
                    cluster: "c".into(),
                    enable_acting_master: false,
                }],
                queue_datas: vec![QueueData {
                    broker_name: "b".into(),
                    perm,
                    read_queue_nums: nums,
                    write_queue_nums: nums,
                    topic_sys_flag: 0,
                }],
                ..TopicRouteData::default()
            };
            let standard = route.encode().expect("encode");
            prop_assert_eq!(&TopicRouteData::decode(&standard).expect("standard"), &route);
            // fastjson's form: strip the quotes around the integer keys of brokerAddrs.
            let text = String::from_utf8(standard).expect("utf8");
            let mut unquoted = text.clone();
            for id in route.broker_datas[0].broker_addrs.keys() {
                unquoted = unquoted.replace(&format!("\"{id}\":"), &format!("{id}:"));
            }
            prop_assert_eq!(&TopicRouteData::decode(unquoted.as_bytes()).expect("fastjson"), &route);
        }
    }
}
