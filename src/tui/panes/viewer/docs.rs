//! The viewer's documents: a `context.jsonl` read as a conversation, a
//! text file with line numbers, their `workspace:///` links, and the
//! loading of a file or a part of a long one off the UI thread.

use super::*;

fn line(s: &str, style: Style) -> StyledLine {
    StyledLine::plain(s, style)
}

fn push_text(out: &mut Vec<StyledLine>, s: &str, style: Style, indent: &str) {
    for l in s.lines() {
        out.push(line(&format!("{indent}{l}"), style));
    }
    if s.is_empty() {
        out.push(line(indent, style));
    }
}

/// Adds `(line, url)` for every `workspace:///` reference in the lines.
fn collect_links(doc: &mut Doc) {
    doc.links.clear();
    for (i, l) in doc.lines.iter().enumerate() {
        let mut rest = l.text.as_str();
        while let Some(p) = rest.find(names::DATA_URL_PREFIX) {
            let tail = &rest[p..];
            let end = tail
                .find(|c: char| c.is_whitespace() || c == '\'' || c == '"' || c == ')' || c == '>')
                .unwrap_or(tail.len());
            doc.links.push((i, tail[..end].to_string()));
            rest = &tail[end..];
        }
    }
}

fn data_line(name: Option<&str>, source: &DataSource, t: &Theme, indent: &str) -> StyledLine {
    match source {
        DataSource::Url { url, media_type } => line(
            &format!("{indent}[data {} {media_type}] {url}", name.unwrap_or("")),
            t.link,
        ),
        DataSource::Base64 { data, media_type } => line(
            &format!(
                "{indent}[data {} {media_type}, {} base64 characters inline]",
                name.unwrap_or(""),
                data.len()
            ),
            t.binary,
        ),
    }
}

fn message_lines(m: &Msg, t: &Theme, out: &mut Vec<StyledLine>) {
    let head_style = match m.role.as_str() {
        "user" => t.accent,
        "assistant" => t.success,
        _ => t.warn,
    }
    .add_modifier(Modifier::BOLD);
    out.push(line(
        &format!("── {} ({}) · {}", m.name, m.role, m.created_at),
        head_style,
    ));
    for b in &m.content {
        match b {
            Block::Text(tb) => push_text(out, &tb.text, t.base, ""),
            Block::Thinking(_) => push_text(
                out,
                &format!("[thinking] {}", b.as_text().unwrap_or("")),
                t.muted,
                "",
            ),
            Block::Hint(h) => out.push(line(
                &format!(
                    "[hint] {}",
                    h.get("hint").map(|v| v.to_string()).unwrap_or_default()
                ),
                t.muted,
            )),
            Block::ToolCall(c) => {
                let input = c
                    .input
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| c.input.to_string());
                out.push(line(&format!("⚙ tool call {} {}", c.name, c.id), t.key));
                push_text(out, &input, t.muted, "  ");
            }
            Block::ToolResult(r) => {
                let st = if r.state == "success" || r.state.is_empty() {
                    t.success
                } else {
                    t.error
                };
                out.push(line(
                    &format!("↳ tool result {} {} · {}", r.name, r.id, r.state),
                    st,
                ));
                match &r.output {
                    ToolOutput::Text(s) => push_text(out, s, t.base, "  "),
                    ToolOutput::Blocks(bs) => {
                        for b in bs {
                            match b {
                                Block::Text(tb) => push_text(out, &tb.text, t.base, "  "),
                                Block::Data(d) => {
                                    out.push(data_line(d.name.as_deref(), &d.source, t, "  "))
                                }
                                _ => {}
                            }
                        }
                    }
                }
            }
            Block::Data(d) => out.push(data_line(d.name.as_deref(), &d.source, t, "")),
        }
    }
    out.push(StyledLine::default());
}

/// A `context.jsonl` as a conversation: one header line per message
/// (name, role, time), its text, tool calls and results, data blocks
/// with their `workspace:///` links; unreadable lines are listed.
pub fn conversation_doc(title: &str, ctx: &ContextRead, t: &Theme) -> Doc {
    let mut lines = Vec::new();
    for m in &ctx.messages {
        message_lines(m, t, &mut lines);
    }
    for (n, msg) in &ctx.bad_lines {
        lines.push(line(
            &format!("!! line {n} is not a message: {msg}"),
            t.error,
        ));
    }
    if lines.is_empty() {
        lines.push(line("(no messages)", t.muted));
    }
    let mut doc = Doc {
        title: title.to_string(),
        lines,
        links: Vec::new(),
    };
    collect_links(&mut doc);
    doc
}

/// Text with line numbers.
pub fn text_doc(title: &str, body: &str, truncated: bool, t: &Theme) -> Doc {
    let n = body.lines().count().max(1);
    let w = n.to_string().len();
    let mut lines: Vec<StyledLine> = body
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut sl = StyledLine::plain(&format!("{:>w$} ", i + 1), t.line_number);
            let start = sl.text.len() as u32;
            sl.text.push_str(&text::display(l));
            sl.runs.push((start, t.base));
            sl
        })
        .collect();
    if truncated {
        lines.push(line(
            &format!(
                "… (first {} shown: G reads the end)",
                text::human_size(MAX_VIEW_BYTES)
            ),
            t.muted,
        ));
    }
    let mut doc = Doc {
        title: title.to_string(),
        lines,
        links: Vec::new(),
    };
    collect_links(&mut doc);
    doc
}

