//! The NameServer bodies other than routes: `RegisterBrokerBody` (REGISTER_BROKER request) in its
//! JSON and compressed forms, `TopicConfigSerializeWrapper`, `ClusterInfo` (GET_BROKER_CLUSTER_INFO),
//! `TopicList` (topic-list codes) and `KVTable` (GET_KVLIST_BY_NAMESPACE, REGISTER_BROKER response).
//!
//! ## The compressed REGISTER_BROKER body (header `compressed=true`)
//!
//! RocketMQ's `RegisterBrokerBody.encode(true)` writes, through a zlib `DeflaterOutputStream`
//! (`Deflater.BEST_COMPRESSION`, zlib header included), all integers big-endian:
//!
//! ```text
//! i32 len | DataVersion JSON
//! i32 n   | n × (i32 len | "topicName readQueueNums writeQueueNums perm topicFilterType")
//! i32 len | filterServerList JSON
//! ```
//!
//! The compressed form carries only those five topic fields (Java drops `topicSysFlag` and `order`
//! the same way); 5.x appends a sixth space-separated field (attributes JSON), which is ignored.
//!
//! Invariants: decoding never panics and never inflates more than
//! [`REGISTER_BROKER_BODY_INFLATED_SIZE_MAX_BYTES`]; every length is checked against what remains.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::io::Read;
use std::io::Write;

use serde::Deserialize;
use serde::Serialize;
use thiserror::Error;

use super::BodyError;
use super::JsonBody;
use super::route::BrokerData;
use super::topic::DataVersion;
use super::topic::TopicConfig;
use super::topic::TopicFilterType;
use crate::limits::REGISTER_BROKER_BODY_INFLATED_SIZE_MAX_BYTES;

/// A broker's topic table with its version (`TopicConfigSerializeWrapper`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    /// Bumped by the broker on every topic change.
    pub data_version: DataVersion,
    /// topic name → config.
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

impl JsonBody for TopicConfigSerializeWrapper {
    const NAME: &'static str = "TopicConfigSerializeWrapper";
}

/// The REGISTER_BROKER request body (`RegisterBrokerBody`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    /// Filter-server addresses (4.x filter servers; raftmq brokers send none).
    pub filter_server_list: Vec<String>,
    /// The broker's topics.
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

impl JsonBody for RegisterBrokerBody {
    const NAME: &'static str = "RegisterBrokerBody";
}

