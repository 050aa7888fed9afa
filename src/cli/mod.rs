//! The headless CLI (clap): the contract the TUI, tests and scripts build
//! on. Every sub-command takes `--workdir`, `--agent`, `--session` and
//! `--json`; errors go to stderr with a non-zero exit.

mod exec;
mod info;
mod mcp;
mod offload;
mod output;
mod sessions;
mod skills;
mod tool;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::backend::local::LocalSandbox;
use crate::config::{Config, Paths};
use crate::engine::{EventBus, Workspace, WorkspaceConfig};

/// Exit code of a command that timed out (as `timeout(1)` reports it).
pub const EXIT_TIMEOUT: i32 = 124;

/// wsbench — a terminal workbench for AI-agent workspaces.
#[derive(Debug, Parser)]
#[command(name = "wsbench", version, about, long_about = None)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do; none opens the workspace view.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options shared by every sub-command.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Workspace directory (default: the embedded default workspace under
    /// the XDG data dir).
    #[arg(long, global = true, value_name = "DIR", env = "WSBENCH_WORKDIR")]
    pub workdir: Option<PathBuf>,
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
}

impl Ctx {
    /// Loads paths and config.
    pub fn load(global: GlobalArgs) -> anyhow::Result<Self> {
        let paths = Paths::from_env()?;
        let config_file = global
            .config
            .clone()
            .unwrap_or_else(|| paths.config_file.clone());
        let config = Config::load(&config_file)?;
        Ok(Ctx {
            global,
            paths,
            config,
            config_file,
        })
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

    /// Opens the workspace on the local backend.
    pub async fn open_workspace(&self) -> anyhow::Result<Arc<Workspace>> {
        let dir = self.workdir();
        let sandbox = LocalSandbox::open(&dir)
            .with_context(|| format!("opening workspace {}", dir.display()))?;
        let config = WorkspaceConfig {
            workspace_id: None,
            skill_paths: self.config.workspace.skill_paths.clone(),
            instructions: self.config.workspace.instructions.clone(),
            limits: self.config.limits.clone(),
            default_mcps: Vec::new(),
        };
        Ok(Workspace::open(Arc::new(sandbox), config, EventBus::default()).await?)
    }
}

/// Runs the CLI; returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    if let Some(Command::Completions { shell }) = &cli.command {
        let mut cmd = Cli::command();
        clap_complete::generate(*shell, &mut cmd, "wsbench", &mut std::io::stdout());
        return Ok(0);
    }
    let ctx = Ctx::load(cli.global)?;
    match cli.command {
        None => info::summary(&ctx).await,
        Some(Command::Exec(a)) => exec::run(&ctx, a).await,
        Some(Command::Tool(a)) => tool::run(&ctx, a).await,
        Some(Command::Skills(c)) => skills::run(&ctx, c).await,
        Some(Command::Sessions(c)) => sessions::run(&ctx, c).await,
        Some(Command::Offload(c)) => offload::run(&ctx, c).await,
        Some(Command::Mcp(c)) => mcp::run(&ctx, c).await,
        Some(Command::Status) => info::summary(&ctx).await,
        Some(Command::Info) => info::run(&ctx).await,
        Some(Command::Completions { .. }) => unreachable!("handled above"),
    }
}
