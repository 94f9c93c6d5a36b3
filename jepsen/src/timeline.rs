//! The timeline picture: one row per process, each operation a bar from its invocation to its
//! completion coloured by outcome (ok green, fail red, info orange, never completed grey), and every
//! fault (`nemesis` invoke → ok of the same value) shaded across all rows. Hand-written SVG text.
//!
//! Invariant: the output is well-formed XML whatever the history holds (names are escaped); bars past
//! [`TIMELINE_BARS_MAX_COUNT`] are left out and the picture says so.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt::Write as _;

use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;

/// Bars drawn at most; a soak run's history would make a picture no viewer opens.
pub const TIMELINE_BARS_MAX_COUNT: usize = 50_000;

const WIDTH_PX: f64 = 1400.0;
const LABEL_PX: f64 = 110.0;
const ROW_PX: f64 = 16.0;
const TOP_PX: f64 = 40.0;

struct Bar {
    row: usize,
    from: u64,
    to: u64,
    kind: Option<OpType>,
    title: String,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn label(op: &Op) -> String {
    let f = serde_json::to_string(&op.f).unwrap_or_default().trim_matches('"').to_owned();
    let mut s = format!("{} {f}", op.process);
    if let Some(v) = &op.value {
        let _ = write!(s, " {v}");
    }
    if let Some(q) = &op.queue {
        let _ = write!(s, " {q}");
    }
    if let Some(o) = op.offset {
        let _ = write!(s, "@{o}");
    }
    if !op.msgs.is_empty() {
        let _ = write!(s, " ({} msgs)", op.msgs.len());
    }
    if let Some(e) = &op.error {
        let _ = write!(s, " error: {e}");
    }
    s
}

/// Renders `ops` as an SVG document.
pub fn render(ops: &[Op]) -> String {
    let end = ops.iter().map(|o| o.time).max().unwrap_or(0).max(1);
    let mut rows: BTreeMap<&str, usize> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    let mut bars: Vec<Bar> = Vec::new();
    let mut faults: Vec<(u64, u64, String)> = Vec::new();
    let mut open_faults: HashMap<&str, u64> = HashMap::new();
    let mut pending: HashMap<(&str, OpF, Option<&str>), Vec<&Op>> = HashMap::new();
    let mut dropped = 0usize;

    for op in ops {
        if op.f == OpF::Nemesis {
            let name = op.value.as_deref().unwrap_or("fault");
            match op.kind {
                OpType::Invoke => {
                    open_faults.insert(name, op.time);
                }
                _ => {
                    let from = open_faults.remove(name).unwrap_or(op.time);
                    faults.push((from, op.time, name.to_owned()));
                }
            }
            continue;
        }
        let row = *rows.entry(op.process.as_str()).or_insert_with(|| {
            order.push(op.process.as_str());
            order.len() - 1
        });
        // Sends are matched by value (async producers have several in flight); others in FIFO order.
        let key = (op.process.as_str(), op.f, if op.f == OpF::Send { op.value.as_deref() } else { None });
        if op.kind == OpType::Invoke {
            pending.entry(key).or_default().push(op);
            continue;
        }
        let invoke = pending.get_mut(&key).and_then(|v| (!v.is_empty()).then(|| v.remove(0)));
        if bars.len() >= TIMELINE_BARS_MAX_COUNT {
            dropped += 1;
            continue;
        }
        let from = invoke.map_or(op.time, |i| i.time);
        bars.push(Bar { row, from, to: op.time, kind: Some(op.kind), title: label(op) });
    }
    for (name, from) in open_faults {
        faults.push((from, end, format!("{name} (not healed)")));
    }
    for invokes in pending.into_values() {
        for i in invokes {
            if let Some(&row) = rows.get(i.process.as_str()) {
                bars.push(Bar {
                    row,
                    from: i.time,
                    to: end,
                    kind: None,
                    title: format!("{} (no completion)", label(i)),
                });
            }
        }
    }

    let plot_px = WIDTH_PX - LABEL_PX - 10.0;
    let x = |t: u64| LABEL_PX + (t as f64 / end as f64) * plot_px;
    let height = TOP_PX + ROW_PX * order.len().max(1) as f64 + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{height}" font-family="monospace" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r##"<text x="4" y="14">raftmq-jepsen timeline: {} ops, {:.1} s; ok=green fail=red info=orange open=grey; faults shaded{}</text>"##,
        ops.len(),
        end as f64 / 1e9,
        if dropped > 0 { format!("; {dropped} bars omitted") } else { String::new() }
    );
    for (from, to, name) in &faults {
        let (x0, x1) = (x(*from), x(*to));
        let _ = writeln!(
            s,
            r##"<g><title>{}</title><rect x="{x0:.1}" y="{TOP_PX}" width="{:.1}" height="{:.1}" fill="#8888cc" fill-opacity="0.25"/><text x="{x0:.1}" y="{:.1}" fill="#444477">{}</text></g>"##,
            escape(name),
            (x1 - x0).max(1.0),
            ROW_PX * order.len().max(1) as f64,
            TOP_PX - 4.0,
            escape(name)
        );
    }
    for (i, p) in order.iter().enumerate() {
        let y = TOP_PX + ROW_PX * i as f64;
        let _ = writeln!(s, r#"<text x="4" y="{:.1}">{}</text>"#, y + ROW_PX - 4.0, escape(p));
    }
    for b in &bars {
        let fill = match b.kind {
            Some(OpType::Ok) => "#4caf50",
            Some(OpType::Fail) => "#d9534f",
            Some(OpType::Info) => "#f0ad4e",
            Some(OpType::Invoke) | None => "#999999",
        };
        let (x0, x1) = (x(b.from), x(b.to));
        let y = TOP_PX + ROW_PX * b.row as f64 + 2.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{fill}"><title>{}</title></rect>"#,
            (x1 - x0).max(1.0),
            ROW_PX - 4.0,
            escape(&b.title)
        );
    }
    let axis_y = TOP_PX + ROW_PX * order.len().max(1) as f64 + 14.0;
    let seconds = end / 1_000_000_000;
    let step = (seconds / 10).max(1);
    for sec in (0..=seconds).step_by(step as usize) {
        let _ = writeln!(s, r#"<text x="{:.1}" y="{axis_y:.1}">{sec}s</text>"#, x(sec * 1_000_000_000));
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::testkit::*;
    use crate::history::ReadMsg;

    #[test]
    fn ops_and_faults_are_drawn_and_text_is_escaped() {
        let mut ops = sent("p<0>", "p0-0", "a:0", 0);
        ops.push(
            Op::new(OpType::Invoke, OpF::Nemesis, crate::history::NEMESIS_PROCESS).value("partition halves & more"),
        );
        ops.push(Op::new(OpType::Invoke, OpF::Send, "p1").value("p1-0"));
        ops.push(Op::new(OpType::Info, OpF::Send, "p1").value("p1-0").error("timed out"));
        ops.push(Op::new(OpType::Ok, OpF::Nemesis, crate::history::NEMESIS_PROCESS).value("partition halves & more"));
        ops.push(Op::new(OpType::Invoke, OpF::Nemesis, crate::history::NEMESIS_PROCESS).value("kill n2"));
        ops.push(Op::new(OpType::Ok, OpF::FinalRead, "final").msgs(vec![ReadMsg {
            offset: 0,
            value: "x".into(),
            copy: None,
        }]));
        ops.push(Op::new(OpType::Invoke, OpF::Send, "p2").value("p2-0"));
        let svg = render(&h(ops));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("p&lt;0&gt;") && !svg.contains("p<0>"));
        assert!(svg.contains("partition halves &amp; more"));
        assert!(svg.contains("kill n2 (not healed)"));
        assert!(svg.contains("#f0ad4e") && svg.contains("#4caf50") && svg.contains("#999999"));
        assert!(!svg.contains(">nemesis<"), "faults are shading, not a process row");
    }

    #[test]
    fn an_empty_history_is_still_a_picture() {
        let svg = render(&[]);
        assert!(svg.contains("0 ops"));
    }
}
