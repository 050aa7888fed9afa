//! Reading JSON Lines files the engine appends to (`journal.jsonl`,
//! `context.jsonl`): one value per line, bad lines reported rather than
//! fatal, and torn records (a line cut short by a crash or a full disk
//! before appends became line-safe) told apart from other bad lines.

use serde::de::DeserializeOwned;

/// What [`parse`] found besides the values.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Parsed<T> {
    /// Values in file order.
    pub values: Vec<T>,
    /// `(1-based line number, message)` of lines that are not values; a
    /// torn record's message starts with `torn record`.
    pub bad_lines: Vec<(usize, String)>,
    /// How many of `bad_lines` are torn records: JSON that ends before the
    /// value does. The lines after one are read normally.
    pub torn: usize,
}

/// Parses `bytes` line by line; blank lines are skipped.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Parsed<T> {
    let mut out = Parsed {
        values: Vec::new(),
        bad_lines: Vec::new(),
        torn: 0,
    };
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(v) => out.values.push(v),
            Err(e) if e.is_eof() => {
                out.torn += 1;
                out.bad_lines.push((
                    i + 1,
                    format!(
                        "torn record ({} bytes, cut short by a failed write): {e}",
                        line.len()
                    ),
                ));
            }
            Err(e) => out.bad_lines.push((i + 1, e.to_string())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_record_is_counted_and_the_next_line_read() {
        let p: Parsed<serde_json::Value> = parse(b"{\"a\":1}\n{\"b\":\n{\"c\":3}\nnot json\n\n");
        assert_eq!(p.values.len(), 2);
        assert_eq!(p.torn, 1);
        assert_eq!(p.bad_lines.len(), 2);
        assert_eq!(p.bad_lines[0].0, 2);
        assert!(p.bad_lines[0].1.starts_with("torn record"));
        assert_eq!(p.bad_lines[1].0, 4);
    }

    #[test]
    fn torn_heads_and_tails_from_another_writer_are_skipped_and_counted() {
        // Issue 23: the reference read the head of a wsbench line and wrote
        // it back with its own record glued on; its overwrite left the tail
        // of another wsbench line behind. Both are bad lines; the records
        // around them are read.
        let wsbench =
            r#"{"id":"w1","role":"user","content":[{"type":"text","text":"hello there"}]}"#;
        let reference = r#"{"id":"r1","name":"coder","content":[]}"#;
        let head = &wsbench[..30];
        let tail = &wsbench[60..];
        let file = format!("{wsbench}\n{head}{reference}\n{tail}\n{reference}\n{head}\n");
        let p: Parsed<serde_json::Value> = parse(file.as_bytes());
        assert_eq!(p.values.len(), 2);
        let lines: Vec<usize> = p.bad_lines.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [2, 3, 5]);
        // Only the head alone at the end reads as a record cut short.
        assert_eq!(p.torn, 1);
    }
}
