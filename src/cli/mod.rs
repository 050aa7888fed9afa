//! The headless CLI (clap): the contract the TUI, tests and scripts build
//! on. Every sub-command takes `--workdir`, `--agent`, `--session` and
//! `--json`; errors go to stderr with a non-zero exit.

mod agent;
pub mod complete;
mod exec;
mod gc;
mod info;
pub mod logging;
mod mcp;
mod offload;
mod output;
mod read_only;
mod sessions;
mod shell;
mod skills;
mod tool;
mod workspaces;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::root::{Context, Selection};

/// The log filter when `WSBENCH_LOG` is unset or invalid: wsbench's own
/// warnings and nothing from libraries, whose ERROR lines repeat a
/// failure wsbench reports itself (and would break its one-line errors
/// and the `--json` stderr).
pub const DEFAULT_LOG_FILTER: &str = "off,wsbench=warn";

/// Exit code of a command that timed out (as `timeout(1)` reports it).
pub(crate) const EXIT_TIMEOUT: i32 = 124;

/// Exit code of a listing that was printed whole but holds failures a
/// script should notice: `mcp list` with a server that failed to start or
/// connect (or a declaration problem), `skills list` with invalid skills.
/// Distinct from 1 (the command itself failed: nothing was listed) and 2
/// (bad command line, as clap reports it).
pub const EXIT_PARTIAL: i32 = 3;

/// What `--version` prints after `wsbench `: the crate version, then the
/// commit the binary was built from and that commit's date (`build.rs`),
/// e.g. `0.1.0 (f2495dd0a1b2 2026-12-06)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("WSBENCH_COMMIT"),
    " ",
    env!("WSBENCH_COMMIT_DATE"),
    ")"
);

/// wsbench — a terminal workbench for AI-agent workspaces.
#[derive(Debug, Parser)]
#[command(name = "wsbench", version = VERSION, about, long_about = None)]
pub struct Cli {
    /// Options every command takes (shown under their own heading in
    /// every `--help`, apart from the sub-command's own options).
    #[command(flatten, next_help_heading = "Global options")]
    pub global: GlobalArgs,
    /// Options of the TUI (a bare `wsbench`).
    #[command(flatten)]
    pub tui: TuiArgs,
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
    /// Create the `--workdir` directory when it does not exist (its
    /// parent must exist). Without it a missing `--workdir` is an error,
    /// so a typo never starts an empty workspace.
    #[arg(long, global = true, requires = "workdir")]
    pub create_workdir: bool,
    /// Profile from the config file (default: `default_profile`, else the
    /// built-in `local`).
    #[arg(long, global = true, value_name = "NAME", env = "WSBENCH_PROFILE",
        add = clap_complete::ArgValueCandidates::new(complete::profiles))]
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
    #[arg(
        long,
        global = true,
        value_name = "ID",
        env = "WSBENCH_AGENT",
        default_value = ""
    )]
    pub agent: String,
    /// Session id (names `sessions/<id>/`; default from config, else `default`).
    #[arg(long, global = true, value_name = "ID", env = "WSBENCH_SESSION",
        add = clap_complete::ArgValueCandidates::new(complete::sessions))]
    pub session: Option<String>,
    /// Work in the workspace with this id (made when missing) instead of
    /// the one the profile's isolation policy assigns to --user/--agent/
    /// --session; an explicit id always wins, as in the reference (team
    /// tools share one id). Any text up to 128 bytes without control
    /// characters or surrounding blanks; empty = the policy's id.
    #[arg(
        long,
        global = true,
        value_name = "ID",
        env = "WSBENCH_WORKSPACE_ID",
        conflicts_with = "workdir"
    )]
    pub workspace_id: Option<String>,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    pub json: bool,
    /// Config file (default: `$XDG_CONFIG_HOME/wsbench/config.toml`).
    #[arg(long, global = true, value_name = "FILE", env = "WSBENCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// Write nothing to the workspace: no layout or skills are created,
    /// and commands, tools and edits that would write are refused with
    /// an error. In the TUI, destructive actions are not offered.
    #[arg(long, global = true)]
    pub read_only: bool,
}

