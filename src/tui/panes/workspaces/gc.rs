//! The gc sweep in the Workspaces pane (issue 15 point 4): `C` runs the
//! sweep of `wsbench workspaces gc` ([`WorkspaceManager::gc`]) for the
//! pane's profile. First a dry run on a task (listing a cloud provider
//! takes seconds; the UI never waits): when something is idle past the
//! TTL, a y/n dialog lists what will be closed (the first [`SHOWN`], the
//! rest counted); `y` runs the sweep for real, on a task too. What the
//! sweep reports and leaves alone (failed sandboxes, suspended ones past
//! the TTL, ones another process holds) goes to Logs, one line each, at
//! most [`LOGGED`] a sweep; a toast sums it up.
//!
//! Limits: the real run decides again, so a workspace used between the
//! dry run and `y` is left alone, and one that went idle meanwhile is
//! closed too (the sweep's own rule). The orphan records of `workspaces
//! gc` (this machine's records of cloud sandboxes the service no longer
//! has) are not reported here: they live with the CLI's composition root.
//!
//! [`WorkspaceManager::gc`]: crate::manager::WorkspaceManager::gc

use super::{ID, Msg, WorkspacesPane};
use crate::manager::{GcFinding, GcKind};
use crate::tui::action::{DialogTag, Effect, Level, LogLine};
use crate::tui::pane::Ctx;

/// Workspaces named in the confirmation at most (the rest counted).
pub(super) const SHOWN: usize = 6;
/// Findings written to Logs per sweep at most (the rest counted).
pub(super) const LOGGED: usize = 200;

impl WorkspacesPane {
    /// Starts the sweep: the dry run (`act` false), or the real one after
    /// the dialog's yes. One sweep at a time.
    pub(super) fn gc(&mut self, act: bool, cx: &mut Ctx) {
        let Some(m) = cx.manager.clone() else {
            cx.toast(
                Level::Warn,
                "no workspace manager: this TUI was opened on a single directory",
            );
            return;
        };
        if self.sweeping {
            cx.toast(Level::Info, "a gc sweep is already running");
            return;
        }
        self.sweeping = true;
        if !act {
            cx.toast(
                Level::Info,
                format!(
                    "gc: looking for workspaces of profile {} idle past the TTL…",
                    m.profile()
                ),
            );
        }
        cx.spawn::<WorkspacesPane>(async move {
            let found = m.gc(act).await.map_err(|e| e.to_string());
            Msg::Gc { act, found }
        });
    }

    /// Takes in a sweep's findings: after the dry run, the report to Logs
    /// and the dialog (or "nothing to close"); after the real run, what
    /// was closed.
    pub(super) fn gc_found(
        &mut self,
        act: bool,
        found: &Result<Vec<GcFinding>, String>,
        cx: &mut Ctx,
    ) {
        self.sweeping = false;
        let found = match found {
            Ok(f) => f,
            Err(e) => {
                cx.toast(Level::Error, format!("gc: {e}"));
                return;
            }
        };
        let (closing, reported): (Vec<&GcFinding>, Vec<&GcFinding>) =
            found.iter().partition(|f| f.kind == GcKind::Close);
        // The dry run reports what the sweep leaves alone; the real run
        // what it closed (so Logs says each thing once).
        log_findings(if act { &closing } else { &reported }, act, cx);
        if act {
            let failed = closing.iter().filter(|f| f.error.is_some()).count();
            let (level, msg) = match failed {
                0 => (Level::Info, format!("gc: closed {}", count(closing.len()))),
                n => (
                    Level::Error,
                    format!(
                        "gc: closed {}, {n} failed (see Logs)",
                        count(closing.len() - n)
                    ),
                ),
            };
            cx.toast(level, msg);
            self.load(cx);
            return;
        }
        if closing.is_empty() {
            let more = match reported.len() {
                0 => String::new(),
                n => format!("; {n} reported in Logs"),
            };
            cx.toast(Level::Info, format!("gc: nothing idle past the TTL{more}"));
            return;
        }
        cx.effect(Effect::Confirm {
            pane: ID,
            message: confirm_text(&closing, reported.len()),
            tag: DialogTag::WorkspaceGc,
        });
    }
}

/// `1 workspace`, `3 workspaces`.
fn count(n: usize) -> String {
    crate::root::words::count(n, "workspace", "workspaces")
}

/// The dialog's question: one line, then each workspace to close with
/// why (the first [`SHOWN`], the rest counted), then what else was found.
pub(super) fn confirm_text(closing: &[&GcFinding], reported: usize) -> String {
    let mut lines = vec![format!(
        "Close (suspend) {} idle past the TTL?",
        count(closing.len())
    )];
    for f in closing.iter().take(SHOWN) {
        lines.push(format!("  {}: {}", f.id, f.reason));
    }
    if closing.len() > SHOWN {
        lines.push(format!("  … and {} more", closing.len() - SHOWN));
    }
    if reported > 0 {
        lines.push(format!("{reported} more found: see Logs"));
    }
    lines.join("\n")
}

/// One Logs line per finding, at most [`LOGGED`] (the rest counted).
fn log_findings(found: &[&GcFinding], acted: bool, cx: &mut Ctx) {
    for f in found.iter().take(LOGGED) {
        let (level, what) = match (&f.kind, acted, &f.error) {
            (GcKind::Close, true, None) => (Level::Info, "closed".to_string()),
            (GcKind::Close, true, Some(e)) => (Level::Error, format!("close failed: {e}")),
            (GcKind::Close, false, _) => (Level::Info, "would close".to_string()),
            (GcKind::InUse, ..) => (Level::Info, "left running".to_string()),
            (GcKind::Failed, ..) => (Level::Warn, "failed".to_string()),
            (GcKind::Stopped, ..) => (Level::Warn, "stopped".to_string()),
        };
        let msg = format!("gc: {what} {} ({}): {}", f.id, f.backend, f.reason);
        cx.effect(Effect::Log(LogLine::now(level, "workspaces", msg)));
    }
    if found.len() > LOGGED {
        let msg = format!("gc: {} more findings not logged", found.len() - LOGGED);
        cx.effect(Effect::Log(LogLine::now(Level::Warn, "workspaces", msg)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::BackendKind;

    fn finding(id: &str) -> GcFinding {
        GcFinding {
            id: id.into(),
            profile: "p".into(),
            backend: BackendKind::Docker,
            kind: GcKind::Close,
            reason: "idle 2 h 5 m, past the TTL of 1 h".into(),
            error: None,
        }
    }

    #[test]
    fn the_question_lists_what_it_closes_bounded() {
        let one = finding("ws-1");
        assert_eq!(
            confirm_text(&[&one], 0),
            "Close (suspend) 1 workspace idle past the TTL?\n  ws-1: idle 2 h 5 m, past the TTL of 1 h"
        );
        let many: Vec<GcFinding> = (0..9).map(|i| finding(&format!("ws-{i}"))).collect();
        let refs: Vec<&GcFinding> = many.iter().collect();
        let text = confirm_text(&refs, 2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + SHOWN + 2, "{text}");
        assert!(lines[0].contains("9 workspaces"), "{text}");
        assert_eq!(lines[SHOWN + 1], "  … and 3 more");
        assert_eq!(lines[SHOWN + 2], "2 more found: see Logs");
    }
}
