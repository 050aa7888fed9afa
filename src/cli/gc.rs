//! `wsbench workspaces gc` (issue 15 point 4): closes what is idle past
//! its TTL although no process holds it, and reports orphans, for one
//! profile or all. A dry run unless `--yes`.
//!
//! Per profile: the manager's sweep ([`WorkspaceManager::gc`]: running
//! and idle past the TTL → close, unless another wsbench process of this
//! host holds it; failed sandboxes; suspended ones idle past the TTL),
//! then, on cloud profiles, the records of this machine whose sandbox
//! the service no longer has (the sandbox expired or was deleted outside
//! wsbench; the next command on that workspace makes a new, empty one
//! and says so). Records are reported, never removed: they are what that
//! notice comes from.
//!
//! Output is bounded: at most [`MAX_LINES`] findings are printed (the
//! rest counted on one line); `--json` gives at most [`MAX_JSON`] and an
//! `omitted` count.

use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::Ctx;
use super::output::{self, say, say_err};
use crate::backend::host::sanitize_segment;
use crate::manager::{GcFinding, GcKind};

/// Findings printed as text at most.
const MAX_LINES: usize = 200;
/// Findings in `--json` at most.
const MAX_JSON: usize = 10_000;

/// Options of `workspaces gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Sweep every profile (configured and built-in), not just the
    /// selected one.
    #[arg(long)]
    pub all_profiles: bool,
    /// Close what is past its TTL (without it: a dry run that only says
    /// what would be closed).
    #[arg(long, short = 'y', conflicts_with = "dry_run")]
    pub yes: bool,
    /// Say what would be done and change nothing (the default).
    #[arg(long)]
    pub dry_run: bool,
}

/// A record of this machine whose sandbox the service no longer lists.
#[derive(Debug, Serialize)]
struct OrphanRecord {
    profile: String,
    /// The record's name: the workspace id, sanitized for a file name.
    workspace: String,
}

/// Runs the sweep; see the module doc. Exit status 1 when a profile
/// could not be swept or a close failed, else 0.
pub(super) async fn run(ctx: &Ctx, a: GcArgs) -> anyhow::Result<i32> {
    let names = if a.all_profiles {
        ctx.root.config.profile_names()
    } else {
        vec![ctx.root.profile_name()]
    };
    let mut found: Vec<GcFinding> = Vec::new();
    let mut orphans: Vec<OrphanRecord> = Vec::new();
    let mut errors = Vec::new();
    let mut unread_records = 0;
    for name in &names {
        let m = match ctx.root.manager_for(name) {
            Ok(m) => m,
            Err(e) => {
                errors.push((name.clone(), super::error_line(&e)));
                continue;
            }
        };
        let listed = match m.list().await {
            Ok(l) => l,
            Err(e) => {
                errors.push((name.clone(), e.to_string()));
                continue;
            }
        };
        match m.gc(a.yes).await {
            Ok(f) => found.extend(f),
            Err(e) => errors.push((name.clone(), e.to_string())),
        }
        let (records, more) = ctx.root.recorded_sandboxes(name);
        unread_records += more;
        let live: std::collections::HashSet<String> =
            listed.iter().map(|w| sanitize_segment(&w.id)).collect();
        orphans.extend(
            records
                .into_iter()
                .filter(|r| !live.contains(r))
                .map(|workspace| OrphanRecord {
                    profile: name.clone(),
                    workspace,
                }),
        );
    }
    let failed_closes = found.iter().filter(|f| f.error.is_some()).count();
    for (profile, e) in &errors {
        say_err!("warning: profile {profile} not swept: {e}");
    }
    if ctx.json {
        let omitted = found.len().saturating_sub(MAX_JSON)
            + orphans.len().saturating_sub(MAX_JSON)
            + unread_records;
        found.truncate(MAX_JSON);
        orphans.truncate(MAX_JSON);
        let errors: Vec<_> = errors
            .iter()
            .map(|(p, e)| json!({"profile": p, "error": e}))
            .collect();
        output::json(&json!({
            "acted": a.yes,
            "findings": found,
            "orphan_records": orphans,
            "errors": errors,
            "omitted": omitted,
        }))?;
    } else {
        print_text(&found, &orphans, a.yes, unread_records);
    }
    Ok(if errors.is_empty() && failed_closes == 0 {
        0
    } else {
        1
    })
}

fn print_text(found: &[GcFinding], orphans: &[OrphanRecord], acted: bool, unread: usize) {
    let verb = |f: &GcFinding| match (&f.kind, acted, &f.error) {
        (GcKind::Close, true, None) => "closed".to_string(),
        (GcKind::Close, true, Some(e)) => format!("close failed: {e}"),
        (GcKind::Close, false, _) => "would close".to_string(),
        (GcKind::InUse, ..) => "left running".to_string(),
        (GcKind::Failed, ..) => "failed".to_string(),
        (GcKind::Stopped, ..) => "stopped".to_string(),
    };
    let mut lines: Vec<String> = found
        .iter()
        .map(|f| {
            format!(
                "{}  {} ({}): {}: {}",
                verb(f),
                f.id,
                f.profile,
                f.backend,
                f.reason
            )
        })
        .collect();
    lines.extend(orphans.iter().map(|o| {
        format!(
            "orphan record  {} ({}): this machine made a sandbox for it that the service no longer has; the next command on it makes a new, empty one",
            o.workspace, o.profile
        )
    }));
    let total = lines.len() + unread;
    if total == 0 {
        say!("nothing to collect");
        return;
    }
    for l in lines.iter().take(MAX_LINES) {
        say!("{l}");
    }
    if total > MAX_LINES {
        say!(
            "… {} more not shown (--json lists up to {MAX_JSON})",
            total - MAX_LINES
        );
    }
    let would = found.iter().filter(|f| f.kind == GcKind::Close).count();
    if !acted && would > 0 {
        say!("dry run: {would} to close; run again with --yes to close them");
    }
}
