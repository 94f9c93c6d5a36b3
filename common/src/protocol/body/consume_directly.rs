//! `ConsumeMessageDirectlyResult`: a consumer's answer to CONSUME_MESSAGE_DIRECTLY (309), the
//! request an admin sends (through the broker holding the message) to have one client hand one
//! stored message to its listener (`mqadmin queryMsgById -g <group> -d <clientId>`, the
//! dashboard's "resend message").
//!
//! Keys in fastjson's order: `autoCommit`, `consumeResult`, `order`, `remark`, `spentTimeMills`.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;

/// How the listener took the message (`CMResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CmResult {
    /// Consumed.
    CrSuccess,
    /// Asked to be consumed later (concurrent RECONSUME_LATER, orderly SUSPEND).
    CrLater,
    /// Orderly ROLLBACK.
    CrRollback,
    /// Orderly COMMIT.
    CrCommit,
    /// The listener failed (panicked); `remark` says how.
    CrThrowException,
    /// The listener returned nothing.
    CrReturnNull,
}

/// The outcome of one direct consumption (`ConsumeMessageDirectlyResult`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeMessageDirectlyResult {
    /// Orderly consumers commit on their own (always true for concurrent ones).
    pub auto_commit: bool,
    /// What the listener said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_result: Option<CmResult>,
    /// The consumer is orderly.
    pub order: bool,
    /// Why the listener failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remark: Option<String>,
    /// Listener time, ms (Java's spelling).
    pub spent_time_mills: i64,
}

impl JsonBody for ConsumeMessageDirectlyResult {
    const NAME: &'static str = "ConsumeMessageDirectlyResult";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_what_java_does() {
        let java = r#"{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":3}"#;
        let r = ConsumeMessageDirectlyResult::decode(java.as_bytes()).unwrap();
        assert_eq!(r.consume_result, Some(CmResult::CrSuccess));
        assert!(r.auto_commit && !r.order && r.spent_time_mills == 3 && r.remark.is_none());
        assert_eq!(String::from_utf8(r.encode().unwrap()).unwrap(), java);
        let failed = r#"{"autoCommit":true,"consumeResult":"CR_THROW_EXCEPTION","order":true,"remark":"boom","spentTimeMills":0}"#;
        let f = ConsumeMessageDirectlyResult::decode(failed.as_bytes()).unwrap();
        assert_eq!((f.consume_result, f.remark.as_deref()), (Some(CmResult::CrThrowException), Some("boom")));
        assert!(ConsumeMessageDirectlyResult::decode(br#"{"consumeResult":"CR_MAYBE"}"#).is_err());
    }
}
