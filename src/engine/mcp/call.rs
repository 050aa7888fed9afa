//! MCP tool calls through the workspace: resolve the server, call,
//! turn the result into blocks, offload large text, journal the call.

use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::{McpError, qualified_name, split_qualified};
use super::handle::Mcp;
use crate::engine::events::Event;
use crate::engine::journal::Journal;
use crate::engine::journal::{JournalCall, JournalEntry};
use crate::engine::message::{Block, DataBlock, DataSource, TextBlock, new_id};
use crate::engine::tools::{ToolResult, ToolState};

/// One MCP tool call through [`Mcp::call_tool`].
#[derive(Debug, Clone, Default)]
pub struct McpToolCall {
    /// Agent id (`""` for none).
    pub agent: String,
    /// Session id.
    pub session: String,
    /// Server name; `None` when `tool` is qualified (`mcp__<server>__<tool>`).
    pub server: Option<String>,
    /// Tool name: the server's own, or qualified.
    pub tool: String,
    /// Arguments object.
    pub args: Value,
    /// Call id; `None` mints one.
    pub call_id: Option<String>,
    /// Cancels the call (the server is sent `notifications/cancelled`).
    pub cancel: Option<CancellationToken>,
    /// Why `cancel` fired (`"SIGINT"`), set before the token is
    /// cancelled: the interrupted result and its journal line name it.
    pub cancel_reason: Option<std::sync::Arc<std::sync::OnceLock<String>>>,
}

