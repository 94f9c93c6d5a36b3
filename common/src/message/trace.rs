//! Message trace records (RocketMQ 4.9's `TraceDataEncoder` layout), as a pure codec.
//!
//! A traced producer or consumer writes what happened to each message (sent, about to be consumed,
//! consumed, transaction ended) as [`TraceContext`]s; a dispatcher packs many of them into the body
//! of one message to the trace topic (`RMQ_SYS_TRACE_TOPIC` by default), keyed by every traced
//! message id and user key, so `queryMsgTraceById` finds them through the IndexFile.
//!
//! ```text
//! body    = context*                      each context ends with FIELD_SPLITOR (U+0002)
//! Pub     = Pub ts region group topic msgId tags keys storeHost bodyLength costTime msgType offsetMsgId success
//! SubBefore (one per message) = SubBefore ts region group requestId msgId retryTimes keys
//! SubAfter  (one per message) = SubAfter requestId msgId costTime success keys contextCode ts group
//! EndTransaction = EndTransaction ts region group topic msgId tags keys storeHost msgType transactionId state fromCheck
//!                                         fields separated by CONTENT_SPLITOR (U+0001)
//! ```
//!
//! Invariants: [`decode`] never panics and skips a context it cannot read (too few fields, a number
//! that does not parse) instead of failing the rest, as Java's decoder would throw for the whole
//! body; fields are written as Java's `StringBuilder.append` writes them (`true`/`false`, decimal
//! numbers, enum names, and an absent text as `null`, which decodes back to empty: Java's
//! `String.split` drops trailing empty fields, so an empty last field would make Java's decoder
//! index past the end); a field is never allowed to contain either separator (they are replaced by
//! a space), so one context can never split into two.

use std::fmt::Write as _;

use serde::Serialize;

use super::properties::KEY_SEPARATOR;

/// Separates the fields of a context (`TraceConstants.CONTENT_SPLITOR`).
pub const CONTENT_SPLITOR: char = '\u{1}';
/// Ends each context (`TraceConstants.FIELD_SPLITOR`).
pub const FIELD_SPLITOR: char = '\u{2}';
/// The default trace topic (`TopicValidator.RMQ_SYS_TRACE_TOPIC`).
pub const TRACE_TOPIC_DEFAULT: &str = super::validate::RMQ_SYS_TRACE_TOPIC;
/// Region written when the broker named none (`MixAll.DEFAULT_TRACE_REGION_ID`).
pub const TRACE_REGION_DEFAULT: &str = "DefaultRegion";
/// Producer group prefix of the trace dispatcher's own producer (`TraceConstants.GROUP_NAME_PREFIX`).
pub const TRACE_PRODUCER_GROUP_PREFIX: &str = "_INNER_TRACE_PRODUCER";

/// What a context records (`TraceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceType {
    /// A send and its result.
    Pub,
    /// A batch handed to a listener.
    SubBefore,
    /// The listener's outcome.
    SubAfter,
    /// A transaction's commit or rollback.
    EndTransaction,
}

impl TraceType {
    /// Java's enum name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pub => "Pub",
            Self::SubBefore => "SubBefore",
            Self::SubAfter => "SubAfter",
            Self::EndTransaction => "EndTransaction",
        }
    }

    fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "Pub" => Self::Pub,
            "SubBefore" => Self::SubBefore,
            "SubAfter" => Self::SubAfter,
            "EndTransaction" => Self::EndTransaction,
            _ => return None,
        })
    }
}

/// The kind of a traced message (`MessageType`, written by ordinal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceMessageType {
    /// `Normal_Msg`.
    #[default]
    Normal,
    /// `Trans_Msg_Half`: a transaction's prepared half.
    TransHalf,
    /// `Trans_msg_Commit`.
    TransCommit,
    /// `Delay_Msg`: sent with a delay level.
    Delay,
}

impl TraceMessageType {
    /// Java's ordinal.
    pub fn ordinal(self) -> u8 {
        match self {
            Self::Normal => 0,
            Self::TransHalf => 1,
            Self::TransCommit => 2,
            Self::Delay => 3,
        }
    }

