//! An agent acting in a workspace: the reasoning–acting loop of the
//! reference (messages in its format, docs/contract.md §2.4), with its context
//! policies (§6), the built-in tools plus the Skill viewer (§4.5), and a
//! model that is either a replayed transcript ([`script`]) or any
//! OpenAI-compatible chat-completions server ([`openai`]).
//!
//! A UI drives a running agent through an [`AgentHandle`]: it subscribes to
//! the typed [`AgentEvent`] stream, steps it in step mode and stops it.
//! Every step also reaches the workspace bus as an `Event::Log` line with
//! source `agent`, and the session's `agent.jsonl`; every tool call is in
//! the session journal (the built-ins journal themselves through
//! [`Workspace::call_tool`], the agent journals the others).
//!
//! State between runs: the live conversation and summary are kept in
//! `sessions/<id>/agent_state.json` (wsbench's file; the reference ignores
//! it), the compressed-away messages in `context.jsonl` as the reference
//! writes them. [`Agent::open`] continues from the state file, or — for a
//! session that only has a `context.jsonl`, e.g. one the reference wrote —
//! from the messages [`Workspace::read_context`] reads back.

mod call;
mod compress;
pub mod context;
pub mod events;
mod hold;
pub mod model;
pub mod openai;
pub mod script;
pub mod step;
pub mod tools;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

pub use context::ContextPolicy;
pub use events::{
    AgentEnvelope, AgentEvent, AgentEvents, AgentOffload, AgentReceived, AgentSubscriber,
    FinishReason,
};
pub use model::{
    Model, ModelDelta, ModelError, ModelRequest, ModelToolCall, ModelTurn, TokenUsage,
};
pub use step::StepControl;
pub use tools::{AgentTool, AgentToolContext, Toolset};

use crate::engine::events::Event;
use crate::engine::journal::{JournalCall, JournalEntry};
use crate::engine::layout::{check_session_id, partition_name};
use crate::engine::message::{
    Block, DataSource, Msg, TextBlock, ToolCallBlock, ToolOutput, new_id, now_naive,
};
use crate::engine::tools::{ToolResult, ToolState};
use crate::engine::workspace::{Workspace, WorkspaceError};

/// The agent's own prompt, before the skills block and the workspace
/// instructions.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are an agent working in a workspace. Use the tools to look at files, change them and run commands. Be brief: say what you found and what you did.";

/// Model turns in one reply before the reply gives up (the reference's
/// `ReActConfig.max_iters`).
pub const DEFAULT_MAX_ITERS: usize = 20;

/// Live conversation of a session (wsbench's file). Named in the engine,
/// whose session timeline reads it and which may not import this layer.
pub const STATE_FILE: &str = crate::engine::timeline::AGENT_STATE_FILE;

/// One JSON line per agent step (wsbench's file); named in the engine as
/// [`STATE_FILE`] is.
pub const AGENT_LOG_FILE: &str = crate::engine::timeline::AGENT_LOG_FILE;

/// Longest text kept per event in `agent.jsonl`, in characters.
const LOG_TEXT_CHARS: usize = 4000;

/// Text the reply ends with after `max_iters` turns (the reference's).
const MAX_ITERS_TEXT: &str =
    "Executed maximum iterations of reasoning-acting loop without finishing the task.";

/// How an agent is set up.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Speaker name of the agent's messages.
    pub name: String,
    /// Agent id: selects the skills partition and tags tool calls.
    pub agent_id: String,
    /// Session id (`sessions/<id>/`).
    pub session: String,
    /// The agent's own prompt.
    pub system_prompt: String,
    /// Context policies.
    pub policy: ContextPolicy,
    /// Model turns per reply.
    pub max_iters: usize,
}

impl AgentConfig {
    /// Defaults for `session`: name `agent`, no agent id, the default
    /// prompt and policies, 20 turns.
    pub fn new(session: impl Into<String>) -> Self {
        AgentConfig {
            name: "agent".into(),
            agent_id: String::new(),
            session: session.into(),
            system_prompt: DEFAULT_SYSTEM_PROMPT.into(),
            policy: ContextPolicy::default(),
            max_iters: DEFAULT_MAX_ITERS,
        }
    }
}

