//! `wsbench mcp serve`: the workspace as an MCP server over stdio.
//!
//! Any MCP client (an editor agent, a desktop assistant) can then work
//! inside a wsbench workspace on any backend: the six built-in tools
//! (Bash, Read, Write, Edit, Glob, Grep) run through
//! [`Workspace::call_tool`], so every call lands in the session journal
//! and on the event bus; a `Skill` tool returns a skill's instructions;
//! every skill of the agent's partition is also a resource
//! `skill://<name>` (its SKILL.md body).
//!
//! The server runs for as long as its client stays connected, often
//! hours; every tool call and resource read checks the workspace out of
//! its [`WorkspaceSource`] for the length of the call (issue 15), so calls
//! keep the sandbox from being evicted or expiring, and idle time between
//! them lets it go.

mod frame;

use std::sync::Arc;

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, EmbeddedResource, ErrorCode, ErrorData, ImageContent, Implementation,
    InitializeResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ServerCapabilities, ServerConfig, TextContent, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use crate::engine::activity::{Checkout, FixedSource, WorkspaceSource};
use crate::engine::message::{Block, DataSource};
use crate::engine::tools::{ToolResult, ToolState};
use crate::engine::workspace::{ToolCall, Workspace};

/// Name of the skill tool.
pub const SKILL_TOOL: &str = "Skill";

/// URI scheme of skill resources.
pub const SKILL_SCHEME: &str = "skill://";

/// The MCP server of one workspace, for one (agent, session).
#[derive(Debug, Clone)]
pub struct WorkspaceServer {
    /// The workspace the server was started on: its tool list and
    /// instructions (the same for every workspace of the profile). Calls
    /// go through `source`.
    ws: Arc<Workspace>,
    source: Arc<dyn WorkspaceSource>,
    agent: String,
    session: String,
}

impl WorkspaceServer {
    /// A server whose calls act as `agent` in `session` on `ws` itself,
    /// holding nothing ([`FixedSource`]: a `--workdir` workspace).
    pub fn new(ws: Arc<Workspace>, agent: &str, session: &str) -> Self {
        let source = Arc::new(FixedSource(ws.clone()));
        Self::with_source(ws, source, agent, session)
    }

    /// A server started on `ws` whose every call checks the workspace
    /// out of `source` for the length of the call (the manager's source
    /// leases it: see [`crate::engine::activity`]).
    pub fn with_source(
        ws: Arc<Workspace>,
        source: Arc<dyn WorkspaceSource>,
        agent: &str,
        session: &str,
    ) -> Self {
        WorkspaceServer {
            ws,
            source,
            agent: agent.to_string(),
            session: session.to_string(),
        }
    }

    /// The workspace for one call, or the error the client reads.
    async fn checkout(&self) -> Result<Checkout, ErrorData> {
        self.source
            .checkout()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    /// Serves MCP on this process's stdin/stdout until the client
    /// disconnects.
    ///
    /// Errors: the handshake failed or the service task broke.
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        use rmcp::ServiceExt;
        // Requests over the limit get an error answer instead of none.
        let input = frame::bounded_lines(tokio::io::stdin(), frame::MAX_REQUEST_BYTES);
        let running = self
            .serve((input, tokio::io::stdout()))
            .await
            .map_err(|e| anyhow::anyhow!("MCP handshake failed: {e}"))?;
        running.waiting().await?;
        Ok(())
    }

