//! `wsbench mcp list | add | remove | tools | call | restart | serve`:
//! the MCP servers of the (agent, session) named by `--agent` /
//! `--session`.

use super::output::{say, say_err, say_part};
use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, output};
use crate::engine::mcp::{
    McpConfig, McpDecl, McpListing, McpState, McpStatus, McpToolCall, StrMap,
};
use crate::engine::message::{Block, DataBlock, DataSource};
use crate::engine::serve::WorkspaceServer;

/// MCP sub-commands (scoped to `--agent` and `--session`).
#[derive(Debug, Subcommand)]
pub enum McpCmd {
    /// The declared servers with their state, tools and `.mcp` problems;
    /// starts the ones not running yet (unless `--no-connect`).
    ///
    /// With `--json`: `{"agent", "session", "servers": [...], "issues":
    /// [text, ...]}`; every server object has the same keys, `null` where
    /// one does not apply to its state: `name`, `agent`, `session`,
    /// `transport` (`stdio` | `sse` | `streamable_http`), `is_stateful`,
    /// `state` (`declared` | `starting` | `ready` | `failed` | `stopped`),
    /// `tool_count` (ready), `reason`, `exit_status`, `stderr_tail`
    /// (failed), `tools` (qualified names, `[]` before the first
    /// listing), `process` (backend process id of a live stdio server),
    /// `expands` (the `${VAR}` names its env or header values use, which
    /// the reference would send as written; `[]` when none).
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
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::mcp_servers))]
        name: String,
    },
    /// The tools of one server (`mcp__<name>__<tool>`), starting it if
    /// needed.
    Tools {
        /// Server name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::mcp_servers))]
        name: String,
    },
    /// Calls a tool of a server with JSON arguments; the call lands in
    /// the session journal.
    Call {
        /// Server name.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::mcp_servers))]
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
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::mcp_servers))]
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
    /// environment when connecting and kept as written in `.mcp` (the
    /// reference sends it as written: see `--literal`).
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
    /// Fill `${VAR}` in `--header` / `--env` values from the environment
    /// now and write the values themselves to `.mcp`, so the reference
    /// (which does not expand `${VAR}`) sends the same. The secret is then
    /// in clear text in the agent-readable workspace.
    #[arg(long)]
    pub literal: bool,
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
    if a.literal {
        decl = decl
            .literal_with(|name| std::env::var(name).ok())
            .map_err(|e| anyhow::anyhow!("--literal: {e}"))?;
    }
    Ok(decl)
}

/// The note `mcp add` and `mcp list` print for a server whose values use
/// `${VAR}`; `None` when they use none.
fn expands_note(s: &McpStatus) -> Option<String> {
    if s.expands.is_empty() {
        return None;
    }
    let vars: Vec<String> = s.expands.iter().map(|v| format!("${{{v}}}")).collect();
    Some(format!(
        "note: {} fills {} from wsbench's environment; the reference (agentscope) sends \
         the text as written. For both to work, add it with --literal (the value is then \
         stored in clear in .mcp)",
        s.name,
        vars.join(", ")
    ))
}

fn state_text(s: &McpStatus) -> String {
    s.summary()
}

/// One line announcing a non-text block of a tool result, which text
/// output cannot show: `[image image/png, 1234 bytes]`, `[resource
/// application/pdf, 88 bytes, file:///r.pdf]`, `[audio audio/wav,
/// workspace:///data/…]`.
fn data_line(d: &DataBlock) -> String {
    use base64::Engine as _;
    let media = d.source.media_type();
    // A blob resource carries its URI as the name; images and audio none.
    let kind = match media.split('/').next() {
        _ if d.name.is_some() => "resource",
        Some("image") => "image",
        Some("audio") => "audio",
        _ => "resource",
    };
    let mut parts = vec![format!("{kind} {media}")];
    match &d.source {
        DataSource::Base64 { data, .. } => {
            match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
                Ok(bytes) => parts.push(format!("{} bytes", bytes.len())),
                Err(_) => parts.push(format!("{} base64 characters", data.len())),
            }
        }
        DataSource::Url { url, .. } => parts.push(url.clone()),
    }
    if let Some(name) = &d.name {
        parts.push(name.clone());
    }
    format!("[{}]", parts.join(", "))
}

/// A tool result as text: text blocks as they are, one [`data_line`]
/// per other block, in order; ends with a newline unless empty.
fn result_text(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            Block::Text(t) => out.push_str(&t.text),
            Block::Data(d) => {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&data_line(d));
                out.push('\n');
            }
            _ => {}
        }
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn print_listing(l: &McpListing) {
    say!(
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
            say!("\n{} stderr tail:\n{}", s.name, stderr_tail.trim_end());
        }
    }
    for note in l.servers.iter().filter_map(expands_note) {
        say!("{note}");
    }
    for i in &l.issues {
        say!("problem: {i}");
    }
}

