//! The Agent pane: runs a shipped demo transcript or an OpenAI-compatible
//! model in the workspace and shows the conversation as it happens
//! (issue 7 §2–3).
//!
//! * A full-screen pane (`A`, or `:agent`): the demo list and run facts
//!   on the left, the conversation on the right, the prompt below it.
//! * Demos run in a fresh session `demo-<name>-<YYYYmmdd-HHMMSS>`; a
//!   prompt to the model runs in the selected session (continuing it).
//!   Once a run has its session the pane selects it, so the Sessions,
//!   Offload and Command panes follow it; at the end it selects it again,
//!   which makes them reload (the session's journal, offloads and
//!   `context.jsonl`).
//! * Step mode pauses before every model turn and tool call; the pane
//!   shows what runs next, a key lets one step go.
//! * The run is a plain tokio task, not [`Ctx::spawn`]: in step mode it
//!   may wait for the user forever, and `Ctx::spawn` counts tasks that are
//!   expected to end on their own. It forwards the agent's events to the
//!   app channel in batches, so the render loop wakes when something
//!   happened and drains them before drawing; the task stops polling the
//!   agent while the channel is full, so a flood of text slows the agent
//!   rather than growing memory. The conversation itself is a ring of
//!   `output_buffer_lines` lines.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui_textarea::TextArea;

use crate::agent::openai::{OpenAiConfig, OpenAiModel};
use crate::agent::script::{self, ScriptedModel, Transcript};
use crate::agent::{
    Agent, AgentConfig, AgentEvent, AgentHandle, AgentReceived, AgentSubscriber, FinishReason,
    Model, Toolset,
};
use crate::engine::Workspace;
use crate::tui::action::{DialogTag, Effect, Level, PaneEvent, TaskResult};
use crate::tui::config::TuiConfig;
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{
    Ctx, ListMouse, Pane, TaskPane, TaskSender, act, deliver, list_mouse, placeholder,
};
use crate::tui::widgets::list::{ListCursor, render_rows};
use crate::tui::widgets::paste::clean_paste;
use crate::tui::widgets::ring::Ring;
use crate::tui::widgets::text;

/// Pane id (and keymap context outside the prompt).
pub const ID: &str = "agent";

/// Keymap context while the prompt has the keyboard.
pub const PROMPT: &str = "agent.prompt";

/// Keys of the pane. List keys (`j`/`k`, `g`/`G`) move in the demo list;
/// page keys scroll the conversation (paging down to its end follows it
/// again).
pub const ACTIONS: &[ActionSpec] = crate::pane_actions!("agent";
    act("agent.run", ID, "run demo", &["enter", "r"], true, true),
    act("agent.step_mode", ID, "step mode on/off", &["t"], false, true),
    act("agent.step", ID, "next step", &["space", "n"], false, true),
    act("agent.continue", ID, "continue (step mode off)", &["c"], false, true),
    act("agent.stop", ID, "stop", &["x", "ctrl-c"], false, true),
    act("agent.prompt", ID, "prompt the model", &["i"], true, true),
    act("agent.model", ID, "set model URL", &["m"], false, true),
    act("agent.clear", ID, "clear conversation", &["C"], false, false),
    act("agent.close", ID, "close", &["esc"], false, true),
    act("agent.send", PROMPT, "send", &["enter"], true, true),
    act("agent.newline", PROMPT, "new line", &["alt-enter", "shift-enter", "ctrl-j"], false, true),
    act("agent.stop_typing", PROMPT, "stop", &["ctrl-c"], false, false),
    act("agent.leave", PROMPT, "leave prompt", &["esc"], false, true),
);

/// Environment variables the model settings start from (the same ones
/// `wsbench agent` reads).
pub const MODEL_URL_ENV: &str = "WSBENCH_MODEL_URL";
/// See [`MODEL_URL_ENV`].
pub const MODEL_ENV: &str = "WSBENCH_MODEL";
/// Environment variable holding the API key sent to the model server
/// (unset: none is sent).
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// Lines of a tool result shown in the conversation; the rest is counted
/// (the whole result is in the session's journal and conversation).
const RESULT_LINES: usize = 6;

