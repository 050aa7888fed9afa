//! The report as one neutral document: what each format prints, built
//! once from a [`Report`](super::Report).

use serde_json::Value;

use super::{Report, TEXT_BYTES};
use crate::engine::message::{Block, DataSource, Msg, ToolOutput};
use crate::engine::timeline::{RowKind, TimelineRow};

/// Timeline rows shown; a longer timeline ends with a note.
pub const TIMELINE_ROWS: usize = 5_000;

/// Media types embedded as pictures; others (SVG among them: it can
/// carry script) are linked.
const EMBEDDED_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// One piece of a report. Text is as the workspace wrote it: each format
/// escapes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A heading, level 1 to 4.
    Heading(u8, String),
    /// A muted line under a heading.
    Meta(String),
    /// A paragraph of plain text (line breaks kept).
    Para(String),
    /// A table: header cells and rows of cells.
    Table(Vec<String>, Vec<Vec<String>>),
    /// Preformatted text, folded behind `fold` when it is `Some`.
    Code {
        /// The text.
        text: String,
        /// The fold's one-line summary; `None`: shown open.
        fold: Option<String>,
    },
    /// A quoted block (the compression summary).
    Quote(String),
    /// A picture: embedded from `data` when it is `Some`, else linked to
    /// `url` with the reason.
    Image {
        /// Its name.
        alt: String,
        /// Media type.
        media_type: String,
        /// The bytes to embed.
        data: Option<Vec<u8>>,
        /// Where it is in the workspace.
        url: String,
        /// Why it is not embedded.
        why: Option<String>,
    },
    /// A bar chart: a title and `(label, value)` bars.
    Bars(String, Vec<(String, u64)>),
}

/// A document: a title and its nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    /// The page title.
    pub title: String,
    /// The nodes in order.
    pub nodes: Vec<Node>,
}

/// Builds the document of `r`.
pub fn build(r: &Report) -> Doc {
    let t = &r.timeline;
    let mut n = vec![
        Node::Heading(1, format!("Session {}", r.session)),
        Node::Meta(format!(
            "{} · {} · {} · exported by wsbench {}",
            r.workdir,
            crate::root::words::count(t.tool_calls, "tool call", "tool calls"),
            crate::root::words::count(t.errors, "error", "errors"),
            env!("CARGO_PKG_VERSION")
        )),
    ];
    let tokens: Vec<(String, u64)> = t
        .rows
        .iter()
        .filter(|row| row.kind == RowKind::Turn)
        .filter_map(|row| Some((short_time(row.at.as_deref()), row.tokens?)))
        .collect();
    if !tokens.is_empty() {
        n.push(Node::Bars(
            "Estimated request tokens per turn".into(),
            tokens,
        ));
    }
    n.push(Node::Heading(2, "Timeline".into()));
    let rows: Vec<Vec<String>> = t.rows.iter().take(TIMELINE_ROWS).map(row_cells).collect();
    n.push(Node::Table(
        ["time", "what", "state", "duration", "size", "details"]
            .map(String::from)
            .to_vec(),
        rows,
    ));
    if t.rows.len() > TIMELINE_ROWS {
        n.push(Node::Meta(format!(
            "{} more rows not shown",
            t.rows.len() - TIMELINE_ROWS
        )));
    }
    let summary = r.summary.clone().or_else(|| {
        t.rows
            .iter()
            .rev()
            .find_map(|row| row.compression.as_ref().map(|c| c.summary.clone()))
    });
    if let Some(s) = summary.filter(|s| !s.is_empty()) {
        n.push(Node::Heading(2, "Compression summary".into()));
        n.push(Node::Quote(bounded(&s)));
    }
    if !r.offloaded.messages.is_empty() || !r.live.is_empty() {
        n.push(Node::Heading(2, "Conversation".into()));
    }
    if !r.offloaded.messages.is_empty() {
        n.push(Node::Heading(3, "Compressed away (context.jsonl)".into()));
        for m in &r.offloaded.messages {
            message(r, m, &mut n);
        }
    }
    if !r.live.is_empty() {
        n.push(Node::Heading(3, "Live context (agent_state.json)".into()));
        for m in &r.live {
            message(r, m, &mut n);
        }
    }
    let mut notes = t.notes.clone();
    notes.extend(r.notes.iter().cloned());
    notes.extend(
        r.offloaded
            .bad_lines
            .iter()
            .map(|(line, msg)| format!("context.jsonl line {line} unreadable: {msg}")),
    );
    if !notes.is_empty() {
        n.push(Node::Heading(2, "Notes".into()));
        n.extend(notes.into_iter().map(Node::Para));
    }
    Doc {
        title: format!("wsbench session {}", r.session),
        nodes: n,
    }
}

fn short_time(at: Option<&str>) -> String {
    at.map_or(String::new(), |a| {
        a.get(..19).unwrap_or(a).replace('T', " ")
    })
}

