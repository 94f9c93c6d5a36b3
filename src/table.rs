//! mqadmin's table output: `#`-prefixed headers and `printf`-aligned columns, two spaces apart.
//!
//! Java pads with fixed widths (`%-32s`); here each column is as wide as its widest cell, so long
//! topic names never run into the next column and scripts can still split on runs of spaces.
//! Invariant: every row has as many cells as the header (short rows are padded with empty cells).

use std::fmt::Write as _;

/// A table being filled; [`Table::render`] lays it out.
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles (each should start with `#`, as mqadmin's do).
    pub fn new(header: &[&str]) -> Self {
        Table { header: header.iter().map(|h| (*h).to_owned()).collect(), rows: Vec::new() }
    }

    /// Adds a row; extra cells are dropped, missing ones left empty.
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: ToString,
    {
        let mut row: Vec<String> = cells.into_iter().take(self.header.len()).map(|c| c.to_string()).collect();
        row.resize(self.header.len(), String::new());
        self.rows.push(row);
    }

    /// The table as text, one line per row, each ending in `\n`; trailing spaces trimmed.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let mut text = String::new();
            for (cell, width) in line.iter().zip(&widths) {
                // Writing to a String cannot fail.
                let _ = write!(text, "{cell:<width$}  ");
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut t = Table::new(&["#Topic", "#QID"]);
        t.row(["TopicTest", "0"]);
        t.row(["T", "12"]);
        t.row(["short"]);
        assert_eq!(t.render(), "#Topic     #QID\nTopicTest  0\nT          12\nshort\n");
    }
}
