//! The history: every operation the workload and the nemesis performed, as JSONL (one [`Op`] a line).
//!
//! ```text
//! workload / nemesis ──Op (no index, no time)──▶ Recorder::record ──index, time──▶ history.jsonl
//! checkers ◀── read_history(history.jsonl) / Recorder::ops()
//! ```
//!
//! Rules the checkers rely on (docs/reliability.md#history-rules):
//! - Every operation is an `invoke` followed by exactly one completion of the same process and `f`:
//!   `ok` (it happened), `fail` (it definitely did not happen) or `info` (unknown: a timeout or a
//!   connection lost after sending). After an `info` the process id retires and a new one takes over.
//! - Send values are unique (`"<process>-<counter>"`), so a value names one attempted message.
//! - `index` is the position in the file and `time` the nanoseconds since the run started; both only
//!   grow, so file order is real-time order.
//! - Membership changes are `nemesis` ops of their own (`member remove broker-a n12 id 2`,
//!   `member add broker-a n100 id 4`); after every change and at the end of the final heal an
//!   instant `members <group> <node>…` record ([`members_value`]) states a group's members, and the
//!   last one of each group ([`final_members`]) is the membership the final checks compare.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::BufRead;
use std::io::BufReader;
use std::io::BufWriter;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use serde::Deserialize;
use serde::Serialize;

/// The process name of fault events.
pub const NEMESIS_PROCESS: &str = "nemesis";

/// Whether an op starts or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The operation started.
    Invoke,
    /// It happened.
    Ok,
    /// It definitely did not happen.
    Fail,
    /// Unknown outcome (timeout, connection lost after sending).
    Info,
}

/// What an op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpF {
    /// A producer send of one unique value; `ok` carries `queue` and `offset`.
    Send,
    /// A consumer poll; `ok` carries `queue` and the messages read in `msgs`.
    Read,
    /// The final drain of one queue from offset 0; `ok` carries every message of `queue`.
    FinalRead,
    /// A consumer committed `offset` for `queue`.
    CommitOffset,
    /// The broker's stored consumer offset of `queue` was observed to be `offset`.
    FetchOffset,
    /// A deliberate consumer offset reset of `queue` (allows the offset to move backwards).
    Reset,
    /// A consumer's assignment changed; `value` lists the queues now assigned.
    Assign,
    /// A fault: `invoke` when it starts, `ok` when it was healed; `value` names it.
    Nemesis,
    /// An orderly consumer processing one message: `invoke` when its listener starts it, `ok` when
    /// it finished it; both carry `queue`, `offset` and `value`.
    Process,
    /// A POP consumer's POP_MESSAGE to one broker group (`queue` = the group); `ok` carries the
    /// messages handed out in `msgs` (none: nothing ready).
    Pop,
    /// A POP consumer's ACK_MESSAGE of one popped `value`: `ok` acked, `fail` a stale receipt.
    Ack,
    /// The final POP settle: `ok` once every group stayed quiet past the invisible time.
    PopSettle,
}

/// One message a read returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadMsg {
    /// Its ConsumeQueue offset.
    pub offset: i64,
    /// The value (message body).
    pub value: String,
    /// POP reads and acks: which stored copy of the value this is (the offsetMsgId of the record
    /// first stored, which a retry carries as ORIGIN_MESSAGE_ID), so a value stored twice is two
    /// messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<String>,
}