impl GlobalArgs {
    /// The workspace selection these options make (everything but
    /// `--json`, which only the CLI reads).
    pub fn selection(&self) -> Selection {
        Selection {
            workdir: self.workdir.clone(),
            create_workdir: self.create_workdir,
            profile: self.profile.clone(),
            user: self.user.clone(),
            agent: self.agent.clone(),
            session: self.session.clone(),
            workspace_id: self.workspace_id.clone(),
            config: self.config.clone(),
            read_only: self.read_only,
        }
    }
}

/// Options of a bare `wsbench` that only the TUI reads.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TuiArgs {
    /// Theme: dark, light, high-contrast, or a user theme in
    /// `$XDG_CONFIG_HOME/wsbench/themes/<name>.toml`.
    #[arg(long, value_name = "NAME")]
    pub theme: Option<String>,
    /// Do not capture the mouse (the terminal keeps text selection).
    #[arg(long)]
    pub no_mouse: bool,
}

/// Sub-commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command through the Bash tool, streaming its output; exits with
    /// the command's exit code (124 on timeout).
    Exec(exec::ExecArgs),
    /// Call a built-in tool with JSON arguments and print its result.
    Tool(tool::ToolArgs),
    /// A terminal inside the workspace's sandbox: its `bash` (else `sh`)
    /// in the workspace directory, or `-- CMD` run interactively; exits
    /// with its exit code. A local workspace's shell is not sandboxed.
    Shell(shell::ShellArgs),
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
    /// Print the manual page (roff: `wsbench man | man -l -`), of a
    /// sub-command with its name (`wsbench man mcp add`), or write every
    /// page to a folder with `--out DIR` (for `MANPATH`).
    Man {
        /// The sub-command whose page to print (none: `wsbench` itself).
        command: Vec<String>,
        /// Write `wsbench.1` and one page per sub-command into DIR instead.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        out: Option<PathBuf>,
    },
    /// Print shell completions.
    Completions {
        /// Shell to generate for.
        shell: clap_complete::Shell,
    },
}

/// What every command works with: the composition root's context
/// (`ctx.root.config`, `ctx.root.open_workspace()`, ...) and the output
/// format.
pub struct Ctx {
    /// Paths, config, profile and the manager factory.
    pub root: Context,
    /// Machine-readable JSON output (`--json`).
    pub json: bool,
}

impl Ctx {
    /// Loads paths and config for `global` (see [`Context::load`]).
    pub fn load(global: GlobalArgs) -> anyhow::Result<Self> {
        Ok(Ctx {
            json: global.json,
            root: Context::load(global.selection())?,
        })
    }
}

/// Cancels `token` on SIGINT, SIGTERM or SIGHUP, so a running command's
/// whole process tree is killed and its call journalled instead of being
/// orphaned. Returns the number of the signal received (0 while none).
pub(crate) fn cancel_on_signals(
    token: tokio_util::sync::CancellationToken,
) -> Arc<std::sync::atomic::AtomicI32> {
    cancel_on_signals_why(token, None)
}

/// [`cancel_on_signals`], also setting `reason` to the signal's name
/// (`SIGINT`, `SIGTERM`, `SIGHUP`) before the token is cancelled, for a
/// result or journal line that says what interrupted it.
pub(crate) fn cancel_on_signals_why(
    token: tokio_util::sync::CancellationToken,
    reason: Option<Arc<std::sync::OnceLock<String>>>,
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
        if let Some(r) = reason {
            let name = match n {
                libc::SIGINT => "SIGINT",
                libc::SIGTERM => "SIGTERM",
                _ => "SIGHUP",
            };
            let _ = r.set(name.to_string());
        }
        token.cancel();
    });
    got
}

