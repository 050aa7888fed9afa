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
//!   `output_buffer_lines` lines and `output_buffer_bytes` bytes (lines
//!   cut at 16 KiB).
//!
//! Files of the pane, one job each:
//! * `mod.rs`: the pane's types, settings and state accessors.
//! * [`conversation`]: the conversation lines (streaming, wrapping, drawing).
//! * [`run`]: starting, stepping and stopping a run, and the run task.
//! * [`pane`]: the `Pane` glue (keys, actions, events, mouse, render).

use std::collections::HashSet;
use std::time::Duration;

use crate::tui::widgets::prompt::PromptField;
use ratatui::layout::Rect;

use crate::agent::script::{self, Transcript};
use crate::agent::{AgentHandle, AgentReceived, FinishReason};
use crate::tui::config::TuiConfig;
use crate::tui::keymap::ActionSpec;
use crate::tui::widgets::list::ListCursor;
use crate::tui::widgets::ring::Ring;

mod conversation;
mod pane;
mod run;

/// Pane id (and keymap context outside the prompt).
pub const ID: &str = "agent";

/// Keymap context while the prompt has the keyboard.
pub const PROMPT: &str = "agent.prompt";

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum AgentAction in "agent";
    Run => act("agent.run", ID, "run demo", &["enter", "r"], true, true),
    StepMode => act("agent.step_mode", ID, "step mode on/off", &["t"], false, true),
    Step => act("agent.step", ID, "next step", &["space", "n"], false, true),
    Continue => act("agent.continue", ID, "continue (step mode off)", &["c"], false, true),
    Stop => act("agent.stop", ID, "stop", &["x", "ctrl-c"], false, true),
    Prompt => act("agent.prompt", ID, "prompt the model", &["i"], true, true),
    Model => act("agent.model", ID, "set model URL", &["m"], false, true),
    Clear => act("agent.clear", ID, "clear conversation", &["C"], false, false),
    Close => act("agent.close", ID, "close", &["esc"], false, true),
    Send => act("agent.send", PROMPT, "send", &["enter"], true, true),
    Newline => act("agent.newline", PROMPT, "new line", &["alt-enter", "shift-enter", "ctrl-j"], false, true),
    StopTyping => act("agent.stop_typing", PROMPT, "stop", &["ctrl-c"], false, false),
    Leave => act("agent.leave", PROMPT, "leave prompt", &["esc"], false, true),
}

/// Keys of the pane. List keys (`j`/`k`, `g`/`G`) move in the demo list;
/// page keys scroll the conversation (paging down to its end follows it
/// again).
pub const ACTIONS: &[ActionSpec] = AgentAction::TABLE;

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
    prompt: PromptField,
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

fn new_prompt() -> PromptField {
    PromptField::new("message to the model · enter sends · alt-enter new line")
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
            lines: Ring::with_budget(cfg.output_buffer_lines, cfg.output_buffer_bytes),
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
}
