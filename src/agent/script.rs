//! Scripted runs: a transcript (YAML or JSONL) of user messages and
//! assistant turns is replayed against the real workspace. The assistant
//! turns stand in for a model — the agent loop, the tool calls, the
//! offload and compression policies and the files they write are all
//! real.
//!
//! YAML shape:
//!
//! ```yaml
//! name: explore                    # required
//! description: what it shows
//! agent: explorer                  # speaker name of the agent's messages
//! policy: {context_window: 20000}  # ContextPolicy fields to override
//! setup:                           # run before the first step
//!   - write: {path: demo/a.rs, content: "fn main() {}\n", if_absent: true, unless_glob: "**/*.rs"}
//!   - bash: "seq 1 100 > demo/numbers.txt"
//! summaries:                       # what the "model" answers when asked to compress
//!   - {task_overview: ..., current_state: ..., important_discoveries: ..., next_steps: ..., context_to_preserve: ...}
//! steps:
//!   - user: "Explore this repository."
//!   - assistant:
//!       text: "Listing the Rust files."
//!       tool_calls:
//!         - {id: glob1, name: Glob, args: {pattern: "**/*.rs"}}
//!   - assistant: "Done."           # a turn with text only ends the reply
//! ```
//!
//! JSONL: one object per line — `{"meta": {name, description, agent,
//! policy}}`, `{"setup": {...}}`, `{"summary": {...}}`, `{"user": ...}` or
//! `{"assistant": ...}`, the same shapes as above.
//!
//! Placeholders in user text, assistant text and tool-call arguments:
//! `{{workdir}}` (workspace root), `{{session}}`, `{{session_dir}}`, and
//! `{{first_path:ID}}` — the first absolute path in the result of the
//! scripted call with id `ID` (so a demo can Read what its Glob found).
//! Tool-call ids in the conversation are always fresh; script ids only
//! name calls for placeholders. `input:` instead of `args:` sends a raw
//! argument string as is (to show what a malformed call does).

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::context::{ContextPolicy, mechanical_summary};
use super::model::{
    DeltaSink, Model, ModelDelta, ModelError, ModelRequest, ModelToolCall, ModelTurn,
};
use super::{Agent, AgentError, ReplyOutcome};
use crate::backend::{ExecRequest, path as bpath};
use crate::engine::message::{Block, Msg, ToolOutput};
use crate::engine::workspace::Workspace;

mod setup;

pub use setup::run_setup;

/// The demo transcripts shipped with wsbench (`assets/demos/`).
pub const DEMOS: &[(&str, &str)] = &[
    ("explore", include_str!("../../assets/demos/explore.yaml")),
    ("bugfix", include_str!("../../assets/demos/bugfix.yaml")),
    ("long", include_str!("../../assets/demos/long.yaml")),
];

/// A transcript that cannot be used; says where and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ScriptError {
    /// File name or demo name.
    pub origin: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

fn err(origin: &str, line: Option<usize>, message: impl Into<String>) -> ScriptError {
    ScriptError {
        origin: origin.to_string(),
        line,
        message: message.into(),
    }
}

/// A file the setup writes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    /// Path relative to the workspace root.
    pub path: String,
    /// UTF-8 content.
    pub content: String,
    /// Keep an existing file as it is.
    #[serde(default)]
    pub if_absent: bool,
    /// Skip the write when a file of the workspace matches this glob
    /// (e.g. `**/*.rs`: a real repository is there, no demo repo needed).
    #[serde(default)]
    pub unless_glob: Option<String>,
}

/// One setup step: exactly one of `write` and `bash`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupStep {
    /// Write a file.
    #[serde(default)]
    pub write: Option<WriteFile>,
    /// Run a shell command in the workspace root (60 s limit); it must exit 0.
    #[serde(default)]
    pub bash: Option<String>,
}

/// A user message: a text, or a text with images (paths relative to the
/// workspace root, attached as base64 data blocks).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum UserStep {
    /// Plain text.
    Text(String),
    /// Text and images.
    Full {
        /// The text.
        text: String,
        /// Image files to attach.
        #[serde(default)]
        images: Vec<String>,
    },
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// Script-local id, for `{{first_path:ID}}`.
    #[serde(default)]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments object.
    #[serde(default)]
    pub args: Option<Value>,
    /// Raw argument text, sent as is (instead of `args`).
    #[serde(default)]
    pub input: Option<String>,
}