    fn from_ordinal(s: &str) -> Option<Self> {
        Some(match s.parse::<u8>().ok()? {
            0 => Self::Normal,
            1 => Self::TransHalf,
            2 => Self::TransCommit,
            3 => Self::Delay,
            _ => return None,
        })
    }
}

/// How a listener call ended (`ConsumeReturnType`), written by ordinal as a SubAfter's contextCode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeReturnType {
    /// `SUCCESS`.
    Success,
    /// `TIME_OUT`: the call outlasted the consume timeout.
    TimeOut,
    /// `EXCEPTION`: the listener panicked.
    Exception,
    /// `RETURNNULL`.
    ReturnNull,
    /// `FAILED`: reconsume later / suspend.
    Failed,
}

impl ConsumeReturnType {
    /// Java's ordinal.
    pub fn ordinal(self) -> i32 {
        match self {
            Self::Success => 0,
            Self::TimeOut => 1,
            Self::Exception => 2,
            Self::ReturnNull => 3,
            Self::Failed => 4,
        }
    }
}

/// One message in a context (`TraceBean`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceBean {
    /// Topic.
    pub topic: String,
    /// The message id (UNIQ_KEY when the producer set one).
    pub msg_id: String,
    /// offsetMsgId (Pub).
    pub offset_msg_id: String,
    /// Tags.
    pub tags: String,
    /// Keys, space-separated.
    pub keys: String,
    /// The broker address (Pub, EndTransaction).
    pub store_host: String,
    /// Body length in bytes (Pub).
    pub body_length: i64,
    /// Reconsume count (SubBefore).
    pub retry_times: i32,
    /// Message kind (Pub, EndTransaction).
    pub msg_type: TraceMessageType,
    /// Transaction id (EndTransaction).
    pub transaction_id: String,
    /// `COMMIT_MESSAGE`, `ROLLBACK_MESSAGE` or `UNKNOW` (EndTransaction).
    pub transaction_state: String,
    /// Whether the end answered a broker's check (EndTransaction).
    pub from_transaction_check: bool,
}

/// One traced event (`TraceContext`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// What it records.
    pub trace_type: TraceType,
    /// When, ms since the epoch.
    pub timestamp_ms: i64,
    /// The broker's region.
    pub region_id: String,
    /// Producer or consumer group.
    pub group_name: String,
    /// Send time, or listener time per message, ms.
    pub cost_time_ms: i64,
    /// SEND_OK, or the listener consumed.
    pub success: bool,
    /// Pairs a SubBefore with its SubAfter.
    pub request_id: String,
    /// [`ConsumeReturnType`] ordinal (SubAfter).
    pub context_code: i32,
    /// The messages (Pub and EndTransaction carry one).
    pub beans: Vec<TraceBean>,
}

impl TraceContext {
    /// An empty context of `trace_type`.
    pub fn new(trace_type: TraceType, timestamp_ms: i64, group_name: &str) -> Self {
        TraceContext {
            trace_type,
            timestamp_ms,
            region_id: TRACE_REGION_DEFAULT.to_owned(),
            group_name: group_name.to_owned(),
            cost_time_ms: 0,
            success: true,
            request_id: String::new(),
            context_code: 0,
            beans: Vec::new(),
        }
    }
}

/// Appends `field` with any separator in it replaced, then CONTENT_SPLITOR.
fn put(out: &mut String, field: impl std::fmt::Display) {
    let start = out.len();
    let _ = write!(out, "{field}");
    if out[start..].contains([CONTENT_SPLITOR, FIELD_SPLITOR]) {
        let clean: String =
            out[start..].chars().map(|c| if c == CONTENT_SPLITOR || c == FIELD_SPLITOR { ' ' } else { c }).collect();
        out.truncate(start);
        out.push_str(&clean);
    }
    out.push(CONTENT_SPLITOR);
}

/// Appends a text field: `null` when it is empty, as Java appends an absent `String`.
fn put_text(out: &mut String, field: &str) {
    put(out, if field.is_empty() { NULL_TEXT } else { field });
}

/// What Java's `StringBuilder.append((String) null)` writes.
const NULL_TEXT: &str = "null";