/// A streamed line longer than this, in characters, continues on a new
/// line, so one endless line cannot grow without bound.
const MAX_LINE_CHARS: usize = 2000;

/// Pause between scripted words, for a visible stream.
const DEFAULT_PACE: Duration = Duration::from_millis(20);

/// Events forwarded per message to the app.
const BATCH: usize = 256;

/// Width of the demo column.
const SIDE_WIDTH: u16 = 26;

/// The model server the prompt goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSetting {
    /// Base URL (`http://127.0.0.1:8080/v1`).
    pub url: String,
    /// Model name.
    pub model: String,
}

impl ModelSetting {
    /// Parses `URL MODEL` (whitespace-separated).
    ///
    /// Errors: not two words; a URL that is not `http://` or `https://`.
    pub fn parse(s: &str) -> Result<ModelSetting, String> {
        let parts: Vec<&str> = s.split_whitespace().collect();
        let [url, model] = parts[..] else {
            return Err(format!(
                "expected `URL MODEL` (e.g. `http://127.0.0.1:8080/v1 qwen`), got `{}`",
                s.trim()
            ));
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "model URL `{url}` must start with http:// or https://"
            ));
        }
        Ok(ModelSetting {
            url: url.into(),
            model: model.into(),
        })
    }

    fn from_env() -> Option<ModelSetting> {
        let url = std::env::var(MODEL_URL_ENV)
            .ok()
            .filter(|s| !s.is_empty())?;
        let model = std::env::var(MODEL_ENV).ok().filter(|s| !s.is_empty())?;
        ModelSetting::parse(&format!("{url} {model}")).ok()
    }
}

/// What a conversation line is (its style and prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// The user's message.
    User,
    /// Model text.
    Assistant,
    /// A tool call.
    Call,
    /// A tool result's first line (status).
    ResultOk,
    /// A failed tool result's first line.
    ResultErr,
    /// A tool result's body.
    ResultBody,
    /// Offloads and compressions.
    Offload,
    /// An error.
    Error,
    /// Run facts (setup, session, reply finished).
    Info,
}

/// One line of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvLine {
    /// Which run wrote it.
    pub run: u64,
    /// Kind.
    pub kind: LineKind,
    /// The text (one line, not yet sanitised for display).
    pub text: String,
}

/// How a run ended, as the task reports it.
#[derive(Debug)]
pub(crate) struct Finished {
    reason: Option<FinishReason>,
    error: Option<String>,
    summary: Option<String>,
}

pub(crate) enum Msg {
    Setup(u64, Vec<String>),
    Started(u64, AgentHandle),
    Events(u64, Vec<AgentReceived>),
    Done(u64, Finished),
}

enum Job {
    Demo(Transcript, Duration),
    Model(ModelSetting, String),
}

struct Run {
    id: u64,
    label: String,
    session: String,
    handle: Option<AgentHandle>,
    stop_requested: bool,
}

/// Title of the model dialog: the format, a complete example, and how to
/// clear the setting.
const MODEL_TITLE: &str = "Model: URL MODEL (e.g. http://127.0.0.1:8080/v1 qwen2.5; empty clears)";

/// The Agent pane.
pub struct AgentPane {
    demos: Vec<(String, String)>,
    cursor: ListCursor,
    side_list: Rect,
    stepping: bool,
    pace: Duration,
    model: Option<ModelSetting>,
    prompt: TextArea<'static>,
    typing: bool,
    /// `i` asked for a model first: typing starts once one is set (but
    /// not after `m` or `:agent`, which only set the model).
    type_after_model: bool,
    lines: Ring<ConvLine>,
    /// The line model text is streaming into.
    partial: Option<ConvLine>,
    partial_chars: usize,
    follow: bool,
    back: usize,
    view_height: usize,
    run: Option<Run>,
    runs: u64,
    used_sessions: HashSet<String>,
    last: Option<(String, String)>,
    tool_calls: usize,
    offloads: usize,
    compressions: usize,
    errors: usize,
}

fn new_prompt() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_placeholder_text("message to the model · enter sends · alt-enter new line");
    t.set_cursor_line_style(Style::default());
    t
}