/// A scripted assistant turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum AssistantStep {
    /// Text only (ends the reply).
    Text(String),
    /// Text and tool calls.
    Full {
        /// The text.
        #[serde(default)]
        text: String,
        /// Tool calls, run in order.
        #[serde(default)]
        tool_calls: Vec<ScriptToolCall>,
    },
}

impl AssistantStep {
    fn parts(&self) -> (&str, &[ScriptToolCall]) {
        match self {
            AssistantStep::Text(t) => (t, &[]),
            AssistantStep::Full { text, tool_calls } => (text, tool_calls),
        }
    }
}

/// One step: exactly one of `user` and `assistant`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// A user message (starts a reply).
    #[serde(default)]
    pub user: Option<UserStep>,
    /// An assistant turn.
    #[serde(default)]
    pub assistant: Option<AssistantStep>,
}

/// A transcript.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcript {
    /// Name.
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// Speaker name of the agent's messages.
    #[serde(default)]
    pub agent: Option<String>,
    /// Context policy (fields not given keep the reference defaults).
    #[serde(default)]
    pub policy: Option<ContextPolicy>,
    /// Setup steps.
    #[serde(default)]
    pub setup: Vec<SetupStep>,
    /// Compression summaries, used in order.
    #[serde(default)]
    pub summaries: Vec<Map<String, Value>>,
    /// The conversation.
    pub steps: Vec<Step>,
}

/// One reply of a transcript: the user message and the turns answering it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptReply {
    /// The user message.
    pub user: UserStep,
    /// Assistant turns.
    pub turns: Vec<AssistantStep>,
}

