//! The headless CLI (clap): the contract the TUI, tests and scripts build
//! on. Every sub-command takes `--workdir`, `--agent`, `--session` and
//! `--json`; errors go to stderr with a non-zero exit.

mod agent;
mod exec;
mod info;
mod mcp;
mod offload;
mod output;
mod sandbox_record;
mod sessions;
mod skills;
mod tool;
mod workspaces;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::backend::local::LocalSandbox;
use crate::config::{Config, Paths};
use crate::engine::{EventBus, Workspace, WorkspaceConfig};
use crate::manager::{WorkspaceManager, profile_options};

/// The log filter when `WSBENCH_LOG` is unset or invalid: wsbench's own
/// warnings and nothing from libraries, whose ERROR lines repeat a
/// failure wsbench reports itself (and would break its one-line errors
/// and the `--json` stderr).
pub const DEFAULT_LOG_FILTER: &str = "off,wsbench=warn";

/// Exit code of a command that timed out (as `timeout(1)` reports it).
pub const EXIT_TIMEOUT: i32 = 124;

/// wsbench — a terminal workbench for AI-agent workspaces.
#[derive(Debug, Parser)]
#[command(name = "wsbench", version, about, long_about = None)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// Options of the TUI (a bare `wsbench`).
    #[command(flatten)]
    pub tui: crate::tui::TuiArgs,
    /// What to do; none opens the TUI (or, without a terminal or with
    /// `--json`, prints a summary).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options shared by every sub-command.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Use exactly this directory as a local workspace, bypassing profiles
    /// (default: the workspace the profile's manager assigns to
    /// `--user`/`--agent`/`--session`).
    #[arg(long, global = true, value_name = "DIR", env = "WSBENCH_WORKDIR")]
    pub workdir: Option<PathBuf>,
    /// Profile from the config file (default: `default_profile`, else the
    /// built-in `local`).
    #[arg(long, global = true, value_name = "NAME", env = "WSBENCH_PROFILE")]
    pub profile: Option<String>,
    /// User id the workspace manager assigns workspaces for.
    #[arg(
        long,
        global = true,
        value_name = "ID",
        env = "WSBENCH_USER",
        default_value = ""
    )]
    pub user: String,
    /// Agent id (selects the skills partition; empty = `default`).
    #[arg(long, global = true, default_value = "")]
    pub agent: String,
    /// Session id (names `sessions/<id>/`; default from config, else `default`).
    #[arg(long, global = true)]
    pub session: Option<String>,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    pub json: bool,
    /// Config file (default: `$XDG_CONFIG_HOME/wsbench/config.toml`).
    #[arg(long, global = true, value_name = "FILE", env = "WSBENCH_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Sub-commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command through the Bash tool, streaming its output; exits with
    /// the command's exit code (124 on timeout).
    Exec(exec::ExecArgs),
    /// Call a built-in tool with JSON arguments and print its result.
    Tool(tool::ToolArgs),
    /// Skills of the agent's partition.
    #[command(subcommand)]
    Skills(skills::SkillsCmd),
    /// Sessions of the workspace.
    #[command(subcommand)]
    Sessions(sessions::SessionsCmd),
    /// Offloaded context, tool results and data.
    #[command(subcommand)]
    Offload(offload::OffloadCmd),
    /// MCP servers of the (agent, session): list, add, remove, tools,
    /// call, restart; `serve` runs this workspace as an MCP server.
    #[command(subcommand)]
    Mcp(mcp::McpCmd),
    /// The workspace at a glance: sessions, skills, MCP declarations.
    Status,
    /// Workspaces of a profile: list (including those made by earlier
    /// runs), create, open, close, destroy.
    #[command(subcommand)]
    Workspaces(workspaces::WorkspacesCmd),
    /// Replay a demo transcript (scripted agent) in the workspace; no
    /// model server needed. `--list` shows the demos.
    Demo(agent::DemoArgs),
    /// Run an agent on an OpenAI-compatible model server for one prompt;
    /// `--session S` continues a session.
    Agent(agent::AgentArgs),
    /// Versions, resolved config and data paths, workspace root, backend.
    Info,
    /// Print shell completions.
    Completions {
        /// Shell to generate for.
        shell: clap_complete::Shell,
    },
}

