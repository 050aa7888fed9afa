//! `wsbench sessions export ID --format md|html` (issue 20 point 7): a
//! self-contained report of one session for sharing a demo or a bug.
//!
//! * [`gather`] reads what the report shows, each piece bounded in bytes:
//!   the merged [timeline](crate::engine::timeline), the compressed-away
//!   messages of `context.jsonl`, the live conversation and summary of
//!   `agent_state.json`, and the image blobs the messages point at;
//! * [`doc`] turns that into one neutral document (headings, tables,
//!   folded code, images), so the two formats cannot drift apart;
//! * [`markdown`] and [`html`] print the document.
//!
//! Everything the workspace wrote is escaped for the format: a report
//! opened in a browser runs no script from a tool result.

mod doc;
mod html;
mod markdown;

use serde_json::Value;

use crate::engine::Workspace;
use crate::engine::message::{Block, DataSource, Msg, ToolOutput};
use crate::engine::sessions::{ContextRead, parse_context};
use crate::engine::timeline::{AGENT_STATE_FILE, FILE_BYTES, Timeline};
use crate::engine::workspace::WsResult;

pub use doc::{Doc, Node};

/// Bytes of one image embedded in a report; a bigger one is linked.
pub const IMAGE_BYTES: u64 = 2 * 1024 * 1024;

/// Bytes of all images embedded in one report together.
pub const IMAGES_TOTAL_BYTES: u64 = 8 * 1024 * 1024;

/// Bytes of one text (a message, a tool result) shown in a report; the
/// rest is left out with a note naming where the full text is.
pub const TEXT_BYTES: usize = 64 * 1024;

/// The report's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Markdown (GitHub's flavour: tables, `<details>` folds).
    Md,
    /// One HTML file with its style inline and images as data URLs.
    Html,
}

impl Format {
    /// The format a file name's extension asks for (`.md`, `.markdown`,
    /// `.html`, `.htm`); `None` for any other.
    pub fn from_path(path: &std::path::Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "md" | "markdown" => Some(Format::Md),
            "html" | "htm" => Some(Format::Html),
            _ => None,
        }
    }
}

/// An image a message points at, read for embedding.
#[derive(Debug, Clone)]
pub struct Image {
    /// Its bytes, or why they are not embedded (too big, unreadable).
    pub bytes: Result<Vec<u8>, String>,
    /// Media type as the message gives it.
    pub media_type: String,
}

/// What a report shows of one session.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Session id.
    pub session: String,
    /// Workspace directory (as the backend names it).
    pub workdir: String,
    /// The merged timeline.
    pub timeline: Timeline,
    /// Messages compressed away into `context.jsonl` (at most
    /// [`FILE_BYTES`] of it read).
    pub offloaded: ContextRead,
    /// The compression summary of `agent_state.json`, if any.
    pub summary: Option<String>,
    /// The live conversation of `agent_state.json` (wsbench's agent).
    pub live: Vec<Msg>,
    /// Images by their `workspace:///` URL.
    pub images: std::collections::BTreeMap<String, Image>,
    /// What could not be read.
    pub notes: Vec<String>,
}

/// Reads session `id` of `ws` for a report.
///
/// Errors: a session id that is not valid, or a backend error other than
/// a missing file. A session with nothing to show gives an empty report
/// (the caller says so).
pub async fn gather(ws: &Workspace, id: &str) -> WsResult<Report> {
    let timeline = ws.sessions().timeline(id).await?;
    let layout = ws.layout();
    let mut notes = Vec::new();
    let offloaded = match read_bounded(ws, &layout.context_file(id)?, &mut notes).await? {
        Some(b) => parse_context(&b),
        None => ContextRead::default(),
    };
    let state_path = format!("{}/{AGENT_STATE_FILE}", layout.session_dir(id)?);
    let (summary, live) = match read_bounded(ws, &state_path, &mut notes).await? {
        Some(b) => match serde_json::from_slice::<Value>(&b) {
            Ok(v) => (
                v.get("summary").and_then(Value::as_str).map(str::to_string),
                v.get("context")
                    .and_then(|c| serde_json::from_value::<Vec<Msg>>(c.clone()).ok())
                    .unwrap_or_default(),
            ),
            Err(e) => {
                notes.push(format!("{AGENT_STATE_FILE}: not JSON ({e}); not shown"));
                (None, Vec::new())
            }
        },
        None => (None, Vec::new()),
    };
    let mut report = Report {
        session: id.to_string(),
        workdir: layout.workdir().to_string(),
        timeline,
        offloaded,
        summary,
        live,
        images: Default::default(),
        notes,
    };
    read_images(ws, &mut report).await;
    Ok(report)
}

