//! The setup steps of a transcript (`write`, `bash`), run against the
//! workspace before the first step.

use super::*;

/// Runs the setup steps; returns one line per step saying what it did.
///
/// Errors: a file that cannot be written, a command that fails (with its
/// exit code and output tail).
pub async fn run_setup(ws: &Workspace, t: &Transcript) -> Result<Vec<String>, ScriptError> {
    let origin = &t.name;
    let mut report = Vec::new();
    // `unless_glob` asks about the workspace as it was before the setup:
    // judged once per glob up front, so a step's own writes (a `lib.rs`)
    // never make a later step (`main.rs`) think the workspace had files.
    let mut had_match = std::collections::HashMap::new();
    for (i, s) in t.setup.iter().enumerate() {
        if let Some(g) = s.write.as_ref().and_then(|w| w.unless_glob.as_ref())
            && !had_match.contains_key(g)
        {
            let found = workspace_has_match(ws, g)
                .map_err(|m| err(origin, None, format!("setup step {}: {m}", i + 1)))?;
            had_match.insert(g.clone(), found);
        }
    }
    for (i, s) in t.setup.iter().enumerate() {
        let at = |m: String| err(origin, None, format!("setup step {}: {m}", i + 1));
        if let Some(w) = &s.write {
            check_relative(&w.path).map_err(at)?;
            let path = ws.layout().join(&w.path);
            if let Some(g) = &w.unless_glob
                && had_match.get(g).copied().unwrap_or(false)
            {
                report.push(format!(
                    "kept the workspace as is (it has files matching {g}); not writing {}",
                    w.path
                ));
                continue;
            }
            if w.if_absent {
                match ws.sandbox().stat(&path).await {
                    Ok(_) => {
                        report.push(format!("{} exists, kept", w.path));
                        continue;
                    }
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(at(e.to_string())),
                }
            }
            ws.sandbox()
                .mkdir(&bpath::parent(&path), true)
                .await
                .map_err(|e| at(e.to_string()))?;
            ws.sandbox()
                .write(&path, w.content.as_bytes())
                .await
                .map_err(|e| at(e.to_string()))?;
            report.push(format!("wrote {} ({} bytes)", w.path, w.content.len()));
        } else if let Some(cmd) = &s.bash {
            let (tx, mut rx) = tokio::sync::mpsc::channel(64);
            let collect = tokio::spawn(async move {
                let mut out = Vec::new();
                while let Some(chunk) = rx.recv().await {
                    let chunk: crate::backend::OutputChunk = chunk;
                    // stdout and stderr interleaved, as a terminal shows them.
                    out.extend_from_slice(&chunk.data);
                    if out.len() > 64 * 1024 {
                        out.drain(..out.len() - 64 * 1024);
                    }
                }
                out
            });
            let mut req = ExecRequest::shell(cmd.clone());
            req.timeout = Some(Duration::from_secs(60));
            let outcome = ws
                .sandbox()
                .exec(req, Some(tx))
                .await
                .map_err(|e| at(e.to_string()))?;
            let out = collect.await.unwrap_or_default();
            if outcome.exit_code != Some(0) || outcome.timed_out {
                let text = String::from_utf8_lossy(&out);
                let tail: String = text
                    .chars()
                    .rev()
                    .take(500)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                return Err(at(format!(
                    "`{cmd}` failed ({}): {}",
                    if outcome.timed_out {
                        "timed out after 60 s".to_string()
                    } else {
                        format!("exit code {:?}", outcome.exit_code)
                    },
                    tail.trim()
                )));
            }
            report.push(format!("ran `{cmd}`"));
        }
    }
    Ok(report)
}

/// True when a file under the workspace root (ignore files honoured,
/// `sessions/`, `data/` and `skills/` left out) matches `glob`. Backends
/// without a host view report no match, so the setup writes its files.
pub(super) fn workspace_has_match(ws: &Workspace, glob: &str) -> Result<bool, String> {
    let Some(root) = ws.sandbox().host_root() else {
        return Ok(false);
    };
    let matcher = globset::GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("bad glob `{glob}`: {e}"))?
        .compile_matcher();
    for entry in ignore::WalkBuilder::new(root)
        .hidden(false)
        .build()
        .flatten()
    {
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let first = rel
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        if matches!(
            first.as_deref(),
            Some("sessions" | "data" | "skills" | ".git")
        ) {
            continue;
        }
        if entry.file_type().is_some_and(|t| t.is_file()) && matcher.is_match(rel) {
            return Ok(true);
        }
    }
    Ok(false)
}
