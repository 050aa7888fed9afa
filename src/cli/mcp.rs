//! `wsbench mcp list | add | remove | tools | call | restart | serve`:
//! the MCP servers of the (agent, session) named by `--agent` /
//! `--session`.

use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, output};
use crate::engine::mcp::serve::WorkspaceServer;
use crate::engine::mcp::{
    McpConfig, McpDecl, McpListing, McpState, McpStatus, McpToolCall, StrMap,
};

/// MCP sub-commands (scoped to `--agent` and `--session`).
#[derive(Debug, Subcommand)]
pub enum McpCmd {
    /// The declared servers with their state, tools and `.mcp` problems;
    /// starts the ones not running yet (unless `--no-connect`).
    List {
        /// Only show the declarations and known states; start nothing.
        #[arg(long)]
        no_connect: bool,
    },
    /// Declares a server for the pair and saves `.mcp`: a stdio command
    /// after `--`, or an HTTP server with `--url`. A stateful server is
    /// started first; if it cannot start, nothing is saved.
    Add(AddArgs),
    /// Removes a server from the pair and saves `.mcp`.
    Remove {
        /// Server name.
        name: String,
    },
    /// The tools of one server (`mcp__<name>__<tool>`), starting it if
    /// needed.
    Tools {
        /// Server name.
        name: String,
    },
    /// Calls a tool of a server with JSON arguments; the call lands in
    /// the session journal.
    Call {
        /// Server name.
        name: String,
        /// The server's tool name (or the qualified `mcp__<name>__<tool>`).
        tool: String,
        /// Arguments as a JSON object.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// Stops and starts a server again.
    Restart {
        /// Server name.
        name: String,
    },
    /// Serves this workspace as an MCP server on stdin/stdout: the
    /// built-in tools, a Skill tool and the skills as resources.
    Serve,
}

/// Arguments of `mcp add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// Server name (`[a-zA-Z0-9_-]+`).
    pub name: String,
    /// URL of an HTTP server (SSE when its path ends in `/sse`, else
    /// streamable HTTP).
    #[arg(long, conflicts_with = "command")]
    pub url: Option<String>,
    /// HTTP header `K=V` (repeatable); `${VAR}` in V is filled from the
    /// environment when connecting and kept as written in `.mcp`.
    #[arg(long = "header", value_name = "K=V")]
    pub headers: Vec<String>,
    /// Environment variable `K=V` of a stdio server (repeatable; `${VAR}`
    /// as for headers).
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Working directory of a stdio server (backend path).
    #[arg(long)]
    pub cwd: Option<String>,
    /// An HTTP server without a persistent session (one per call).
    #[arg(long)]
    pub stateless: bool,
    /// Only these tools are offered (repeatable).
    #[arg(long = "enable-tool", value_name = "TOOL")]
    pub enable_tools: Vec<String>,
    /// These tools are hidden (repeatable).
    #[arg(long = "disable-tool", value_name = "TOOL")]
    pub disable_tools: Vec<String>,
    /// Per-call timeout in seconds.
    #[arg(long, value_name = "SECS")]
    pub execution_timeout: Option<f64>,
    /// Save the declaration without starting the server.
    #[arg(long)]
    pub no_connect: bool,
    /// The stdio command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn pairs(items: &[String], what: &str) -> anyhow::Result<Option<StrMap>> {
    if items.is_empty() {
        return Ok(None);
    }
    let mut map = StrMap::new();
    for item in items {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("{what} {item:?} is not of the form K=V"))?;
        anyhow::ensure!(!k.is_empty(), "{what} {item:?} has an empty name");
        map.insert(k, v);
    }
    Ok(Some(map))
}

fn decl_of(a: &AddArgs) -> anyhow::Result<McpDecl> {
    let mut decl = match (&a.url, a.command.split_first()) {
        (Some(url), _) => {
            anyhow::ensure!(
                a.env.is_empty(),
                "--env is for stdio servers (use --header)"
            );
            let mut d = McpDecl::http(&a.name, url, !a.stateless);
            if let McpConfig::Http(h) = &mut d.mcp_config {
                h.headers = pairs(&a.headers, "header")?;
            }
            d
        }
        (None, Some((cmd, args))) => {
            anyhow::ensure!(
                a.headers.is_empty(),
                "--header is for HTTP servers (use --env)"
            );
            anyhow::ensure!(!a.stateless, "a stdio server is always stateful");
            let mut d = McpDecl::stdio(&a.name, cmd, args.to_vec());
            if let McpConfig::Stdio(s) = &mut d.mcp_config {
                s.env = pairs(&a.env, "env")?;
                s.cwd = a.cwd.clone();
            }
            d
        }
        (None, None) => anyhow::bail!(
            "give a stdio command after `--` (mcp add NAME -- CMD ARGS...) or --url URL"
        ),
    };
    decl.enable_tools = (!a.enable_tools.is_empty()).then(|| a.enable_tools.clone());
    decl.disable_tools = (!a.disable_tools.is_empty()).then(|| a.disable_tools.clone());
    decl.execution_timeout = a.execution_timeout;
    Ok(decl)
}

