//! `wsbench info` and the summary printed by a bare `wsbench`.

use serde_json::json;

use super::{Ctx, output};

pub(super) async fn run(ctx: &Ctx) -> anyhow::Result<i32> {
    let ws = ctx.open_workspace().await?;
    let info = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "config_file": ctx.config_file,
        "config_file_exists": ctx.config_file.is_file(),
        "data_dir": ctx.paths.data_dir,
        "default_workdir": ctx.paths.default_workdir,
        "workspace": {
            "id": ws.id(),
            "root": ws.layout().workdir(),
            "backend": ws.backend(),
            "capabilities": ws.sandbox().capabilities(),
        },
        "agent": ctx.global.agent,
        "session": ctx.session(),
        "config": ctx.config,
    });
    if ctx.global.json {
        output::json(&info)?;
    } else {
        println!("wsbench {}", env!("CARGO_PKG_VERSION"));
        println!(
            "config file:      {} ({})",
            ctx.config_file.display(),
            if ctx.config_file.is_file() {
                "loaded"
            } else {
                "absent: built-in defaults"
            }
        );
        println!("data dir:         {}", ctx.paths.data_dir.display());
        println!("default workdir:  {}", ctx.paths.default_workdir.display());
        println!("workspace root:   {}", ws.layout().workdir());
        println!("backend:          {}", ws.backend());
        println!(
            "agent / session:  {:?} / {}",
            ctx.global.agent,
            ctx.session()
        );
        let l = &ctx.config.limits;
        println!(
            "limits:           Bash {} chars, {} ms default / {} ms max; Read {} lines; Glob/Grep {} results, {} ms",
            l.bash_max_output_chars,
            l.bash_default_timeout_ms,
            l.bash_max_timeout_ms,
            l.read_max_lines,
            l.search_default_limit,
            l.search_timeout_ms
        );
    }
    Ok(0)
}

/// What a bare `wsbench` prints until the TUI opens instead.
pub(super) async fn summary(ctx: &Ctx) -> anyhow::Result<i32> {
    let ws = ctx.open_workspace().await?;
    let sessions = ws.list_sessions().await?;
    let skills = ws.list_skills(&ctx.global.agent).await?;
    let mcp = ws.load_mcp_store().await?;
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
    if ctx.global.json {
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
    println!(
        "workspace {} ({} backend)",
        ws.layout().workdir(),
        ws.backend()
    );
    println!("sessions: {}", sessions.len());
    for s in sessions.iter().take(10) {
        println!(
            "  {:<20} {}  {} tool calls, {} offloads",
            s.id,
            output::time(s.last_activity),
            s.tool_calls,
            s.offloads
        );
    }
    println!(
        "skills of agent {:?}: {} valid, {} invalid",
        ctx.global.agent,
        skills.skills.len(),
        skills.invalid.len()
    );
    println!(
        "MCP declarations (.mcp): {} (agent, session) pairs",
        declarations.len()
    );
    for d in &declarations {
        println!(
            "  agent {} / session {}: {}",
            d["agent"], d["session"], d["mcps"]
        );
    }
    for i in &issues {
        println!("  problem: {i}");
    }
    println!("\ntry: wsbench exec -- echo hi   |   wsbench sessions list   |   wsbench --help");
    Ok(0)
}