/// Errors that stop an agent from running (model and tool failures do
/// not: they end up in the conversation).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A bad setting (policy out of range, bad session or agent id).
    #[error("{0}")]
    Config(String),
    /// A message the agent cannot take.
    #[error("{0}")]
    Input(String),
    /// The session's state file exists but cannot be read; it is left as is.
    #[error("cannot continue session from {path}: {message}")]
    State {
        /// Backend path.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A workspace operation failed.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The workspace could not be checked out for a reply (`hold.rs`).
    #[error(transparent)]
    Checkout(#[from] crate::engine::activity::CheckoutError),
}

/// How a reply ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplyOutcome {
    /// Reply id (= the id of the assistant message).
    pub reply_id: String,
    /// Why it ended.
    pub reason: FinishReason,
    /// The final (or partial) answer text.
    pub text: String,
    /// The error, when `reason` is `error`.
    pub error: Option<String>,
    /// Model turns taken.
    pub turns: usize,
}

/// What a UI holds to watch and steer a running agent; cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentHandle {
    events: AgentEvents,
    step: StepControl,
    stop: Arc<Mutex<CancellationToken>>,
}

impl AgentHandle {
    /// Subscribes to the agent's events from now on.
    pub fn subscribe(&self) -> AgentSubscriber {
        self.events.subscribe()
    }

    /// Step mode control.
    pub fn step_control(&self) -> &StepControl {
        &self.step
    }

    /// Stops the current reply: the model call is abandoned, a running
    /// tool call is cancelled (its process tree killed), the reply ends as
    /// `interrupted`. The next reply runs normally.
    pub fn stop(&self) {
        self.stop.lock().expect("stop lock").cancel();
    }

    /// Just the stop control, for a key handler or signal task that must
    /// not keep the event stream open.
    pub fn stopper(&self) -> Stopper {
        Stopper {
            stop: self.stop.clone(),
        }
    }

    fn fresh_cancel(&self) -> CancellationToken {
        let t = CancellationToken::new();
        *self.stop.lock().expect("stop lock") = t.clone();
        t
    }
}

/// Stops the current reply of an agent (see [`AgentHandle::stop`]).
#[derive(Debug, Clone)]
pub struct Stopper {
    stop: Arc<Mutex<CancellationToken>>,
}

impl Stopper {
    /// Stops the current reply.
    pub fn stop(&self) {
        self.stop.lock().expect("stop lock").cancel();
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct SavedState {
    version: u32,
    agent: String,
    session: String,
    summary: Option<String>,
    context: Vec<Msg>,
}

/// An agent bound to a workspace session.
pub struct Agent {
    ws: Arc<Workspace>,
    /// Where each reply checks the workspace out (`hold.rs`); `None`: `ws`.
    source: Option<Arc<dyn crate::engine::activity::WorkspaceSource>>,
    model: Arc<dyn Model>,
    tools: Toolset,
    config: AgentConfig,
    context: Vec<Msg>,
    summary: Option<String>,
    /// Hashes of the lines already in `context.jsonl`, so continuing a
    /// session never appends the same message twice.
    offloaded: HashSet<[u8; 32]>,
    handle: AgentHandle,
    log_buf: Mutex<Vec<u8>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session", &self.config.session)
            .field("model", &self.model.name())
            .field("messages", &self.context.len())
            .finish()
    }
}

fn hash_msg(m: &Msg) -> [u8; 32] {
    Sha256::digest(serde_json::to_vec(m).expect("message serialises")).into()
}

/// A message with every field the reference writes.
fn new_msg(name: &str, role: &str, id: String, content: Vec<Block>) -> Msg {
    let mut m = Msg::text(name, role, "");
    m.id = id;
    m.content = content;
    m
}

fn text_block(text: impl Into<String>) -> Block {
    Block::Text(TextBlock::new(text))
}

fn block_timestamps(created_at: String) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("created_at".into(), Value::String(created_at));
    m.insert("finished_at".into(), Value::Null);
    m
}

/// Text of a tool result's output as the model sees it.
fn output_text(out: &ToolOutput) -> String {
    match out {
        ToolOutput::Text(t) => t.clone(),
        ToolOutput::Blocks(bs) => bs
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.text.clone()),
                Block::Data(d) => Some(format!(
                    "[data {} {}]",
                    d.name.as_deref().unwrap_or(""),
                    d.source.media_type()
                )),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(""),
    }
}

