//! The in-sandbox engine of Grep: `rg` run through the backend with the
//! flags the in-process engine follows, for sandboxes without a host view.

use super::*;

/// The `rg` argv equivalent to `opts` (docs/contract.md §3.6 plus the walking
/// default of [`super::walk`]).
pub(super) fn rg_argv(
    pattern: &str,
    opts: &Opts,
    file_type: Option<&str>,
    globs: &[String],
    root: &str,
) -> Vec<String> {
    let mut a = vec!["rg".to_string()];
    a.extend(walk::rg_walk_args());
    a.extend(["--sort".into(), "path".into()]);
    a.extend(["--max-columns".into(), opts.max_columns.to_string()]);
    if opts.multiline {
        a.extend(["-U".into(), "--multiline-dotall".into()]);
    }
    if opts.case_insensitive {
        a.push("-i".into());
    }
    match opts.mode {
        Mode::Files => a.push("-l".into()),
        Mode::Count => a.push("-c".into()),
        Mode::Content => {
            if opts.line_numbers {
                a.push("-n".into());
            }
            if opts.before > 0 {
                a.extend(["-B".into(), opts.before.to_string()]);
            }
            if opts.after > 0 {
                a.extend(["-A".into(), opts.after.to_string()]);
            }
        }
    }
    a.extend(["-e".into(), pattern.to_string()]);
    if let Some(t) = file_type {
        a.extend(["--type".into(), t.to_string()]);
    }
    for g in globs {
        a.extend(["--glob".into(), g.clone()]);
    }
    a.extend(["--".into(), root.to_string()]);
    a
}

/// The in-sandbox engine: `rg` run with the equivalent flags; its output
/// lines (`\r` stripped, empty ones dropped) are paged like ours.
pub(super) async fn search_exec(
    ctx: &ToolContext<'_>,
    argv: Vec<String>,
    root: &str,
    keep: Option<usize>,
    budget: Duration,
) -> Outcome {
    let sb = ctx.env.sandbox.as_ref();
    match sb.stat(root).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => return Outcome::NotFound,
        Err(e) => return Outcome::Failed(format!("Error: cannot search {root}: {e}")),
    }
    let req = ExecRequest {
        argv,
        timeout: Some(budget),
        cancel: Some(ctx.cancel.clone()),
        ..Default::default()
    };
    let mut lines = Vec::new();
    let mut total = 0usize;
    let res = walk::exec_lines(sb, req, b'\n', |raw| {
        let mut b = raw;
        while let Some(rest) = b.strip_suffix(b"\r") {
            b = rest;
        }
        if b.is_empty() {
            return;
        }
        total += 1;
        if keep.is_none_or(|k| lines.len() < k) {
            lines.push(String::from_utf8_lossy(b).into_owned());
        }
    })
    .await;
    let (outcome, stderr) = match res {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(walk::rg_missing("Grep", &e.to_string())),
    };
    if outcome.cancelled {
        return Outcome::Stopped;
    }
    if outcome.timed_out {
        return Outcome::TimedOut;
    }
    let stderr = String::from_utf8_lossy(&stderr).trim().to_string();
    match outcome.exit_code {
        Some(0 | 1) => Outcome::Lines(lines, total),
        // Unreadable files make rg exit 2 next to real results; the
        // in-process engine skips them silently, so report the results.
        Some(2) if total > 0 => Outcome::Lines(lines, total),
        Some(127) => Outcome::Failed(walk::rg_missing("Grep", &stderr)),
        code => Outcome::Failed(format!(
            "ripgrep error (code {}): {stderr}",
            code.map_or("unknown".to_string(), |c| c.to_string())
        )),
    }
}