/// Replaces the trailing CONTENT_SPLITOR of the last field with FIELD_SPLITOR.
fn end(out: &mut String) {
    if out.ends_with(CONTENT_SPLITOR) {
        out.pop();
    }
    out.push(FIELD_SPLITOR);
}

/// The opening of Pub, SubBefore and EndTransaction records: type, time, region, group.
fn put_context(out: &mut String, ctx: &TraceContext) {
    put(out, ctx.trace_type.name());
    put(out, ctx.timestamp_ms);
    put_text(out, &ctx.region_id);
    put_text(out, &ctx.group_name);
}

/// The message of Pub and EndTransaction records: topic, msgId, tags, keys, storeHost.
fn put_message(out: &mut String, bean: &TraceBean) {
    put_text(out, &bean.topic);
    put_text(out, &bean.msg_id);
    put_text(out, &bean.tags);
    put_text(out, &bean.keys);
    put_text(out, &bean.store_host);
}

/// Appends `ctx` to `out` in Java's layout; a context without beans writes nothing. Returns the
/// keys the trace message must carry for it: every bean's msgId and user keys.
pub fn encode_into(ctx: &TraceContext, out: &mut String) -> Vec<String> {
    let Some(first) = ctx.beans.first() else { return Vec::new() };
    match ctx.trace_type {
        TraceType::Pub => {
            put_context(out, ctx);
            put_message(out, first);
            put(out, first.body_length);
            put(out, ctx.cost_time_ms);
            put(out, first.msg_type.ordinal());
            put_text(out, &first.offset_msg_id);
            put(out, ctx.success);
            end(out);
        }
        TraceType::SubBefore => {
            for bean in &ctx.beans {
                put_context(out, ctx);
                put_text(out, &ctx.request_id);
                put_text(out, &bean.msg_id);
                put(out, bean.retry_times);
                put_text(out, &bean.keys);
                end(out);
            }
        }
        TraceType::SubAfter => {
            for bean in &ctx.beans {
                put(out, ctx.trace_type.name());
                put_text(out, &ctx.request_id);
                put_text(out, &bean.msg_id);
                put(out, ctx.cost_time_ms);
                put(out, ctx.success);
                put_text(out, &bean.keys);
                put(out, ctx.context_code);
                put(out, ctx.timestamp_ms);
                put_text(out, &ctx.group_name);
                end(out);
            }
        }
        TraceType::EndTransaction => {
            put_context(out, ctx);
            put_message(out, first);
            put(out, first.msg_type.ordinal());
            put_text(out, &first.transaction_id);
            put_text(out, &first.transaction_state);
            put(out, first.from_transaction_check);
            end(out);
        }
    }
    let mut keys = Vec::new();
    for bean in &ctx.beans {
        if !bean.msg_id.is_empty() {
            keys.push(bean.msg_id.clone());
        }
        keys.extend(bean.keys.split(KEY_SEPARATOR).filter(|k| !k.is_empty()).map(str::to_owned));
    }
    keys
}

/// Every context of a trace message body that parses, in order (`decoderFromTraceDataString`).
/// SubBefore and SubAfter come back with one bean per context, as they were written.
pub fn decode(data: &str) -> Vec<TraceContext> {
    data.split(FIELD_SPLITOR).filter(|c| !c.is_empty()).filter_map(decode_context).collect()
}