/// Why a REGISTER_BROKER body could not be read or written.
#[derive(Debug, Error)]
pub enum RegisterBodyError {
    /// A JSON part is invalid.
    #[error(transparent)]
    Json(#[from] BodyError),
    /// The compressed body is not a valid zlib stream.
    #[error("the compressed RegisterBrokerBody does not inflate: {0}")]
    Inflate(#[source] std::io::Error),
    /// The compressed body could not be written.
    #[error("the RegisterBrokerBody could not be deflated: {0}")]
    Deflate(#[source] std::io::Error),
    /// The compressed body inflates past the limit.
    #[error("the compressed RegisterBrokerBody inflates past {max_bytes} bytes")]
    TooLarge {
        /// [`REGISTER_BROKER_BODY_INFLATED_SIZE_MAX_BYTES`].
        max_bytes: usize,
    },
    /// A length or count field is negative or runs past the end.
    #[error("the compressed RegisterBrokerBody is truncated or corrupt at {part}")]
    Truncated {
        /// Which part was being read.
        part: &'static str,
    },
    /// A topic entry is not `name read write perm filterType`.
    #[error("the compressed RegisterBrokerBody has an invalid topic entry {entry:?}")]
    BadTopicConfig {
        /// The entry (cut to 128 characters).
        entry: String,
    },
    /// A part is too long for its `i32` length field.
    #[error("the RegisterBrokerBody part {part} is too long to encode")]
    PartTooLong {
        /// Which part.
        part: &'static str,
    },
}

impl RegisterBrokerBody {
    /// Reads a body in the form the header's `compressed` flag announces.
    pub fn decode_body(bytes: &[u8], compressed: bool) -> Result<Self, RegisterBodyError> {
        if compressed { Self::decode_compressed(bytes) } else { Ok(<Self as JsonBody>::decode(bytes)?) }
    }

    /// Writes the body in the plain JSON form or the compressed form.
    pub fn encode_body(&self, compressed: bool) -> Result<Vec<u8>, RegisterBodyError> {
        if compressed { self.encode_compressed() } else { Ok(<Self as JsonBody>::encode(self)?) }
    }

    /// `RegisterBrokerBody.encode(true)`.
    pub fn encode_compressed(&self) -> Result<Vec<u8>, RegisterBodyError> {
        let mut plain = Vec::new();
        let wrapper = &self.topic_config_serialize_wrapper;
        put_part(&mut plain, &wrapper.data_version.encode()?, "dataVersion")?;
        let count = i32::try_from(wrapper.topic_config_table.len())
            .map_err(|_| RegisterBodyError::PartTooLong { part: "topicConfigTable" })?;
        plain.extend_from_slice(&count.to_be_bytes());
        for config in wrapper.topic_config_table.values() {
            let entry = format!(
                "{} {} {} {} {}",
                config.topic_name,
                config.read_queue_nums,
                config.write_queue_nums,
                config.perm,
                config.topic_filter_type.as_str()
            );
            put_part(&mut plain, entry.as_bytes(), "topicConfig")?;
        }
        let filters = serde_json::to_vec(&self.filter_server_list)
            .map_err(|source| BodyError::Json { body: "filterServerList", source })?;
        put_part(&mut plain, &filters, "filterServerList")?;

        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&plain).map_err(RegisterBodyError::Deflate)?;
        encoder.finish().map_err(RegisterBodyError::Deflate)
    }

    /// `RegisterBrokerBody.decode(bytes, true)`.
    pub fn decode_compressed(bytes: &[u8]) -> Result<Self, RegisterBodyError> {
        let max_bytes = REGISTER_BROKER_BODY_INFLATED_SIZE_MAX_BYTES;
        let mut plain = Vec::new();
        let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX).saturating_add(1);
        flate2::read::ZlibDecoder::new(bytes)
            .take(limit)
            .read_to_end(&mut plain)
            .map_err(RegisterBodyError::Inflate)?;
        if plain.len() > max_bytes {
            return Err(RegisterBodyError::TooLarge { max_bytes });
        }
        let mut cursor = Cursor { buf: &plain };
        let data_version = DataVersion::decode(cursor.part("dataVersion")?)?;
        let count = cursor.i32("topicConfigTable count")?;
        let count =
            usize::try_from(count).map_err(|_| RegisterBodyError::Truncated { part: "topicConfigTable count" })?;
        let mut topic_config_table = BTreeMap::new();
        for _ in 0..count {
            let config = parse_topic_entry(cursor.part("topicConfig")?)?;
            topic_config_table.insert(config.topic_name.clone(), config);
        }
        let filter_server_list = serde_json::from_slice(cursor.part("filterServerList")?)
            .map_err(|source| BodyError::Json { body: "filterServerList", source })?;
        Ok(RegisterBrokerBody {
            filter_server_list,
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper { data_version, topic_config_table },
        })
    }
}

fn put_part(out: &mut Vec<u8>, part: &[u8], name: &'static str) -> Result<(), RegisterBodyError> {
    let len = i32::try_from(part.len()).map_err(|_| RegisterBodyError::PartTooLong { part: name })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(part);
    Ok(())
}

fn parse_topic_entry(raw: &[u8]) -> Result<TopicConfig, RegisterBodyError> {
    let bad = || RegisterBodyError::BadTopicConfig { entry: String::from_utf8_lossy(raw).chars().take(128).collect() };
    let text = std::str::from_utf8(raw).map_err(|_| bad())?;
    // Java splits on single spaces; 5.x adds a sixth field (attributes) that we do not model.
    let fields: Vec<&str> = text.split(' ').collect();
    let [name, read, write, perm, filter, ..] = fields.as_slice() else {
        return Err(bad());
    };
    if name.is_empty() {
        return Err(bad());
    }
    Ok(TopicConfig {
        topic_name: (*name).to_owned(),
        read_queue_nums: read.parse().map_err(|_| bad())?,
        write_queue_nums: write.parse().map_err(|_| bad())?,
        perm: perm.parse().map_err(|_| bad())?,
        topic_filter_type: TopicFilterType::parse(filter).ok_or_else(bad)?,
        ..TopicConfig::default()
    })
}

/// Reads length-prefixed parts of an inflated body.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn i32(&mut self, part: &'static str) -> Result<i32, RegisterBodyError> {
        let (head, rest) = self.buf.split_first_chunk::<4>().ok_or(RegisterBodyError::Truncated { part })?;
        self.buf = rest;
        Ok(i32::from_be_bytes(*head))
    }

    fn part(&mut self, part: &'static str) -> Result<&'a [u8], RegisterBodyError> {
        let len = usize::try_from(self.i32(part)?).map_err(|_| RegisterBodyError::Truncated { part })?;
        if len > self.buf.len() {
            return Err(RegisterBodyError::Truncated { part });
        }
        let (head, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(head)
    }
}

/// `CRC32(body) & 0x7FFFFFFF`, as `UtilAll.crc32` computes REGISTER_BROKER's `bodyCrc32`.
pub fn body_crc32(body: &[u8]) -> i32 {
    // The mask leaves 31 bits, so the value always fits a non-negative i32.
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// Brokers and clusters (`ClusterInfo`), the GET_BROKER_CLUSTER_INFO (106) response body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterInfo {
    /// brokerName → the group's addresses.
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// cluster → brokerNames.
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

/// `brokerAddrs` inside may use fastjson's unquoted integer keys; [`JsonBody::decode`] accepts them.
impl JsonBody for ClusterInfo {
    const NAME: &'static str = "ClusterInfo";
}

/// A set of topic names (`TopicList`): GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicList {
    /// Set only by broker-side topic lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_addr: Option<String>,
    /// The topics.
    pub topic_list: BTreeSet<String>,
}

impl JsonBody for TopicList {
    const NAME: &'static str = "TopicList";
}

/// A flat key → value table (`KVTable`): one KV-config namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KvTable {
    /// key → value.
    pub table: BTreeMap<String, String>,
}

