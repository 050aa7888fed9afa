//! A run of the Agent pane: starting a demo or a prompt, step mode,
//! stopping, agent events, the end of a run, and the run task itself.

use std::future::Future;
use std::sync::Arc;

use crate::agent::openai::{OpenAiConfig, OpenAiModel};
use crate::agent::script::{self, ScriptedModel, Transcript};
use crate::agent::{
    Agent, AgentConfig, AgentEvent, AgentReceived, AgentSubscriber, FinishReason, Model, Toolset,
};
use crate::engine::Workspace;
use crate::tui::action::{Effect, Level};
use crate::tui::pane::{Ctx, TaskSender};
use crate::tui::widgets::text;

use super::*;

impl AgentPane {
    pub(super) fn session_for_demo(&mut self, name: &str, cx: &Ctx) -> String {
        let at: chrono::DateTime<chrono::Utc> = (cx.clock)().into();
        let base = format!("demo-{name}-{}", at.format("%Y%m%d-%H%M%S"));
        let mut s = base.clone();
        let mut n = 1;
        while self.used_sessions.contains(&s) {
            n += 1;
            s = format!("{base}-{n}");
        }
        self.used_sessions.insert(s.clone());
        s
    }

    /// Runs the selected demo in a fresh session.
    pub fn run_demo(&mut self, cx: &mut Ctx) {
        let Some((name, _)) = self.demos.get(self.cursor.selected).cloned() else {
            return;
        };
        let t = match Transcript::demo(&name) {
            Ok(t) => t,
            Err(e) => {
                cx.toast(Level::Error, e.to_string());
                return;
            }
        };
        let session = self.session_for_demo(&name, cx);
        let label = format!("demo {name}");
        self.start(label, session, Job::Demo(t, self.pace), cx);
    }

    /// Sends `prompt` to the model in the selected session.
    pub fn run_prompt(&mut self, prompt: String, cx: &mut Ctx) {
        let Some(m) = self.model.clone() else {
            cx.toast(Level::Warn, "set a model first: m, or :agent URL MODEL");
            return;
        };
        let label = format!("model {}", m.model);
        let session = cx.session.clone();
        self.start(label, session, Job::Model(m, prompt), cx);
    }

    pub(super) fn start(&mut self, label: String, session: String, job: Job, cx: &mut Ctx) {
        if !cx.can("agent.run") {
            cx.toast(Level::Warn, "read-only mode: the agent cannot run");
            return;
        }
        if self.run.is_some() {
            cx.toast(Level::Warn, "the agent is running: x stops it");
            return;
        }
        self.runs += 1;
        let id = self.runs;
        self.tool_calls = 0;
        self.offloads = 0;
        self.compressions = 0;
        self.errors = 0;
        self.follow = true;
        self.back = 0;
        self.push(
            LineKind::Info,
            &format!(
                "── {label} · session {session}{} ──",
                if self.stepping { " · step mode" } else { "" }
            ),
        );
        self.run = Some(Run {
            id,
            label,
            session: session.clone(),
            handle: None,
            stop_requested: false,
        });
        let ws = cx.ws.clone();
        let tx = cx.tasks::<AgentPane>();
        let agent_id = cx.agent.clone();
        let stepping = self.stepping;
        tokio::spawn(async move {
            let fin = run_job(id, ws, agent_id, session, job, stepping, &tx).await;
            tx.send(Msg::Done(id, fin)).await;
        });
    }

    pub(super) fn stop(&mut self, cx: &mut Ctx) {
        match &mut self.run {
            Some(r) => {
                r.stop_requested = true;
                if let Some(h) = &r.handle {
                    h.stop();
                }
                cx.toast(Level::Info, "stopping the agent");
            }
            None => cx.toast(Level::Info, "the agent is not running"),
        }
    }

    pub(super) fn set_stepping(&mut self, on: bool, cx: &mut Ctx) {
        self.stepping = on;
        if let Some(h) = self.run.as_ref().and_then(|r| r.handle.as_ref()) {
            h.step_control().set_stepping(on);
        }
        cx.toast(
            Level::Info,
            if on {
                "step mode on: space runs the next step"
            } else {
                "step mode off"
            },
        );
    }

