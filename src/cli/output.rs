//! Printing helpers shared by the commands.
//!
//! Every line of text output goes through [`say!`]/[`say_err!`] (or
//! [`Safe`]): workspace and server data (skill descriptions, context text,
//! MCP output, error bodies) may hold escape sequences, which are shown as
//! visible stand-ins ([`crate::root::safe_text`]) instead of driving the
//! terminal. `--json` output is exact (JSON escapes controls itself); the
//! raw byte streams of `exec` and `offload get --raw` are passed through
//! untouched on purpose: they are the command's or file's own bytes, meant
//! for pipes.

use std::io::Write;

use serde::Serialize;

use crate::root::safe_text;

/// A writer that makes everything written through it terminal-safe
/// ([`safe_text::bytes_for_lines`]). `write!`/`writeln!` hand it whole
/// `str` pieces, so a character is never split between two writes.
pub struct Safe<W: Write>(pub W);

impl<W: Write> Write for Safe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(&safe_text::bytes_for_lines(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Prints formatted text on stdout (`err` false) or stderr through
/// [`Safe`]. A closed stdout ends the program quietly with 141, as
/// `println!` does in `main`'s hook.
pub fn print_safe(err: bool, args: std::fmt::Arguments<'_>) {
    let res = if err {
        Safe(std::io::stderr().lock()).write_fmt(args)
    } else {
        Safe(std::io::stdout().lock()).write_fmt(args)
    };
    if let Err(e) = res
        && !err
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(141);
    }
}

/// `println!` through [`Safe`].
macro_rules! say {
    () => { $crate::cli::output::print_safe(false, format_args!("\n")) };
    ($($t:tt)*) => { $crate::cli::output::print_safe(false, format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` through [`Safe`].
macro_rules! say_part {
    ($($t:tt)*) => { $crate::cli::output::print_safe(false, format_args!($($t)*)) };
}

/// `eprintln!` through [`Safe`].
macro_rules! say_err {
    () => { $crate::cli::output::print_safe(true, format_args!("\n")) };
    ($($t:tt)*) => { $crate::cli::output::print_safe(true, format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprint!` through [`Safe`].
macro_rules! say_err_part {
    ($($t:tt)*) => { $crate::cli::output::print_safe(true, format_args!($($t)*)) };
}

pub(crate) use {say, say_err, say_err_part, say_part};

/// Prints a value as pretty JSON on stdout.
pub fn json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Formats seconds since the epoch as local `YYYY-MM-DD HH:MM:SS`.
pub fn time(secs: Option<f64>) -> String {
    match secs.and_then(|s| chrono::DateTime::from_timestamp(s as i64, 0)) {
        Some(t) => t
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S")
            .to_string(),
        None => "-".into(),
    }
}

/// Human-readable byte size (the TUI's format too).
pub use crate::root::words::size;

/// Prints rows as left-aligned columns with a header (see
/// [`table_lines`]).
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    for line in table_lines(header, rows) {
        say!("{line}");
    }
}

/// Rows as left-aligned columns with a header, one `String` per line,
/// columns two spaces apart, the last column unpadded, trailing spaces
/// trimmed. Widths are display columns (`unicode-width`: a CJK character
/// counts 2, a combining mark 0), so `代码 review` lines up under ASCII
/// text in a terminal; a row shorter than the header leaves its last
/// cells empty.
///
/// A cell holding several lines (a skill description written as a YAML
/// block scalar, a multi-line error) takes as many output lines as its
/// longest cell, each continuation line starting at its column, the other
/// cells blank there; a trailing newline adds no empty line, `\r\n` counts
/// as one break. Without this a description's second line would start at
/// column 0 and read as a new row.
pub fn table_lines(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    use unicode_width::UnicodeWidthStr;
    let split = |c: &str| -> Vec<String> {
        let body = c.strip_suffix('\n').unwrap_or(c);
        body.split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
            .collect()
    };
    let mut widths: Vec<usize> = header.iter().map(|h| h.width()).collect();
    let cells: Vec<Vec<Vec<String>>> = rows
        .iter()
        .map(|r| r.iter().map(|c| split(c)).collect())
        .collect();
    for r in &cells {
        for (i, c) in r.iter().enumerate().take(widths.len()) {
            for l in c {
                widths[i] = widths[i].max(l.width());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            s.push_str(c);
            if i + 1 < cells.len() {
                let pad = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(c.width());
                s.extend(std::iter::repeat_n(' ', pad + 2));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = vec![line(header.to_vec())];
    for r in &cells {
        let height = r.iter().map(Vec::len).max().unwrap_or(1).max(1);
        for k in 0..height {
            out.push(line(
                r.iter()
                    .map(|c| c.get(k).map(String::as_str).unwrap_or(""))
                    .collect(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::size(10), "10 B");
        assert_eq!(super::size(2048), "2.0 KiB");
    }

    #[test]
    fn tables_align_by_display_width() {
        let rows = vec![
            vec!["代码 review".to_string(), "ok".to_string(), "x".to_string()],
            vec!["plain".to_string(), "ok".to_string(), "y".to_string()],
        ];
        let lines = super::table_lines(&["ID", "STATE", "NOTE"], &rows);
        // `代码 review` is 11 columns wide: STATE starts at column 13 on
        // every line.
        assert_eq!(lines[0], "ID           STATE  NOTE");
        assert_eq!(lines[1], "代码 review  ok     x");
        assert_eq!(lines[2], "plain        ok     y");
    }

    #[test]
    fn a_multi_line_cell_continues_under_its_column() {
        let rows = vec![
            vec![
                "deploy".to_string(),
                "ok".to_string(),
                "Ships the build.\r\nAsks first.\n".to_string(),
            ],
            vec!["lint".to_string(), "ok".to_string(), "Checks.".to_string()],
        ];
        let lines = super::table_lines(&["NAME", "STATUS", "DESCRIPTION"], &rows);
        assert_eq!(
            lines,
            vec![
                "NAME    STATUS  DESCRIPTION",
                "deploy  ok      Ships the build.",
                "                Asks first.",
                "lint    ok      Checks.",
            ]
        );
    }
}