/// Parses a model's tool-call arguments; the error is the text the model
/// reads back.
fn parse_call_args(name: &str, raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let shown: String = raw.chars().take(300).collect();
    let ellipsis = if raw.chars().count() > 300 { "…" } else { "" };
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!(
            "Invalid arguments for tool '{name}': expected a JSON object, got {}. Arguments received: `{shown}{ellipsis}`. The tool was not run.",
            match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "null",
            }
        )),
        Err(e) => Err(format!(
            "Invalid arguments for tool '{name}': the JSON is malformed ({e}). Arguments received: `{shown}{ellipsis}`. The tool was not run; call it again with a valid JSON object."
        )),
    }
}

impl Agent {
    /// Opens an agent on `config.session`, continuing the session when it
    /// has a state file or an offloaded `context.jsonl`.
    ///
    /// Errors: [`AgentError::Config`] for a policy out of range or a bad
    /// session/agent id; [`AgentError::State`] when the state file cannot
    /// be parsed (it is not touched); backend errors.
    pub async fn open(
        ws: Arc<Workspace>,
        model: Arc<dyn Model>,
        tools: Toolset,
        config: AgentConfig,
    ) -> Result<Agent, AgentError> {
        config.policy.validate().map_err(AgentError::Config)?;
        check_session_id(&config.session).map_err(|e| AgentError::Config(e.to_string()))?;
        partition_name(&config.agent_id).map_err(|e| AgentError::Config(e.to_string()))?;
        if config.max_iters == 0 {
            return Err(AgentError::Config("max_iters must be at least 1".into()));
        }
        let dir = ws
            .layout()
            .session_dir(&config.session)
            .map_err(WorkspaceError::from)?;
        ws.sandbox()
            .mkdir(&dir, true)
            .await
            .map_err(WorkspaceError::from)?;
        let offloaded_read = ws.sessions().read_context(&config.session).await?;
        let offloaded: HashSet<[u8; 32]> = offloaded_read.messages.iter().map(hash_msg).collect();
        let state_path = format!("{dir}/{STATE_FILE}");
        let (context, summary) = match ws.sandbox().read(&state_path, None).await {
            Ok(bytes) => {
                let s: SavedState =
                    serde_json::from_slice(&bytes).map_err(|e| AgentError::State {
                        path: state_path.clone(),
                        message: e.to_string(),
                    })?;
                (s.context, s.summary)
            }
            Err(e) if e.is_not_found() => (offloaded_read.messages, None),
            Err(e) => return Err(WorkspaceError::from(e).into()),
        };
        Ok(Agent {
            ws,
            source: None,
            model,
            tools,
            config,
            context,
            summary,
            offloaded,
            handle: AgentHandle {
                events: AgentEvents::default(),
                step: StepControl::new(false),
                stop: Arc::new(Mutex::new(CancellationToken::new())),
            },
            log_buf: Mutex::new(Vec::new()),
        })
    }

    /// The handle a UI keeps while the agent runs elsewhere.
    pub fn handle(&self) -> AgentHandle {
        self.handle.clone()
    }

    /// The live conversation.
    pub fn context(&self) -> &[Msg] {
        &self.context
    }

    /// The current compression summary.
    pub fn summary(&self) -> Option<&str> {
        self.summary.as_deref()
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The workspace.
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.ws
    }

    /// The toolset, to add MCP or custom tools before a reply.
    pub fn tools_mut(&mut self) -> &mut Toolset {
        &mut self.tools
    }

    /// The system prompt: the agent prompt, the `<agent-skills>` block
    /// and the workspace instructions, joined by newlines (docs/contract.md §1.1,
    /// §4.5). Skills that cannot be listed are left out with an error
    /// event.
    pub async fn system_prompt(&self) -> String {
        let mut parts = vec![self.config.system_prompt.clone()];
        match self.ws.skills().list(&self.config.agent_id).await {
            Ok(listing) => {
                let block = tools::skills_prompt(&listing);
                if !block.is_empty() {
                    parts.push(block);
                }
            }
            Err(e) => self.emit(AgentEvent::Error {
                kind: "internal".into(),
                message: format!("skills left out of the system prompt: {e}"),
            }),
        }
        parts.push(self.ws.get_instructions());
        parts.join("\n")
    }