/// One history event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history.
    pub index: u64,
    /// Nanoseconds since the run started.
    pub time: u64,
    /// Logical process (`p3`, `c1`, `final`, `nemesis`, ...).
    pub process: String,
    /// Invoke or completion kind.
    #[serde(rename = "type")]
    pub kind: OpType,
    /// The operation.
    pub f: OpF,
    /// The sent value, a fault's name, or an assignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The queue, `brokerName:queueId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The offset a send landed at, or a committed/observed consumer offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Messages returned by a read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub msgs: Vec<ReadMsg>,
    /// The node the op went through, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why it failed or is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Op {
    /// An op of `kind` and `f` by `process`; index and time are set by the [`Recorder`].
    pub fn new(kind: OpType, f: OpF, process: impl Into<String>) -> Self {
        Op {
            index: 0,
            time: 0,
            process: process.into(),
            kind,
            f,
            value: None,
            queue: None,
            offset: None,
            msgs: Vec::new(),
            node: None,
            error: None,
        }
    }

    /// Sets `value`.
    pub fn value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// Sets `queue`.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Sets `offset`.
    pub fn offset(mut self, offset: i64) -> Self {
        self.offset = Some(offset);
        self
    }

    /// Sets `msgs`.
    pub fn msgs(mut self, msgs: Vec<ReadMsg>) -> Self {
        self.msgs = msgs;
        self
    }

    /// Sets `node`.
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Sets `error`.
    pub fn error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// Sets `time` (for synthetic histories).
    pub fn at(mut self, time_ns: u64) -> Self {
        self.time = time_ns;
        self
    }

    /// Whether this op is a completion (`ok`, `fail`, `info`).
    pub fn is_completion(&self) -> bool {
        self.kind != OpType::Invoke
    }
}

/// Why a history could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not an [`Op`].
    #[error("{path}:{line}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The cause.
        source: serde_json::Error,
    },
}

struct RecorderInner {
    out: Option<BufWriter<File>>,
    path: PathBuf,
    ops: Vec<Op>,
    error: Option<String>,
}

/// Appends ops to a JSONL file (and keeps them in memory); clones share one history.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Mutex<RecorderInner>>,
    start: Instant,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing to `path` (created or truncated); time 0 is now.
    pub fn create(path: &Path) -> Result<Self, HistoryError> {
        let file = File::create(path).map_err(|source| HistoryError::Io { path: path.to_owned(), source })?;
        Ok(Self::with_output(Some(BufWriter::new(file)), path.to_owned()))
    }

    /// A recorder that keeps ops in memory only (tests, dry runs).
    pub fn in_memory() -> Self {
        Self::with_output(None, PathBuf::new())
    }

    fn with_output(out: Option<BufWriter<File>>, path: PathBuf) -> Self {
        let inner = RecorderInner { out, path, ops: Vec::new(), error: None };
        Recorder { inner: Arc::new(Mutex::new(inner)), start: Instant::now() }
    }

    /// Nanoseconds since the run started.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Stamps `op` with the next index and the current time, appends it and returns the stamped op.
    /// A write error is kept and reported by [`Self::flush`], so the workload never stops on it.
    pub fn record(&self, mut op: Op) -> Op {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        op.index = inner.ops.len() as u64;
        // Under the lock, so time never decreases along the index.
        op.time = self.now_ns();
        if let Some(out) = inner.out.as_mut() {
            let written = serde_json::to_writer(&mut *out, &op)
                .map_err(std::io::Error::other)
                .and_then(|()| out.write_all(b"\n"));
            if let Err(e) = written
                && inner.error.is_none()
            {
                inner.error = Some(e.to_string());
            }
        }
        inner.ops.push(op.clone());
        op
    }

    /// Every op recorded so far.
    pub fn ops(&self) -> Vec<Op> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).ops.clone()
    }

    /// Flushes the file; reports the first write error seen.
    pub fn flush(&self) -> Result<(), HistoryError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let path = inner.path.clone();
        if let Some(e) = inner.error.clone() {
            return Err(HistoryError::Io { path, source: std::io::Error::other(e) });
        }
        match inner.out.as_mut() {
            Some(out) => out.flush().map_err(|source| HistoryError::Io { path, source }),
            None => Ok(()),
        }
    }
}

/// Prefix of a members record's value.
pub const MEMBERS_PREFIX: &str = "members ";

/// The value of a members record: `members broker-a n11 n13 n100`.
pub fn members_value(group: &str, nodes: &[String]) -> String {
    format!("{MEMBERS_PREFIX}{group} {}", nodes.join(" "))
}

