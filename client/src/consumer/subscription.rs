//! Subscriptions: the `SubscriptionData` a consumer registers per topic (`FilterAPI.buildSubscriptionData`)
//! and the client-side tag re-check (`PullAPIWrapper.processPullResult`).
//!
//! The broker filters by tag **hash code** only (the ConsumeQueue stores codes, not strings), so two
//! tags with equal Java `String.hashCode` ("Aa" and "BB") both pass it; the client therefore checks
//! the tag string of every pulled message again. Invariant: a message reaches a listener only if its
//! subscription is `*` or its tag is one of the subscribed tags, exactly.

use raftmq_common::filter::EXPRESSION_TYPE_SQL92;
use raftmq_common::filter::FilterError;
use raftmq_common::filter::SqlFilter;
use raftmq_common::java::string_hash_code;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::body::heartbeat::SUB_ALL;
use raftmq_common::protocol::body::heartbeat::SubscriptionData;

/// `ExpressionType.TAG`.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";

/// How a subscription selects messages (`MessageSelector`): by tag, or by a SQL92 expression over
/// the message's properties (evaluated by the broker; it needs `enablePropertyFilter = true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageSelector {
    /// `"TagA || TagB"` or `"*"` (`MessageSelector.byTag`).
    Tag(String),
    /// A SQL92 expression, e.g. `"a > 5 AND region = 'eu'"` (`MessageSelector.bySql`).
    Sql92(String),
}

impl MessageSelector {
    /// The subscription of `topic` this selector makes, at `sub_version`.
    pub fn subscription_data(&self, topic: &str, sub_version: i64) -> SubscriptionData {
        match self {
            MessageSelector::Tag(expression) => build_subscription_data(topic, expression, sub_version),
            MessageSelector::Sql92(expression) => SubscriptionData {
                topic: topic.to_owned(),
                sub_string: expression.trim().to_owned(),
                sub_version,
                expression_type: EXPRESSION_TYPE_SQL92.to_owned(),
                ..SubscriptionData::default()
            },
        }
    }

    /// Checks a SQL92 expression before the consumer starts (the broker would refuse it on every pull).
    pub fn validate(&self) -> Result<(), FilterError> {
        match self {
            MessageSelector::Tag(_) => Ok(()),
            MessageSelector::Sql92(expression) => SqlFilter::compile(expression).map(|_| ()),
        }
    }
}

/// Parses `"TagA || TagB"` (or `"*"`, or empty = `*`) into a TAG subscription of `topic` with version
/// `sub_version` (Java uses the clock in ms). Tags are trimmed; empty parts are skipped; codes are
/// Java `String.hashCode` of each tag, in order.
pub fn build_subscription_data(topic: &str, sub_string: &str, sub_version: i64) -> SubscriptionData {
    let trimmed = sub_string.trim();
    let mut data = SubscriptionData {
        topic: topic.to_owned(),
        sub_string: trimmed.to_owned(),
        sub_version,
        expression_type: EXPRESSION_TYPE_TAG.to_owned(),
        ..SubscriptionData::default()
    };
    if trimmed.is_empty() || trimmed == SUB_ALL {
        data.sub_string = SUB_ALL.to_owned();
        return data;
    }
    for tag in trimmed.split("||").map(str::trim).filter(|t| !t.is_empty()) {
        // Java's tagsSet is a HashSet: a repeated tag is registered once.
        if !data.tags_set.iter().any(|t| t == tag) {
            data.tags_set.push(tag.to_owned());
            data.code_set.push(string_hash_code(tag));
        }
    }
    data
}

/// Whether `msg` passes `sub` on the client: `*` (or a class-filter subscription) takes everything;
/// otherwise the message's tag string must be one of the subscribed tags. A SQL92 subscription has
/// no tags: the broker filtered it, the client takes what it returns (as Java's client does).
pub fn tag_matches(sub: &SubscriptionData, msg: &MessageExt) -> bool {
    if sub.tags_set.is_empty() || sub.class_filter_mode {
        return true;
    }
    msg.message.tags().is_some_and(|tag| sub.tags_set.iter().any(|t| t == tag))
}

#[cfg(test)]
mod tests {
    use raftmq_common::message::Message;

    use super::*;

    fn msg(tag: Option<&str>) -> MessageExt {
        let mut m = Message::new("T", &b"x"[..]);
        if let Some(t) = tag {
            m.set_tags(t);
        }
        MessageExt { message: m, ..Default::default() }
    }

    #[test]
    fn expressions_parse_like_filter_api() {
        let cases: &[(&str, &str, &[&str], &[i32])] = &[
            ("*", "*", &[], &[]),
            ("", "*", &[], &[]),
            ("  * ", "*", &[], &[]),
            ("TagA", "TagA", &["TagA"], &[2_598_919]),
            ("TagA || TagB", "TagA || TagB", &["TagA", "TagB"], &[2_598_919, 2_598_920]),
            ("TagA||TagA|| ||TagB ", "TagA||TagA|| ||TagB", &["TagA", "TagB"], &[2_598_919, 2_598_920]),
        ];
        for (input, sub_string, tags, codes) in cases {
            let s = build_subscription_data("T", input, 7);
            assert_eq!(s.sub_string, *sub_string, "{input:?}");
            assert_eq!(s.tags_set, *tags, "{input:?}");
            assert_eq!(s.code_set, *codes, "{input:?}");
            assert_eq!((s.topic.as_str(), s.sub_version, s.expression_type.as_str()), ("T", 7, "TAG"));
        }
    }

    #[test]
    fn re_check_drops_hash_collisions() {
        // "Aa" and "BB" share a Java hash code, so the broker lets both through.
        assert_eq!(string_hash_code("Aa"), string_hash_code("BB"));
        let sub = build_subscription_data("T", "Aa || TagB", 0);
        assert!(tag_matches(&sub, &msg(Some("Aa"))));
        assert!(tag_matches(&sub, &msg(Some("TagB"))));
        assert!(!tag_matches(&sub, &msg(Some("BB"))));
        assert!(!tag_matches(&sub, &msg(None)));
        let all = build_subscription_data("T", "*", 0);
        assert!(tag_matches(&all, &msg(None)) && tag_matches(&all, &msg(Some("BB"))));
    }
}