impl JsonBody for KvTable {
    const NAME: &'static str = "KVTable";
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::topic::perm;

    fn body(topics: &[(&str, i32, i32)]) -> RegisterBrokerBody {
        let mut wrapper = TopicConfigSerializeWrapper {
            data_version: DataVersion { counter: 3, timestamp: 1_700_000_000_000 },
            ..Default::default()
        };
        for (name, read, write) in topics {
            let config = TopicConfig {
                read_queue_nums: *read,
                write_queue_nums: *write,
                perm: perm::READ_WRITE,
                ..TopicConfig::new(*name)
            };
            wrapper.topic_config_table.insert((*name).to_owned(), config);
        }
        RegisterBrokerBody { filter_server_list: vec![], topic_config_serialize_wrapper: wrapper }
    }

    #[test]
    fn json_form_matches_java() {
        let json = String::from_utf8(body(&[("T", 4, 4)]).encode_body(false).expect("encode")).expect("utf8");
        assert_eq!(
            json,
            concat!(
                r#"{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},"#,
                r#""topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","#,
                r#""topicName":"T","topicSysFlag":0,"writeQueueNums":4}}}}"#
            )
        );
        assert_eq!(RegisterBrokerBody::decode_body(json.as_bytes(), false).expect("decode"), body(&[("T", 4, 4)]));
    }

    #[test]
    fn compressed_form_round_trips_and_matches_the_layout() {
        let original = body(&[("A", 8, 8), ("B", 2, 1)]);
        let bytes = original.encode_body(true).expect("encode");
        assert_eq!(RegisterBrokerBody::decode_body(&bytes, true).expect("decode"), original);

        let mut plain = Vec::new();
        flate2::read::ZlibDecoder::new(&bytes[..]).read_to_end(&mut plain).expect("zlib");
        let dv = br#"{"counter":3,"timestamp":1700000000000}"#;
        let mut expected = Vec::new();
        expected.extend_from_slice(&(dv.len() as i32).to_be_bytes());
        expected.extend_from_slice(dv);
        expected.extend_from_slice(&2i32.to_be_bytes());
        for entry in ["A 8 8 6 SINGLE_TAG", "B 2 1 6 SINGLE_TAG"] {
            expected.extend_from_slice(&(entry.len() as i32).to_be_bytes());
            expected.extend_from_slice(entry.as_bytes());
        }
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(b"[]");
        assert_eq!(plain, expected);
    }

    fn deflate(plain: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(plain).expect("write");
        e.finish().expect("finish")
    }

    #[test]
    fn compressed_5x_entries_with_attributes_are_accepted() {
        let dv = br#"{"counter":1,"stateVersion":0,"timestamp":5}"#;
        let entry = br#"T 4 4 6 SINGLE_TAG {"+message.type":"NORMAL"}"#;
        let mut plain = Vec::new();
        plain.extend_from_slice(&(dv.len() as i32).to_be_bytes());
        plain.extend_from_slice(dv);
        plain.extend_from_slice(&1i32.to_be_bytes());
        plain.extend_from_slice(&(entry.len() as i32).to_be_bytes());
        plain.extend_from_slice(entry);
        plain.extend_from_slice(&4i32.to_be_bytes());
        plain.extend_from_slice(b"null");
        let decoded = RegisterBrokerBody::decode_compressed(&deflate(&plain));
        // `null` is not a list: fastjson would give null, we refuse rather than guess.
        assert!(decoded.is_err());
        let n = plain.len();
        plain.truncate(n - 8);
        plain.extend_from_slice(&2i32.to_be_bytes());
        plain.extend_from_slice(b"[]");
        let decoded = RegisterBrokerBody::decode_compressed(&deflate(&plain)).expect("decode");
        assert_eq!(decoded.topic_config_serialize_wrapper.topic_config_table["T"].read_queue_nums, 4);
    }

