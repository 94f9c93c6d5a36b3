//! GET_CONSUMER_LIST_BY_GROUP (38) response body (`GetConsumerListByGroupResponseBody`):
//! `{"consumerIdList":["ip@instance",...]}`, the client ids a consumer rebalances over.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;
use super::null_as_default;

/// The live consumers of a group, by client id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerListBody {
    /// Client ids (`ip@instanceName`).
    #[serde(deserialize_with = "null_as_default")]
    pub consumer_id_list: Vec<String>,
}

impl JsonBody for ConsumerListBody {
    const NAME: &'static str = "GetConsumerListByGroupResponseBody";
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protocol::body::testing::check_body;
    use crate::protocol::body::testing::text;

    #[test]
    fn consumer_list_satisfies_body_properties() {
        check_body(
            proptest::collection::vec(text(), 0..5)
                .prop_map(|consumer_id_list| ConsumerListBody { consumer_id_list })
                .boxed(),
        );
    }

    #[test]
    fn java_body_decodes() {
        let body = ConsumerListBody::decode(br#"{"consumerIdList":["10.0.0.1@1","10.0.0.2@2"]}"#).expect("decodes");
        assert_eq!(body.consumer_id_list, vec!["10.0.0.1@1", "10.0.0.2@2"]);
        assert_eq!(body.encode().unwrap(), br#"{"consumerIdList":["10.0.0.1@1","10.0.0.2@2"]}"#.to_vec());
    }
}