impl Mcp<'_> {
    /// Calls an MCP tool, with the bus events and the journal line of a
    /// built-in tool call. The result is the tool's content (text, and
    /// images/audio/blobs as data blocks); `isError` gives an error
    /// result. Text over [`McpOptions::max_result_chars`] is written whole
    /// to a tool-result file of the session and cut in the result, which
    /// names the file (docs/contract.md §6; C04). Never fails: problems are error
    /// results (unknown tool, server down, timeout); a cancel gives an
    /// interrupted result.
    pub async fn call_tool(self, call: McpToolCall) -> ToolResult {
        let call_id = call.call_id.clone().unwrap_or_else(|| {
            format!("call_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
        });
        if let Err(e) = crate::engine::layout::check_session_id(&call.session) {
            return ToolResult::error(e.to_string());
        }
        let resolved = self.resolve_tool(&call).await;
        let qualified = match &resolved {
            Ok((server, tool)) => qualified_name(server, tool),
            Err(_) => call.tool.clone(),
        };
        let started_at = chrono::Utc::now();
        let t0 = Instant::now();
        self.base.publish(Event::ToolStarted {
            call_id: call_id.clone(),
            agent: call.agent.clone(),
            session: call.session.clone(),
            tool: qualified.clone(),
            args: crate::engine::journal::bounded_args(&call.args).0,
        });
        let result = match resolved {
            Err(msg) => ToolResult::error(msg),
            Ok((server, tool)) => self.run_mcp_call(&call, &server, &tool, &call_id).await,
        };
        let duration_ms = t0.elapsed().as_millis() as u64;
        self.base.publish(Event::ToolFinished {
            call_id: call_id.clone(),
            tool: qualified.clone(),
            state: result.state.as_str().to_string(),
            duration_ms,
        });
        let mut entry = JournalEntry::from_result(
            JournalCall {
                call_id,
                agent: call.agent.clone(),
                session: call.session.clone(),
                tool: qualified,
                args: call.args,
            },
            &result,
            started_at,
            duration_ms,
        );
        if result.state == ToolState::Interrupted {
            // The journal keeps the reason of an interrupted call too (by
            // whom: a signal, a cancel), not only of a failed one.
            entry.error = Some(result.text().lines().next().unwrap_or("").to_string());
        }
        if let Err(e) = Journal::new(self.base).append(&entry).await {
            self.runtime.log(
                "warn",
                format!(
                    "could not append to the journal of session {}: {e}",
                    entry.session
                ),
            );
        }
        result
    }

    pub(super) async fn resolve_tool(
        &self,
        call: &McpToolCall,
    ) -> Result<(String, String), String> {
        if let Some(server) = &call.server {
            let tool = call
                .tool
                .strip_prefix(&qualified_name(server, ""))
                .unwrap_or(&call.tool);
            return Ok((server.clone(), tool.to_string()));
        }
        let declared = self
            .declared(&call.agent, &call.session)
            .await
            .map_err(|e| e.to_string())?;
        let mut best: Option<(String, String)> = None;
        for d in &declared {
            if let Some(tool) = call.tool.strip_prefix(&qualified_name(&d.name, ""))
                && !tool.is_empty()
                && best.as_ref().is_none_or(|(s, _)| s.len() < d.name.len())
            {
                best = Some((d.name.clone(), tool.to_string()));
            }
        }
        best.or_else(|| split_qualified(&call.tool).map(|(s, t)| (s.to_string(), t.to_string())))
            .ok_or_else(|| {
                format!(
                    "`{}` is not an MCP tool name (expected mcp__<server>__<tool>)",
                    call.tool
                )
            })
    }

    pub(super) async fn run_mcp_call(
        &self,
        call: &McpToolCall,
        server: &str,
        tool: &str,
        call_id: &str,
    ) -> ToolResult {
        let args: JsonObject = match &call.args {
            Value::Object(m) => m.clone(),
            Value::Null => JsonObject::new(),
            other => {
                return ToolResult::error(format!(
                    "arguments of an MCP tool must be a JSON object, got {other}"
                ));
            }
        };
        let inst = match self.instance(&call.agent, &call.session, server).await {
            Ok(i) => i,
            Err(e) => return ToolResult::error(e.to_string()),
        };
        let cancel = call.cancel.clone().unwrap_or_default();
        match inst.call(tool, args, cancel).await {
            Ok(r) => self.mcp_result(&call.session, call_id, r).await,
            Err(McpError::Cancelled) => {
                let why = call.cancel_reason.as_ref().and_then(|r| r.get());
                ToolResult {
                    state: ToolState::Interrupted,
                    ..ToolResult::ok(match why {
                        Some(why) => format!("The MCP tool call was interrupted by {why}."),
                        None => "The MCP tool call was cancelled.".to_string(),
                    })
                }
            }
            Err(e @ McpError::Timeout { .. }) => ToolResult {
                timed_out: true,
                ..ToolResult::error(e.to_string())
            },
            Err(e) => ToolResult::error(e.to_string()),
        }
    }

    pub(super) async fn mcp_result(
        &self,
        session: &str,
        call_id: &str,
        r: CallToolResult,
    ) -> ToolResult {
        let mut content = Vec::new();
        for block in r.content {
            match block {
                ContentBlock::Text(t) => content.push(Block::Text(TextBlock::new(t.text))),
                ContentBlock::Image(i) => content.push(data_block(i.data, i.mime_type, None)),
                ContentBlock::Audio(a) => content.push(data_block(a.data, a.mime_type, None)),
                ContentBlock::Resource(e) => match e.resource {
                    ResourceContents::TextResourceContents { text, .. } => {
                        content.push(Block::Text(TextBlock::new(text)))
                    }
                    ResourceContents::BlobResourceContents {
                        uri,
                        mime_type,
                        blob,
                        ..
                    } => content.push(data_block(
                        blob,
                        mime_type.unwrap_or_else(|| "application/octet-stream".into()),
                        Some(uri),
                    )),
                    other => content.push(Block::Text(TextBlock::new(
                        serde_json::to_string(&other).unwrap_or_default(),
                    ))),
                },
                ContentBlock::ResourceLink(l) => content.push(Block::Text(TextBlock::new(
                    format!("<resource uri='{}' name='{}'/>", l.uri, l.name),
                ))),
                other => content.push(Block::Text(TextBlock::new(
                    serde_json::to_string(&other).unwrap_or_default(),
                ))),
            }
        }
        let mut result = ToolResult::ok("");
        result.content = content;
        if r.is_error == Some(true) {
            result.state = ToolState::Error;
        }
        if let Some(s) = r.structured_content {
            result.metadata.insert("structured_content".into(), s);
        }
        let text = result.text();
        result.output_bytes = text.len() as u64;
        let limit = self.options().max_result_chars;
        if text.chars().count() > limit {
            match self
                .offload
                .tool_result_stream(
                    session,
                    call_id,
                    Box::new(std::io::Cursor::new(text.clone().into_bytes())),
                )
                .await
            {
                Ok(path) => {
                    let kept: String = text.chars().take(limit).collect();
                    let data: Vec<Block> = result
                        .content
                        .iter()
                        .filter(|b| matches!(b, Block::Data(_)))
                        .cloned()
                        .collect();
                    result.content = vec![Block::Text(TextBlock::new(format!(
                        "{kept}\n<<<TRUNCATED>>> The full result ({} bytes) is in {path}",
                        text.len()
                    )))];
                    result.content.extend(data);
                    result.offload_path = Some(path);
                }
                Err(e) => self.runtime.log(
                    "warn",
                    format!("could not offload a large MCP result of session {session}: {e}"),
                ),
            }
        }
        result
    }
}

pub(super) fn data_block(data: String, media_type: String, name: Option<String>) -> Block {
    Block::Data(DataBlock {
        id: new_id(),
        source: DataSource::Base64 { data, media_type },
        name,
        created_at: None,
        finished_at: None,
        extra: Default::default(),
    })
}