/// What every command works with.
pub struct Ctx {
    /// Global options.
    pub global: GlobalArgs,
    /// Resolved paths.
    pub paths: Paths,
    /// Loaded config.
    pub config: Config,
    /// Config file actually used.
    pub config_file: PathBuf,
    /// The selected profile's manager, made on first use.
    manager: tokio::sync::OnceCell<WorkspaceManager>,
    /// Records of that manager's cloud sandboxes (cloud profiles only).
    records: std::sync::OnceLock<sandbox_record::SandboxRecords>,
    /// Subscriptions to the opened workspaces' buses, read when the
    /// command ends so a failed journal append is not lost silently
    /// (the tool call itself succeeded; only its record is missing).
    journal_watch: std::sync::Mutex<Vec<crate::engine::events::Subscriber>>,
}

impl Ctx {
    /// Loads paths and config.
    pub fn load(global: GlobalArgs) -> anyhow::Result<Self> {
        let paths = Paths::from_env()?;
        let config_file = global
            .config
            .clone()
            .unwrap_or_else(|| paths.config_file.clone());
        if global.config.is_some() && !config_file.is_file() {
            anyhow::bail!(
                "config file {} (given with --config) does not exist",
                config_file.display()
            );
        }
        let config = Config::load(&config_file)?;
        for w in config.skill_path_warnings() {
            eprintln!("warning: {}: {w}", config_file.display());
        }
        Ok(Ctx {
            global,
            paths,
            config,
            config_file,
            manager: tokio::sync::OnceCell::new(),
            records: std::sync::OnceLock::new(),
            journal_watch: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The profile in use: `--profile`, else the config's default.
    pub fn profile_name(&self) -> String {
        self.global
            .profile
            .clone()
            .unwrap_or_else(|| self.config.default_profile_name().to_string())
    }

    /// The manager of profile `name` (not cached; see [`Ctx::manager`]).
    /// Its pre-warm pool is off: a one-shot command would exit before
    /// claiming, and leave the pool's workspaces behind.
    pub fn manager_for(&self, name: &str) -> anyhow::Result<WorkspaceManager> {
        let (provisioner, mut opts) = profile_options(&self.config, name, &self.paths)?;
        opts.prewarm.size = 0;
        Ok(WorkspaceManager::new(
            name,
            provisioner,
            opts,
            EventBus::default(),
        ))
    }

    /// The manager of the selected profile, shared by the whole command.
    /// On a cloud profile its workspaces are recorded, so that one whose
    /// sandbox vanished on the service is reported when it is made anew
    /// (see [`Ctx::report_lost_sandboxes`]).
    pub async fn manager(&self) -> anyhow::Result<&WorkspaceManager> {
        self.manager
            .get_or_try_init(|| async {
                let name = self.profile_name();
                let m = self.manager_for(&name)?;
                if sandbox_record::tracked(m.backend()) {
                    let _ = self.records.set(sandbox_record::SandboxRecords::new(
                        &self.paths.data_dir,
                        &name,
                        m.backend(),
                        m.events().subscribe(),
                    ));
                }
                Ok(m)
            })
            .await
    }

    /// Prints a notice for each workspace of the selected cloud profile
    /// that got a new, empty sandbox because its recorded one is gone from
    /// the service, and updates the records (made, destroyed). Called
    /// after opening a workspace and when a command ends.
    pub fn report_lost_sandboxes(&self) {
        if let Some(r) = self.records.get() {
            for n in r.drain() {
                eprintln!("{n}");
            }
        }
    }

    /// The workspace directory to open.
    pub fn workdir(&self) -> PathBuf {
        self.global
            .workdir
            .clone()
            .unwrap_or_else(|| self.paths.default_workdir.clone())
    }

    /// The session id in use.
    pub fn session(&self) -> String {
        self.global
            .session
            .clone()
            .or_else(|| self.config.workspace.default_session.clone())
            .unwrap_or_else(|| "default".to_string())
    }

    /// Opens the workspace: `--workdir` as an exact local directory, else
    /// the one the selected profile's manager assigns to
    /// `(--user, --agent, session)` (created, or reattached when an earlier
    /// run made it).
    pub async fn open_workspace(&self) -> anyhow::Result<Arc<Workspace>> {
        if self.global.workdir.is_none() {
            let manager = self.manager().await?;
            let ws = manager
                .get_workspace(&self.global.user, &self.global.agent, &self.session(), None)
                .await
                .with_context(|| format!("opening a workspace of profile `{}`", manager.profile()));
            self.report_lost_sandboxes();
            if let Ok(ws) = &ws {
                self.watch_journal(ws);
            }
            return ws;
        }
        let dir = self.workdir();
        check_workdir(&dir)?;
        let sandbox = LocalSandbox::open(&dir)
            .with_context(|| format!("opening workspace {}", dir.display()))?;
        // Stable across launches: the Workspaces pane, the header and
        // `:ws` name the same directory by the same id every time.
        let id = crate::backend::Sandbox::host_root(&sandbox)
            .map(workdir_workspace_id)
            .unwrap_or_else(|| workdir_workspace_id(&dir));
        let config = WorkspaceConfig {
            workspace_id: Some(id),
            skill_paths: self.config.workspace.skill_paths.clone(),
            instructions: self.config.workspace.instructions.clone(),
            limits: self.config.limits.clone(),
            default_mcps: Vec::new(),
        };
        let ws = Workspace::open(Arc::new(sandbox), config, EventBus::default()).await?;
        self.watch_journal(&ws);
        Ok(ws)
    }

    fn watch_journal(&self, ws: &Workspace) {
        self.journal_watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(ws.events().subscribe());
    }

    /// The journal failures the opened workspaces reported during the
    /// command, each distinct message once, as `warning: ...` lines for
    /// stderr (e.g. a read-only copy of a workspace: the command ran, its
    /// journal entry could not be written).
    pub fn journal_warnings(&self) -> Vec<String> {
        let mut subs = self
            .journal_watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out: Vec<String> = Vec::new();
        for sub in subs.iter_mut() {
            while let Some(r) = sub.try_recv() {
                let crate::engine::events::Received::Event(env) = r else {
                    continue;
                };
                if let crate::engine::Event::Log {
                    level,
                    source,
                    message,
                } = &env.event
                    && source == "journal"
                    && (level == "warn" || level == "error")
                {
                    let line = format!("warning: {message}");
                    if !out.contains(&line) {
                        out.push(line);
                    }
                }
            }
        }
        out
    }
}

/// The workspace id of a `--workdir` directory: the first 32 hex digits
/// of the SHA-256 of its canonical path — the shape of a minted id
/// (`uuid4().hex`, contract §1), the same on every launch for the same
/// directory however it is spelt (`dir`, `dir/.`, a symlink), different
/// for different directories. Nothing on disk is keyed by it (sessions
/// and journals live in the directory), so earlier launches' data is
/// found whatever id they had.
pub fn workdir_workspace_id(dir: &std::path::Path) -> String {
    use sha2::Digest as _;
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let digest = sha2::Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    hex::encode(digest)[..32].to_string()
}

/// Cancels `token` on SIGINT, SIGTERM or SIGHUP, so a running command's
/// whole process tree is killed and its call journalled instead of being
/// orphaned. Returns the number of the signal received (0 while none).
pub fn cancel_on_signals(
    token: tokio_util::sync::CancellationToken,
) -> Arc<std::sync::atomic::AtomicI32> {
    use tokio::signal::unix::{SignalKind, signal};
    let got = Arc::new(std::sync::atomic::AtomicI32::new(0));
    let flag = got.clone();
    // Registered here, before the command starts, not inside the task.
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return got;
    };
    tokio::spawn(async move {
        let n = tokio::select! {
            _ = int.recv() => libc::SIGINT,
            _ = term.recv() => libc::SIGTERM,
            _ = hup.recv() => libc::SIGHUP,
        };
        flag.store(n, std::sync::atomic::Ordering::SeqCst);
        token.cancel();
    });
    got
}

/// Checks a `--workdir` before it is opened: an existing path must be a
/// directory, and a new one is only made when its parent exists (a typo in
/// a parent must not silently create a tree of directories).
pub fn check_workdir(dir: &std::path::Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!("--workdir {} is not a directory", dir.display()),
        Err(_) => {
            let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
            match parent {
                Some(p) if !p.is_dir() => anyhow::bail!(
                    "--workdir {}: the parent directory {} does not exist (create it first; only the last level is made)",
                    dir.display(),
                    p.display()
                ),
                _ => Ok(()),
            }
        }
    }
}

/// The message of a failed command as one line: the error and its causes
/// joined with `: `, each text once. Errors that print their source in
/// their own message (the manager's) would otherwise show it twice, as
/// `{:#}` does.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Runs the CLI; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    if let Some(Command::Completions { shell }) = &cli.command {
        let mut cmd = Cli::command();
        clap_complete::generate(*shell, &mut cmd, "wsbench", &mut std::io::stdout());
        return Ok(0);
    }
    let ctx = Ctx::load(cli.global)?;
    let code = dispatch(&ctx, cli.command, cli.tui).await;
    ctx.report_lost_sandboxes();
    for w in ctx.journal_warnings() {
        eprintln!("{w}");
    }
    code
}