/// Each group's members as its last `ok` members record states them; groups without one are absent
/// (histories written before membership changes existed have none).
pub fn final_members(ops: &[Op]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for op in ops.iter().filter(|o| o.f == OpF::Nemesis && o.kind == OpType::Ok) {
        let Some(rest) = op.value.as_deref().and_then(|v| v.strip_prefix(MEMBERS_PREFIX)) else { continue };
        let mut words = rest.split_whitespace();
        let Some(group) = words.next() else { continue };
        out.insert(group.to_owned(), words.map(str::to_owned).collect());
    }
    out
}

/// Writes `ops` as JSONL to `path`.
pub fn write_history(path: &Path, ops: &[Op]) -> Result<(), HistoryError> {
    let io = |source| HistoryError::Io { path: path.to_owned(), source };
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    for op in ops {
        serde_json::to_writer(&mut out, op).map_err(|e| io(std::io::Error::other(e)))?;
        out.write_all(b"\n").map_err(io)?;
    }
    out.flush().map_err(io)
}

/// Reads a JSONL history; blank lines are skipped.
pub fn read_history(path: &Path) -> Result<Vec<Op>, HistoryError> {
    let file = File::open(path).map_err(|source| HistoryError::Io { path: path.to_owned(), source })?;
    let mut ops = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|source| HistoryError::Io { path: path.to_owned(), source })?;
        if line.trim().is_empty() {
            continue;
        }
        let op = serde_json::from_str(&line).map_err(|source| HistoryError::Parse {
            path: path.to_owned(),
            line: i + 1,
            source,
        })?;
        ops.push(op);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_round_trip_keeps_every_field() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("history.jsonl");
        let rec = Recorder::create(&path)?;
        rec.record(Op::new(OpType::Invoke, OpF::Send, "p0").value("p0-0"));
        rec.record(Op::new(OpType::Ok, OpF::Send, "p0").value("p0-0").queue("broker-a:1").offset(7).node("n1"));
        rec.record(Op::new(OpType::Ok, OpF::Read, "c0").queue("broker-a:1").msgs(vec![ReadMsg {
            offset: 7,
            value: "p0-0".into(),
            copy: None,
        }]));
        rec.record(Op::new(OpType::Info, OpF::Send, "p1").value("p1-0").error("timed out"));
        rec.flush()?;
        let read = read_history(&path)?;
        assert_eq!(read, rec.ops());
        assert_eq!(read.iter().map(|o| o.index).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert!(read.windows(2).all(|w| w[0].time <= w[1].time));
        let text = std::fs::read_to_string(&path)?;
        assert!(text.lines().next().is_some_and(|l| l.contains(r#""type":"invoke""#) && l.contains(r#""f":"send""#)));
        Ok(())
    }

    #[test]
    fn the_last_members_record_of_each_group_wins() {
        let members = |g: &str, n: &[&str]| {
            let names: Vec<String> = n.iter().map(|s| (*s).to_owned()).collect();
            Op::new(OpType::Ok, OpF::Nemesis, NEMESIS_PROCESS).value(members_value(g, &names))
        };
        let ops = vec![
            members("broker-a", &["n11", "n12", "n13"]),
            Op::new(OpType::Ok, OpF::Nemesis, NEMESIS_PROCESS).value("member remove broker-a n12 id 2"),
            members("broker-b", &["n21", "n22", "n23"]),
            members("broker-a", &["n11", "n13", "n100"]),
            Op::new(OpType::Invoke, OpF::Nemesis, NEMESIS_PROCESS).value(members_value("broker-b", &[])),
        ];
        let f = final_members(&ops);
        let names = |g: &str| f.get(g).map(|s| s.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(names("broker-a"), Some(vec!["n100", "n11", "n13"]));
        assert_eq!(names("broker-b"), Some(vec!["n21", "n22", "n23"]), "only ok records count");
        assert!(final_members(&[]).is_empty());
    }

    #[test]
    fn a_bad_line_names_its_line_number() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("h.jsonl");
        std::fs::write(
            &path,
            "{\"index\":0,\"time\":0,\"process\":\"p\",\"type\":\"ok\",\"f\":\"final-read\"}\n\nnot json\n",
        )?;
        match read_history(&path) {
            Err(HistoryError::Parse { line, .. }) => assert_eq!(line, 3),
            other => panic!("expected a parse error, got {other:?}"),
        }
        Ok(())
    }
}
