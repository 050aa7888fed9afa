//! `wsbench offload list [--session S] | show PATH-OR-URL`.

use super::output::say;
use clap::Subcommand;
use serde_json::json;

use super::{Ctx, output};
use crate::engine::Workspace;
use crate::engine::layout::names;
use crate::engine::message::{Block, DataSource, Msg, ToolOutput};
use crate::engine::offload::{png_dimensions, sniff_media_type};
use crate::engine::sessions::parse_context;

/// Offload sub-commands.
#[derive(Debug, Subcommand)]
pub enum OffloadCmd {
    /// Offloaded context, tool results and data blobs, newest first (of the
    /// `--session` given, else of every session).
    List,
    /// Shows one offload: a context.jsonl as a conversation, a tool result
    /// as text, a data blob as its size and type. Takes a backend path, a
    /// path relative to the workspace, or a `workspace:///` URL.
    Show {
        /// Path or URL.
        target: String,
    },
}

pub(super) async fn run(ctx: &Ctx, cmd: OffloadCmd) -> anyhow::Result<i32> {
    let ws = ctx.root.open_workspace().await?;
    match cmd {
        OffloadCmd::List => {
            if let Some(s) = ctx.root.global.session.as_deref()
                && !ws.sessions().ids().await?.iter().any(|id| id == s)
            {
                anyhow::bail!("no session `{s}` in {}", ws.layout().workdir());
            }
            let items = ws
                .offload()
                .list(ctx.root.global.session.as_deref())
                .await?;
            if ctx.json {
                output::json(&items)?;
            } else {
                let rows: Vec<Vec<String>> = items
                    .iter()
                    .map(|o| {
                        vec![
                            output::time(o.modified),
                            serde_json::to_value(o.kind)
                                .ok()
                                .and_then(|v| v.as_str().map(String::from))
                                .unwrap_or_default(),
                            if o.session.is_empty() {
                                "-".into()
                            } else {
                                o.session.clone()
                            },
                            output::size(o.bytes),
                            o.url.clone().unwrap_or_else(|| o.path.clone()),
                        ]
                    })
                    .collect();
                output::table(&["MODIFIED", "KIND", "SESSION", "SIZE", "PATH"], &rows);
            }
        }
        OffloadCmd::Show { target } => {
            let path = ws.layout().resolve_reference(&target)?;
            return show(ctx, &ws, &path).await;
        }
    }
    Ok(0)
}

/// Shows one offload at a backend path inside the workspace.
pub(super) async fn show(ctx: &Ctx, ws: &Workspace, path: &str) -> anyhow::Result<i32> {
    let target = path;
    let path = path.to_string();
    let stat = ws
        .sandbox()
        .stat(&path)
        .await
        .map_err(|e| anyhow::anyhow!("{target}: {e}"))?;
    anyhow::ensure!(!stat.is_dir_like(), "{target} is a directory");
    let name = path.rsplit('/').next().unwrap_or("");
    let in_data = path.starts_with(&format!("{}/", ws.layout().data_dir()));
    if name == names::CONTEXT_FILE || name.ends_with(".jsonl") && !in_data {
        let bytes = ws.sandbox().read(&path, None).await?;
        let ctx_read = parse_context(&bytes);
        if ctx.json {
            output::json(
                &json!({"path": path, "messages": ctx_read.messages, "bad_lines": ctx_read.bad_lines, "torn": ctx_read.torn}),
            )?;
        } else {
            for m in &ctx_read.messages {
                print_message(m);
            }
            for (line, msg) in &ctx_read.bad_lines {
                say!("!! line {line} is not a message: {msg}");
            }
        }
        return Ok(0);
    }
    let head = ws
        .sandbox()
        .read(
            &path,
            Some(crate::backend::ByteRange {
                offset: 0,
                len: 4096,
            }),
        )
        .await?;
    let sniffed = sniff_media_type(&head);
    let is_text = sniffed.is_none() && !head.contains(&0) && !in_data;
    if is_text {
        let bytes = ws.sandbox().read(&path, None).await?;
        if ctx.json {
            output::json(
                &json!({"path": path, "bytes": stat.size, "text": String::from_utf8_lossy(&bytes)}),
            )?;
        } else {
            use std::io::Write as _;
            // A text file of the workspace: shown terminal-safe.
            std::io::stdout().write_all(&crate::root::safe_text::bytes_for_lines(&bytes))?;
            if !bytes.ends_with(b"\n") {
                say!();
            }
        }
    } else {
        let media = sniffed.unwrap_or("application/octet-stream");
        let dims = png_dimensions(&head);
        if ctx.json {
            output::json(&json!({
                "path": path, "bytes": stat.size, "media_type": media,
                "width": dims.map(|d| d.0), "height": dims.map(|d| d.1),
            }))?;
        } else {
            say!("path:       {path}");
            say!(
                "size:       {} bytes ({})",
                stat.size,
                output::size(stat.size)
            );
            say!("media type: {media}");
            if let Some((w, h)) = dims {
                say!("dimensions: {w}x{h}");
            }
        }
    }
    Ok(0)
}

fn print_message(m: &Msg) {
    say!("── {} ({}) · {}", m.name, m.role, m.created_at);
    for b in &m.content {
        match b {
            Block::Text(t) => say!("{}", t.text),
            Block::Thinking(_) => say!("[thinking] {}", b.as_text().unwrap_or("")),
            Block::Hint(h) => say!(
                "[hint] {}",
                h.get("hint").map(|v| v.to_string()).unwrap_or_default()
            ),
            Block::ToolCall(c) => say!(
                "[tool call {} {}] {}",
                c.name,
                c.id,
                c.input
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| c.input.to_string())
            ),
            Block::ToolResult(r) => {
                say!("[tool result {} {} · {}]", r.name, r.id, r.state);
                match &r.output {
                    ToolOutput::Text(t) => say!("{t}"),
                    ToolOutput::Blocks(bs) => {
                        for b in bs {
                            match b {
                                Block::Text(t) => say!("{}", t.text),
                                Block::Data(d) => print_data(d.name.as_deref(), &d.source),
                                _ => {}
                            }
                        }
                    }
                }
            }
            Block::Data(d) => print_data(d.name.as_deref(), &d.source),
        }
    }
    say!();
}

fn print_data(name: Option<&str>, source: &DataSource) {
    match source {
        DataSource::Url { url, media_type } => {
            say!("[data {} {media_type}] {url}", name.unwrap_or(""))
        }
        DataSource::Base64 { data, media_type } => {
            say!(
                "[data {} {media_type}, {} base64 chars inline]",
                name.unwrap_or(""),
                data.len()
            )
        }
    }
}
