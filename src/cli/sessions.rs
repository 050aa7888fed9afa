//! `wsbench sessions list | show ID | export ID`.

use super::output::say;
use clap::Subcommand;

use super::{Ctx, output};

/// Session sub-commands.
#[derive(Debug, Subcommand)]
pub enum SessionsCmd {
    /// Every session with last activity, tool calls and offload count.
    List,
    /// Journal entries and offloads of one session.
    Show {
        /// Session id.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::sessions))]
        id: String,
        /// Render the session's offloaded context (context.jsonl) as a
        /// conversation instead.
        #[arg(long, conflicts_with = "timeline")]
        context: bool,
        /// Show the merged timeline (journal.jsonl, agent.jsonl,
        /// context.jsonl, agent_state.json): one row per turn, tool call,
        /// offload and compression; with `--json`, the rows as JSON.
        #[arg(long)]
        timeline: bool,
    },
    /// Write a self-contained report of one session (timeline, compression
    /// summary, the conversation with tool results folded, images inline,
    /// tokens per turn) for sharing a demo or a bug.
    Export {
        /// Session id.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::sessions))]
        id: String,
        /// Report format (default: from `--output`'s extension, else md).
        #[arg(long, value_enum)]
        format: Option<crate::root::export::Format>,
        /// Write the report to this file (atomically) instead of stdout.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
    },
}

pub(super) async fn run(ctx: &Ctx, cmd: SessionsCmd) -> anyhow::Result<i32> {
    let ws = ctx.root.open_workspace().await?;
    match cmd {
        SessionsCmd::List => {
            let list = ws.sessions().list().await?;
            if ctx.json {
                output::json(&list)?;
            } else if list.is_empty() {
                say!("no sessions in {}", ws.layout().workdir());
            } else {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|s| {
                        vec![
                            s.id.clone(),
                            output::time(s.last_activity),
                            s.tool_calls.to_string(),
                            s.offloads.to_string(),
                            output::size(s.context_bytes),
                        ]
                    })
                    .collect();
                output::table(
                    &[
                        "SESSION",
                        "LAST ACTIVITY",
                        "TOOL CALLS",
                        "OFFLOADS",
                        "CONTEXT",
                    ],
                    &rows,
                );
            }
        }
        SessionsCmd::Export { id, format, output } => {
            return export(&ws, &id, format, output.as_deref()).await;
        }
        SessionsCmd::Show {
            id, timeline: true, ..
        } => {
            let t = ws.sessions().timeline(&id).await?;
            if t.rows.is_empty() && t.notes.is_empty() {
                anyhow::bail!(
                    "no timeline for session `{id}` in {}",
                    ws.layout().workdir()
                );
            }
            if ctx.json {
                output::json(&t)?;
            } else {
                print_timeline(&t);
            }
        }
        SessionsCmd::Show {
            id, context: true, ..
        } => {
            let path = ws.layout().context_file(&id)?;
            return super::offload::show(ctx, &ws, &path).await;
        }
        SessionsCmd::Show {
            id, context: false, ..
        } => {
            let d = ws.sessions().detail(&id).await?;
            if d.summary.last_activity.is_none()
                && d.journal.entries.is_empty()
                && d.offloads.is_empty()
            {
                anyhow::bail!("no session `{id}` in {}", ws.layout().workdir());
            }
            if ctx.json {
                output::json(&d)?;
                return Ok(0);
            }
            say!(
                "session {id}  (last activity {})",
                output::time(d.summary.last_activity)
            );
            say!("\ntool calls ({}):", d.journal.entries.len());
            for e in &d.journal.entries {
                let status = match (e.exit_code, e.timed_out) {
                    (_, true) => "timeout".to_string(),
                    (Some(c), _) => format!("exit {c}"),
                    (None, _) => e.state.as_str().to_string(),
                };
                say!(
                    "  {}  {:<5} {:>9} {:>7}ms  {}",
                    e.started_at
                        .with_timezone(&chrono::Local)
                        .format("%Y-%m-%d %H:%M:%S"),
                    e.tool,
                    status,
                    e.duration_ms,
                    e.summary()
                );
                if let Some(p) = &e.offload_path {
                    say!("        full output: {p}");
                }
            }
            for (line, msg) in &d.journal.bad_lines {
                say!("  journal line {line} unreadable: {msg}");
            }
            if d.journal.torn > 0 {
                println!(
                    "  {} torn journal record(s): a write was cut short; the entries after it are intact",
                    d.journal.torn
                );
            }
            let files = d
                .offloads
                .iter()
                .filter(|o| o.kind != crate::engine::events::OffloadKind::Data)
                .count();
            let blobs = d.offloads.len() - files;
            say!(
                "\noffloads ({} in the session, {} it refers to):",
                crate::root::words::count(files, "file", "files"),
                crate::root::words::count(blobs, "data blob", "data blobs")
            );
            for o in &d.offloads {
                say!(
                    "  {}  {:<11} {:>10}  {}",
                    output::time(o.modified),
                    serde_json::to_value(o.kind)?.as_str().unwrap_or(""),
                    output::size(o.bytes),
                    o.url.as_deref().unwrap_or(&o.path)
                );
            }
        }
    }
    Ok(0)
}