fn decode_context(text: &str) -> Option<TraceContext> {
    let f: Vec<&str> = text.split(CONTENT_SPLITOR).collect();
    let trace_type = TraceType::from_name(f.first()?)?;
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<i64>().ok());
    let text_at = |i: usize| f.get(i).filter(|s| **s != NULL_TEXT).map(|s| (*s).to_owned()).unwrap_or_default();
    let flag = |i: usize, default: bool| f.get(i).map_or(default, |s| s.parse().unwrap_or(default));
    let mut ctx = TraceContext::new(trace_type, 0, "");
    // What `put_context` and `put_message` wrote, at the same places.
    let context = |ctx: &mut TraceContext| -> Option<()> {
        ctx.timestamp_ms = num(1)?;
        ctx.region_id = text_at(2);
        ctx.group_name = text_at(3);
        Some(())
    };
    let message = || TraceBean {
        topic: text_at(4),
        msg_id: text_at(5),
        tags: text_at(6),
        keys: text_at(7),
        store_host: text_at(8),
        ..TraceBean::default()
    };
    match trace_type {
        TraceType::Pub => {
            if f.len() < 12 {
                return None;
            }
            context(&mut ctx)?;
            ctx.cost_time_ms = num(10)?;
            let mut bean = TraceBean {
                body_length: num(9)?,
                msg_type: TraceMessageType::from_ordinal(f[11]).unwrap_or_default(),
                ..message()
            };
            // 13 fields: 4.x before offsetMsgId; 14: 4.9; 15+: 5.x adds the client host.
            if f.len() == 13 {
                ctx.success = flag(12, false);
            } else if f.len() >= 14 {
                bean.offset_msg_id = text_at(12);
                ctx.success = flag(13, false);
            }
            ctx.beans.push(bean);
        }
        TraceType::SubBefore => {
            if f.len() < 8 {
                return None;
            }
            context(&mut ctx)?;
            ctx.request_id = text_at(4);
            let retry_times = i32::try_from(num(6)?).ok()?;
            ctx.beans.push(TraceBean { msg_id: text_at(5), retry_times, keys: text_at(7), ..TraceBean::default() });
        }
        TraceType::SubAfter => {
            if f.len() < 6 {
                return None;
            }
            ctx.request_id = text_at(1);
            ctx.cost_time_ms = num(3)?;
            ctx.success = flag(4, false);
            if f.len() >= 7 {
                ctx.context_code = num(6).and_then(|c| i32::try_from(c).ok()).unwrap_or(0);
            }
            if f.len() >= 8 {
                ctx.timestamp_ms = num(7).unwrap_or(0);
            }
            if f.len() >= 9 {
                ctx.group_name = text_at(8);
            }
            ctx.beans.push(TraceBean { msg_id: text_at(2), keys: text_at(5), ..TraceBean::default() });
        }
        TraceType::EndTransaction => {
            if f.len() < 13 {
                return None;
            }
            context(&mut ctx)?;
            ctx.beans.push(TraceBean {
                msg_type: TraceMessageType::from_ordinal(f[9]).unwrap_or_default(),
                transaction_id: text_at(10),
                transaction_state: text_at(11),
                from_transaction_check: flag(12, false),
                ..message()
            });
        }
    }
    Some(ctx)
}

/// One row of `queryMsgTraceById` (`TraceView`): a context about one message id. Serialized (the
/// admin HTTP API's trace records) without the id, which the request names, and without
/// `from_transaction_check`, which Java's view does not show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceView {
    /// `Pub`, `SubBefore`, `SubAfter` or `EndTransaction`.
    #[serde(serialize_with = "serialize_trace_type")]
    pub trace_type: TraceType,
    /// The message id.
    #[serde(skip)]
    pub msg_id: String,
    /// Producer or consumer group.
    pub group_name: String,
    /// The tracing client: the IP of the trace message's born host (`getBornHostString`).
    pub client_host: String,
    /// When, ms since the epoch.
    pub timestamp_ms: i64,
    /// Send or per-message listener time, ms.
    pub cost_time_ms: i64,
    /// `success` or `failed`.
    pub status: &'static str,
    /// Topic (Pub, EndTransaction).
    pub topic: String,
    /// Tags.
    pub tags: String,
    /// Keys.
    pub keys: String,
    /// offsetMsgId (Pub).
    pub offset_msg_id: String,
    /// Broker address (Pub, EndTransaction).
    pub store_host: String,
    /// The transaction's end state (EndTransaction).
    pub transaction_state: String,
    /// Whether the end answered a broker's check (EndTransaction).
    #[serde(skip)]
    pub from_transaction_check: bool,
}

fn serialize_trace_type<S: serde::Serializer>(trace_type: &TraceType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(trace_type.name())
}

