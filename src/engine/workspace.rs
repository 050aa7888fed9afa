//! The workspace: one backend sandbox plus the layout, tools, skills,
//! offloading and journal on top of it (docs/contract.md §1).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::base::WorkspaceBase;
use super::events::{Event, EventBus, WorkspaceState};
use super::journal::{Journal, JournalCall, JournalEntry};
use super::layout::Layout;
use super::mcp::{Mcp, McpDecl, McpOptions, McpRuntime};
use super::offload::Offload;
use super::sessions::Sessions;
use super::shell_session::{InputMsg, ShellOptions, ShellSessions};
use super::skills::{SkillState, Skills};
use super::tools::{
    BashOptions, Tool, ToolContext, ToolEnv, ToolLimits, ToolResult, ToolSpec, ToolState,
    builtin_tools,
};
use crate::backend::{BackendKind, Sandbox};

pub use super::error::{WorkspaceError, WsResult};

/// How a workspace is set up.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceConfig {
    /// Workspace id; `None` mints a 32-hex id.
    pub workspace_id: Option<String>,
    /// Host directories copied into `skills/.seed` on initialise (only
    /// while the seed is empty).
    pub skill_paths: Vec<PathBuf>,
    /// Replaces the default instructions template (`{backend}` and
    /// `{workdir}` are filled in).
    pub instructions: Option<String>,
    /// Tool limits.
    pub limits: ToolLimits,
    /// The Bash tool uses the session's long-lived shell
    /// (`[tools] bash_session`; see [`ShellSessions`]).
    pub bash_session: bool,
    /// MCP servers of every (agent, session) that has not diverged
    /// (reference `default_mcps`, docs/contract.md §5.2).
    pub default_mcps: Vec<McpDecl>,
    /// Open without writing anything (`--read-only`): no layout is
    /// created, no skill is migrated, seeded or equipped, and every write
    /// or exec is refused with a clear error (see
    /// [`ReadOnlySandbox`](super::read_only::ReadOnlySandbox)).
    pub read_only: bool,
    /// Options of the MCP clients (the default call timeout among them),
    /// set once here by whoever opens the workspace (the composition root
    /// fills it from `[mcp]`), so every way of opening one carries them.
    #[serde(skip)]
    pub mcp: McpOptions,
}

/// A workspace bound to a live sandbox. It owns the pieces; each
/// subsystem is reached through a handle: [`Workspace::skills`],
/// [`Workspace::mcp`], [`Workspace::offload`], [`Workspace::sessions`],
/// [`Workspace::journal`].
pub struct Workspace {
    base: WorkspaceBase,
    config: WorkspaceConfig,
    tools: Vec<Arc<dyn Tool>>,
    skills: SkillState,
    alive: AtomicBool,
    offload: Offload,
    /// Live MCP servers and the `.mcp` declarations.
    mcp: McpRuntime,
    /// The session shells (Command pane, Bash tool with `bash_session`).
    shells: ShellSessions,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("id", &self.base.id())
            .field("backend", &self.base.sandbox().kind())
            .field("workdir", &self.base.layout().workdir())
            .finish()
    }
}

/// One tool call to make through [`Workspace::call_tool`].
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    /// Agent id (`""` for none).
    pub agent: String,
    /// Session id.
    pub session: String,
    /// Tool name (`Bash`, `Read`, ...).
    pub tool: String,
    /// Arguments object.
    pub args: Value,
    /// Call id; `None` mints one.
    pub call_id: Option<String>,
    /// Cancels the call.
    pub cancel: Option<CancellationToken>,
    /// Receives raw command output losslessly while the call runs.
    pub output: Option<crate::backend::OutputSink>,
}

/// Extra options of one call ([`Workspace::call_tool_with`]); they
/// matter only to the Bash tool.
#[derive(Debug, Default)]
pub struct CallOptions {
    /// `Some(true)`: run in the session's shell; `Some(false)`: a fresh
    /// shell; `None`: as `[tools] bash_session` says.
    pub session_shell: Option<bool>,
    /// Input for the running command (lines, end of file, Ctrl-C); its
    /// stdin is then a FIFO instead of `/dev/null`.
    pub input: Option<tokio::sync::mpsc::Receiver<InputMsg>>,
    /// Told when the command's processes are gone, before the tool
    /// writes its tool-result file (the TUI shows a kill at once).
    pub ended: Option<tokio::sync::oneshot::Sender<super::tools::ProcessEnded>>,
}

