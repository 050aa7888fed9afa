//! Dynamic shell completions: profile names, workspace ids, session ids
//! and MCP server names, found when the shell asks (clap_complete's
//! `CompleteEnv`, issue 22).
//!
//! Set up once per shell: `source <(WSBENCH_COMPLETE=bash wsbench)`
//! (zsh: the same with `zsh`; fish: `WSBENCH_COMPLETE=fish wsbench |
//! source`). The shell then runs `WSBENCH_COMPLETE=bash wsbench -- wsbench
//! <words so far>` on Tab; [`maybe_complete`] answers and exits before
//! anything else runs.
//!
//! The candidates read the words typed so far (`--profile`, `--workdir`,
//! `--user`, `--agent`, `--session`, their `WSBENCH_*` variables, else the
//! config's defaults), so `wsbench --profile docker workspaces open <Tab>`
//! lists the Docker profile's ids. Limits: workspace ids come from the
//! profile's own listing (a local folder scan, the Docker daemon, a cloud
//! API), cut off after [`LIST_TIMEOUT`] so a slow service never hangs the
//! shell; sessions and MCP servers are read from a workspace folder on
//! this machine (`--workdir`, or the built-in local profile's default
//! workspace), never by provisioning a sandbox. Failures give no
//! candidates, never an error on the user's terminal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::CommandFactory;
use clap_complete::engine::CompletionCandidate;

use super::Cli;
use crate::engine::mcp::decl::McpTransport;
use crate::root::{Context, Selection};

/// Name of the variable that switches the binary into completion mode.
pub const COMPLETE_VAR: &str = "WSBENCH_COMPLETE";

/// How long a workspace listing may take before the candidates are
/// given up: 2 s.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(2);

/// Answers a completion request and exits when [`COMPLETE_VAR`] is set
/// (printing the shell's set-up script, or the candidates for the words
/// given); returns at once otherwise.
pub fn maybe_complete() {
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(COMPLETE_VAR)
        .complete();
}

/// The value of `--name` among the words being completed (`--name V` or
/// `--name=V`), else of the variable `var`.
fn typed(name: &str, var: &str) -> Option<String> {
    let words: Vec<String> = std::env::args().collect();
    let flag = format!("--{name}");
    let mut found = None;
    let mut it = words.iter().skip_while(|w| *w != "--").skip(1).peekable();
    while let Some(w) = it.next() {
        if *w == flag {
            found = it.peek().map(|v| v.to_string());
        } else if let Some(v) = w.strip_prefix(&format!("{flag}=")) {
            found = Some(v.to_string());
        }
    }
    found
        .filter(|v| !v.is_empty())
        .or_else(|| std::env::var(var).ok().filter(|v| !v.is_empty()))
}

/// The selection the words so far make.
fn selection() -> Selection {
    Selection {
        workdir: typed("workdir", "WSBENCH_WORKDIR").map(PathBuf::from),
        create_workdir: false,
        profile: typed("profile", "WSBENCH_PROFILE"),
        user: typed("user", "WSBENCH_USER").unwrap_or_default(),
        agent: typed("agent", "WSBENCH_AGENT").unwrap_or_default(),
        session: typed("session", "WSBENCH_SESSION"),
        config: typed("config", "WSBENCH_CONFIG").map(PathBuf::from),
        workspace_id: typed("workspace-id", "WSBENCH_WORKSPACE_ID"),
        read_only: true,
    }
}

/// The context of the words so far, quietly: `None` when the config
/// cannot be loaded.
fn context() -> Option<Context> {
    Context::load(selection()).ok()
}

/// Profile names: configured and built-in.
pub fn profiles() -> Vec<CompletionCandidate> {
    let Some(ctx) = context() else {
        return Vec::new();
    };
    ctx.config
        .profile_names()
        .into_iter()
        .map(|n| {
            let backend = ctx
                .config
                .profiles
                .get(&n)
                .map(|p| p.backend)
                .or_else(|| crate::config::builtin_backend(&n));
            let c = CompletionCandidate::new(n);
            match backend {
                Some(b) => c.help(Some(b.to_string().into())),
                None => c,
            }
        })
        .collect()
}

