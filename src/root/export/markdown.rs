//! The document as Markdown (GitHub's flavour). Workspace text is escaped
//! where Markdown would read it as markup that changes the page: `<`,
//! `>` and `&` everywhere (raw HTML), `|` and line breaks in table cells;
//! code is fenced with more backticks than it contains.

use base64::Engine as _;

use super::doc::{Doc, Node};

/// Renders `d` as Markdown.
pub fn render(d: &Doc) -> String {
    let mut out = String::new();
    for node in &d.nodes {
        match node {
            Node::Heading(level, text) => {
                out.push_str(&"#".repeat(*level as usize));
                out.push(' ');
                out.push_str(&one_line(text));
                out.push_str("\n\n");
            }
            Node::Meta(text) => out.push_str(&format!("_{}_\n\n", one_line(text))),
            Node::Para(text) => {
                // Two spaces before each break keep the text's lines.
                let lines: Vec<String> = text.lines().map(escape).collect();
                out.push_str(&lines.join("  \n"));
                out.push_str("\n\n");
            }
            Node::Table(head, rows) => {
                out.push_str(&row(head));
                out.push_str(&format!("|{}\n", "---|".repeat(head.len())));
                for r in rows {
                    out.push_str(&row(r));
                }
                out.push('\n');
            }
            Node::Code { text, fold } => {
                let fence = "`".repeat(longest_run(text, '`').max(2) + 1);
                if let Some(summary) = fold {
                    out.push_str(&format!(
                        "<details><summary>{}</summary>\n\n",
                        one_line(summary)
                    ));
                }
                out.push_str(&format!("{fence}text\n{text}\n{fence}\n\n"));
                if fold.is_some() {
                    out.push_str("</details>\n\n");
                }
            }
            Node::Quote(text) => {
                for l in text.lines() {
                    out.push_str(&format!("> {}\n", escape(l)));
                }
                out.push('\n');
            }
            Node::Image {
                alt,
                media_type,
                data,
                url,
                why,
            } => match data {
                Some(bytes) => out.push_str(&format!(
                    "![{}](data:{media_type};base64,{})\n\n",
                    one_line(alt),
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                )),
                None => out.push_str(&format!(
                    "[{}: {}] ({})\n\n",
                    one_line(alt),
                    one_line(url),
                    one_line(why.as_deref().unwrap_or(""))
                )),
            },
            Node::Bars(title, bars) => {
                out.push_str(&format!("{}: {}", one_line(title), sparkline(bars)));
                let max = bars.iter().map(|(_, v)| *v).max().unwrap_or(0);
                out.push_str(&format!(" (highest ~{max})\n\n"));
            }
        }
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn one_line(s: &str) -> String {
    escape(&s.replace(['\n', '\r'], " "))
}

fn row(cells: &[String]) -> String {
    let cells: Vec<String> = cells
        .iter()
        .map(|c| one_line(c).replace('|', "\\|"))
        .collect();
    format!("| {} |\n", cells.join(" | "))
}

fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for ch in s.chars() {
        run = if ch == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// Eight levels of block characters, scaled to the highest bar.
pub(super) fn sparkline(bars: &[(String, u64)]) -> String {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = bars.iter().map(|(_, v)| *v).max().unwrap_or(0).max(1);
    bars.iter()
        .map(|(_, v)| LEVELS[((*v * 7) / max) as usize])
        .collect()
}