/// The reference's default instructions (docs/contract.md §1.1), in our words.
pub const DEFAULT_INSTRUCTIONS: &str = "<workspace>
You work in a {backend} workspace rooted at `{workdir}`.

{workdir}/
├── data/      offloaded images and files, named by content hash (workspace:///data/...)
├── skills/    your skills, one folder per skill with a SKILL.md
└── sessions/  per session: context.jsonl (offloaded messages) and tool-result files

Keep the workspace tidy: put each project in its own dated directory with a README,
use a git worktree per session when you change a repository, keep temporary files in
`scratch/`, give each Python project its own virtual environment, and never write
secrets into files.
</workspace>";

impl Workspace {
    /// Binds a workspace to `sandbox` and initialises it: creates the
    /// layout, migrates stray skills into `.seed` and seeds skills from
    /// `config.skill_paths`. Connects no MCP server. Publishes
    /// `Provisioning`, then `Ready` (or `Failed`), each once, tagged with
    /// the workspace id.
    pub async fn open(
        sandbox: Arc<dyn Sandbox>,
        config: WorkspaceConfig,
        bus: EventBus,
    ) -> WsResult<Arc<Self>> {
        Self::open_inner(sandbox, config, bus, true).await
    }

    /// [`Workspace::open`] for a caller that has already published
    /// `Provisioning` for `config.workspace_id` (the workspace manager
    /// and its pre-warm pool do, before they create the sandbox), so the
    /// state change is not published twice. Publishes `Ready` or
    /// `Failed`.
    pub(crate) async fn open_provisioned(
        sandbox: Arc<dyn Sandbox>,
        config: WorkspaceConfig,
        bus: EventBus,
    ) -> WsResult<Arc<Self>> {
        Self::open_inner(sandbox, config, bus, false).await
    }

    async fn open_inner(
        sandbox: Arc<dyn Sandbox>,
        config: WorkspaceConfig,
        bus: EventBus,
        announce: bool,
    ) -> WsResult<Arc<Self>> {
        let id = config
            .workspace_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let mut base = WorkspaceBase::new(id, sandbox, bus);
        if config.read_only {
            base = base.read_only();
        }
        // After the read-only wrap: MCP servers start through it too.
        let mcp = McpRuntime::new(
            base.sandbox().clone(),
            base.bus().clone(),
            base.id(),
            config.default_mcps.clone(),
        );
        let mcp_options = config.mcp.clone();
        let shells = ShellSessions::new(base.sandbox().clone(), ShellOptions::default());
        let tools = builtin_tools(config.bash_session);
        let ws = Arc::new(Workspace {
            shells,
            offload: Offload::new(base.clone()),
            base,
            config,
            tools,
            skills: SkillState::default(),
            alive: AtomicBool::new(false),
            mcp,
        });
        ws.mcp().set_options(mcp_options);
        if announce {
            ws.publish(Event::Workspace {
                state: WorkspaceState::Provisioning,
            });
        }
        match ws.initialize().await {
            Ok(()) => Ok(ws),
            Err(e) => {
                ws.publish(Event::Workspace {
                    state: WorkspaceState::Failed {
                        reason: e.to_string(),
                    },
                });
                Err(e)
            }
        }
    }

    /// Creates the layout and seeds skills. No-op when already alive.
    /// Read-only ([`WorkspaceConfig::read_only`]): writes nothing, so a
    /// missing layout stays missing and listings read what is there.
    pub async fn initialize(&self) -> WsResult<()> {
        if self.alive.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.base.is_read_only() {
            self.alive.store(true, Ordering::Release);
            self.publish(Event::Workspace {
                state: WorkspaceState::Ready,
            });
            return Ok(());
        }
        let sb = self.base.sandbox();
        let layout = self.base.layout();
        sb.mkdir(layout.workdir(), true).await?;
        sb.mkdir(&layout.skills_dir(), true).await?;
        self.skills().migrate().await?;
        sb.mkdir(&layout.seed_dir(), true).await?;
        self.skills().seed().await?;
        self.alive.store(true, Ordering::Release);
        self.publish(Event::Workspace {
            state: WorkspaceState::Ready,
        });
        Ok(())
    }

    /// Sets the workspace up again after the workspace manager replaced or
    /// restarted the sandbox under it (issue 15): live MCP servers are
    /// closed (they ran in the old sandbox; each starts again on its next
    /// use), then the layout is created and skills seeded as on open
    /// (both keep what is there, so a restarted sandbox loses nothing).
    /// Publishes `Ready` again.
    pub(crate) async fn reinitialize(&self) -> WsResult<()> {
        self.mcp().close().await;
        self.alive.store(false, Ordering::Release);
        self.initialize().await
    }

    /// Marks the workspace closed. The sandbox stays usable (local
    /// semantics); the manager decides whether to suspend or destroy it.
    pub async fn close(&self) {
        self.mcp().close().await;
        if self.alive.swap(false, Ordering::AcqRel) {
            self.publish(Event::Workspace {
                state: WorkspaceState::Closed,
            });
        }
    }

    /// Deletes `sessions/`, `data/`, `skills/` and `.mcp`; the sandbox stays.
    /// Skills are not re-seeded until the next [`Workspace::initialize`].
    pub async fn reset(&self) -> WsResult<()> {
        self.mcp().reset().await;
        let layout = self.base.layout();
        for p in [
            layout.sessions_dir(),
            layout.data_dir(),
            layout.skills_dir(),
            layout.mcp_file(),
        ] {
            match self.base.sandbox().remove(&p, true).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.skills.forget_equipped();
        self.publish(Event::Workspace {
            state: WorkspaceState::Reset,
        });
        Ok(())
    }

    /// Workspace id.
    pub fn id(&self) -> &str {
        self.base.id()
    }

    /// True between initialise and close.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The live sandbox.
    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        self.base.sandbox()
    }

    /// Backend kind.
    pub fn backend(&self) -> BackendKind {
        self.base.sandbox().kind()
    }

    /// The layout (backend paths).
    pub fn layout(&self) -> &Layout {
        self.base.layout()
    }

    /// The event bus.
    pub fn events(&self) -> &EventBus {
        self.base.bus()
    }

    /// The shared pieces (id, sandbox, layout, bus) the subsystems use.
    pub fn base(&self) -> &WorkspaceBase {
        &self.base
    }

    /// The skills (list, add, remove, seed).
    pub fn skills(&self) -> Skills<'_> {
        Skills::new(&self.base, &self.skills, &self.config.skill_paths)
    }

    /// The MCP servers (declarations, live instances, tool calls).
    pub fn mcp(&self) -> Mcp<'_> {
        Mcp::new(&self.mcp, &self.base, &self.offload)
    }

    /// Offloading of data blocks, messages and tool results.
    pub fn offload(&self) -> &Offload {
        &self.offload
    }

    /// The sessions under `sessions/` (summaries, details, contexts).
    pub fn sessions(&self) -> Sessions<'_> {
        Sessions::new(&self.base, &self.offload)
    }

    /// The per-session tool-call journals.
    pub fn journal(&self) -> Journal<'_> {
        Journal::new(&self.base)
    }

    /// What a built-in tool call may touch, for running a tool directly.
    pub fn tool_env(&self) -> ToolEnv<'_> {
        ToolEnv {
            workspace_id: self.base.id(),
            sandbox: self.base.sandbox(),
            layout: self.base.layout(),
            limits: &self.config.limits,
            bus: self.base.bus(),
            offload: &self.offload,
            shells: &self.shells,
            bash_session: self.config.bash_session,
        }
    }

    /// The session shells of this workspace, one per session id.
    pub fn shells(&self) -> &ShellSessions {
        &self.shells
    }

    /// The configuration.
    pub fn config(&self) -> &WorkspaceConfig {
        &self.config
    }

    /// Tool limits.
    pub fn limits(&self) -> &ToolLimits {
        &self.config.limits
    }

    /// Publishes an event tagged with this workspace's id.
    pub fn publish(&self, event: Event) {
        self.base.publish(event);
    }

    /// System-prompt fragment naming the backend and workdir. Pure.
    pub fn get_instructions(&self) -> String {
        let template = self
            .config
            .instructions
            .as_deref()
            .unwrap_or(DEFAULT_INSTRUCTIONS);
        template
            .replace("{backend}", self.backend().instructions_label())
            .replace("{workdir}", self.base.layout().workdir())
    }

    /// The built-in tools with their schemas.
    pub fn list_tools(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.input_schema(),
                read_only: t.read_only(),
            })
            .collect()
    }

    /// Runs a built-in tool, publishing start/finish events and appending
    /// one line to the session journal.
    pub async fn call_tool(&self, call: ToolCall) -> ToolResult {
        self.call_tool_with(call, CallOptions::default()).await
    }

    /// [`Workspace::call_tool`] with what only some front ends give: the
    /// Command pane's choice of shell and its input channel.
    pub async fn call_tool_with(&self, call: ToolCall, opts: CallOptions) -> ToolResult {
        let call_id = call.call_id.clone().unwrap_or_else(|| {
            format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
        });
        let Some(tool) = self.tools.iter().find(|t| t.name() == call.tool).cloned() else {
            let names: Vec<_> = self.tools.iter().map(|t| t.name()).collect();
            return ToolResult::error(format!(
                "Unknown tool `{}`. Available tools: {}",
                call.tool,
                names.join(", ")
            ));
        };
        if let Err(e) = super::layout::check_session_id(&call.session) {
            return ToolResult::error(e.to_string());
        }
        let started_at = chrono::Utc::now();
        let t0 = Instant::now();
        // The event and the journal get a bounded copy; the tool gets the
        // arguments themselves (a Write's content is never copied).
        let (args_view, args_cut) = super::journal::bounded_args(&call.args);
        self.publish(Event::ToolStarted {
            call_id: call_id.clone(),
            agent: call.agent.clone(),
            session: call.session.clone(),
            tool: call.tool.clone(),
            args: args_view.clone(),
        });
        let ctx = ToolContext {
            env: self.tool_env(),
            agent: &call.agent,
            session: &call.session,
            call_id: &call_id,
            cancel: call.cancel.clone().unwrap_or_default(),
            output: call.output.clone(),
            bash: BashOptions::new(opts.session_shell, opts.input).with_ended(opts.ended),
        };
        let result = tool.call(&ctx, call.args).await;
        // A tool that measured itself (Bash) gave the one figure shown
        // everywhere; the others are measured here.
        let duration_ms = result
            .metadata
            .get("duration_ms")
            .and_then(|v| v.as_u64())
            .unwrap_or_else(|| t0.elapsed().as_millis() as u64);
        self.publish(Event::ToolFinished {
            call_id: call_id.clone(),
            tool: call.tool.clone(),
            state: result.state.as_str().to_string(),
            duration_ms,
        });
        let mut entry = JournalEntry::from_bounded(
            JournalCall {
                call_id,
                agent: call.agent,
                session: call.session,
                tool: call.tool,
                args: args_view,
            },
            args_cut,
            &result,
            started_at,
            duration_ms,
        );
        // Built-in tools have always journalled a byte-bounded first line
        // with an ellipsis; kept so existing journals read the same.
        entry.error = (result.state == ToolState::Error).then(|| first_line(&result.text(), 500));
        if let Err(e) = self.journal().append(&entry).await {
            self.publish(Event::Log {
                level: "warn".into(),
                source: "journal".into(),
                message: format!(
                    "could not append to the journal of session {}: {e}",
                    entry.session
                ),
            });
        }
        result
    }
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.len() <= max {
        line.to_string()
    } else {
        format!("{}…", crate::backend::text::head_bytes(line, max))
    }
}