impl Transcript {
    /// Parses YAML text. `origin` names the source in errors.
    ///
    /// Errors: YAML syntax or shape errors with their line; a step or
    /// setup step that is not exactly one kind; an assistant turn before
    /// the first user message; no user message.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Transcript, ScriptError> {
        let t: Transcript = serde_yaml_ng::from_str(text).map_err(|e| {
            let line = e.location().map(|l| l.line());
            let msg = e.to_string();
            // The location is reported on its own; keep the message short.
            let msg = match msg.rfind(" at line ") {
                Some(i) if line.is_some() => msg[..i].to_string(),
                _ => msg,
            };
            err(origin, line, msg)
        })?;
        t.validate(origin)?;
        Ok(t)
    }

    /// Parses JSONL text (see the module doc). The name defaults to
    /// `default_name` when no `meta` line gives one.
    pub fn from_jsonl(
        text: &str,
        origin: &str,
        default_name: &str,
    ) -> Result<Transcript, ScriptError> {
        let mut t = Transcript {
            name: default_name.to_string(),
            description: String::new(),
            agent: None,
            policy: None,
            setup: Vec::new(),
            summaries: Vec::new(),
            steps: Vec::new(),
        };
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Meta {
            #[serde(default)]
            name: Option<String>,
            #[serde(default)]
            description: String,
            #[serde(default)]
            agent: Option<String>,
            #[serde(default)]
            policy: Option<ContextPolicy>,
        }
        for (i, line) in text.lines().enumerate() {
            let n = Some(i + 1);
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line).map_err(|e| err(origin, n, e.to_string()))?;
            let Value::Object(obj) = &v else {
                return Err(err(origin, n, "each line must be a JSON object"));
            };
            let key = obj.keys().next().cloned().unwrap_or_default();
            if obj.len() != 1 {
                return Err(err(
                    origin,
                    n,
                    "each line must have exactly one key: meta, setup, summary, user or assistant",
                ));
            }
            let inner = obj[&key].clone();
            let shape = |e: serde_json::Error| err(origin, n, format!("{key}: {e}"));
            match key.as_str() {
                "meta" => {
                    let m: Meta = serde_json::from_value(inner).map_err(shape)?;
                    if let Some(name) = m.name {
                        t.name = name;
                    }
                    t.description = m.description;
                    t.agent = m.agent;
                    t.policy = m.policy;
                }
                "setup" => t.setup.push(serde_json::from_value(inner).map_err(shape)?),
                "summary" => t
                    .summaries
                    .push(serde_json::from_value(inner).map_err(shape)?),
                "user" | "assistant" => t
                    .steps
                    .push(serde_json::from_value(v.clone()).map_err(shape)?),
                other => {
                    return Err(err(
                        origin,
                        n,
                        format!(
                            "unknown key `{other}`; expected meta, setup, summary, user or assistant"
                        ),
                    ));
                }
            }
        }
        t.validate(origin)?;
        Ok(t)
    }

    /// Loads a transcript file: `.jsonl` as JSONL, anything else as YAML.
    pub fn from_path(path: &Path) -> Result<Transcript, ScriptError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| err(&origin, None, e.to_string()))?;
        if path.extension().is_some_and(|e| e == "jsonl") {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "script".into());
            Transcript::from_jsonl(&text, &origin, &stem)
        } else {
            Transcript::from_yaml(&text, &origin)
        }
    }

    /// A shipped demo by name.
    ///
    /// Errors: no demo of that name (the message lists them).
    pub fn demo(name: &str) -> Result<Transcript, ScriptError> {
        let Some((_, text)) = DEMOS.iter().find(|(n, _)| *n == name) else {
            return Err(err(
                name,
                None,
                format!(
                    "no demo named `{name}`; demos: {}",
                    DEMOS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        Transcript::from_yaml(text, &format!("assets/demos/{name}.yaml"))
    }

    fn validate(&self, origin: &str) -> Result<(), ScriptError> {
        if let Some(p) = &self.policy {
            p.validate()
                .map_err(|m| err(origin, None, format!("policy: {m}")))?;
        }
        for (i, s) in self.setup.iter().enumerate() {
            if s.write.is_some() == s.bash.is_some() {
                return Err(err(
                    origin,
                    None,
                    format!(
                        "setup step {}: give exactly one of `write` and `bash`",
                        i + 1
                    ),
                ));
            }
            if let Some(w) = &s.write {
                check_relative(&w.path)
                    .map_err(|m| err(origin, None, format!("setup step {}: {m}", i + 1)))?;
            }
        }
        let mut seen_user = false;
        for (i, s) in self.steps.iter().enumerate() {
            match (&s.user, &s.assistant) {
                (Some(_), None) => seen_user = true,
                (None, Some(a)) => {
                    if !seen_user {
                        return Err(err(
                            origin,
                            None,
                            format!("step {}: an assistant turn before any user message", i + 1),
                        ));
                    }
                    for c in a.parts().1 {
                        if c.args.is_some() && c.input.is_some() {
                            return Err(err(
                                origin,
                                None,
                                format!(
                                    "step {}: tool call {}: give `args` or `input`, not both",
                                    i + 1,
                                    c.name
                                ),
                            ));
                        }
                    }
                }
                _ => {
                    return Err(err(
                        origin,
                        None,
                        format!("step {}: give exactly one of `user` and `assistant`", i + 1),
                    ));
                }
            }
        }
        if !seen_user {
            return Err(err(origin, None, "the transcript has no user message"));
        }
        Ok(())
    }

    /// The replies, in order.
    pub fn replies(&self) -> Vec<ScriptReply> {
        let mut out: Vec<ScriptReply> = Vec::new();
        for s in &self.steps {
            if let Some(u) = &s.user {
                out.push(ScriptReply {
                    user: u.clone(),
                    turns: Vec::new(),
                });
            } else if let (Some(a), Some(last)) = (&s.assistant, out.last_mut()) {
                last.turns.push(a.clone());
            }
        }
        out
    }
}

fn check_relative(p: &str) -> Result<(), String> {
    if p.is_empty() || p.starts_with('/') || p.split('/').any(|s| s == "..") {
        return Err(format!(
            "`{p}` must be a relative path inside the workspace (no leading `/`, no `..`)"
        ));
    }
    Ok(())
}

#[derive(Debug, Default, Clone)]
struct Vars {
    workdir: String,
    session: String,
    session_dir: String,
}

/// A model that answers with the scripted turns of the current reply.
#[derive(Debug)]
pub struct ScriptedModel {
    name: String,
    queue: Mutex<VecDeque<AssistantStep>>,
    summaries: Mutex<VecDeque<Map<String, Value>>>,
    vars: Mutex<Vars>,
    ids: Mutex<HashMap<String, String>>,
    /// First absolute path of each scripted call's result, remembered
    /// when first seen: compression may later take the result out of the
    /// conversation.
    paths: Mutex<HashMap<String, String>>,
    pace: Duration,
}

impl ScriptedModel {
    /// A scripted model for `t`, streaming text word by word with `pace`
    /// between words (zero: as fast as possible).
    pub fn new(t: &Transcript, pace: Duration) -> Self {
        ScriptedModel {
            name: format!("script:{}", t.name),
            queue: Mutex::new(VecDeque::new()),
            summaries: Mutex::new(t.summaries.iter().cloned().collect()),
            vars: Mutex::new(Vars::default()),
            ids: Mutex::new(HashMap::new()),
            paths: Mutex::new(HashMap::new()),
            pace,
        }
    }

    /// Queues the turns of the next reply (dropping any left over).
    pub fn load_turns(&self, turns: Vec<AssistantStep>) {
        *self.queue.lock().expect("queue lock") = turns.into();
    }

    /// Sets the placeholder values.
    fn set_vars(&self, ws: &Workspace, session: &str) {
        let session_dir = ws.layout().session_dir(session).unwrap_or_default();
        *self.vars.lock().expect("vars lock") = Vars {
            workdir: ws.layout().workdir().to_string(),
            session: session.to_string(),
            session_dir,
        };
    }

    fn remember_paths(&self, messages: &[Msg]) {
        let ids = self.ids.lock().expect("ids lock");
        let mut paths = self.paths.lock().expect("paths lock");
        for real in ids.values() {
            if !paths.contains_key(real)
                && let Some(p) = first_path_in_result(messages, real)
            {
                paths.insert(real.clone(), p);
            }
        }
    }

    fn expand(&self, s: &str, messages: &[Msg]) -> Result<String, ModelError> {
        self.remember_paths(messages);
        expand_placeholders(
            s,
            &self.vars.lock().expect("vars lock"),
            &self.ids.lock().expect("ids lock"),
            &self.paths.lock().expect("paths lock"),
        )
    }

    fn expand_value(&self, v: &Value, messages: &[Msg]) -> Result<Value, ModelError> {
        Ok(match v {
            Value::String(s) => Value::String(self.expand(s, messages)?),
            Value::Array(a) => Value::Array(
                a.iter()
                    .map(|x| self.expand_value(x, messages))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(o) => {
                let mut m = Map::new();
                for (k, x) in o {
                    m.insert(k.clone(), self.expand_value(x, messages)?);
                }
                Value::Object(m)
            }
            other => other.clone(),
        })
    }
}

fn expand_placeholders(
    s: &str,
    vars: &Vars,
    ids: &HashMap<String, String>,
    paths: &HashMap<String, String>,
) -> Result<String, ModelError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(ModelError::Script(format!("unclosed placeholder in `{s}`")));
        };
        let key = after[..end].trim();
        let value = match key {
            "workdir" => vars.workdir.clone(),
            "session" => vars.session.clone(),
            "session_dir" => vars.session_dir.clone(),
            k if k.starts_with("first_path:") => {
                let script_id = k["first_path:".len()..].trim();
                let real = ids.get(script_id).ok_or_else(|| {
                    ModelError::Script(format!(
                        "{{{{{k}}}}}: no earlier tool call has id `{script_id}`"
                    ))
                })?;
                paths.get(real).cloned().ok_or_else(|| {
                    ModelError::Script(format!(
                        "{{{{{k}}}}}: the result of call `{script_id}` names no absolute path"
                    ))
                })?
            }
            other => {
                return Err(ModelError::Script(format!(
                    "unknown placeholder {{{{{other}}}}}; known: workdir, session, session_dir, first_path:ID"
                )));
            }
        };
        out.push_str(&value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn first_path_in_result(messages: &[Msg], call_id: &str) -> Option<String> {
    for m in messages.iter().rev() {
        for b in &m.content {
            let Block::ToolResult(r) = b else { continue };
            if r.id != call_id {
                continue;
            }
            let text = match &r.output {
                ToolOutput::Text(t) => t.clone(),
                ToolOutput::Blocks(bs) => bs.iter().filter_map(Block::as_text).collect(),
            };
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with('/') {
                    // `path:line:text` in Grep content mode.
                    return Some(line.split(':').next().unwrap_or(line).to_string());
                }
            }
        }
    }
    None
}

#[async_trait]
impl Model for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn turn(
        &self,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ModelTurn, ModelError> {
        let Some(step) = self.queue.lock().expect("queue lock").pop_front() else {
            // The script ran out of turns for this reply: an empty answer
            // ends it.
            return Ok(ModelTurn {
                finish_reason: Some("stop".into()),
                ..ModelTurn::default()
            });
        };
        let (text, calls) = step.parts();
        let text = self.expand(text, &request.messages)?;
        for (i, word) in text.split_inclusive(' ').enumerate() {
            if !self.pace.is_zero() && i > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(self.pace) => {}
                    _ = cancel.cancelled() => return Err(ModelError::Cancelled),
                }
            }
            on_delta(ModelDelta::Text(word.to_string()));
        }
        let mut tool_calls = Vec::new();
        for (index, c) in calls.iter().enumerate() {
            let id = format!("call_{}", &crate::engine::message::new_id()[..12]);
            if let Some(sid) = &c.id {
                self.ids
                    .lock()
                    .expect("ids lock")
                    .insert(sid.clone(), id.clone());
            }
            let arguments = match (&c.input, &c.args) {
                (Some(raw), _) => self.expand(raw, &request.messages)?,
                (None, Some(args)) => self.expand_value(args, &request.messages)?.to_string(),
                (None, None) => "{}".to_string(),
            };
            on_delta(ModelDelta::ToolCallStart {
                index,
                id: id.clone(),
                name: c.name.clone(),
            });
            on_delta(ModelDelta::ToolCallArgs {
                index,
                delta: arguments.clone(),
            });
            tool_calls.push(ModelToolCall {
                id,
                name: c.name.clone(),
                arguments,
            });
        }
        Ok(ModelTurn {
            text,
            finish_reason: Some(
                if tool_calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                }
                .into(),
            ),
            tool_calls,
            usage: None,
        })
    }

    async fn summarize(
        &self,
        request: &ModelRequest,
        _schema: &Value,
        _cancel: &CancellationToken,
    ) -> Result<Map<String, Value>, ModelError> {
        if let Some(s) = self.summaries.lock().expect("summaries lock").pop_front() {
            return Ok(s);
        }
        // The last message is the compression prompt.
        let n = request.messages.len().saturating_sub(1);
        Ok(mechanical_summary(&request.messages[..n]))
    }
}