/// `sessions export`: the report of session `id`, to `output` or stdout.
async fn export(
    ws: &crate::engine::Workspace,
    id: &str,
    format: Option<crate::root::export::Format>,
    output: Option<&std::path::Path>,
) -> anyhow::Result<i32> {
    use crate::root::export::{self, Format};
    let format = match (format, output) {
        (Some(f), _) => f,
        (None, Some(p)) => Format::from_path(p).unwrap_or(Format::Md),
        (None, None) => Format::Md,
    };
    let report = export::gather(ws, id).await?;
    if report.timeline.rows.is_empty()
        && report.offloaded.messages.is_empty()
        && report.live.is_empty()
    {
        anyhow::bail!("no session `{id}` in {}", ws.layout().workdir());
    }
    let text = export::render(&report, format);
    match output {
        Some(p) => {
            crate::backend::host::fs::atomic_write_host(p, text.as_bytes())
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
            super::output::say_err!(
                "wrote {} ({})",
                p.display(),
                output::size(text.len() as u64)
            );
        }
        None => super::output::say_part!("{text}"),
    }
    Ok(0)
}

/// Prints a timeline as one line per row (time, kind/tool, state,
/// duration, size, arguments), offload and compression rows indented.
fn print_timeline(t: &crate::engine::timeline::Timeline) {
    use crate::engine::timeline::RowKind;
    say!(
        "session {}  ({} tool calls, {} errors)",
        t.session,
        t.tool_calls,
        t.errors
    );
    for r in &t.rows {
        let at = r.at.as_deref().map_or("", |a| a.get(..19).unwrap_or(a));
        match r.kind {
            RowKind::Turn => say!(
                "{at:<19}  turn  {}{}",
                r.tokens.map_or(String::new(), |n| format!("~{n} tokens  ")),
                r.args
            ),
            RowKind::ToolCall => say!(
                "{at:<19}  {:<8} {:>9} {:>8} {:>10}  {}",
                r.tool.as_deref().unwrap_or("?"),
                r.state.as_deref().unwrap_or("-"),
                r.duration_ms.map_or("-".into(), |d| format!("{d}ms")),
                r.result_size.map_or("-".into(), |n| n.to_string()),
                r.args
            ),
            RowKind::Offload => {
                let o = r.offload.clone().unwrap_or_default();
                let kept = match (o.kept_chars, o.full) {
                    (Some(k), Some(f)) => format!("kept {k} of {f} chars"),
                    (None, Some(f)) => format!("{f} bytes offloaded"),
                    _ => "offloaded".into(),
                };
                say!("{at:<19}    ✂ {kept} → {}", o.path);
            }
            RowKind::Compression => {
                let c = r.compression.clone().unwrap_or_default();
                let tok = match (c.tokens_before, c.tokens_after) {
                    (Some(b), Some(a)) => format!("~{b} → ~{a} tokens"),
                    _ => "summary".into(),
                };
                say!("{at:<19}  ⇊ compression {tok}");
                for l in c.summary.lines() {
                    say!("      │ {l}");
                }
            }
            RowKind::Error => say!(
                "{at:<19}  error {}: {}",
                r.tool.as_deref().unwrap_or(""),
                r.error.as_deref().unwrap_or("")
            ),
        }
    }
    for n in &t.notes {
        say!("note: {n}");
    }
}
