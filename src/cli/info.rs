//! `wsbench info` and the summary printed by a bare `wsbench`.

use super::output::say;
use serde_json::json;

use super::{Ctx, output};
use crate::backend::BackendKind;

/// `wsbench info`: what a command would use, read-only. It opens no
/// workspace and contacts no service (a cloud profile would otherwise
/// create a sandbox just to describe it): the profile is shown from the
/// config as written, `${VAR}` placeholders kept and secrets masked.
pub(super) async fn run(ctx: &Ctx) -> anyhow::Result<i32> {
    let name = ctx.root.profile_name();
    // Unknown profile names are the one error `info` reports.
    let profile = match ctx.root.config.profiles.get(&name) {
        Some(p) => p.clone(),
        None => ctx.root.config.profile(&name)?,
    };
    // `--workdir`, or the built-in local profile's default user: a known
    // directory. Anything else is placed by the manager when first used.
    let builtin_local =
        !ctx.root.config.profiles.contains_key(&name) && profile.backend == BackendKind::Local;
    let (backend, root) = if ctx.root.global.workdir.is_some() {
        (BackendKind::Local, Some(ctx.root.workdir()))
    } else if builtin_local && ctx.root.global.user.is_empty() {
        (
            BackendKind::Local,
            Some(ctx.root.paths.default_workdir.clone()),
        )
    } else {
        (profile.backend, None)
    };
    let info = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "config_file": ctx.root.config_file,
        "config_file_exists": ctx.root.config_file.is_file(),
        "data_dir": ctx.root.paths.data_dir,
        "log_file": super::logging::log_file_path(),
        "default_workdir": ctx.root.paths.default_workdir,
        "workspace": {
            "root": root,
            "backend": backend,
        },
        "profile": {
            "name": name,
            "settings": profile,
        },
        "agent": ctx.root.global.agent,
        "session": ctx.root.session(),
        "config": ctx.root.config,
    });
    if ctx.json {
        output::json(&info)?;
        return Ok(0);
    }
    say!("wsbench {}", env!("CARGO_PKG_VERSION"));
    say!(
        "config file:      {} ({})",
        ctx.root.config_file.display(),
        if ctx.root.config_file.is_file() {
            "loaded"
        } else {
            "absent: built-in defaults"
        }
    );
    say!("data dir:         {}", ctx.root.paths.data_dir.display());
    match super::logging::log_file_path() {
        Some(p) => say!(
            "log file:         {} (rotated at {} MiB, {} kept)",
            p.display(),
            super::logging::LOG_FILE_BYTES >> 20,
            super::logging::LOG_FILES_KEPT
        ),
        None => say!("log file:         none (WSBENCH_LOG_FILE=off, or no data dir)"),
    }
    say!(
        "default workdir:  {}",
        ctx.root.paths.default_workdir.display()
    );
    say!(
        "profile:          {name} ({} backend, {} isolation)",
        profile.backend,
        profile.isolation.as_str()
    );
    let settings = &info["profile"]["settings"];
    if let Some(opts) = settings["options"].as_object().filter(|o| !o.is_empty()) {
        for (k, v) in opts {
            let v = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            say!("  option {k} = {v}");
        }
    }
    match &root {
        Some(r) => say!("workspace root:   {}", r.display()),
        None => say!(
            "workspace:        made or reattached by the first command that uses it (info creates nothing)"
        ),
    }
    say!("backend:          {backend}");
    say!(
        "agent / session:  {:?} / {}",
        ctx.root.global.agent,
        ctx.root.session()
    );
    let l = &ctx.root.config.limits;
    say!(
        "limits:           Bash {} chars, {} ms default / {} ms max; Read {} lines; Glob/Grep {} results, {} ms",
        l.bash_max_output_chars,
        l.bash_default_timeout_ms,
        l.bash_max_timeout_ms,
        l.read_max_lines,
        l.search_default_limit,
        l.search_timeout_ms
    );
    Ok(0)
}

/// What a bare `wsbench` prints until the TUI opens instead.
pub(super) async fn summary(ctx: &Ctx) -> anyhow::Result<i32> {
    let ws = ctx.root.open_workspace().await?;
    let sessions = ws.sessions().list().await?;
    let skills = ws.skills().list(&ctx.root.global.agent).await?;
    let mcp = ws.mcp().load_store().await?;
    let declarations: Vec<_> = mcp
        .pairs()
        .into_iter()
        .map(|(agent, session)| {
            let names: Vec<String> = mcp
                .specs(&agent, &session)
                .unwrap_or_default()
                .into_iter()
                .map(|d| d.name)
                .collect();
            json!({"agent": agent, "session": session, "mcps": names})
        })
        .collect();
    let issues: Vec<String> = mcp.issues().iter().map(|i| i.to_string()).collect();
    if ctx.json {
        output::json(&json!({
            "root": ws.layout().workdir(),
            "backend": ws.backend(),
            "sessions": sessions,
            "skills": skills,
            "mcp_declarations": declarations,
            "mcp_issues": issues,
        }))?;
        return Ok(0);
    }
    say!(
        "workspace {} ({} backend)",
        ws.layout().workdir(),
        ws.backend()
    );
    say!("sessions: {}", sessions.len());
    for s in sessions.iter().take(10) {
        say!(
            "  {:<20} {}  {}, {}",
            s.id,
            output::time(s.last_activity),
            crate::root::words::count(s.tool_calls, "tool call", "tool calls"),
            crate::root::words::count(s.offloads, "offload", "offloads")
        );
    }
    say!(
        "skills of agent {:?}: {} valid, {} invalid",
        ctx.root.global.agent,
        skills.skills.len(),
        skills.invalid.len()
    );
    say!(
        "MCP declarations (.mcp): {} (agent, session) pairs",
        declarations.len()
    );
    for d in &declarations {
        say!(
            "  agent {} / session {}: {}",
            d["agent"],
            d["session"],
            d["mcps"]
        );
    }
    for i in &issues {
        say!("  problem: {i}");
    }
    say!("\ntry: wsbench exec -- echo hi   |   wsbench sessions list   |   wsbench --help");
    Ok(0)
}