    #[test]
    fn corrupt_compressed_bodies_are_errors() {
        assert!(matches!(RegisterBrokerBody::decode_compressed(b"not zlib"), Err(RegisterBodyError::Inflate(_))));
        let valid = deflate(&[]);
        assert!(matches!(RegisterBrokerBody::decode_compressed(&valid), Err(RegisterBodyError::Truncated { .. })));
        let mut plain = Vec::new();
        plain.extend_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(
            RegisterBrokerBody::decode_compressed(&deflate(&plain)),
            Err(RegisterBodyError::Truncated { part: "dataVersion" })
        ));
        let mut plain = Vec::new();
        plain.extend_from_slice(&2i32.to_be_bytes());
        plain.extend_from_slice(b"{}");
        plain.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            RegisterBrokerBody::decode_compressed(&deflate(&plain)),
            Err(RegisterBodyError::Truncated { part: "topicConfig" })
        ));
        let mut plain = Vec::new();
        plain.extend_from_slice(&2i32.to_be_bytes());
        plain.extend_from_slice(b"{}");
        plain.extend_from_slice(&1i32.to_be_bytes());
        plain.extend_from_slice(&5i32.to_be_bytes());
        plain.extend_from_slice(b"T 4 x");
        assert!(matches!(
            RegisterBrokerBody::decode_compressed(&deflate(&plain)),
            Err(RegisterBodyError::BadTopicConfig { .. })
        ));
    }

    #[test]
    fn inflation_is_bounded() {
        let bomb = deflate(&vec![0u8; REGISTER_BROKER_BODY_INFLATED_SIZE_MAX_BYTES + 1]);
        assert!(matches!(RegisterBrokerBody::decode_compressed(&bomb), Err(RegisterBodyError::TooLarge { .. })));
    }

    #[test]
    fn body_crc32_matches_java_util_all() {
        // java.util.zip.CRC32 of "123456789" is 0xCBF43926; UtilAll masks the sign bit.
        assert_eq!(body_crc32(b"123456789"), 0x4BF4_3926);
        assert_eq!(body_crc32(b""), 0);
    }

    #[test]
    fn cluster_info_and_lists_match_java() {
        let mut info = ClusterInfo::default();
        info.broker_addr_table.insert(
            "broker-a".into(),
            BrokerData {
                broker_addrs: BTreeMap::from([(0, "h:1".to_owned())]),
                broker_name: "broker-a".into(),
                cluster: "C".into(),
                enable_acting_master: false,
            },
        );
        info.cluster_addr_table.insert("C".into(), BTreeSet::from(["broker-a".to_owned()]));
        let json = String::from_utf8(info.encode().expect("encode")).expect("utf8");
        assert_eq!(
            json,
            concat!(
                r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"h:1"},"brokerName":"broker-a","cluster":"C","#,
                r#""enableActingMaster":false}},"clusterAddrTable":{"C":["broker-a"]}}"#
            )
        );
        let fastjson = r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"h:1"},"brokerName":"broker-a","cluster":"C"}},"clusterAddrTable":{"C":["broker-a"]}}"#;
        assert_eq!(ClusterInfo::decode(fastjson.as_bytes()).expect("decode"), info);

        let list = TopicList { broker_addr: None, topic_list: BTreeSet::from(["a".to_owned(), "b".to_owned()]) };
        assert_eq!(list.encode().expect("encode"), br#"{"topicList":["a","b"]}"#);
        let kv = KvTable { table: BTreeMap::from([("k".to_owned(), "v".to_owned())]) };
        assert_eq!(kv.encode().expect("encode"), br#"{"table":{"k":"v"}}"#);
    }

    proptest! {
        #[test]
        fn compressed_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = RegisterBrokerBody::decode_compressed(&bytes);
            let _ = RegisterBrokerBody::decode_compressed(&deflate(&bytes));
        }

        #[test]
        fn compressed_round_trips(
            topics in proptest::collection::btree_map("[A-Za-z0-9_%|-]{1,20}", (0i32..1024, 0i32..1024, 0i32..8), 0..20),
            counter in any::<i64>(),
        ) {
            let mut original = body(&[]);
            original.topic_config_serialize_wrapper.data_version.counter = counter;
            for (name, (read, write, p)) in &topics {
                let config = TopicConfig { read_queue_nums: *read, write_queue_nums: *write, perm: *p, ..TopicConfig::new(name.clone()) };
                original.topic_config_serialize_wrapper.topic_config_table.insert(name.clone(), config);
            }
            let bytes = original.encode_body(true).expect("encode");
            prop_assert_eq!(RegisterBrokerBody::decode_body(&bytes, true).expect("decode"), original);
        }
    }
}