    fn tools(&self) -> Vec<Tool> {
        let mut tools: Vec<Tool> = self
            .ws
            .list_tools()
            .into_iter()
            .map(|t| {
                let schema = match t.input_schema {
                    Value::Object(m) => m,
                    _ => Default::default(),
                };
                Tool::new(t.name, t.description, Arc::new(schema))
                    .with_annotations(ToolAnnotations::new().read_only(t.read_only))
            })
            .collect();
        let mut schema = serde_json::Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert(
            "properties".into(),
            json!({"skill": {"type": "string", "description": "The skill's name"}}),
        );
        schema.insert("required".into(), json!(["skill"]));
        tools.push(
            Tool::new(
                SKILL_TOOL,
                "Loads a skill of this workspace: returns its SKILL.md instructions. \
                 The available skills are listed as resources (skill://<name>).",
                Arc::new(schema),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
        );
        tools
    }

    async fn skill(
        &self,
        ws: &Workspace,
        args: Option<&serde_json::Map<String, Value>>,
    ) -> CallToolResult {
        let Some(name) = args.and_then(|a| a.get("skill")).and_then(Value::as_str) else {
            return CallToolResult::error(vec![ContentBlock::Text(TextContent::new(
                "Invalid arguments for Skill: missing string field `skill`",
            ))]);
        };
        match ws.skills().markdown(name, &self.agent).await {
            Ok(md) => CallToolResult::success(vec![ContentBlock::Text(TextContent::new(md))]),
            Err(e) => {
                let names = match ws.skills().list(&self.agent).await {
                    Ok(l) => l.names().join(", "),
                    Err(_) => String::new(),
                };
                CallToolResult::error(vec![ContentBlock::Text(TextContent::new(format!(
                    "{e}. Available skills: {names}"
                )))])
            }
        }
    }
}

/// A built-in tool result as MCP content: text as text, images as image
/// content, other inline data as embedded blobs, offloaded data as a
/// reference line.
pub fn to_call_result(r: &ToolResult) -> CallToolResult {
    let mut content = Vec::new();
    for b in &r.content {
        match b {
            Block::Text(t) => content.push(ContentBlock::Text(TextContent::new(t.text.clone()))),
            Block::Data(d) => match &d.source {
                DataSource::Base64 { data, media_type } if media_type.starts_with("image/") => {
                    content.push(ContentBlock::Image(ImageContent::new(
                        data.clone(),
                        media_type.clone(),
                    )))
                }
                DataSource::Base64 { data, media_type } => {
                    let uri = format!(
                        "data:{}",
                        d.name.clone().unwrap_or_else(|| "attachment".into())
                    );
                    content.push(ContentBlock::Resource(EmbeddedResource::new(
                        ResourceContents::BlobResourceContents {
                            uri,
                            mime_type: Some(media_type.clone()),
                            blob: data.clone(),
                            meta: None,
                        },
                    )))
                }
                DataSource::Url { url, media_type } => {
                    content.push(ContentBlock::Text(TextContent::new(format!(
                        "<data url='{url}' name='{}' media_type='{media_type}'/>",
                        d.name.as_deref().unwrap_or("")
                    ))))
                }
            },
            _ => {}
        }
    }
    let mut out = if r.state == ToolState::Success {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    if !r.metadata.is_empty() {
        out.structured_content = Some(Value::Object(r.metadata.clone()));
    }
    out
}

impl ServerHandler for WorkspaceServer {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("wsbench", env!("CARGO_PKG_VERSION")))
        .with_instructions(self.ws.get_instructions())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    /// The stand-in of a request over the size limit ([`frame`]): a
    /// JSON-RPC "invalid request" error naming the size and the limit.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method != frame::TOO_LARGE_METHOD {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let p = request.params.unwrap_or_default();
        let (bytes, limit) = (
            p["bytes"].as_u64().unwrap_or(0),
            p["limit"].as_u64().unwrap_or(0),
        );
        Err(ErrorData::new(
            ErrorCode::INVALID_REQUEST,
            format!(
                "request too large: {bytes} bytes, the limit is {limit} bytes ({} MiB) per message; the request was not read",
                limit / (1024 * 1024)
            ),
            Some(json!({"bytes": bytes, "limit": limit})),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ws = self.checkout().await?;
        if request.name == SKILL_TOOL {
            return Ok(self.skill(&ws, request.arguments.as_ref()).await.into());
        }
        let args = request.arguments.map(Value::Object).unwrap_or(json!({}));
        let result = ws
            .call_tool(ToolCall {
                agent: self.agent.clone(),
                session: self.session.clone(),
                tool: request.name.to_string(),
                args,
                cancel: Some(context.ct.clone()),
                ..Default::default()
            })
            .await;
        Ok(to_call_result(&result).into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let ws = self.checkout().await?;
        let listing = ws
            .skills()
            .list(&self.agent)
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(ListResourcesResult::with_all_items(
            listing
                .skills
                .iter()
                .map(|s| {
                    Resource::new(format!("{SKILL_SCHEME}{}", s.name), s.name.clone())
                        .with_description(s.description.clone())
                        .with_mime_type("text/markdown")
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let Some(name) = request.uri.strip_prefix(SKILL_SCHEME) else {
            return Err(ErrorData::resource_not_found(
                format!(
                    "unknown resource {}; skills are skill://<name>",
                    request.uri
                ),
                None,
            ));
        };
        let ws = self.checkout().await?;
        match ws.skills().markdown(name, &self.agent).await {
            Ok(md) => Ok(
                ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
                    uri: request.uri.clone(),
                    mime_type: Some("text/markdown".into()),
                    text: md,
                    meta: None,
                }])
                .into(),
            ),
            Err(e) => Err(ErrorData::resource_not_found(e.to_string(), None)),
        }
    }
}
