//! Sessions of a workspace, from `sessions/` and the journals.

use serde::Serialize;

use super::base::WorkspaceBase;
use super::error::WsResult;
use super::journal::{Journal, JournalRead};
use super::layout::names;
use super::message::Msg;
use super::offload::{Offload, OffloadItem, epoch_secs};
use crate::backend::FileKind;

/// One session at a glance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    /// Session id (its directory name).
    pub id: String,
    /// Latest modification among the session's files, seconds since epoch.
    pub last_activity: Option<f64>,
    /// Tool calls in the journal.
    pub tool_calls: usize,
    /// Offloaded files: context.jsonl (if any) plus tool results.
    pub offloads: usize,
    /// Size of context.jsonl in bytes (0 if absent).
    pub context_bytes: u64,
}

/// Everything about one session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionDetail {
    /// The summary.
    pub summary: SessionSummary,
    /// Journal entries (and unreadable lines).
    pub journal: JournalRead,
    /// Offloaded items, newest first (including data blobs it refers to).
    pub offloads: Vec<OffloadItem>,
}

/// Messages read back from a `context.jsonl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContextRead {
    /// Messages in file order.
    pub messages: Vec<Msg>,
    /// `(line number, parser message)` of lines that are not messages.
    pub bad_lines: Vec<(usize, String)>,
    /// How many of `bad_lines` are torn records (cut short by a failed
    /// write; the messages after them are intact).
    pub torn: usize,
}

/// Parses context.jsonl bytes; bad lines are reported, not fatal, and a
/// torn record does not hide the message after it.
pub fn parse_context(bytes: &[u8]) -> ContextRead {
    let p = super::jsonl::parse(bytes);
    ContextRead {
        messages: p.values,
        bad_lines: p.bad_lines,
        torn: p.torn,
    }
}

/// The sessions of one workspace, reached through
/// `Workspace::sessions`.
#[derive(Debug, Clone, Copy)]
pub struct Sessions<'a> {
    base: &'a WorkspaceBase,
    offload: &'a Offload,
}

impl<'a> Sessions<'a> {
    /// The sessions under `base`'s `sessions/`; `offload` lists their files.
    pub fn new(base: &'a WorkspaceBase, offload: &'a Offload) -> Self {
        Sessions { base, offload }
    }

    /// Ids of the session directories under `sessions/`, sorted.
    pub async fn ids(self) -> WsResult<Vec<String>> {
        self.base.session_ids().await
    }

    /// Summary of one session (a missing session gives an empty summary).
    pub async fn summary(self, id: &str) -> WsResult<SessionSummary> {
        let dir = self.base.layout().session_dir(id)?;
        let entries = match self.base.sandbox().list(&dir).await {
            Ok(e) => e,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut s = SessionSummary {
            id: id.to_string(),
            last_activity: None,
            tool_calls: 0,
            offloads: 0,
            context_bytes: 0,
        };
        for e in entries.iter().filter(|e| e.kind == FileKind::File) {
            let t = epoch_secs(e.modified);
            if t > s.last_activity {
                s.last_activity = t;
            }
            if e.name == names::CONTEXT_FILE {
                s.offloads += 1;
                s.context_bytes = e.size;
            } else if e.name.starts_with("tool_result-") {
                s.offloads += 1;
            }
        }
        // Tool calls are counted in the merged timeline, so a session the
        // reference wrote (context.jsonl only) counts its calls too.
        let sources = [
            names::JOURNAL_FILE,
            names::CONTEXT_FILE,
            super::timeline::AGENT_LOG_FILE,
            super::timeline::AGENT_STATE_FILE,
        ];
        if entries.iter().any(|e| sources.contains(&e.name.as_str())) {
            s.tool_calls = self.timeline(id).await?.tool_calls;
        }
        Ok(s)
    }

    /// Summaries of every session, most recently active first.
    pub async fn list(self) -> WsResult<Vec<SessionSummary>> {
        let mut out = Vec::new();
        for id in self.ids().await? {
            out.push(self.summary(&id).await?);
        }
        out.sort_by(|a, b| {
            b.last_activity
                .partial_cmp(&a.last_activity)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(out)
    }

    /// Journal and offloads of one session.
    pub async fn detail(self, id: &str) -> WsResult<SessionDetail> {
        Ok(SessionDetail {
            summary: self.summary(id).await?,
            journal: Journal::new(self.base).read(id).await?,
            offloads: self.offload.list(Some(id)).await?,
        })
    }

    /// The merged timeline of one session (see [`super::timeline`]); each
    /// file is read to at most [`super::timeline::FILE_BYTES`], cut back
    /// to its last whole line, and what was left is noted. A missing
    /// session gives an empty timeline.
    pub async fn timeline(self, id: &str) -> WsResult<super::timeline::Timeline> {
        use super::timeline as tl;
        let dir = self.base.layout().session_dir(id)?;
        let entries = match self.base.sandbox().list(&dir).await {
            Ok(e) => e,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let mut inputs = tl::TimelineInputs::default();
        for e in entries.iter().filter(|e| e.kind == FileKind::File) {
            let path = format!("{dir}/{}", e.name);
            let slot = match e.name.as_str() {
                names::JOURNAL_FILE => &mut inputs.journal,
                tl::AGENT_LOG_FILE => &mut inputs.agent_log,
                names::CONTEXT_FILE => &mut inputs.context,
                tl::AGENT_STATE_FILE => &mut inputs.state,
                n if n.starts_with("tool_result-") => {
                    inputs.result_files.push((path, e.size));
                    continue;
                }
                _ => continue,
            };
            let range = crate::backend::ByteRange {
                offset: 0,
                len: tl::FILE_BYTES,
            };
            let bytes = self.base.sandbox().read(&path, Some(range)).await?;
            if e.name == tl::AGENT_STATE_FILE && e.size > bytes.len() as u64 {
                inputs.notes.push(format!(
                    "{}: {} bytes, over the {} read; not read",
                    e.name,
                    e.size,
                    tl::FILE_BYTES
                ));
                continue;
            }
            *slot = Some(tl::bound_lines(bytes, e.size, &e.name, &mut inputs.notes));
        }
        inputs.result_files.sort();
        Ok(tl::build(id, inputs))
    }

    /// Reads a session's `context.jsonl` back as messages.
    pub async fn read_context(self, session: &str) -> WsResult<ContextRead> {
        let path = self.base.layout().context_file(session)?;
        match self.base.sandbox().read(&path, None).await {
            Ok(b) => Ok(parse_context(&b)),
            Err(e) if e.is_not_found() => Ok(ContextRead::default()),
            Err(e) => Err(e.into()),
        }
    }
}