    pub(super) fn on_agent_event(&mut self, ev: &AgentEvent) {
        match ev {
            AgentEvent::ReplyStarted { user_text, .. } => {
                self.push(LineKind::User, &format!("▶ {user_text}"));
            }
            AgentEvent::TurnStarted { .. } | AgentEvent::TurnFinished { .. } => {
                self.close_text(false);
            }
            AgentEvent::TextDelta { delta, .. } => self.push_delta(delta),
            AgentEvent::ToolCallStarted { .. } | AgentEvent::ToolCallDelta { .. } => {}
            AgentEvent::ToolCall { name, input, .. } => {
                self.tool_calls += 1;
                self.push(
                    LineKind::Call,
                    &format!("⚙ {name} {}", input.replace('\n', " ")),
                );
            }
            AgentEvent::ToolResult {
                name,
                state,
                text: body,
                full_chars,
                offloaded_to,
                duration_ms,
                ..
            } => {
                let kind = if state == "success" {
                    LineKind::ResultOk
                } else {
                    LineKind::ResultErr
                };
                let mark = if state == "success" { "✓" } else { "✗" };
                self.push(
                    kind,
                    &format!(
                        "  {mark} {name} {state} · {} · {full_chars} chars",
                        text::duration_ms(*duration_ms)
                    ),
                );
                let body_lines: Vec<&str> = body.lines().collect();
                for l in body_lines.iter().take(RESULT_LINES) {
                    self.push(LineKind::ResultBody, &format!("  │ {l}"));
                }
                if body_lines.len() > RESULT_LINES {
                    self.push(
                        LineKind::ResultBody,
                        &format!("  │ … {} more lines", body_lines.len() - RESULT_LINES),
                    );
                }
                if let Some(p) = offloaded_to {
                    self.push(
                        LineKind::Offload,
                        &format!("  ⤓ full result offloaded to {p}"),
                    );
                }
            }
            AgentEvent::OffloadWritten { kind, path, size } => {
                self.offloads += 1;
                let kind = serde_json::to_value(kind)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                self.push(
                    LineKind::Offload,
                    &format!("  ⤓ {kind} offload written: {path} ({size})"),
                );
            }
            AgentEvent::CompressionDone {
                path,
                compressed_messages,
                kept_messages,
                tokens_before,
                tokens_after,
                fallback,
                ..
            } => {
                self.compressions += 1;
                self.push(
                    LineKind::Offload,
                    &format!(
                        "⇣ context compressed: {compressed_messages} message(s) → {path}; {kept_messages} kept; ~{tokens_before} → ~{tokens_after} tokens{}",
                        if *fallback {
                            " (summary made without the model)"
                        } else {
                            ""
                        }
                    ),
                );
            }
            // Shown as the step bar from the live step control.
            AgentEvent::StepPaused { .. } => {}
            AgentEvent::Error { kind, message } => {
                self.errors += 1;
                self.push(LineKind::Error, &format!("! {kind}: {message}"));
            }
            AgentEvent::ReplyFinished { reason, .. } => {
                self.push(LineKind::Info, &format!("▌ reply {}", reason.as_str()));
            }
        }
    }

    pub(super) fn finish(&mut self, fin: &Finished, cx: &mut Ctx) {
        let Some(run) = self.run.take() else {
            return;
        };
        if let Some(e) = &fin.error {
            self.errors += 1;
            self.push(LineKind::Error, &format!("! {e}"));
        }
        if let Some(s) = &fin.summary {
            self.push(LineKind::Info, s);
        }
        let outcome = match (&fin.error, fin.reason) {
            (Some(e), _) => format!("error: {e}"),
            (None, Some(r)) => r.as_str().to_string(),
            (None, None) => "ended".into(),
        };
        let level = match fin.reason {
            Some(FinishReason::Completed) if fin.error.is_none() => Level::Info,
            _ => Level::Warn,
        };
        cx.toast(level, format!("{}: {outcome}", run.label));
        // Selecting the session again makes the Sessions, Offload and
        // Command panes reload it.
        if run.handle.is_some() {
            cx.effect(Effect::SelectSession(run.session.clone()));
        }
        self.last = Some((run.session, outcome));
    }
}