impl AgentPane {
    /// A pane listing the shipped demos; its conversation keeps at most
    /// `output_buffer_lines` lines. The model setting starts from
    /// `WSBENCH_MODEL_URL` and `WSBENCH_MODEL` when both are set.
    pub fn new(cfg: &TuiConfig) -> Self {
        let demos = script::DEMOS
            .iter()
            .map(|(n, _)| {
                let d = Transcript::demo(n)
                    .map(|t| t.description)
                    .unwrap_or_else(|e| e.to_string());
                (n.to_string(), d)
            })
            .collect();
        AgentPane {
            demos,
            cursor: ListCursor::default(),
            side_list: Rect::default(),
            stepping: false,
            pace: DEFAULT_PACE,
            model: ModelSetting::from_env(),
            prompt: new_prompt(),
            typing: false,
            type_after_model: false,
            lines: Ring::new(cfg.output_buffer_lines),
            partial: None,
            partial_chars: 0,
            follow: true,
            back: 0,
            view_height: 10,
            run: None,
            runs: 0,
            used_sessions: HashSet::new(),
            last: None,
            tool_calls: 0,
            offloads: 0,
            compressions: 0,
            errors: 0,
        }
    }

    /// Sets the pause between scripted words (zero: as fast as possible).
    pub fn set_pace(&mut self, pace: Duration) {
        self.pace = pace;
    }

    /// Sets or clears the model server.
    pub fn set_model(&mut self, model: Option<ModelSetting>) {
        self.model = model;
    }

    /// The model server, if one is set.
    pub fn model(&self) -> Option<&ModelSetting> {
        self.model.as_ref()
    }

    /// Selects the demo `name`; false if there is none.
    pub fn select_demo(&mut self, name: &str) -> bool {
        match self.demos.iter().position(|(n, _)| n == name) {
            Some(i) => {
                self.cursor.selected = i;
                true
            }
            None => false,
        }
    }

    /// Whether step mode is on (for the next run and the running one).
    pub fn is_stepping(&self) -> bool {
        self.stepping
    }

    /// Whether a run is going on.
    pub fn is_running(&self) -> bool {
        self.run.is_some()
    }

    /// The session of the running run, else of the last one.
    pub fn session(&self) -> Option<&str> {
        match &self.run {
            Some(r) => Some(&r.session),
            None => self.last.as_ref().map(|l| l.0.as_str()),
        }
    }

    /// How the last run ended (`completed`, `interrupted`, `error: ...`).
    pub fn last_outcome(&self) -> Option<&str> {
        self.last.as_ref().map(|l| l.1.as_str())
    }

    /// What the running agent waits to run in step mode.
    pub fn waiting_for(&self) -> Option<String> {
        self.run
            .as_ref()
            .and_then(|r| r.handle.as_ref())
            .and_then(|h| h.step_control().waiting_for())
    }

    /// The conversation lines.
    pub fn lines(&self) -> &Ring<ConvLine> {
        &self.lines
    }

    fn push(&mut self, kind: LineKind, text: &str) {
        self.close_text(false);
        let run = self.runs;
        for l in text.split('\n') {
            let l = l.strip_suffix('\r').unwrap_or(l);
            self.lines.push(ConvLine {
                run,
                kind,
                text: l.to_string(),
            });
        }
    }

    /// Moves the streaming line into the ring; an empty one only when a
    /// newline ended it (a blank line of the answer).
    fn close_text(&mut self, newline: bool) {
        if let Some(l) = self.partial.take()
            && (newline || !l.text.is_empty())
        {
            self.lines.push(l);
        }
        self.partial_chars = 0;
    }

    fn push_delta(&mut self, delta: &str) {
        let run = self.runs;
        for (i, piece) in delta.split('\n').enumerate() {
            if i > 0 {
                self.close_text(true);
            }
            let piece = piece.strip_suffix('\r').unwrap_or(piece);
            for c in piece.chars() {
                if self.partial_chars >= MAX_LINE_CHARS {
                    self.close_text(true);
                }
                self.partial
                    .get_or_insert_with(|| ConvLine {
                        run,
                        kind: LineKind::Assistant,
                        text: String::new(),
                    })
                    .text
                    .push(c);
                self.partial_chars += 1;
            }
            if self.partial.is_none() {
                self.partial = Some(ConvLine {
                    run,
                    kind: LineKind::Assistant,
                    text: String::new(),
                });
            }
        }
    }