pub(super) async fn run(ctx: &Ctx, cmd: McpCmd) -> anyhow::Result<i32> {
    let ws = ctx.root.open_workspace().await?;
    let agent = ctx.root.global.agent.clone();
    let session = ctx.root.session();
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
    let json_out = ctx.json;
    match cmd {
        McpCmd::List { no_connect } => {
            let listing = if no_connect {
                ws.mcp().status(agent, session).await?
            } else {
                ws.mcp().list(agent, session).await?
            };
            if json_out {
                output::json(&listing)?;
            } else {
                print_listing(&listing);
            }
            // The whole listing is printed; a failed server or a broken
            // declaration shows in the exit code for scripts.
            let failed = listing
                .servers
                .iter()
                .any(|s| matches!(s.state, McpState::Failed { .. }));
            if failed || !listing.issues.is_empty() {
                return Ok(super::EXIT_PARTIAL);
            }
        }
        McpCmd::Add(a) => {
            let decl = decl_of(&a)?;
            let status = ws.mcp().add(decl, agent, session, !a.no_connect).await?;
            if json_out {
                output::json(&status)?;
            } else {
                say!("added MCP server {}: {}", status.name, state_text(&status));
                if let Some(note) = expands_note(&status) {
                    say!("{note}");
                }
                if a.literal {
                    say!(
                        "note: --literal wrote the values themselves into .mcp, which \
                         the agent can read"
                    );
                }
            }
        }
        McpCmd::Remove { name } => {
            let removed = ws.mcp().remove(&name, agent, session).await?;
            if json_out {
                output::json(&json!({"removed": removed, "name": name}))?;
            } else if removed {
                say!("removed MCP server {name}");
            } else {
                say!("no MCP server {name} for agent {agent:?}, session {session:?}");
            }
            return Ok(if removed { 0 } else { 1 });
        }
        McpCmd::Tools { name } => {
            let tools = ws.mcp().server_tools(agent, session, &name).await?;
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
            // INT, TERM and HUP cancel the call instead of killing wsbench,
            // so the interrupted call reaches the journal, naming the signal.
            let cancel = tokio_util::sync::CancellationToken::new();
            let reason = std::sync::Arc::new(std::sync::OnceLock::new());
            let interrupted = super::cancel_on_signals_why(cancel.clone(), Some(reason.clone()));
            let result = ws
                .mcp()
                .call_tool(McpToolCall {
                    agent: agent.to_string(),
                    session: session.to_string(),
                    server: Some(name),
                    tool,
                    args: value,
                    cancel: Some(cancel),
                    cancel_reason: Some(reason),
                    ..Default::default()
                })
                .await;
            let signal = interrupted.load(std::sync::atomic::Ordering::SeqCst);
            if signal != 0 {
                say_err!("wsbench: {}", result_text(&result.content).trim_end());
                return Ok(128 + signal);
            }
            if json_out {
                output::json(&result)?;
            } else {
                say_part!("{}", result_text(&result.content));
            }
            return Ok(if result.is_success() { 0 } else { 1 });
        }
        McpCmd::Restart { name } => {
            let status = ws.mcp().restart(agent, session, &name).await?;
            if json_out {
                output::json(&status)?;
            } else {
                say!("{}: {}", status.name, state_text(&status));
            }
        }
        McpCmd::Serve => {
            let source = ctx.root.workspace_source(ws).await?;
            // Each call leases the workspace; between calls it may idle
            // and be evicted like any other.
            ctx.root.release_run_lease();
            let served = WorkspaceServer::with_source(ws.clone(), source, agent, session)
                .serve_stdio()
                .await;
            // Its client is gone: suspend what it held (unless another
            // process holds it), as a TUI does when it quits.
            ctx.root.close_at_exit().await;
            served?;
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::message::TextBlock;

    fn data(data: &str, media: &str, name: Option<&str>) -> Block {
        Block::Data(DataBlock {
            id: "d".into(),
            source: DataSource::Base64 {
                data: data.into(),
                media_type: media.into(),
            },
            name: name.map(String::from),
            created_at: None,
            finished_at: None,
            extra: Default::default(),
        })
    }

    #[test]
    fn call_text_announces_every_non_text_block() {
        let blocks = vec![
            Block::Text(TextBlock::new("look:")),
            // 12 bytes, 16 base64 characters.
            data("iVBORw0KGgoAAAAN", "image/png", None),
            data("UklGRg==", "audio/wav", None),
            data("JVBERi0=", "application/pdf", Some("file:///r.pdf")),
            Block::Data(DataBlock {
                id: "u".into(),
                source: DataSource::Url {
                    url: "workspace:///data/ab.png".into(),
                    media_type: "image/png".into(),
                },
                name: None,
                created_at: None,
                finished_at: None,
                extra: Default::default(),
            }),
            Block::Text(TextBlock::new("done")),
        ];
        assert_eq!(
            result_text(&blocks),
            "look:\n[image image/png, 12 bytes]\n[audio audio/wav, 4 bytes]\n\
             [resource application/pdf, 5 bytes, file:///r.pdf]\n\
             [image image/png, workspace:///data/ab.png]\ndone\n"
        );
        assert_eq!(result_text(&[]), "");
        assert_eq!(result_text(&[Block::Text(TextBlock::new("x\n"))]), "x\n");
    }

    #[test]
    fn state_text_names_the_exit_status_once() {
        let s = McpStatus {
            name: "x".into(),
            agent: String::new(),
            session: "s".into(),
            transport: crate::engine::mcp::McpTransport::Stdio,
            is_stateful: true,
            state: McpState::Failed {
                reason: "the server process exited with status 3".into(),
                exit_status: Some(3),
                stderr_tail: "boom".into(),
            },
            tools: Vec::new(),
            process: None,
            restarts: 0,
            expands: Vec::new(),
        };
        assert_eq!(
            state_text(&s),
            "failed: the server process exited with status 3"
        );
        let back = McpStatus {
            state: McpState::Ready { tool_count: 4 },
            restarts: 2,
            ..s.clone()
        };
        assert_eq!(state_text(&back), "ready (4 tools) · 2 restarts");
        assert_eq!(serde_json::to_value(&back).unwrap()["restarts"], 2);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["reason"], "the server process exited with status 3");
        assert!(v["tool_count"].is_null());
    }
}