/// Opens the agent for `job`, reports its handle, runs it while
/// forwarding its events, and says how it ended.
async fn run_job(
    id: u64,
    ws: Arc<Workspace>,
    agent_id: String,
    session: String,
    job: Job,
    stepping: bool,
    tx: &TaskSender<Msg>,
) -> Finished {
    let send = |m: Msg| {
        let tx = tx.clone();
        async move {
            tx.send(m).await;
        }
    };
    let fail = |e: String| Finished {
        reason: None,
        error: Some(e),
        summary: None,
    };
    let mut config = AgentConfig::new(session.clone());
    config.agent_id = agent_id.clone();
    let reason = match job {
        Job::Demo(t, pace) => {
            match script::run_setup(&ws, &t).await {
                Ok(lines) => send(Msg::Setup(id, lines)).await,
                Err(e) => return fail(format!("setup of demo {}: {e}", t.name)),
            }
            let model = Arc::new(ScriptedModel::new(&t, pace));
            config.name = t.agent.clone().unwrap_or_else(|| "agent".into());
            config.policy = t.policy.clone().unwrap_or_default();
            let tools = Toolset::standard(&ws);
            let mut agent =
                match Agent::open(ws.clone(), model.clone() as Arc<dyn Model>, tools, config).await
                {
                    Ok(a) => a,
                    Err(e) => return fail(e.to_string()),
                };
            let mut sub = started(id, &agent, stepping, tx).await;
            let out = pump(id, &mut sub, script::replay(&mut agent, &model, &t), tx).await;
            match out {
                Ok(outcomes) => outcomes.last().map(|o| o.reason),
                Err(e) => return fail(e.to_string()),
            }
        }
        Job::Model(m, prompt) => {
            let mut oc = OpenAiConfig::new(m.url.clone(), m.model.clone());
            oc.api_key = std::env::var(API_KEY_ENV).ok().filter(|k| !k.is_empty());
            let model = match OpenAiModel::new(oc) {
                Ok(m) => m,
                Err(e) => return fail(e.to_string()),
            };
            if !agent_id.is_empty() {
                config.name = agent_id;
            }
            let tools = Toolset::standard(&ws);
            let mut agent = match Agent::open(ws.clone(), Arc::new(model), tools, config).await {
                Ok(a) => a,
                Err(e) => return fail(e.to_string()),
            };
            let mut sub = started(id, &agent, stepping, tx).await;
            match pump(id, &mut sub, agent.reply_text(&prompt), tx).await {
                Ok(o) => Some(o.reason),
                Err(e) => return fail(e.to_string()),
            }
        }
    };
    let summary = match ws.sessions().detail(&session).await {
        Ok(d) => Some(format!(
            "session {session}: {} journalled · {} · context.jsonl {}",
            crate::root::words::count(d.journal.entries.len(), "tool call", "tool calls"),
            crate::root::words::count(d.summary.offloads, "offload", "offloads"),
            if d.summary.context_bytes > 0 {
                text::human_size(d.summary.context_bytes)
            } else {
                "not written".into()
            }
        )),
        Err(e) => Some(format!("session {session}: cannot read it back: {e}")),
    };
    Finished {
        reason,
        error: None,
        summary,
    }
}

/// Subscribes before the agent does anything, sets step mode, and hands
/// the pane the handle.
async fn started(id: u64, agent: &Agent, stepping: bool, tx: &TaskSender<Msg>) -> AgentSubscriber {
    let handle = agent.handle();
    let sub = handle.subscribe();
    handle.step_control().set_stepping(stepping);
    tx.send(Msg::Started(id, handle)).await;
    sub
}

/// Drives `work` while forwarding the events it publishes, in order and
/// in batches; every event published before `work` ended is forwarded
/// before this returns (so the pane sees them before `Done`).
async fn pump<T>(
    id: u64,
    sub: &mut AgentSubscriber,
    work: impl Future<Output = T>,
    tx: &TaskSender<Msg>,
) -> T {
    let forward = |batch: Vec<AgentReceived>| async move {
        tx.send(Msg::Events(id, batch)).await;
    };
    tokio::pin!(work);
    let mut closed = false;
    let out = loop {
        tokio::select! {
            biased;
            r = sub.recv(), if !closed => {
                let Some(first) = r else {
                    closed = true;
                    continue;
                };
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match sub.try_recv() {
                        Some(e) => batch.push(e),
                        None => break,
                    }
                }
                forward(batch).await;
            }
            out = &mut work => break out,
        }
    };
    let mut batch = Vec::new();
    while let Some(e) = sub.try_recv() {
        batch.push(e);
        if batch.len() == BATCH {
            forward(std::mem::take(&mut batch)).await;
        }
    }
    if !batch.is_empty() {
        forward(batch).await;
    }
    out
}