/// Builds the user message of a reply, attaching its images.
async fn user_message(
    ws: &Workspace,
    model: &ScriptedModel,
    user: &UserStep,
) -> Result<Msg, AgentError> {
    let (text, images) = match user {
        UserStep::Text(t) => (t.as_str(), &[][..]),
        UserStep::Full { text, images } => (text.as_str(), images.as_slice()),
    };
    let text = model
        .expand(text, &[])
        .map_err(|e| AgentError::Input(e.to_string()))?;
    let mut msg = Msg::text("user", "user", text);
    for rel in images {
        let path = ws.layout().join(rel);
        let bytes = ws
            .sandbox()
            .read(&path, None)
            .await
            .map_err(|e| AgentError::Input(format!("image {rel}: {e}")))?;
        let media_type = crate::engine::offload::sniff_media_type(&bytes)
            .unwrap_or("application/octet-stream")
            .to_string();
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let block = crate::engine::message::DataBlock {
            id: crate::engine::message::new_id(),
            source: crate::engine::message::DataSource::Base64 { data, media_type },
            name: Some(bpath::file_name(&path).to_string()),
            created_at: Some(crate::engine::message::now_naive()),
            finished_at: None,
            extra: Map::new(),
        };
        msg.content.push(Block::Data(block));
    }
    Ok(msg)
}

/// Replays `t` with `agent`, whose model must be `model`: each reply's
/// turns are queued, then the user message is sent. Stops after a reply
/// that ends in an error or is interrupted (the rest of the script would
/// no longer fit the conversation). Returns the outcome of each reply run.
///
/// Errors: an image of a user step that cannot be read; agent errors.
pub async fn replay(
    agent: &mut Agent,
    model: &ScriptedModel,
    t: &Transcript,
) -> Result<Vec<ReplyOutcome>, AgentError> {
    let ws = agent.workspace().clone();
    model.set_vars(&ws, &agent.config().session);
    let mut outcomes = Vec::new();
    for r in t.replies() {
        model.load_turns(r.turns.clone());
        let msg = user_message(&ws, model, &r.user).await?;
        let outcome = agent.reply(msg).await?;
        let stop = !matches!(outcome.reason, super::FinishReason::Completed);
        outcomes.push(outcome);
        if stop {
            break;
        }
    }
    model.load_turns(Vec::new());
    Ok(outcomes)
}

#[cfg(test)]
mod tests;
