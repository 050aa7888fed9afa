//! Offloading (docs/contract.md §6): data blobs into `data/`, messages into
//! `sessions/<id>/context.jsonl`, large tool results into
//! `sessions/<id>/tool_result-<id>.txt`.
//!
//! Better than the reference where its weak points are listed (§11 point 11
//! and 12): `context.jsonl` grows by an in-place append whose cost is the
//! bytes appended (never a read-and-rewrite), appends from concurrent
//! sessions never interleave, and tool-result names are claimed with an
//! exclusive create instead of an exists-loop.

use base64::Engine as _;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::AsyncRead;

use super::base::WorkspaceBase;
use super::error::{WorkspaceError, WsResult};
use super::events::{Event, OffloadKind};
use super::layout::names;
use super::message::{Block, DataBlock, DataSource, Msg, ToolOutput, ToolResultBlock};
use super::tools::OffloadSink;

/// Most `(n)` suffixes tried when claiming a tool-result file name.
const MAX_NAME_CLAIMS: u32 = 10_000;

/// File extension for a media type, as Python's `mimetypes.guess_extension`
/// gives it on a Debian host (docs/contract.md §2.2), `.bin` when unknown.
pub fn extension_for(media_type: &str) -> &'static str {
    let mt = media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mt.as_str() {
        "image/png" => ".png",
        "image/jpeg" | "image/jpg" => ".jpg",
        "image/gif" => ".gif",
        "image/webp" => ".webp",
        "image/bmp" => ".bmp",
        "image/tiff" => ".tiff",
        "image/svg+xml" => ".svg",
        "image/x-icon" | "image/vnd.microsoft.icon" => ".ico",
        "application/pdf" => ".pdf",
        "audio/mpeg" => ".mp3",
        "audio/ogg" => ".oga",
        "audio/x-wav" => ".wav",
        "video/mp4" => ".mp4",
        "video/webm" => ".webm",
        "text/plain" => ".txt",
        "text/html" => ".html",
        "text/csv" => ".csv",
        "text/markdown" => ".md",
        "application/json" => ".json",
        "application/zip" => ".zip",
        _ => ".bin",
    }
}

/// Media type guessed from a file's first bytes (magic numbers), for
/// showing blobs whose name carries no reliable type.
pub fn sniff_media_type(bytes: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"%PDF-", "application/pdf"),
        (b"PK\x03\x04", "application/zip"),
        (b"ID3", "audio/mpeg"),
        (b"\x1f\x8b", "application/gzip"),
    ];
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return Some("image/webp");
    }
    MAGIC
        .iter()
        .find(|(m, _)| bytes.starts_with(m))
        .map(|(_, t)| *t)
}

/// Pixel size of a PNG from its IHDR chunk.
pub fn png_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || !bytes.starts_with(b"\x89PNG\r\n\x1a\n") || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(bytes[16..20].try_into().ok()?);
    let h = u32::from_be_bytes(bytes[20..24].try_into().ok()?);
    Some((w, h))
}

/// One offloaded item of a session, for listings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OffloadItem {
    /// Kind.
    pub kind: OffloadKind,
    /// Session (`""` for data blobs).
    pub session: String,
    /// Backend path.
    pub path: String,
    /// `workspace:///...` URL for data blobs.
    pub url: Option<String>,
    /// Size in bytes.
    pub bytes: u64,
    /// Modification time, seconds since the Unix epoch.
    pub modified: Option<f64>,
}

/// The offloading of one workspace, reached through
/// `Workspace::offload`: it owns the name-claim hints and a
/// clone of the shared pieces.
#[derive(Debug)]
pub struct Offload {
    base: WorkspaceBase,
    /// Next `(n)` suffix to try per (session, result id): claims stay
    /// race-free through exclusive creates, the hint only skips names
    /// this process already took.
    claim_hints: std::sync::Mutex<std::collections::HashMap<(String, String), u32>>,
}

impl Offload {
    /// Offloading over `base`, with no names claimed yet.
    pub fn new(base: WorkspaceBase) -> Self {
        Offload {
            base,
            claim_hints: Default::default(),
        }
    }