fn row_cells(r: &TimelineRow) -> Vec<String> {
    let time = short_time(r.at.as_deref());
    let dash = || "-".to_string();
    match r.kind {
        RowKind::Turn => vec![
            time,
            format!("turn {}", r.tool.as_deref().unwrap_or("")),
            String::new(),
            String::new(),
            r.tokens.map_or(String::new(), |t| format!("~{t} tokens")),
            r.args.clone(),
        ],
        RowKind::ToolCall => vec![
            time,
            r.tool.clone().unwrap_or_else(|| "?".into()),
            r.state.clone().unwrap_or_else(dash),
            r.duration_ms.map_or_else(dash, |d| format!("{d} ms")),
            r.result_size.map_or_else(dash, |s| s.to_string()),
            r.args.clone(),
        ],
        RowKind::Offload => {
            let o = r.offload.clone().unwrap_or_default();
            let kept = match (o.kept_chars, o.full) {
                (Some(k), Some(f)) => format!("kept {k} of {f} chars"),
                (None, Some(f)) => format!("{f} bytes"),
                _ => String::new(),
            };
            vec![
                time,
                "✂ offload".into(),
                String::new(),
                String::new(),
                kept,
                o.path,
            ]
        }
        RowKind::Compression => {
            let c = r.compression.clone().unwrap_or_default();
            let tok = match (c.tokens_before, c.tokens_after) {
                (Some(b), Some(a)) => format!("~{b} → ~{a} tokens"),
                _ => String::new(),
            };
            vec![
                time,
                "⇊ compression".into(),
                String::new(),
                String::new(),
                tok,
                "summary below".into(),
            ]
        }
        RowKind::Error => vec![
            time,
            "error".into(),
            r.tool.clone().unwrap_or_default(),
            String::new(),
            String::new(),
            r.error.clone().unwrap_or_default(),
        ],
    }
}

fn message(r: &Report, m: &Msg, n: &mut Vec<Node>) {
    let who = if m.name.is_empty() || m.name == m.role {
        m.role.clone()
    } else {
        format!("{} ({})", m.name, m.role)
    };
    n.push(Node::Heading(
        4,
        format!("{who} · {}", short_time(Some(&m.created_at))),
    ));
    for b in &m.content {
        block(r, b, n);
    }
}

fn block(r: &Report, b: &Block, n: &mut Vec<Node>) {
    match b {
        Block::Text(t) => n.push(Node::Para(bounded(&t.text))),
        Block::Thinking(m) => n.push(Node::Code {
            text: bounded(m.get("thinking").and_then(Value::as_str).unwrap_or("")),
            fold: Some("thinking".into()),
        }),
        Block::Hint(m) => n.push(Node::Para(format!("hint: {}", hint_text(m.get("hint"))))),
        Block::ToolCall(c) => {
            let args = match &c.input {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            n.push(Node::Para(format!("→ {}  {}", c.name, bounded(&args))));
        }
        Block::ToolResult(res) => {
            let (text, inner) = match &res.output {
                ToolOutput::Text(s) => (s.clone(), Vec::new()),
                ToolOutput::Blocks(bs) => (
                    bs.iter()
                        .filter_map(Block::as_text)
                        .collect::<Vec<_>>()
                        .join("\n"),
                    bs.iter().filter(|b| matches!(b, Block::Data(_))).collect(),
                ),
            };
            let state = if res.state.is_empty() {
                String::new()
            } else {
                format!(" · {}", res.state)
            };
            n.push(Node::Code {
                fold: Some(format!(
                    "{} result{state} · {} lines, {} chars",
                    res.name,
                    text.lines().count(),
                    text.chars().count()
                )),
                text: bounded(&text),
            });
            for b in inner {
                block(r, b, n);
            }
        }
        Block::Data(d) => n.push(image(r, d.name.as_deref(), &d.source)),
    }
}

fn image(r: &Report, name: Option<&str>, source: &DataSource) -> Node {
    let media_type = source.media_type().to_string();
    let alt = name.unwrap_or("data").to_string();
    match source {
        DataSource::Base64 { .. } => Node::Image {
            alt,
            media_type,
            data: None,
            url: String::new(),
            why: Some("inline data in the message; not embedded".into()),
        },
        DataSource::Url { url, .. } => {
            let (data, why) = match r.images.get(url).map(|i| &i.bytes) {
                Some(Ok(b)) if EMBEDDED_TYPES.contains(&media_type.as_str()) => {
                    (Some(b.clone()), None)
                }
                Some(Ok(_)) => (None, Some(format!("{media_type} is linked, not embedded"))),
                Some(Err(e)) => (None, Some(e.clone())),
                None => (None, Some("not an image".into())),
            };
            Node::Image {
                alt,
                media_type,
                data,
                url: url.clone(),
                why,
            }
        }
    }
}

/// A hint as text: a string, or the text of a list of blocks (data blocks
/// named by their URL).
fn hint_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => bounded(s),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i.get("type").and_then(Value::as_str) {
                Some("text") => i
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                Some("data") => format!(
                    "[{}]",
                    i.pointer("/source/url")
                        .and_then(Value::as_str)
                        .unwrap_or("data")
                ),
                _ => i.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// `s` cut to [`TEXT_BYTES`] at a character boundary, with a note of what
/// was left out.
pub fn bounded(s: &str) -> String {
    if s.len() <= TEXT_BYTES {
        return s.to_string();
    }
    let mut end = TEXT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… ({} more bytes not shown in this report)",
        &s[..end],
        s.len() - end
    )
}