/// Renders `report` in `format`.
pub fn render(report: &Report, format: Format) -> String {
    let d = doc::build(report);
    match format {
        Format::Md => markdown::render(&d),
        Format::Html => html::render(&d),
    }
}

/// A file's first [`FILE_BYTES`], cut back to a whole line with a note
/// when it is longer; `None` when it does not exist.
async fn read_bounded(
    ws: &Workspace,
    path: &str,
    notes: &mut Vec<String>,
) -> WsResult<Option<Vec<u8>>> {
    let sb = ws.sandbox();
    let size = match sb.stat(path).await {
        Ok(s) => s.size,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let range = crate::backend::ByteRange {
        offset: 0,
        len: FILE_BYTES,
    };
    let bytes = sb.read(path, Some(range)).await?;
    let name = path.rsplit('/').next().unwrap_or(path);
    Ok(Some(crate::engine::timeline::bound_lines(
        bytes, size, name, notes,
    )))
}

/// Reads the images the messages point at (`workspace:///` URLs), up to
/// [`IMAGE_BYTES`] each and [`IMAGES_TOTAL_BYTES`] in all; the others are
/// recorded with the reason, so the report links them instead.
async fn read_images(ws: &Workspace, report: &mut Report) {
    let urls: Vec<(String, String)> = report
        .offloaded
        .messages
        .iter()
        .chain(&report.live)
        .flat_map(|m| blocks_deep(&m.content))
        .filter_map(|b| match b {
            Block::Data(d) => match &d.source {
                DataSource::Url { url, media_type } if media_type.starts_with("image/") => {
                    Some((url.clone(), media_type.clone()))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    let mut total = 0u64;
    for (url, media_type) in urls {
        if report.images.contains_key(&url) {
            continue;
        }
        let bytes = read_image(ws, &url, &mut total).await;
        report.images.insert(url, Image { bytes, media_type });
    }
}

async fn read_image(ws: &Workspace, url: &str, total: &mut u64) -> Result<Vec<u8>, String> {
    let path = ws
        .layout()
        .resolve_reference(url)
        .map_err(|e| e.to_string())?;
    let size = ws
        .sandbox()
        .stat(&path)
        .await
        .map_err(|e| e.to_string())?
        .size;
    if size > IMAGE_BYTES {
        return Err(format!(
            "{size} bytes, over the {IMAGE_BYTES}-byte limit for an embedded image"
        ));
    }
    if *total + size > IMAGES_TOTAL_BYTES {
        return Err(format!(
            "the report already embeds {total} bytes of images (limit {IMAGES_TOTAL_BYTES})"
        ));
    }
    let bytes = ws
        .sandbox()
        .read(&path, None)
        .await
        .map_err(|e| e.to_string())?;
    *total += bytes.len() as u64;
    Ok(bytes)
}

/// The blocks of a message, with those inside tool results' outputs.
fn blocks_deep(content: &[Block]) -> Vec<&Block> {
    let mut out = Vec::new();
    for b in content {
        out.push(b);
        if let Block::ToolResult(r) = b
            && let ToolOutput::Blocks(inner) = &r.output
        {
            out.extend(blocks_deep(inner));
        }
    }
    out
}

#[cfg(test)]
mod tests;
