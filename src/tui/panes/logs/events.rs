//! Engine events as log lines: what each bus event says in Logs, and a
//! workspace state as a short phrase (shared with the status line).

use crate::backend::text::head_bytes;
use crate::engine::events::{Event, OffloadKind};
use crate::tui::action::Level;
use crate::tui::widgets::text;

use super::LogsPane;

/// A workspace state as a short phrase: `leased`, `failed: reason`.
pub(crate) fn workspace_state(s: &crate::engine::events::WorkspaceState) -> String {
    use crate::engine::events::WorkspaceState as S;
    match s {
        S::Failed { reason } => format!("failed: {reason}"),
        S::Lost { health, reason } => format!("lost ({health}): {reason}"),
        S::Replaced { notice } => format!("replaced: {notice}"),
        S::Restarted { notice } => format!("restarted: {notice}"),
        S::Created { files_kept: true } => "created (files kept)".into(),
        S::Created { files_kept: false } => "created".into(),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| v.get("state").and_then(|s| s.as_str()).map(String::from))
            .unwrap_or_else(|| format!("{other:?}").to_lowercase()),
    }
}

impl LogsPane {
    /// One engine event as a log line (`None` for output chunks, which the
    /// Command pane shows).
    pub fn describe(ev: &Event) -> Option<(Level, String, String)> {
        Some(match ev {
            Event::Workspace { state } => (
                if matches!(state, crate::engine::events::WorkspaceState::Failed { .. }) {
                    Level::Error
                } else if matches!(
                    state,
                    crate::engine::events::WorkspaceState::Lost { .. }
                        | crate::engine::events::WorkspaceState::Replaced { .. }
                ) {
                    Level::Warn
                } else {
                    Level::Info
                },
                "workspace".into(),
                format!("workspace {}", workspace_state(state)),
            ),
            Event::ToolStarted {
                tool,
                call_id,
                session,
                args,
                ..
            } => {
                let mut a = args.to_string();
                if a.len() > 200 {
                    a.truncate(head_bytes(&a, 200).len());
                    a.push('…');
                }
                (
                    Level::Debug,
                    "tool".into(),
                    format!("{tool} started ({call_id}, session {session}) {a}"),
                )
            }
            Event::ToolFinished {
                tool,
                call_id,
                state,
                duration_ms,
            } => (
                if state == "success" {
                    Level::Info
                } else {
                    Level::Warn
                },
                "tool".into(),
                format!(
                    "{tool} {state} in {} ({call_id})",
                    text::duration_ms(*duration_ms)
                ),
            ),
            Event::CommandStarted {
                command, session, ..
            } => (
                Level::Info,
                "command".into(),
                format!("[{session}] $ {}", command.replace('\n', " ⏎ ")),
            ),
            Event::CommandOutput { .. } => return None,
            Event::CommandExited {
                exit_code,
                timed_out,
                cancelled,
                duration_ms,
                ..
            } => {
                let what = if *timed_out {
                    "timed out".to_string()
                } else if *cancelled {
                    "killed".to_string()
                } else {
                    format!(
                        "exit {}",
                        exit_code
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "?".into())
                    )
                };
                let lvl = if *exit_code == Some(0) {
                    Level::Info
                } else {
                    Level::Warn
                };
                (
                    lvl,
                    "command".into(),
                    format!("{what} after {}", text::duration_ms(*duration_ms)),
                )
            }
            Event::FileChanged { path, kind } => (
                Level::Debug,
                "file".into(),
                format!("{kind:?} {path}").to_lowercase(),
            ),
            Event::SkillAdded { agent, name } => (
                Level::Info,
                "skills".into(),
                format!("added {name} to {agent}"),
            ),
            Event::SkillRemoved { agent, name } => (
                Level::Info,
                "skills".into(),
                format!("removed {name} from {agent}"),
            ),
            Event::OffloadWritten {
                session,
                kind,
                path,
                bytes,
            } => {
                let k = match kind {
                    OffloadKind::Context => "context",
                    OffloadKind::ToolResult => "tool result",
                    OffloadKind::Data => "data",
                };
                let s = if session.is_empty() {
                    String::new()
                } else {
                    format!("[{session}] ")
                };
                (
                    Level::Info,
                    "offload".into(),
                    format!("{s}{k} {} → {path}", text::human_size(*bytes)),
                )
            }
            Event::McpState {
                agent,
                session,
                server,
                state,
                detail,
            } => (
                if state == "failed" || state == "crashed" {
                    Level::Error
                } else {
                    Level::Info
                },
                "mcp".into(),
                format!(
                    "{server} ({agent}/{session}) {state}{}",
                    detail
                        .as_ref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                ),
            ),
            Event::Log {
                level,
                source,
                message,
            } => (
                Level::parse(level),
                format!("engine:{source}"),
                message.clone(),
            ),
        })
    }
}
