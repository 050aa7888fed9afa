//! The agent's toolset: the workspace's built-in tools, the Skill viewer
//! (docs/contract.md §4.5) and, through [`Toolset::add`], any other tool — MCP
//! tools named `mcp__<server>__<tool>` plug in as one [`AgentTool`] each.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::model::ToolSchema;
use crate::engine::skills::SkillListing;
use crate::engine::tools::{ToolResult, ToolSpec};
use crate::engine::workspace::{ToolCall, Workspace};

/// What a tool call gets besides its arguments.
pub struct AgentToolContext<'a> {
    /// The workspace.
    pub workspace: &'a Arc<Workspace>,
    /// Agent id (skills partition; `""` = `default`).
    pub agent: &'a str,
    /// Session id.
    pub session: &'a str,
    /// Call id (names offloaded files).
    pub call_id: &'a str,
    /// Fires when the user stops the run.
    pub cancel: CancellationToken,
}

/// One tool the agent can call.
#[async_trait]
pub trait AgentTool: Send + Sync {
    /// Name, description, schema and whether it only reads.
    fn spec(&self) -> ToolSpec;

    /// Runs the call; failures come back as an error [`ToolResult`] the
    /// model can read, never as a panic.
    async fn call(&self, ctx: &AgentToolContext<'_>, args: Value) -> ToolResult;

    /// True when the call publishes its own `Tool*` bus events and journal
    /// line (the built-ins do, through [`Workspace::call_tool`]); for the
    /// others the agent does it.
    fn journals_itself(&self) -> bool {
        false
    }
}

/// A built-in tool, run through [`Workspace::call_tool`].
pub struct BuiltinTool {
    spec: ToolSpec,
}

#[async_trait]
impl AgentTool for BuiltinTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn call(&self, ctx: &AgentToolContext<'_>, args: Value) -> ToolResult {
        ctx.workspace
            .call_tool(ToolCall {
                agent: ctx.agent.to_string(),
                session: ctx.session.to_string(),
                tool: self.spec.name.clone(),
                args,
                call_id: Some(ctx.call_id.to_string()),
                cancel: Some(ctx.cancel.clone()),
                output: None,
            })
            .await
    }

    fn journals_itself(&self) -> bool {
        true
    }
}

/// Name of the skill viewer tool (docs/contract.md §4.5).
pub const SKILL_TOOL: &str = "Skill";

/// The skill viewer: returns the markdown body of a skill of the agent's
/// partition, or `SkillNotFoundError: Skill '<x>' not found.`.
pub struct SkillViewer;

#[async_trait]
impl AgentTool for SkillViewer {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: SKILL_TOOL.into(),
            description:
                "Open a skill: returns the instructions (SKILL.md body) of the named skill. \
                When a task matches one of the available skills, open it with this tool before \
                acting, then follow it; reach its scripts and resources with the other tools under \
                the skill's directory."
                    .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "skill": {"type": "string", "description": "The exact name of the skill to view."}
                },
                "required": ["skill"]
            }),
            read_only: true,
        }
    }

    async fn call(&self, ctx: &AgentToolContext<'_>, args: Value) -> ToolResult {
        let Some(name) = args.get("skill").and_then(Value::as_str) else {
            return ToolResult::error("Invalid arguments for Skill: `skill` (string) is required.");
        };
        match ctx.workspace.skills().list(ctx.agent).await {
            Ok(listing) => match listing.get(name) {
                Some(skill) => ToolResult::ok(skill.markdown.clone())
                    .with_meta("skill", skill.name.clone())
                    .with_meta("dir", skill.dir.clone()),
                None => ToolResult::error(format!("SkillNotFoundError: Skill '{name}' not found.")),
            },
            Err(e) => ToolResult::error(format!(
                "Skills of agent '{}' cannot be listed: {e}",
                ctx.agent
            )),
        }
    }
}

/// The tools offered to the model, in order.
#[derive(Clone, Default)]
pub struct Toolset {
    tools: Vec<Arc<dyn AgentTool>>,
}

impl std::fmt::Debug for Toolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Toolset {
    /// An empty toolset.
    pub fn new() -> Self {
        Toolset::default()
    }

    /// The workspace's built-in tools (Bash, Read, Write, Edit, Glob,
    /// Grep) and the Skill viewer.
    pub fn standard(ws: &Workspace) -> Self {
        let mut t = Toolset::new();
        for spec in ws.list_tools() {
            t.tools.push(Arc::new(BuiltinTool { spec }));
        }
        t.tools.push(Arc::new(SkillViewer));
        t
    }

    /// Adds a tool (an MCP tool, a custom one).
    ///
    /// Errors: a tool of that name is already in the set.
    pub fn add(&mut self, tool: Arc<dyn AgentTool>) -> Result<(), String> {
        let name = tool.spec().name;
        if self.get(&name).is_some() {
            return Err(format!("a tool named `{name}` is already in the toolset"));
        }
        self.tools.push(tool);
        Ok(())
    }

    /// Removes a tool by name; returns whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.tools.len();
        self.tools.retain(|t| t.spec().name != name);
        before != self.tools.len()
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn AgentTool>> {
        self.tools.iter().find(|t| t.spec().name == name).cloned()
    }

    /// Tool names, in order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.spec().name).collect()
    }

    /// Schemas for the model.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools
            .iter()
            .map(|t| {
                let s = t.spec();
                ToolSchema {
                    name: s.name,
                    description: s.description,
                    parameters: s.input_schema,
                }
            })
            .collect()
    }
}

/// The `<agent-skills>` block of the system prompt (docs/contract.md §4.5): says
/// skills are not tools and are opened with the viewer, then one `<skill>`
/// per skill with its name, description and directory. Empty when the
/// partition has no valid skill.
pub fn skills_prompt(listing: &SkillListing) -> String {
    if listing.skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<agent-skills>\nThe skills below are folders of instructions, scripts and resources for \
         specialised tasks. They are not tools: to use one, first open it with the `Skill` tool \
         (parameter `skill`: its exact name), then follow its instructions; reach its scripts and \
         files with the other tools under its directory.\n",
    );
    for s in &listing.skills {
        out.push_str(&format!(
            "<skill>\n<name>{}</name>\n<description>{}</description>\n<dir>{}</dir>\n</skill>\n",
            s.name, s.description, s.dir
        ));
    }
    out.push_str("</agent-skills>");
    out
}