/// Loads what a path or `workspace:///` URL points at, as a document.
pub async fn load_doc(
    ws: std::sync::Arc<crate::engine::Workspace>,
    target: String,
    theme: Theme,
) -> Doc {
    load(ws, target, theme).await.0
}

/// The end of a long text file: its last [`MAX_VIEW_BYTES`] in one ranged
/// read (backends with ranged reads read only those; E2B and Daytona cut
/// them from a whole download), the line cut at the start dropped. Lines
/// are not numbered: counting them would read the whole file.
pub(super) async fn load_tail(
    ws: std::sync::Arc<crate::engine::Workspace>,
    cut: Cut,
    title: String,
    t: Theme,
) -> (Doc, Option<Cut>) {
    let offset = cut.size.saturating_sub(MAX_VIEW_BYTES);
    let range = ByteRange {
        offset,
        len: MAX_VIEW_BYTES,
    };
    let bytes = match ws.sandbox().read(&cut.path, Some(range)).await {
        Ok(b) => b,
        Err(e) => {
            let doc =
                crate::tui::panes::files::metadata_doc(&cut.path, None, &[], Some(&e.to_string()));
            return (doc, None);
        }
    };
    let start = bytes.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
    let skipped = offset + start as u64;
    let mut lines = vec![line(
        &format!(
            "… (first {} not shown: g goes back to the start)",
            text::human_size(skipped)
        ),
        t.muted,
    )];
    let body = String::from_utf8_lossy(&bytes[start..]);
    lines.extend(body.lines().map(|l| line(&text::display(l), t.base)));
    let mut doc = Doc {
        title,
        lines,
        links: Vec::new(),
    };
    collect_links(&mut doc);
    (doc, Some(Cut { tail: true, ..cut }))
}

/// [`load_doc`], and the [`Cut`] when only the start of a text file was
/// read.
pub(super) async fn load(
    ws: std::sync::Arc<crate::engine::Workspace>,
    target: String,
    theme: Theme,
) -> (Doc, Option<Cut>) {
    let doc = |d: Doc| (d, None);
    let path = match ws.layout().resolve_reference(&target) {
        Ok(p) => p,
        Err(e) => {
            return doc(crate::tui::panes::files::metadata_doc(
                &target,
                None,
                &[],
                Some(&e.to_string()),
            ));
        }
    };
    let shown = crate::backend::path::strip_root(ws.layout().workdir(), &path)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| path.clone());
    let stat = match ws.sandbox().stat(&path).await {
        Ok(s) => s,
        Err(e) => {
            return doc(crate::tui::panes::files::metadata_doc(
                &path,
                None,
                &[],
                Some(&e.to_string()),
            ));
        }
    };
    if stat.is_dir_like() {
        return doc(crate::tui::panes::files::metadata_doc(
            &path,
            Some(&stat),
            &[],
            Some("is a directory"),
        ));
    }
    let head = ws
        .sandbox()
        .read(
            &path,
            Some(ByteRange {
                offset: 0,
                len: 4096,
            }),
        )
        .await
        .unwrap_or_default();
    let name = path.rsplit('/').next().unwrap_or("");
    let in_data = path.starts_with(&format!("{}/", ws.layout().data_dir()));
    let binary =
        in_data || crate::engine::offload::sniff_media_type(&head).is_some() || head.contains(&0);
    if binary {
        return doc(crate::tui::panes::files::metadata_doc(
            &path,
            Some(&stat),
            &head,
            None,
        ));
    }
    let range = (stat.size > MAX_VIEW_BYTES).then_some(ByteRange {
        offset: 0,
        len: MAX_VIEW_BYTES,
    });
    let bytes = match ws.sandbox().read(&path, range).await {
        Ok(b) => b,
        Err(e) => {
            return doc(crate::tui::panes::files::metadata_doc(
                &path,
                Some(&stat),
                &head,
                Some(&e.to_string()),
            ));
        }
    };
    if name == names::CONTEXT_FILE || name.ends_with(".jsonl") {
        return doc(conversation_doc(&shown, &parse_context(&bytes), &theme));
    }
    let cut = range.map(|_| Cut {
        path: path.clone(),
        size: stat.size,
        tail: false,
    });
    let text = text_doc(
        &shown,
        &String::from_utf8_lossy(&bytes),
        range.is_some(),
        &theme,
    );
    (text, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_lists_links() {
        let ctx = parse_context(
            br#"{"name":"u","content":[{"type":"text","text":"see"},{"type":"data","source":{"type":"url","url":"workspace:///data/ab.png","media_type":"image/png"},"name":"x.png"}],"role":"user","id":"1","created_at":"t"}
not json
"#,
        );
        let doc = conversation_doc("c", &ctx, &Theme::default());
        assert_eq!(doc.links.len(), 1);
        assert_eq!(doc.links[0].1, "workspace:///data/ab.png");
        assert!(
            doc.lines
                .iter()
                .any(|l| l.text.contains("line 2 is not a message"))
        );
        assert!(doc.lines[0].text.starts_with("── u (user)"));
    }

    #[test]
    fn links_in_plain_text() {
        let doc = text_doc(
            "t",
            "x <data url='workspace:///data/f.png' name='a'/>\n",
            false,
            &Theme::default(),
        );
        assert_eq!(doc.links, vec![(0, "workspace:///data/f.png".to_string())]);
    }
}