/// Ids of the selected profile's workspaces, each with its state.
pub fn workspace_ids() -> Vec<CompletionCandidate> {
    let Some(ctx) = context() else {
        return Vec::new();
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    let listed = rt.block_on(async {
        let m = ctx.manager_for(&ctx.profile_name()).ok()?;
        tokio::time::timeout(LIST_TIMEOUT, m.list())
            .await
            .ok()?
            .ok()
    });
    listed
        .unwrap_or_default()
        .into_iter()
        .map(|w| {
            let who = [w.user.as_deref(), w.agent.as_deref()]
                .iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("/");
            let help = if who.is_empty() {
                w.state.clone()
            } else {
                format!("{} {who}", w.state)
            };
            CompletionCandidate::new(w.id).help(Some(help.into()))
        })
        .collect()
}

/// The workspace folder on this machine the words so far name, if any.
fn local_workdir(ctx: &Context) -> Option<PathBuf> {
    if ctx.global.workdir.is_some() {
        return Some(ctx.workdir());
    }
    let name = ctx.profile_name();
    let builtin_local = !ctx.config.profiles.contains_key(&name)
        && crate::config::builtin_backend(&name) == Some(crate::backend::BackendKind::Local);
    (builtin_local && ctx.global.user.is_empty()).then(|| ctx.paths.default_workdir.clone())
}

/// Session ids of the workspace folder (names under `sessions/`).
pub fn sessions() -> Vec<CompletionCandidate> {
    let Some(dir) = context().as_ref().and_then(local_workdir) else {
        return Vec::new();
    };
    session_names(&dir)
        .into_iter()
        .map(CompletionCandidate::new)
        .collect()
}

/// Names of the folders under `<workdir>/sessions`, sorted; at most
/// 1,000 (a completion menu longer than that helps no one).
fn session_names(workdir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(workdir.join(crate::engine::layout::names::SESSIONS_DIR)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .take(1000)
        .collect();
    names.sort();
    names
}

/// MCP server names declared for the (agent, session) of the words so
/// far in the workspace folder's `.mcp`.
pub fn mcp_servers() -> Vec<CompletionCandidate> {
    let Some(ctx) = context() else {
        return Vec::new();
    };
    let Some(dir) = local_workdir(&ctx) else {
        return Vec::new();
    };
    server_names(&dir, &ctx.global.agent, &ctx.session())
        .into_iter()
        .map(|(name, transport)| CompletionCandidate::new(name).help(Some(transport.into())))
        .collect()
}

/// (name, transport) of the servers `.mcp` in `workdir` declares for
/// the pair; nothing when the file is missing or over 4 MiB.
fn server_names(workdir: &Path, agent: &str, session: &str) -> Vec<(String, String)> {
    let path = workdir.join(".mcp");
    let Ok(meta) = std::fs::metadata(&path) else {
        return Vec::new();
    };
    if meta.len() > 4 << 20 {
        return Vec::new();
    }
    let bytes = std::fs::read(&path).ok();
    let store =
        crate::engine::mcp::store::McpStore::parse(path.display().to_string(), bytes.as_deref());
    store
        .declared(agent, session, &[])
        .into_iter()
        .map(|d| {
            let transport = match d.transport() {
                McpTransport::Stdio => "stdio",
                McpTransport::Sse => "sse",
                McpTransport::StreamableHttp => "streamable http",
            };
            (d.name.clone(), transport.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_and_servers_come_from_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        for s in ["s-2", "s-1"] {
            std::fs::create_dir_all(dir.path().join("sessions").join(s)).unwrap();
        }
        std::fs::write(dir.path().join("sessions").join("file"), "").unwrap();
        assert_eq!(session_names(dir.path()), ["s-1", "s-2"]);
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("fixtures")
            .join("reference-workspace");
        let names = server_names(&fixture, "coder", "s-001");
        assert!(
            names
                .iter()
                .any(|(n, t)| n == "docs" && t == "streamable http"),
            "{names:?}"
        );
        assert!(server_names(dir.path(), "", "default").is_empty());
    }
}
