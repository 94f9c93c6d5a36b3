//! QUERY_TOPIC_CONSUME_BY_WHO (300) response body (`GroupList`): `{"groupList":["g1",...]}`, the
//! consumer groups of a topic (online subscribers and groups with a committed offset). Java holds a
//! `HashSet`; ours is sorted, which a set's readers cannot tell apart.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::null_as_default;

/// Consumer group names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupList {
    /// The groups, each once.
    #[serde(deserialize_with = "null_as_default")]
    pub group_list: BTreeSet<String>,
}

impl JsonBody for GroupList {
    const NAME: &'static str = "GroupList";
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::testing::check_body;
    use crate::protocol::body::testing::text;

    #[test]
    fn group_list_satisfies_body_properties() {
        check_body(
            proptest::collection::btree_set(text(), 0..5).prop_map(|group_list| GroupList { group_list }).boxed(),
        );
    }

    #[test]
    fn java_body_decodes() {
        let body = GroupList::decode(br#"{"groupList":["b","a","b"]}"#).expect("decodes");
        assert_eq!(body.group_list.iter().map(String::as_str).collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(body.encode().unwrap(), br#"{"groupList":["a","b"]}"#.to_vec());
        assert_eq!(GroupList::decode(br#"{"groupList":null}"#).expect("null").group_list.len(), 0);
    }
}