async fn dispatch(
    ctx: &Ctx,
    command: Option<Command>,
    tui: crate::tui::TuiArgs,
) -> anyhow::Result<i32> {
    match command {
        None if ctx.global.json || !crate::tui::can_open() => info::summary(ctx).await,
        None => crate::tui::run(ctx, tui).await,
        Some(Command::Exec(a)) => exec::run(ctx, a).await,
        Some(Command::Tool(a)) => tool::run(ctx, a).await,
        Some(Command::Skills(c)) => skills::run(ctx, c).await,
        Some(Command::Sessions(c)) => sessions::run(ctx, c).await,
        Some(Command::Offload(c)) => offload::run(ctx, c).await,
        Some(Command::Mcp(c)) => mcp::run(ctx, c).await,
        Some(Command::Status) => info::summary(ctx).await,
        Some(Command::Workspaces(c)) => workspaces::run(ctx, c).await,
        Some(Command::Demo(a)) => agent::run_demo(ctx, a).await,
        Some(Command::Agent(a)) => agent::run_agent(ctx, a).await,
        Some(Command::Info) => info::run(ctx).await,
        Some(Command::Completions { .. }) => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workdir_keeps_its_workspace_id_across_launches() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let id = workdir_workspace_id(a.path());
        assert_eq!(id.len(), 32);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(workdir_workspace_id(a.path()), id);
        assert_eq!(workdir_workspace_id(&a.path().join(".")), id);
        let link = b.path().join("link");
        std::os::unix::fs::symlink(a.path(), &link).unwrap();
        assert_eq!(workdir_workspace_id(&link), id);
        assert_ne!(workdir_workspace_id(b.path()), id);
    }

    #[test]
    fn error_line_shows_each_cause_once() {
        let backend = crate::backend::BackendError::Unavailable("gone".into());
        let e = anyhow::Error::from(crate::manager::ManagerError::Backend {
            op: "close",
            id: "w1".into(),
            source: std::sync::Arc::new(backend),
        })
        .context("closing");
        assert_eq!(
            super::error_line(&e),
            "closing: close of workspace w1 failed: sandbox unavailable: gone"
        );
    }
}