    fn emit(&self, event: AgentEvent) {
        let line = event.summary_line();
        let level = event.level();
        let mut env = self.handle.events.publish(event);
        if let Some(message) = line {
            self.ws.publish(Event::Log {
                level: level.into(),
                source: "agent".into(),
                message,
            });
            env.event = env.event.clipped(LOG_TEXT_CHARS);
            let mut buf = self.log_buf.lock().expect("log lock");
            serde_json::to_writer(&mut *buf, &env).expect("event serialises");
            buf.push(b'\n');
        }
    }

    async fn flush_log(&self) {
        let data = std::mem::take(&mut *self.log_buf.lock().expect("log lock"));
        if data.is_empty() {
            return;
        }
        let Ok(dir) = self.ws.layout().session_dir(&self.config.session) else {
            return;
        };
        let path = format!("{dir}/{AGENT_LOG_FILE}");
        if let Err(e) = self.ws.base().append_or_rewrite(&path, &data).await {
            self.ws.publish(Event::Log {
                level: "warn".into(),
                source: "agent".into(),
                message: format!("could not append to {path}: {e}"),
            });
        }
    }

    async fn save_state(&self) {
        self.flush_log().await;
        let Ok(dir) = self.ws.layout().session_dir(&self.config.session) else {
            return;
        };
        let path = format!("{dir}/{STATE_FILE}");
        let state = SavedState {
            version: 1,
            agent: self.config.name.clone(),
            session: self.config.session.clone(),
            summary: self.summary.clone(),
            context: self.context.clone(),
        };
        let bytes = serde_json::to_vec(&state).expect("state serialises");
        if let Err(e) = self.ws.sandbox().write(&path, &bytes).await {
            self.emit(AgentEvent::Error {
                kind: "internal".into(),
                message: format!("could not save the session state to {path}: {e}"),
            });
        }
    }

    fn estimate(&self, system: &str, tools: &[model::ToolSchema]) -> (usize, usize) {
        let counter = self.config.policy.counter();
        let mut fixed = counter.text(system) + context::MESSAGE_OVERHEAD_TOKENS;
        if let Some(s) = &self.summary {
            fixed += counter.text(s) + context::MESSAGE_OVERHEAD_TOKENS;
        }
        fixed += counter.text(&serde_json::to_string(tools).expect("schemas serialise"));
        (fixed, fixed + counter.msgs(&self.context))
    }

    /// Appends blocks to this reply's assistant message (one message per
    /// reply, as the reference keeps it), creating it when needed.
    fn save_to_reply(&mut self, reply_id: &str, blocks: Vec<Block>, usage: Option<TokenUsage>) {
        let is_ours = self
            .context
            .last()
            .is_some_and(|m| m.role == "assistant" && m.id == reply_id);
        if !is_ours {
            if blocks.is_empty() && usage.is_none() {
                return;
            }
            self.context.push(new_msg(
                &self.config.name,
                "assistant",
                reply_id.to_string(),
                Vec::new(),
            ));
        }
        let msg = self.context.last_mut().expect("reply message");
        msg.content.extend(blocks);
        if let Some(u) = usage {
            // Summed per reply, all four counters, as the reference's
            // `Msg.append_usage` writes them.
            let sum = TokenUsage::from_json(&msg.usage).unwrap_or_default() + u;
            msg.usage = json!({
                "input_tokens": sum.input_tokens,
                "output_tokens": sum.output_tokens,
                "cache_input_tokens": sum.cache_input_tokens,
                "cache_creation_input_tokens": sum.cache_creation_input_tokens,
            });
        }
    }

    fn reply_msg_mut(&mut self, reply_id: &str) -> Option<&mut Msg> {
        self.context
            .iter_mut()
            .rev()
            .find(|m| m.role == "assistant" && m.id == reply_id)
    }

    fn mark_call_finished(&mut self, reply_id: &str, call_id: &str) {
        if let Some(m) = self.reply_msg_mut(reply_id) {
            for b in m.content.iter_mut() {
                if let Block::ToolCall(c) = b
                    && c.id == call_id
                {
                    c.state = Value::String("finished".into());
                }
            }
        }
    }

