//! The workspace: one backend sandbox plus the layout, tools, skills,
//! offloading and journal on top of it (contract §1).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::events::{Event, EventBus, WorkspaceState};
use super::journal::JournalEntry;
use super::layout::{IdError, Layout};
use super::tools::{Tool, ToolContext, ToolLimits, ToolResult, ToolSpec, ToolState, builtin_tools};
use crate::backend::{BackendError, BackendKind, Sandbox};

/// Errors of workspace operations (tools report theirs in a [`ToolResult`]).
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// An id cannot be used in a path.
    #[error(transparent)]
    Id(#[from] IdError),
    /// Bad input (a skill without SKILL.md, a bad archive, ...).
    #[error("{0}")]
    Invalid(String),
    /// Something named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A file's content could not be parsed.
    #[error("{path}: {message}")]
    Parse {
        /// Backend path.
        path: String,
        /// What is wrong, with line and column where known.
        message: String,
    },
}

/// Result alias for workspace operations.
pub type WsResult<T> = Result<T, WorkspaceError>;

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
    /// MCP servers of every (agent, session) that has not diverged
    /// (reference `default_mcps`, contract §5.2).
    pub default_mcps: Vec<super::mcp::McpDecl>,
}

/// A workspace bound to a live sandbox.
pub struct Workspace {
    pub(crate) id: String,
    pub(crate) sandbox: Arc<dyn Sandbox>,
    pub(crate) layout: Layout,
    pub(crate) bus: EventBus,
    pub(crate) config: WorkspaceConfig,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    #[allow(dead_code)] // taken by the skills module
    pub(crate) skill_lock: tokio::sync::Mutex<()>,
    pub(crate) equipped: std::sync::Mutex<HashSet<String>>,
    pub(crate) alive: AtomicBool,
    /// Next `(n)` suffix to try per (session, result id): claims stay
    /// race-free through exclusive creates, the hint only skips names
    /// this process already took.
    pub(crate) claim_hints: std::sync::Mutex<std::collections::HashMap<(String, String), u32>>,
    /// Live MCP servers and the `.mcp` declarations.
    pub(crate) mcp: super::mcp::McpRuntime,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("id", &self.id)
            .field("backend", &self.sandbox.kind())
            .field("workdir", &self.layout.workdir())
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

/// The reference's default instructions (contract §1.1), in our words.
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
        let layout = Layout::new(sandbox.workdir());
        let mcp = super::mcp::McpRuntime::new(
            sandbox.clone(),
            bus.clone(),
            &id,
            config.default_mcps.clone(),
        );
        let ws = Arc::new(Workspace {
            id,
            sandbox,
            layout,
            bus,
            config,
            tools: builtin_tools(),
            skill_lock: tokio::sync::Mutex::new(()),
            equipped: Default::default(),
            alive: AtomicBool::new(false),
            claim_hints: Default::default(),
            mcp,
        });
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
    pub async fn initialize(&self) -> WsResult<()> {
        if self.alive.load(Ordering::Acquire) {
            return Ok(());
        }
        let sb = &self.sandbox;
        sb.mkdir(self.layout.workdir(), true).await?;
        sb.mkdir(&self.layout.skills_dir(), true).await?;
        self.migrate_skills().await?;
        sb.mkdir(&self.layout.seed_dir(), true).await?;
        self.seed_skills().await?;
        self.alive.store(true, Ordering::Release);
        self.publish(Event::Workspace {
            state: WorkspaceState::Ready,
        });
        Ok(())
    }

    /// Marks the workspace closed. The sandbox stays usable (local
    /// semantics); the manager decides whether to suspend or destroy it.
    pub async fn close(&self) {
        self.close_mcps().await;
        if self.alive.swap(false, Ordering::AcqRel) {
            self.publish(Event::Workspace {
                state: WorkspaceState::Closed,
            });
        }
    }

    /// Deletes `sessions/`, `data/`, `skills/` and `.mcp`; the sandbox stays.
    /// Skills are not re-seeded until the next [`Workspace::initialize`].
    pub async fn reset(&self) -> WsResult<()> {
        self.reset_mcps().await;
        for p in [
            self.layout.sessions_dir(),
            self.layout.data_dir(),
            self.layout.skills_dir(),
            self.layout.mcp_file(),
        ] {
            match self.sandbox.remove(&p, true).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.equipped.lock().expect("equipped lock").clear();
        self.publish(Event::Workspace {
            state: WorkspaceState::Reset,
        });
        Ok(())
    }

    /// Workspace id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// True between initialise and close.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The live sandbox.
    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }

    /// Backend kind.
    pub fn backend(&self) -> BackendKind {
        self.sandbox.kind()
    }

    /// The layout (backend paths).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The event bus.
    pub fn events(&self) -> &EventBus {
        &self.bus
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
        self.bus.publish(&self.id, event);
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
            .replace("{workdir}", self.layout.workdir())
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
        self.publish(Event::ToolStarted {
            call_id: call_id.clone(),
            agent: call.agent.clone(),
            session: call.session.clone(),
            tool: call.tool.clone(),
            args: call.args.clone(),
        });
        let ctx = ToolContext {
            workspace: self,
            agent: &call.agent,
            session: &call.session,
            call_id: &call_id,
            cancel: call.cancel.clone().unwrap_or_default(),
            output: call.output.clone(),
        };
        let result = tool.call(&ctx, call.args.clone()).await;
        let duration_ms = t0.elapsed().as_millis() as u64;
        self.publish(Event::ToolFinished {
            call_id: call_id.clone(),
            tool: call.tool.clone(),
            state: result.state.as_str().to_string(),
            duration_ms,
        });
        let entry = JournalEntry {
            started_at,
            call_id,
            agent: call.agent.clone(),
            session: call.session.clone(),
            tool: call.tool.clone(),
            args: call.args,
            state: result.state,
            exit_code: result.exit_code,
            timed_out: result.timed_out,
            error: (result.state == ToolState::Error).then(|| first_line(&result.text(), 500)),
            duration_ms,
            output_bytes: result.output_bytes,
            offload_path: result.offload_path.clone(),
        };
        if let Err(e) = self.append_journal(&entry).await {
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
        let mut end = max;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &line[..end])
    }
}