    /// Stores a base64 data block in `data/<sha256(base64 text)><ext>`
    /// (written only if absent) and returns a copy whose source is the
    /// `workspace:///data/...` URL. Non-base64 blocks come back unchanged.
    ///
    /// Errors: invalid base64, backend failures.
    pub async fn data(&self, block: &DataBlock) -> WsResult<DataBlock> {
        let DataSource::Base64 { data, media_type } = &block.source else {
            return Ok(block.clone());
        };
        let digest = hex::encode(Sha256::digest(data.as_bytes()));
        let file = format!("{digest}{}", extension_for(media_type));
        let path = format!("{}/{file}", self.base.layout().data_dir());
        let exists = match self.base.sandbox().stat(&path).await {
            Ok(_) => true,
            Err(e) if e.is_not_found() => false,
            Err(e) => return Err(e.into()),
        };
        if !exists {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| {
                    WorkspaceError::Invalid(format!("data block {}: invalid base64: {e}", block.id))
                })?;
            self.base.sandbox().write(&path, &bytes).await?;
            self.base.publish(Event::OffloadWritten {
                session: String::new(),
                kind: OffloadKind::Data,
                path: path.clone(),
                bytes: bytes.len() as u64,
            });
        }
        let mut out = block.clone();
        out.source = DataSource::Url {
            url: format!("{}{}/{file}", names::DATA_URL_PREFIX, names::DATA_DIR),
            media_type: media_type.clone(),
        };
        Ok(out)
    }

    async fn blocks(&self, blocks: &mut [Block]) -> WsResult<()> {
        for b in blocks.iter_mut() {
            match b {
                Block::Data(d) => *d = self.data(d).await?,
                Block::ToolResult(tr) => {
                    if let ToolOutput::Blocks(inner) = &mut tr.output {
                        Box::pin(self.blocks(inner)).await?;
                    }
                }
                Block::Hint(map) => {
                    if let Some(list) = map.get_mut("hint").filter(|v| v.is_array()) {
                        let mut inner: Vec<Block> =
                            serde_json::from_value(list.clone()).map_err(|e| {
                                WorkspaceError::Invalid(format!(
                                    "hint block does not hold valid blocks: {e}"
                                ))
                            })?;
                        Box::pin(self.blocks(&mut inner)).await?;
                        *list = serde_json::to_value(inner).expect("blocks serialise");
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Appends `msgs` to `sessions/<session>/context.jsonl`, one compact
    /// JSON line each, after moving their base64 data blocks into `data/`.
    /// Returns the file's backend path. The append is in place and one
    /// call's lines land contiguously even with concurrent callers.
    pub async fn context(&self, session: &str, msgs: &[Msg]) -> WsResult<String> {
        let path = self.base.layout().context_file(session)?;
        if msgs.is_empty() {
            return Ok(path);
        }
        let mut buf = Vec::new();
        for m in msgs {
            let mut m = m.clone();
            self.blocks(&mut m.content).await?;
            serde_json::to_writer(&mut buf, &m).expect("message serialises");
            buf.push(b'\n');
        }
        self.base.append_or_rewrite(&path, &buf).await?;
        self.base.publish(Event::OffloadWritten {
            session: session.to_string(),
            kind: OffloadKind::Context,
            path: path.clone(),
            bytes: buf.len() as u64,
        });
        Ok(path)
    }

    /// Claims a fresh `tool_result-<id>.txt` (then `(1)`, `(2)`, ...) with
    /// an exclusive create, so concurrent writers never share a name.
    pub async fn claim_tool_result_path(&self, session: &str, result_id: &str) -> WsResult<String> {
        let key = (session.to_string(), result_id.to_string());
        let start = self
            .claim_hints
            .lock()
            .expect("hints lock")
            .get(&key)
            .copied()
            .unwrap_or(0);
        for n in start..MAX_NAME_CLAIMS {
            let path = self.base.layout().tool_result_file(session, result_id, n)?;
            if self.base.sandbox().create_new(&path, b"").await? {
                let mut hints = self.claim_hints.lock().expect("hints lock");
                let next = hints.entry(key).or_insert(0);
                *next = (*next).max(n + 1);
                return Ok(path);
            }
        }
        Err(WorkspaceError::Invalid(format!(
            "more than {MAX_NAME_CLAIMS} tool results named {result_id} in session {session}"
        )))
    }

    /// Writes a tool result's text to a fresh `tool_result-<id>.txt` and
    /// returns its backend path. Text output is written as is; block lists
    /// are concatenated, data blocks (offloaded to `data/` first) becoming
    /// `<data url='...' name='...' media_type='...'/>`.
    ///
    /// The text is written from the buffer it lives in (a text output is
    /// not copied; a block list is joined once) with one atomic write of
    /// the claimed file: no stream, no intermediate buffer (issue 18).
    pub async fn tool_result(&self, session: &str, block: &ToolResultBlock) -> WsResult<String> {
        let joined;
        let text: &str = match &block.output {
            ToolOutput::Text(t) => t,
            ToolOutput::Blocks(blocks) => {
                let mut out = String::new();
                for b in blocks {
                    match b {
                        Block::Text(t) => out.push_str(&t.text),
                        Block::Data(d) => {
                            let d = self.data(d).await?;
                            if let DataSource::Url { url, media_type } = &d.source {
                                out.push_str(&format!(
                                    "<data url='{url}' name='{}' media_type='{media_type}'/>",
                                    d.name.as_deref().unwrap_or("")
                                ));
                            }
                        }
                        _ => {}
                    }
                }
                joined = out;
                &joined
            }
        };
        let path = self.claim_tool_result_path(session, &block.id).await?;
        if let Err(e) = self.base.sandbox().write(&path, text.as_bytes()).await {
            return Err(self.unclaim(path, e).await);
        }
        self.base.publish(Event::OffloadWritten {
            session: session.to_string(),
            kind: OffloadKind::ToolResult,
            path: path.clone(),
            bytes: text.len() as u64,
        });
        Ok(path)
    }

    /// The error of a failed tool-result write, after removing the claimed
    /// file: it holds nothing useful, and an empty or partial tool-result
    /// file would mislead. The message says whether the removal worked.
    async fn unclaim(&self, path: String, e: crate::backend::BackendError) -> WorkspaceError {
        let cleanup = match self.base.sandbox().remove(&path, false).await {
            Ok(()) => "nothing was kept".to_string(),
            Err(r) if r.is_not_found() => "nothing was kept".to_string(),
            Err(r) => format!("removing the partial file failed too: {r}"),
        };
        WorkspaceError::OffloadFailed {
            path,
            cleanup,
            source: e,
        }
    }

    /// Streams a tool result's full text into a fresh tool-result file
    /// (used by Bash for outputs too large to hold in memory).
    ///
    /// Errors: the claim's, or a failed write (disk full), after which
    /// the claimed file is removed; the message says whether that worked.
    pub async fn tool_result_stream(
        &self,
        session: &str,
        result_id: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> WsResult<String> {
        let path = self.claim_tool_result_path(session, result_id).await?;
        let bytes = match self.base.sandbox().write_stream(&path, reader).await {
            Ok(n) => n,
            Err(e) => return Err(self.unclaim(path, e).await),
        };
        self.base.publish(Event::OffloadWritten {
            session: session.to_string(),
            kind: OffloadKind::ToolResult,
            path: path.clone(),
            bytes,
        });
        Ok(path)
    }

    /// Offloaded items: context files and tool results of `session` (all
    /// sessions when `None`), then data blobs; newest first.
    pub async fn list(&self, session: Option<&str>) -> WsResult<Vec<OffloadItem>> {
        let sessions = match session {
            Some(s) => vec![s.to_string()],
            None => self.base.session_ids().await?,
        };
        let mut out = Vec::new();
        for s in sessions {
            let dir = self.base.layout().session_dir(&s)?;
            let entries = match self.base.sandbox().list(&dir).await {
                Ok(e) => e,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            };
            for e in entries {
                let kind = if e.name == names::CONTEXT_FILE {
                    OffloadKind::Context
                } else if e.name.starts_with("tool_result-") && e.name.ends_with(".txt") {
                    OffloadKind::ToolResult
                } else {
                    continue;
                };
                out.push(OffloadItem {
                    kind,
                    session: s.clone(),
                    path: format!("{dir}/{}", e.name),
                    url: None,
                    bytes: e.size,
                    modified: epoch_secs(e.modified),
                });
            }
        }
        if session.is_none() {
            out.extend(self.list_data_blobs().await?);
        } else if let Some(s) = session {
            // Only the blobs this session's files point at.
            let refs = self.data_refs_of_session(s).await?;
            out.extend(
                self.list_data_blobs()
                    .await?
                    .into_iter()
                    .filter(|b| b.url.as_ref().is_some_and(|u| refs.contains(u))),
            );
        }
        out.sort_by(|a, b| {
            b.modified
                .partial_cmp(&a.modified)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.path.cmp(&b.path))
        });
        Ok(out)
    }

    async fn list_data_blobs(&self) -> WsResult<Vec<OffloadItem>> {
        let dir = self.base.layout().data_dir();
        let entries = match self.base.sandbox().list(&dir).await {
            Ok(e) => e,
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        Ok(entries
            .into_iter()
            .filter(|e| e.kind == crate::backend::FileKind::File)
            .map(|e| OffloadItem {
                kind: OffloadKind::Data,
                session: String::new(),
                url: Some(format!(
                    "{}{}/{}",
                    names::DATA_URL_PREFIX,
                    names::DATA_DIR,
                    e.name
                )),
                path: format!("{dir}/{}", e.name),
                bytes: e.size,
                modified: epoch_secs(e.modified),
            })
            .collect())
    }

    /// `workspace:///data/...` URLs mentioned in a session's offloads.
    async fn data_refs_of_session(
        &self,
        session: &str,
    ) -> WsResult<std::collections::HashSet<String>> {
        let dir = self.base.layout().session_dir(session)?;
        let mut refs = std::collections::HashSet::new();
        let entries = match self.base.sandbox().list(&dir).await {
            Ok(e) => e,
            Err(e) if e.is_not_found() => return Ok(refs),
            Err(e) => return Err(e.into()),
        };
        let needle = format!("{}{}/", names::DATA_URL_PREFIX, names::DATA_DIR);
        for e in entries
            .iter()
            .filter(|e| e.name.ends_with(".jsonl") || e.name.ends_with(".txt"))
        {
            // Large files are scanned in ranges so memory stays bounded.
            let path = format!("{dir}/{}", e.name);
            let text = self.base.read_text_prefix(&path, 64 * 1024 * 1024).await?;
            let mut rest = text.as_str();
            while let Some(i) = rest.find(&needle) {
                let tail = &rest[i..];
                let end = tail
                    .find(['"', '\'', ' ', '<', '>', '\n'])
                    .unwrap_or(tail.len());
                refs.insert(tail[..end].to_string());
                rest = &tail[end..];
            }
        }
        Ok(refs)
    }
}

#[async_trait::async_trait]
impl OffloadSink for Offload {
    async fn tool_result_stream(
        &self,
        session: &str,
        result_id: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> WsResult<String> {
        Offload::tool_result_stream(self, session, result_id, reader).await
    }
}

pub(crate) fn epoch_secs(t: Option<std::time::SystemTime>) -> Option<f64> {
    t.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_match_python() {
        assert_eq!(extension_for("image/png"), ".png");
        assert_eq!(extension_for("image/jpeg"), ".jpg");
        assert_eq!(extension_for("audio/mpeg"), ".mp3");
        assert_eq!(extension_for("application/x-unknown"), ".bin");
    }

    #[test]
    fn sniffs_png() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x02\0\0\0\x03";
        assert_eq!(sniff_media_type(png), Some("image/png"));
        assert_eq!(png_dimensions(png), Some((2, 3)));
    }
}