    /// Answers one user message: model turns and tool calls until the
    /// model answers without a tool call, the user stops it, `max_iters`
    /// is reached or the model fails. Model and tool failures are recorded
    /// in the conversation and reported in the outcome.
    ///
    /// Errors: [`AgentError::Input`] for a system message or one holding
    /// tool calls, tool results or thinking blocks (the reference refuses
    /// those too).
    pub async fn reply(&mut self, user: Msg) -> Result<ReplyOutcome, AgentError> {
        if user.role == "system"
            || user.content.iter().any(|b| {
                matches!(
                    b,
                    Block::ToolCall(_) | Block::ToolResult(_) | Block::Thinking(_)
                )
            })
        {
            return Err(AgentError::Input(
                "an input message must have role user or assistant and hold no tool calls, tool results or thinking blocks".into(),
            ));
        }
        let _held = self.check_out().await?;
        let cancel = self.handle.fresh_cancel();
        let reply_id = new_id();
        self.emit(AgentEvent::ReplyStarted {
            session: self.config.session.clone(),
            reply_id: reply_id.clone(),
            user_text: user.text_content(),
        });
        self.context.push(user);
        self.save_state().await;

        let mut turns = 0usize;
        let mut last_text = String::new();
        let mut error: Option<String> = None;
        let reason = loop {
            if cancel.is_cancelled() {
                break FinishReason::Interrupted;
            }
            if turns >= self.config.max_iters {
                self.save_to_reply(&reply_id, vec![text_block(MAX_ITERS_TEXT)], None);
                last_text = MAX_ITERS_TEXT.into();
                break FinishReason::ExceedMaxIters;
            }
            turns += 1;
            self.cap_images().await;
            self.maybe_compress(&cancel).await;
            self.wait_step(&format!("model turn {turns}"), &cancel)
                .await;
            if cancel.is_cancelled() {
                break FinishReason::Interrupted;
            }
            let system = self.system_prompt().await;
            let tool_schemas = self.tools.schemas();
            let (_, estimated) = self.estimate(&system, &tool_schemas);
            self.emit(AgentEvent::TurnStarted {
                reply_id: reply_id.clone(),
                turn: turns,
                estimated_tokens: estimated,
            });
            let request = ModelRequest {
                system,
                summary: self.summary.clone(),
                messages: self.context.clone(),
                tools: tool_schemas,
            };
            let partial = Arc::new(Mutex::new(String::new()));
            let result = {
                let events = self.handle.events.clone();
                let partial = partial.clone();
                let ids: Mutex<HashMap<usize, String>> = Mutex::new(HashMap::new());
                let rid = reply_id.clone();
                let on_delta = move |d: ModelDelta| match d {
                    ModelDelta::Text(t) => {
                        partial.lock().expect("partial lock").push_str(&t);
                        events.publish(AgentEvent::TextDelta {
                            reply_id: rid.clone(),
                            delta: t,
                        });
                    }
                    ModelDelta::ToolCallStart { index, id, name } => {
                        ids.lock().expect("ids lock").insert(index, id.clone());
                        events.publish(AgentEvent::ToolCallStarted { call_id: id, name });
                    }
                    ModelDelta::ToolCallArgs { index, delta } => {
                        let id = ids
                            .lock()
                            .expect("ids lock")
                            .get(&index)
                            .cloned()
                            .unwrap_or_default();
                        events.publish(AgentEvent::ToolCallDelta { call_id: id, delta });
                    }
                };
                self.model.turn(&request, &on_delta, &cancel).await
            };
            let turn = match result {
                Ok(t) => t,
                Err(e) => {
                    let partial = std::mem::take(&mut *partial.lock().expect("partial lock"));
                    if !partial.is_empty() {
                        self.save_to_reply(&reply_id, vec![text_block(partial.clone())], None);
                        last_text = partial;
                    }
                    if e == ModelError::Cancelled {
                        break FinishReason::Interrupted;
                    }
                    self.record_model_error(&reply_id, &e);
                    error = Some(e.to_string());
                    break FinishReason::Error;
                }
            };
            let finished = now_naive();
            let mut blocks = Vec::new();
            if !turn.text.is_empty() {
                let mut tb = TextBlock::new(turn.text.clone());
                tb.finished_at = Some(finished.clone());
                blocks.push(Block::Text(tb));
            }
            for c in &turn.tool_calls {
                let mut extra = block_timestamps(now_naive());
                extra.insert("finished_at".into(), Value::String(finished.clone()));
                blocks.push(Block::ToolCall(ToolCallBlock {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    input: Value::String(c.arguments.clone()),
                    state: Value::String("pending".into()),
                    suggested_rules: Vec::new(),
                    extra,
                }));
            }
            self.save_to_reply(&reply_id, blocks, turn.usage);
            self.emit(AgentEvent::TurnFinished {
                reply_id: reply_id.clone(),
                text: turn.text.clone(),
                tool_calls: turn.tool_calls.len(),
                usage: turn.usage.map(|u| (u.input_tokens, u.output_tokens)),
            });
            last_text = turn.text.clone();
            if turn.tool_calls.is_empty() {
                break FinishReason::Completed;
            }
            for call in &turn.tool_calls {
                if !cancel.is_cancelled() {
                    self.wait_step(&format!("tool call {}", call.name), &cancel)
                        .await;
                }
                if cancel.is_cancelled() {
                    self.record_not_run(&reply_id, call);
                    continue;
                }
                self.run_tool_call(&reply_id, call, &cancel).await;
            }
            self.save_state().await;
            if cancel.is_cancelled() {
                break FinishReason::Interrupted;
            }
        };
        let now = now_naive();
        if let Some(m) = self.reply_msg_mut(&reply_id) {
            m.finished_at = Some(now);
            m.finished_reason = Value::String(reason.as_str().into());
        }
        self.emit(AgentEvent::ReplyFinished {
            reply_id: reply_id.clone(),
            reason,
            text: last_text.clone(),
        });
        self.save_state().await;
        Ok(ReplyOutcome {
            reply_id,
            reason,
            text: last_text,
            error,
            turns,
        })
    }