fn state_text(s: &McpStatus) -> String {
    match &s.state {
        McpState::Ready { tool_count: tools } => format!("ready ({tools} tools)"),
        McpState::Failed {
            reason,
            exit_status,
            ..
        } => match exit_status {
            Some(c) if !reason.contains("status") => format!("failed: {reason} (exit status {c})"),
            _ => format!("failed: {reason}"),
        },
        other => other.name().to_string(),
    }
}

fn print_listing(l: &McpListing) {
    println!(
        "MCP servers of agent {:?}, session {:?}: {}",
        l.agent,
        l.session,
        l.servers.len()
    );
    let rows: Vec<Vec<String>> = l
        .servers
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                serde_json::to_value(s.transport)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                state_text(s),
            ]
        })
        .collect();
    if !rows.is_empty() {
        output::table(&["NAME", "TRANSPORT", "STATE"], &rows);
    }
    for s in &l.servers {
        if let McpState::Failed { stderr_tail, .. } = &s.state
            && !stderr_tail.trim().is_empty()
        {
            println!("\n{} stderr tail:\n{}", s.name, stderr_tail.trim_end());
        }
    }
    for i in &l.issues {
        println!("problem: {i}");
    }
}

pub(super) async fn run(ctx: &Ctx, cmd: McpCmd) -> anyhow::Result<i32> {
    let ws = ctx.open_workspace().await?;
    let agent = ctx.global.agent.clone();
    let session = ctx.session();
    let code = run_on(ctx, &ws, &agent, &session, cmd).await;
    ws.close().await;
    code
}

async fn run_on(
    ctx: &Ctx,
    ws: &std::sync::Arc<crate::engine::Workspace>,
    agent: &str,
    session: &str,
    cmd: McpCmd,
) -> anyhow::Result<i32> {
    let json_out = ctx.global.json;
    match cmd {
        McpCmd::List { no_connect } => {
            let listing = if no_connect {
                ws.mcp_status(agent, session).await?
            } else {
                ws.list_mcps(agent, session).await?
            };
            if json_out {
                output::json(&listing)?;
            } else {
                print_listing(&listing);
            }
        }
        McpCmd::Add(a) => {
            let decl = decl_of(&a)?;
            let status = ws.add_mcp(decl, agent, session, !a.no_connect).await?;
            if json_out {
                output::json(&status)?;
            } else {
                println!("added MCP server {}: {}", status.name, state_text(&status));
            }
        }
        McpCmd::Remove { name } => {
            let removed = ws.remove_mcp(&name, agent, session).await?;
            if json_out {
                output::json(&json!({"removed": removed, "name": name}))?;
            } else if removed {
                println!("removed MCP server {name}");
            } else {
                println!("no MCP server {name} for agent {agent:?}, session {session:?}");
            }
            return Ok(if removed { 0 } else { 1 });
        }
        McpCmd::Tools { name } => {
            let tools = ws.mcp_server_tools(agent, session, &name).await?;
            if json_out {
                output::json(&tools)?;
            } else {
                let rows: Vec<Vec<String>> = tools
                    .iter()
                    .map(|t| {
                        vec![
                            t.name.clone(),
                            t.description.lines().next().unwrap_or("").to_string(),
                        ]
                    })
                    .collect();
                output::table(&["TOOL", "DESCRIPTION"], &rows);
            }
        }
        McpCmd::Call { name, tool, args } => {
            let value: serde_json::Value = serde_json::from_str(&args)
                .map_err(|e| anyhow::anyhow!("tool arguments are not valid JSON: {e}"))?;
            anyhow::ensure!(
                value.is_object(),
                "tool arguments must be a JSON object, got {value}"
            );
            let result = ws
                .call_mcp_tool(McpToolCall {
                    agent: agent.to_string(),
                    session: session.to_string(),
                    server: Some(name),
                    tool,
                    args: value,
                    ..Default::default()
                })
                .await;
            if json_out {
                output::json(&result)?;
            } else {
                let text = result.text();
                print!("{text}");
                if !text.ends_with('\n') && !text.is_empty() {
                    println!();
                }
            }
            return Ok(if result.is_success() { 0 } else { 1 });
        }
        McpCmd::Restart { name } => {
            let status = ws.restart_mcp(agent, session, &name).await?;
            if json_out {
                output::json(&status)?;
            } else {
                println!("{}: {}", status.name, state_text(&status));
            }
        }
        McpCmd::Serve => {
            WorkspaceServer::new(ws.clone(), agent, session)
                .serve_stdio()
                .await?;
        }
    }
    Ok(0)
}