/// The message of a failed command as one line: the error and its causes
/// joined with `: `, each text once, terminal-safe
/// ([`crate::root::safe_text::for_lines`]). Errors that print their source in
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
    // Causes carry server and workspace text (error bodies, names): their
    // control characters are shown as visible stand-ins.
    crate::root::safe_text::for_lines(&out).into_owned()
}

/// The manual page (roff, `clap_mangen`) of `wsbench` (`path` empty) or
/// of one of its sub-commands (`path` = `["mcp", "add"]` for
/// `wsbench-mcp-add(1)`), with every option and the sub-commands listed.
///
/// # Errors
/// A `path` that names no sub-command (the message lists the known ones).
pub fn man_page(path: &[String]) -> anyhow::Result<Vec<u8>> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut name = "wsbench".to_string();
    for part in path {
        let known: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        let Some(sub) = cmd.find_subcommand(part).cloned() else {
            anyhow::bail!(
                "no sub-command {part:?} under {name}; known: {}",
                known.join(", ")
            );
        };
        name = format!("{name}-{}", sub.get_name());
        cmd = sub.name(name.clone()).version(VERSION);
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(out)
}

/// An error as the JSON object `--json` prints on stdout: `{"error":
/// "<the one line of [error_line]>", "causes": ["outer", ..., "root"]}`
/// (each cause terminal-safe), so a script reading stdout gets a parseable
/// answer on failure too; the text line still goes to stderr.
pub fn error_json(e: &anyhow::Error) -> serde_json::Value {
    let causes: Vec<String> = e
        .chain()
        .map(|c| crate::root::safe_text::for_lines(&c.to_string()).into_owned())
        .collect();
    serde_json::json!({ "error": error_line(e), "causes": causes })
}

/// Writes `bytes` to stdout. A reader that went away (`| head`) is not an
/// error: the output was wanted only that far, as with any Unix filter
/// (clap_complete writing to stdout itself panicked on the broken pipe).
fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// Runs a sub-command (or, with none, prints the workspace summary: the
/// binary opens the TUI itself when it can); returns the process exit
/// code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    if let Some(Command::Completions { shell }) = &cli.command {
        let mut cmd = Cli::command();
        let mut script = Vec::new();
        clap_complete::generate(*shell, &mut cmd, "wsbench", &mut script);
        write_stdout(&script)?;
        return Ok(0);
    }
    if let Some(Command::Man { command, out }) = &cli.command {
        match out {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                clap_mangen::generate_to(Cli::command(), dir)?;
            }
            None => write_stdout(&man_page(command)?)?,
        }
        return Ok(0);
    }
    // Before anything is loaded or opened: a refused command touches nothing.
    read_only::check(cli.global.read_only, cli.command.as_ref())?;
    let ctx = Ctx::load(cli.global)?;
    let code = dispatch(&ctx, cli.command).await;
    ctx.root.report_at_exit();
    code
}

async fn dispatch(ctx: &Ctx, command: Option<Command>) -> anyhow::Result<i32> {
    match command {
        None => info::summary(ctx).await,
        Some(Command::Exec(a)) => exec::run(ctx, a).await,
        Some(Command::Tool(a)) => tool::run(ctx, a).await,
        Some(Command::Shell(a)) => shell::run(ctx, a).await,
        Some(Command::Skills(c)) => skills::run(ctx, c).await,
        Some(Command::Sessions(c)) => sessions::run(ctx, c).await,
        Some(Command::Offload(c)) => offload::run(ctx, c).await,
        Some(Command::Mcp(c)) => mcp::run(ctx, c).await,
        Some(Command::Status) => info::summary(ctx).await,
        Some(Command::Workspaces(c)) => workspaces::run(ctx, c).await,
        Some(Command::Demo(a)) => agent::run_demo(ctx, a).await,
        Some(Command::Agent(a)) => agent::run_agent(ctx, a).await,
        Some(Command::Info) => info::run(ctx).await,
        Some(Command::Completions { .. } | Command::Man { .. }) => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_line_shows_each_cause_once() {
        let backend = crate::backend::BackendError::unreachable("gone");
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