/// The rows about `msg_id` in one trace message body (`TraceView.decodeFromTraceTransData`);
/// `client_host` is that message's born host.
pub fn views_of(msg_id: &str, data: &str, client_host: &str) -> Vec<TraceView> {
    decode(data)
        .into_iter()
        .filter_map(|ctx| {
            let bean = ctx.beans.into_iter().next()?;
            (bean.msg_id == msg_id).then(|| TraceView {
                trace_type: ctx.trace_type,
                msg_id: bean.msg_id,
                group_name: ctx.group_name,
                client_host: client_host.to_owned(),
                timestamp_ms: ctx.timestamp_ms,
                cost_time_ms: ctx.cost_time_ms,
                status: if ctx.success { "success" } else { "failed" },
                topic: bean.topic,
                tags: bean.tags,
                keys: bean.keys,
                offset_msg_id: bean.offset_msg_id,
                store_host: bean.store_host,
                transaction_state: bean.transaction_state,
                from_transaction_check: bean.from_transaction_check,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pub_ctx() -> TraceContext {
        let mut ctx = TraceContext::new(TraceType::Pub, 1_700_000_000_123, "pg");
        ctx.cost_time_ms = 7;
        ctx.beans.push(TraceBean {
            topic: "T".into(),
            msg_id: "ID1".into(),
            offset_msg_id: "OFF1".into(),
            tags: "TagA".into(),
            keys: "k1 k2".into(),
            store_host: "127.0.0.1:10911".into(),
            body_length: 12,
            ..TraceBean::default()
        });
        ctx
    }

    #[test]
    fn pub_is_written_in_java_layout_and_keyed_by_id_and_keys() {
        let mut out = String::new();
        let keys = encode_into(&pub_ctx(), &mut out);
        assert_eq!(
            out,
            "Pub\u{1}1700000000123\u{1}DefaultRegion\u{1}pg\u{1}T\u{1}ID1\u{1}TagA\u{1}k1 k2\u{1}127.0.0.1:10911\u{1}12\
             \u{1}7\u{1}0\u{1}OFF1\u{1}true\u{2}"
        );
        assert_eq!(keys, ["ID1", "k1", "k2"]);
        assert_eq!(decode(&out), vec![pub_ctx()]);
    }

    #[test]
    fn every_type_round_trips_one_bean_per_context() {
        let mut before = TraceContext::new(TraceType::SubBefore, 5, "cg");
        before.request_id = "REQ".into();
        for (id, retry) in [("A", 0), ("B", 3)] {
            before.beans.push(TraceBean {
                msg_id: id.into(),
                retry_times: retry,
                keys: "k".into(),
                ..TraceBean::default()
            });
        }
        let mut after = before.clone();
        after.trace_type = TraceType::SubAfter;
        after.timestamp_ms = 9;
        after.cost_time_ms = 4;
        after.success = false;
        after.context_code = ConsumeReturnType::Failed.ordinal();
        for b in &mut after.beans {
            b.retry_times = 0;
        }
        let mut tx = TraceContext::new(TraceType::EndTransaction, 11, "pg");
        tx.beans.push(TraceBean {
            topic: "T".into(),
            msg_id: "X".into(),
            store_host: "h:1".into(),
            msg_type: TraceMessageType::TransCommit,
            transaction_id: "TX".into(),
            transaction_state: "COMMIT_MESSAGE".into(),
            from_transaction_check: true,
            ..TraceBean::default()
        });
        let mut out = String::new();
        for ctx in [&before, &after, &tx] {
            encode_into(ctx, &mut out);
        }
        let decoded = decode(&out);
        assert_eq!(decoded.len(), 5, "two SubBefore, two SubAfter, one EndTransaction");
        let split = |ctx: &TraceContext| -> Vec<TraceContext> {
            ctx.beans.iter().map(|b| TraceContext { beans: vec![b.clone()], ..ctx.clone() }).collect()
        };
        let mut expected = split(&before);
        for c in &mut expected {
            c.region_id = TRACE_REGION_DEFAULT.into();
        }
        let mut after_split = split(&after);
        for c in &mut after_split {
            c.region_id = TRACE_REGION_DEFAULT.into();
        }
        expected.extend(after_split);
        expected.push(tx);
        assert_eq!(decoded, expected);
    }

    /// Java's `String.split` drops trailing empty fields: with every optional text empty, each
    /// record must still have all its fields, or Java's decoder reads past the end.
    #[test]
    fn empty_texts_are_written_as_null_so_java_sees_every_field() {
        let java_split = |record: &str| -> usize {
            let mut fields: Vec<&str> = record.split(CONTENT_SPLITOR).collect();
            while fields.last().is_some_and(|f| f.is_empty()) {
                fields.pop();
            }
            fields.len()
        };
        let bare = TraceBean { msg_id: "ID".into(), ..TraceBean::default() };
        for (t, fields) in
            [(TraceType::Pub, 14), (TraceType::SubBefore, 8), (TraceType::SubAfter, 9), (TraceType::EndTransaction, 13)]
        {
            let mut ctx = TraceContext::new(t, 1, "");
            ctx.region_id.clear();
            ctx.beans.push(bare.clone());
            let mut out = String::new();
            let keys = encode_into(&ctx, &mut out);
            assert_eq!(keys, ["ID"], "{t:?}: no empty key");
            let record = out.strip_suffix(FIELD_SPLITOR).expect("one record");
            assert_eq!(java_split(record), fields, "{t:?}: {record:?}");
            let back = decode(&out);
            assert_eq!(back.len(), 1);
            assert!(back[0].beans[0].keys.is_empty() && back[0].beans[0].tags.is_empty(), "{t:?}: null reads as empty");
        }
    }

    #[test]
    fn separators_inside_fields_cannot_split_a_context() {
        let mut ctx = pub_ctx();
        ctx.beans[0].keys = "a\u{2}Pub\u{1}x".into();
        let mut out = String::new();
        encode_into(&ctx, &mut out);
        let decoded = decode(&out);
        assert_eq!(decoded.len(), 1);
        assert_eq!(decoded[0].beans[0].keys, "a Pub x");
    }

    #[test]
    fn older_and_newer_layouts_and_garbage_decode_without_panic() {
        // 4.x before offsetMsgId (13 fields) and 5.x with the client host (15 fields).
        let old = "Pub\u{1}1\u{1}r\u{1}g\u{1}T\u{1}ID\u{1}\u{1}\u{1}h\u{1}3\u{1}2\u{1}3\u{1}false\u{2}";
        let new = "Pub\u{1}1\u{1}r\u{1}g\u{1}T\u{1}ID\u{1}\u{1}\u{1}h\u{1}3\u{1}2\u{1}0\u{1}OFF\u{1}true\u{1}c:1\u{2}";
        let d = decode(&format!("{old}{new}"));
        assert_eq!(d.len(), 2);
        assert!(!d[0].success && d[0].beans[0].msg_type == TraceMessageType::Delay);
        assert!(d[1].success && d[1].beans[0].offset_msg_id == "OFF");
        // A 6-field SubAfter (before contextCode) still reads.
        assert_eq!(decode("SubAfter\u{1}R\u{1}ID\u{1}5\u{1}true\u{1}k\u{2}")[0].cost_time_ms, 5);
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let alphabet = ['P', 'u', 'b', '\u{1}', '\u{2}', '1', '-', 'x', 'S', 'é'];
        for _ in 0..5_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 64) as usize;
            let s: String = (0..len).map(|i| alphabet[((seed >> (i % 60)) % alphabet.len() as u64) as usize]).collect();
            let _ = decode(&s);
            let _ = views_of("x", &s, "h");
        }
        assert!(
            decode("Pub\u{1}notanumber\u{1}r\u{1}g\u{1}T\u{1}ID\u{1}\u{1}\u{1}h\u{1}3\u{1}2\u{1}0\u{2}").is_empty()
        );
    }

    #[test]
    fn views_keep_the_asked_id_only() {
        let mut out = String::new();
        encode_into(&pub_ctx(), &mut out);
        let mut other = pub_ctx();
        other.beans[0].msg_id = "ID2".into();
        other.success = false;
        encode_into(&other, &mut out);
        let views = views_of("ID2", &out, "10.0.0.1:5555");
        assert_eq!(views.len(), 1);
        assert_eq!((views[0].status, views[0].client_host.as_str()), ("failed", "10.0.0.1:5555"));
        assert!(views_of("nope", &out, "h").is_empty());
    }
}
