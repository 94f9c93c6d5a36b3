//! How a command prints its result: mqadmin's text (tables and Java's lines) by default, one JSON
//! document with `--json`. Invariant: a command prints exactly one JSON document in `--json` mode.

use anyhow::Result;

use crate::table::Table;

/// How results are printed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Out {
    pub(super) json: bool,
}

impl Out {
    pub(super) fn json(self, value: &serde_json::Value) {
        println!("{value}");
    }

    pub(super) fn table(self, table: &Table) {
        print!("{}", table.render());
    }
}

/// Java's line, or the JSON document.
pub(super) fn done(out: Out, line: &str, value: serde_json::Value) -> Result<()> {
    if out.json {
        out.json(&value);
    } else {
        println!("{line}");
    }
    Ok(())
}