    /// [`Agent::reply`] to a plain user text.
    pub async fn reply_text(&mut self, text: &str) -> Result<ReplyOutcome, AgentError> {
        self.reply(Msg::text("user", "user", text)).await
    }

    async fn wait_step(&self, next: &str, cancel: &CancellationToken) {
        let step = self.handle.step.clone();
        step.wait(next, cancel, || {
            self.emit(AgentEvent::StepPaused { next: next.into() })
        })
        .await;
    }

    /// Puts a failed model call into the conversation: the reply message
    /// gets the reference's `error` object and a system-reminder hint the
    /// model reads on the next turn.
    fn record_model_error(&mut self, reply_id: &str, e: &ModelError) {
        let kind = e.error_type();
        let message = e.to_string();
        self.emit(AgentEvent::Error {
            kind: kind.into(),
            message: message.clone(),
        });
        let mut hint = Map::new();
        hint.insert(
            "hint".into(),
            Value::String(format!(
                "<system-reminder>The model call failed ({kind}): {message}. The reply ended here.</system-reminder>"
            )),
        );
        hint.insert("id".into(), Value::String(new_id()));
        hint.insert("source".into(), Value::String("system".into()));
        let now = now_naive();
        hint.insert("created_at".into(), Value::String(now.clone()));
        hint.insert("finished_at".into(), Value::String(now));
        self.save_to_reply(reply_id, vec![Block::Hint(hint)], None);
        if let Some(m) = self.reply_msg_mut(reply_id) {
            m.error = json!({"type": kind, "message": message});
        }
    }

    fn record_not_run(&mut self, reply_id: &str, call: &ModelToolCall) {
        let mut r = ToolResult::error("The tool call was not run: the user stopped the agent.");
        r.state = ToolState::Interrupted;
        let mut block = r.to_block(&call.id, &call.name);
        block.extra = block_timestamps(now_naive());
        self.save_to_reply(reply_id, vec![Block::ToolResult(block)], None);
        self.mark_call_finished(reply_id, &call.id);
        self.emit(AgentEvent::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            state: "interrupted".into(),
            text: r.text(),
            full_chars: r.text().chars().count(),
            offloaded_to: None,
            duration_ms: 0,
        });
    }
}

#[cfg(test)]
mod tests;