    /// Every conversation line's text, the streaming one last (tests).
    pub fn texts(&self) -> Vec<String> {
        self.lines
            .iter()
            .chain(self.partial.as_ref())
            .map(|l| l.text.clone())
            .collect()
    }

    fn session_for_demo(&mut self, name: &str, cx: &Ctx) -> String {
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

    fn start(&mut self, label: String, session: String, job: Job, cx: &mut Ctx) {
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

    fn stop(&mut self, cx: &mut Ctx) {
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

    fn set_stepping(&mut self, on: bool, cx: &mut Ctx) {
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

    fn on_agent_event(&mut self, ev: &AgentEvent) {
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

    fn finish(&mut self, fin: &Finished, cx: &mut Ctx) {
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

    fn style(&self, kind: LineKind, cx: &Ctx) -> Style {
        let t = &cx.theme;
        match kind {
            LineKind::User => t.accent.add_modifier(Modifier::BOLD),
            LineKind::Assistant => t.base,
            LineKind::Call => t.key,
            LineKind::ResultOk => t.success,
            LineKind::ResultErr => t.error,
            LineKind::ResultBody => t.muted,
            LineKind::Offload => t.warn,
            LineKind::Error => t.error.add_modifier(Modifier::BOLD),
            LineKind::Info => t.muted,
        }
    }

    fn render_side(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let w = area.width as usize;
        let buf = f.buffer_mut();
        buf.set_stringn(area.x, area.y, "Demos", w, t.title);
        let list_h = (self.demos.len() as u16).min(area.height.saturating_sub(1));
        let list = Rect::new(area.x, area.y + 1, area.width, list_h);
        self.side_list = list;
        let demos = &self.demos;
        let selected = self.cursor.selected;
        render_rows(
            buf,
            list,
            &mut self.cursor,
            demos.len(),
            focused && !self.typing,
            t.selection,
            |i| {
                let mark = if i == selected { "▸" } else { " " };
                Line::from(Span::styled(format!("{mark} {}", demos[i].0), t.base))
            },
        );
        let mut rows: Vec<(String, Style)> = Vec::new();
        if let Some((_, d)) = self.demos.get(self.cursor.selected) {
            for l in wrap_text(d, w) {
                rows.push((l, t.muted));
            }
        }
        rows.push((String::new(), t.base));
        rows.push((
            format!("step mode {}", if self.stepping { "on" } else { "off" }),
            if self.stepping { t.warn } else { t.muted },
        ));
        match &self.model {
            Some(m) => {
                rows.push((format!("model {}", m.model), t.base));
                rows.push((m.url.clone(), t.muted));
            }
            None => rows.push(("model: none (m sets one)".into(), t.muted)),
        }
        rows.push((String::new(), t.base));
        if let Some(s) = self.session() {
            rows.push(("session".into(), t.muted));
            rows.push((s.to_string(), t.base));
        }
        if self.run.is_some() || self.last.is_some() {
            rows.push((
                format!(
                    "{} tool calls · {} offloads",
                    self.tool_calls, self.offloads
                ),
                t.base,
            ));
            rows.push((
                format!(
                    "{} compressions · {} errors",
                    self.compressions, self.errors
                ),
                if self.errors > 0 { t.error } else { t.base },
            ));
        }
        if let Some((_, o)) = &self.last
            && self.run.is_none()
        {
            rows.push((format!("last run: {o}"), t.muted));
        }
        let top = list.y + list.height + 1;
        for (i, (s, st)) in rows.iter().enumerate() {
            let y = top + i as u16;
            if y >= area.y + area.height {
                break;
            }
            let s = text::truncate(&text::display(s), w).into_owned();
            buf.set_string(area.x, y, s, *st);
        }
    }

    fn render_conversation(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        self.view_height = area.height as usize;
        if area.height == 0 || area.width == 0 {
            return;
        }
        if self.lines.is_empty() && self.partial.is_none() {
            let msg = if cx.can("agent.run") {
                "enter runs a demo · t step mode · m, i a model"
            } else {
                "read-only mode: the agent cannot run"
            };
            placeholder(f, area, msg, cx.theme.muted);
            return;
        }
        let w = area.width as usize;
        let h = area.height as usize;
        if self.follow {
            self.back = 0;
        }
        // Wrap from the end only as far as the screen (plus the scroll
        // offset) reaches: the ring may hold thousands of lines.
        let want = h + self.back;
        let mut rows: Vec<(String, Style)> = Vec::new();
        for l in self.partial.iter().chain(self.lines.iter().rev()) {
            let st = self.style(l.kind, cx);
            let wrapped = wrap_text(&l.text, w);
            for r in wrapped.into_iter().rev() {
                rows.push((r, st));
            }
            if rows.len() >= want {
                break;
            }
        }
        self.back = self.back.min(rows.len().saturating_sub(h));
        let end = self.back;
        let start = (end + h).min(rows.len());
        let buf = f.buffer_mut();
        for (n, (s, st)) in rows[end..start].iter().rev().enumerate() {
            buf.set_stringn(area.x, area.y + n as u16, s, w, *st);
        }
    }
}

/// Rows of raw text `s` for `w` columns: each of its own lines wraps on
/// its own (a line break is never shown as `␊` inside a paragraph), and
/// the rows a line wraps into keep its indentation.
fn wrap_text(s: &str, w: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in s.split('\n') {
        let line = text::display(line.strip_suffix('\r').unwrap_or(line)).into_owned();
        let body = line.trim_start_matches(' ');
        let indent = (line.len() - body.len()).min(w / 2);
        if indent == 0 {
            out.extend(wrap(&line, w));
            continue;
        }
        let pad = " ".repeat(indent);
        out.extend(
            wrap(body, w - indent)
                .into_iter()
                .map(|r| format!("{pad}{r}")),
        );
    }
    out
}

/// Cuts `s` (already sanitised) into rows of at most `w` columns,
/// breaking after spaces where it can and inside a word only when the
/// word alone is wider than a row.
fn wrap(s: &str, w: usize) -> Vec<String> {
    use unicode_width::UnicodeWidthChar;
    if w == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cols = 0;
    // Words keep their trailing spaces, so rows rejoin to the input.
    for word in s.split_inclusive(' ') {
        let ww: usize = word.chars().map(|c| c.width().unwrap_or(0)).sum();
        let bare = word.trim_end_matches(' ');
        let bw: usize = bare.chars().map(|c| c.width().unwrap_or(0)).sum();
        if cols + bw > w && !cur.is_empty() && bw <= w {
            out.push(std::mem::take(&mut cur));
            cols = 0;
        }
        if cols + ww <= w || bw > w {
            for c in word.chars() {
                let cw = c.width().unwrap_or(0);
                if cols + cw > w && !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    cols = 0;
                }
                cur.push(c);
                cols += cw;
            }
        } else {
            // The word fits; its trailing spaces are cut at the edge.
            cur.push_str(bare);
            cols += bw;
            for _ in 0..(w - cols).min(ww - bw) {
                cur.push(' ');
                cols += 1;
            }
        }
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    out
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
            "session {session}: {} tool call(s) journalled · {} offload(s) · context.jsonl {}",
            d.journal.entries.len(),
            d.summary.offloads,
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

impl Pane for AgentPane {
    fn id(&self) -> &'static str {
        ID
    }

    fn on_task(&mut self, task: TaskResult, cx: &mut Ctx) {
        deliver(self, task, cx);
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    fn title(&self) -> String {
        "Agent".into()
    }

    fn context(&self) -> &'static str {
        if self.typing { PROMPT } else { ID }
    }

    fn text_input_active(&self) -> bool {
        self.typing
    }

    fn blur(&mut self) {
        self.typing = false;
    }

    fn on_key(&mut self, key: &KeyEvent, _cx: &mut Ctx) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            // Left to the key map: send, new line, leave, stop, quit, help.
            KeyCode::Enter | KeyCode::Esc | KeyCode::Tab | KeyCode::BackTab => false,
            KeyCode::F(_) | KeyCode::PageUp | KeyCode::PageDown => false,
            KeyCode::Char('c' | 'q' | 'j' | 'z' | 'l') if ctrl => false,
            _ => {
                self.prompt.input(*key);
                true
            }
        }
    }

    fn on_paste(&mut self, s: &str, _cx: &mut Ctx) -> bool {
        if !self.typing {
            return false;
        }
        self.prompt.insert_str(clean_paste(s));
        true
    }

    fn busy(&self) -> Option<String> {
        self.run.as_ref().map(|_| "an agent is running".to_string())
    }

    fn shutdown(&mut self, _cx: &mut Ctx) {
        if let Some(r) = &mut self.run {
            r.stop_requested = true;
            if let Some(h) = &r.handle {
                h.stop();
            }
        }
    }

    fn on_action(&mut self, action: &'static str, cx: &mut Ctx) -> bool {
        let verb = action.strip_prefix("agent.").unwrap_or(action);
        match verb {
            "down" | "up" | "top" | "bottom" => {
                crate::tui::pane::navigate(&mut self.cursor, verb, self.demos.len());
            }
            "page_down" => {
                self.back = self.back.saturating_sub(self.view_height.max(1));
                self.follow = self.back == 0;
            }
            "page_up" => {
                self.back += self.view_height.max(1);
                self.follow = false;
            }
            "run" => self.run_demo(cx),
            "step_mode" => {
                let on = !self.stepping;
                self.set_stepping(on, cx);
            }
            "step" => match self.run.as_ref().and_then(|r| r.handle.as_ref()) {
                Some(h) if h.step_control().is_stepping() => h.step_control().step(),
                _ => cx.toast(
                    Level::Info,
                    "nothing waits for a step (t turns step mode on)",
                ),
            },
            "continue" => {
                if self.stepping {
                    self.set_stepping(false, cx);
                }
            }
            "stop" | "stop_typing" => {
                if self.run.is_some() {
                    self.stop(cx);
                } else if self.typing {
                    self.prompt = new_prompt();
                }
            }
            "prompt" => {
                if self.model.is_none() {
                    cx.toast(Level::Warn, "set a model first: m, or :agent URL MODEL");
                    self.ask_model(cx);
                    self.type_after_model = true;
                } else {
                    self.typing = true;
                }
            }
            "model" => {
                self.type_after_model = false;
                self.ask_model(cx)
            }
            "clear" => {
                self.lines.clear();
                self.partial = None;
                self.partial_chars = 0;
                self.back = 0;
                self.follow = true;
            }
            "close" => cx.effect(Effect::CloseModal),
            "send" => {
                let text_ = self.prompt.lines().join("\n");
                if text_.trim().is_empty() {
                    return true;
                }
                if self.run.is_some() {
                    cx.toast(Level::Warn, "the agent is running: x stops it");
                    return true;
                }
                self.prompt = new_prompt();
                self.run_prompt(text_, cx);
            }
            "newline" => self.prompt.insert_newline(),
            "leave" => self.typing = false,
            _ => return false,
        }
        true
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        if let PaneEvent::Input {
            tag: DialogTag::AgentModel,
            text: t,
        } = ev
        {
            if t.trim().is_empty() {
                self.model = None;
                cx.toast(Level::Info, "model cleared");
                return;
            }
            match ModelSetting::parse(t) {
                Ok(m) => {
                    let then = if self.type_after_model {
                        "type a message"
                    } else {
                        "i types a message"
                    };
                    cx.toast(
                        Level::Info,
                        format!("model {} at {} · {then}", m.model, m.url),
                    );
                    self.model = Some(m);
                    self.typing = std::mem::take(&mut self.type_after_model);
                }
                Err(e) => {
                    cx.toast(Level::Error, e);
                    // Back to the dialog with the text, to fix it.
                    self.ask_model_with(cx, t.trim().to_string());
                }
            }
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, area: Rect, cx: &mut Ctx) -> bool {
        use ratatui::crossterm::event::{MouseButton, MouseEventKind};
        if ev.column < self.side_list.x + self.side_list.width
            && self.side_list.width > 0
            && ev.column >= self.side_list.x
        {
            return match list_mouse(&mut self.cursor, ev, self.side_list, self.demos.len()) {
                ListMouse::Clicked(_, true) => self.on_action("agent.run", cx),
                ListMouse::None => false,
                _ => true,
            };
        }
        match ev.kind {
            MouseEventKind::ScrollUp => {
                self.back += 3;
                self.follow = false;
                true
            }
            MouseEventKind::ScrollDown => {
                self.back = self.back.saturating_sub(3);
                self.follow = self.back == 0;
                true
            }
            MouseEventKind::Down(MouseButton::Left) if self.model.is_some() => {
                if ev.row + 4 >= area.y + area.height {
                    self.typing = true;
                }
                true
            }
            _ => false,
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let mut note = String::new();
        if let Some(r) = &self.run {
            note = format!(
                "{} · running{}",
                r.label,
                if self.stepping { " · step mode" } else { "" }
            );
        } else if let Some((name, _)) = self.demos.get(self.cursor.selected) {
            // Also the only sign of the selection when the demo column
            // does not fit.
            note = format!(
                "demo {name}{}",
                if self.stepping { " · step mode" } else { "" }
            );
        }
        if self.lines.dropped() > 0 {
            note = format!("{note} · {} older lines dropped", self.lines.dropped())
                .trim_start_matches(" · ")
                .to_string();
        }
        let block = cx.block_for(area, "Agent", &note, focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        if inner.height == 0 || inner.width == 0 {
            return;
        }
        let side = inner.width >= 60 && inner.height >= 6;
        let main = if side {
            let s = Rect::new(inner.x, inner.y, SIDE_WIDTH, inner.height);
            self.render_side(f, s, focused, cx);
            for y in inner.y..inner.y + inner.height {
                f.buffer_mut()
                    .set_string(inner.x + SIDE_WIDTH, y, "│", t.border);
            }
            Rect::new(
                inner.x + SIDE_WIDTH + 2,
                inner.y,
                inner.width - SIDE_WIDTH - 2,
                inner.height,
            )
        } else {
            inner
        };
        // Bottom rows: the step bar (while a step waits) and the prompt.
        let waiting = self.waiting_for();
        let prompt_h = if self.typing {
            (self.prompt.lines().len() as u16).clamp(1, 5)
        } else {
            0
        };
        let bar_h = u16::from(waiting.is_some());
        let sep_h = 1;
        let reserved = (prompt_h + bar_h + sep_h).min(main.height.saturating_sub(1));
        let conv = Rect::new(main.x, main.y, main.width, main.height - reserved);
        self.render_conversation(f, conv, cx);
        let mut y = conv.y + conv.height;
        let bottom = main.y + main.height;
        let w = main.width as usize;
        if let Some(next) = &waiting
            && y < bottom
        {
            let bar = format!("⏸ next: {next} · space step · c continue · x stop");
            let bar = text::truncate(&text::display(&bar), w).into_owned();
            f.buffer_mut()
                .set_string(main.x, y, bar, t.warn.add_modifier(Modifier::BOLD));
            y += 1;
        }
        if y < bottom {
            let label = if self.typing && focused {
                "─ prompt ".to_string()
            } else if self.model.is_some() {
                "─ i to prompt the model ".to_string()
            } else {
                "─ m sets a model URL to prompt one ".to_string()
            };
            let line = format!("{label}{}", "─".repeat(w));
            f.buffer_mut().set_stringn(
                main.x,
                y,
                line,
                w,
                if focused { t.border_focused } else { t.border },
            );
            y += 1;
        }
        if self.typing && y < bottom {
            let pa = Rect::new(main.x, y, main.width, (bottom - y).min(prompt_h));
            let mut st = t.base;
            if !focused {
                st = st.add_modifier(Modifier::DIM);
            }
            self.prompt.set_style(st);
            self.prompt.set_placeholder_style(t.muted);
            self.prompt.set_cursor_style(if focused {
                t.base.add_modifier(Modifier::REVERSED)
            } else {
                st
            });
            f.render_widget(&self.prompt, pa);
        }
    }
}

impl TaskPane for AgentPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Setup(id, lines) if self.run.as_ref().is_some_and(|r| r.id == *id) => {
                for l in lines {
                    self.push(LineKind::Info, &format!("setup: {l}"));
                }
            }
            Msg::Started(id, handle) => {
                let Some(run) = self.run.as_mut().filter(|r| r.id == *id) else {
                    handle.stop();
                    return;
                };
                if run.stop_requested {
                    handle.stop();
                }
                // Step mode may have been switched while it opened.
                handle.step_control().set_stepping(self.stepping);
                run.handle = Some(handle.clone());
                let s = run.session.clone();
                if s != cx.session {
                    cx.effect(Effect::SelectSession(s));
                }
            }
            Msg::Events(id, batch) if self.run.as_ref().is_some_and(|r| r.id == *id) => {
                for r in batch {
                    match r {
                        AgentReceived::Event(env) => self.on_agent_event(&env.event),
                        AgentReceived::Missed(n) => self.push(
                            LineKind::Info,
                            &format!("({n} agent events were dropped: the pane fell behind)"),
                        ),
                    }
                }
            }
            Msg::Done(id, fin) if self.run.as_ref().is_some_and(|r| r.id == *id) => {
                self.finish(fin, cx);
            }
            _ => {}
        }
    }
}

impl AgentPane {
    fn ask_model(&mut self, cx: &mut Ctx) {
        // No half value to accept by mistake: the current setting, else
        // an empty field under a title with a complete example.
        let initial = self
            .model
            .as_ref()
            .map(|m| format!("{} {}", m.url, m.model))
            .unwrap_or_default();
        self.ask_model_with(cx, initial);
    }

    fn ask_model_with(&mut self, cx: &mut Ctx, initial: String) {
        cx.effect(Effect::Prompt {
            pane: ID,
            title: MODEL_TITLE.into(),
            initial,
            tag: DialogTag::AgentModel,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_settings_parse_or_say_why_not() {
        let m = ModelSetting::parse(" http://127.0.0.1:8080/v1   qwen ").unwrap();
        assert_eq!(m.url, "http://127.0.0.1:8080/v1");
        assert_eq!(m.model, "qwen");
        assert!(
            ModelSetting::parse("http://x")
                .unwrap_err()
                .contains("URL MODEL")
        );
        assert!(
            ModelSetting::parse("ftp://x m")
                .unwrap_err()
                .contains("http://")
        );
    }

    #[test]
    fn deltas_stream_into_one_line_and_memory_is_bounded() {
        let cfg = TuiConfig {
            output_buffer_lines: 100,
            ..Default::default()
        };
        let mut p = AgentPane::new(&cfg);
        p.push_delta("Hello");
        p.push_delta(", world\nsecond");
        p.push_delta(" line");
        assert_eq!(p.texts(), ["Hello, world", "second line"]);
        p.push_delta("\n\npara");
        assert_eq!(p.texts(), ["Hello, world", "second line", "", "para"]);
        p.push(LineKind::Info, "x");
        p.push_delta("new");
        assert_eq!(p.texts().last().unwrap(), "new");
        for i in 0..1000 {
            p.push_delta(&format!("{i}\n"));
        }
        assert_eq!(p.lines().len(), 100);
        let long = "y".repeat(MAX_LINE_CHARS * 3);
        p.push(LineKind::Info, "");
        p.push_delta(&long);
        p.push_delta(&long);
        p.push(LineKind::Info, "");
        assert!(
            p.lines()
                .iter()
                .all(|l| l.text.chars().count() <= MAX_LINE_CHARS)
        );
        assert_eq!(
            p.lines().iter().filter(|l| l.text.starts_with('y')).count(),
            6
        );
    }

    #[test]
    fn wrapped_text_keeps_line_breaks_and_indentation() {
        assert_eq!(
            wrap_text("first line\r\n  an indented one that wraps", 14),
            ["first line", "  an indented ", "  one that ", "  wraps"]
        );
        assert_eq!(wrap_text("a\n\nb", 10), ["a", "", "b"]);
        assert!(!wrap_text("x\ny", 10).concat().contains('␊'));
    }

    #[test]
    fn wrap_cuts_by_columns() {
        assert_eq!(wrap("abcdef", 4), ["abcd", "ef"]);
        assert_eq!(wrap("ab cd ef", 5), ["ab cd", "ef"]);
        assert_eq!(wrap("ab cdefgh", 4), ["ab c", "defg", "h"]);
        assert_eq!(wrap("a  b", 2), ["a ", "b"]);
        assert_eq!(wrap("", 4), [""]);
        assert_eq!(wrap("日本語", 4), ["日本", "語"]);
        assert!(wrap("x", 0).is_empty());
    }
}
