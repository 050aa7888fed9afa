//! What flows through the TUI: messages into the event loop, events
//! delivered to panes, and effects panes ask the app for.
//!
//! The render loop never waits on I/O: engine work runs on tokio tasks
//! (spawned through `Ctx::spawn` in `tui::pane`) that report back as
//! [`AppMsg`]s on one bounded channel; the loop drains what is pending,
//! then draws once.

use std::any::Any;
use std::time::SystemTime;

use ratatui::crossterm::event::Event as TermEvent;

use crate::backend::FileChange;
use crate::engine::events::Envelope;

/// Severity of a log line or toast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Debug detail (tracing `TRACE` folds in here too).
    Debug,
    /// Information.
    Info,
    /// Something to look at.
    Warn,
    /// Something failed.
    Error,
}

impl Level {
    /// Lower-case name (`error`, `warn`, `info`, `debug`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }

    /// Parses a level name as the engine and tracing write it.
    pub fn parse(s: &str) -> Level {
        match s.trim().to_ascii_lowercase().as_str() {
            "error" | "err" => Level::Error,
            "warn" | "warning" => Level::Warn,
            "info" => Level::Info,
            _ => Level::Debug,
        }
    }
}

/// One line of the Logs pane.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// When it happened.
    pub at: SystemTime,
    /// Severity.
    pub level: Level,
    /// Where it came from (`bus:tool`, `tracing`, `tui`, ...).
    pub source: String,
    /// The text (one line; shown through the display sanitiser).
    pub message: String,
}

impl LogLine {
    /// A line stamped now.
    pub fn now(level: Level, source: impl Into<String>, message: impl Into<String>) -> Self {
        LogLine {
            at: SystemTime::now(),
            level,
            source: source.into(),
            message: message.into(),
        }
    }
}

/// A message into the event loop.
pub enum AppMsg {
    /// A terminal event (key, mouse, paste, resize).
    Input(TermEvent),
    /// The result of a task a pane spawned, for that pane only.
    Task(TaskResult),
    /// A change seen by the workspace watch.
    File {
        /// The watch that saw it (the generation of the Files pane's `WatchHandle`):
        /// changes of a workspace the app has left are dropped.
        generation: u64,
        /// The change.
        change: FileChange,
    },
    /// A line written to stderr (tracing output) while the TUI runs.
    Stderr(String),
    /// Text a native clipboard tool could not take: write it as OSC 52.
    Osc52(String),
    /// A message for the user.
    Toast(Level, String),
}

impl std::fmt::Debug for AppMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppMsg::Input(e) => write!(f, "Input({e:?})"),
            AppMsg::Task(t) => write!(f, "Task({}, generation {})", t.pane, t.generation),
            AppMsg::File { generation, change } => write!(f, "File({generation}, {change:?})"),
            AppMsg::Stderr(l) => write!(f, "Stderr({l:?})"),
            AppMsg::Osc52(_) => f.write_str("Osc52"),
            AppMsg::Toast(l, m) => write!(f, "Toast({l:?}, {m:?})"),
        }
    }
}

/// The result of a task a pane spawned (`Ctx::spawn`, a `TaskSender`),
/// on its way back to that pane.
///
/// It carries the workspace generation it was started under: the app
/// drops results of an older generation (a slow listing of the workspace
/// `:ws` just left must not land in the new one's panes). The payload is
/// the pane's own message type (`TaskPane::Msg`); the spawn side checks
/// the type at compile time, so the one downcast in
/// [`TaskResult::take`] cannot miss, and it moves the payload out.
pub struct TaskResult {
    /// The pane it goes to.
    pub pane: &'static str,
    /// The workspace generation the task was started under.
    pub generation: u64,
    payload: Box<dyn Any + Send>,
}

impl TaskResult {
    /// A result for `pane` from generation `generation`.
    pub fn new<M: Send + 'static>(pane: &'static str, generation: u64, msg: M) -> Self {
        TaskResult {
            pane,
            generation,
            payload: Box::new(msg),
        }
    }

    /// The payload, moved out, if it is an `M`.
    pub fn take<M: 'static>(self) -> Option<M> {
        self.payload.downcast::<M>().ok().map(|b| *b)
    }
}

/// What a pane is told about.
pub enum PaneEvent<'a> {
    /// An engine event from the workspace's bus.
    Engine(&'a Envelope),
    /// The bus dropped this many events for the TUI (it fell behind).
    Missed(u64),
    /// A file change from the watch.
    File(&'a FileChange),
    /// The user confirmed the dialog this pane opened with `tag`.
    Confirmed(DialogTag),
    /// The user submitted the input dialog this pane opened with `tag`.
    Input {
        /// The tag given with [`Effect::Prompt`].
        tag: DialogTag,
        /// What was typed (one line).
        text: String,
    },
    /// The selected session changed (read it from the context).
    SessionChanged,
    /// A line for the Logs pane.
    Log(&'a LogLine),
    /// Open a backend path (editor) or a `workspace:///` link (viewer).
    Open(&'a str),
    /// Show a document (viewer).
    Show(&'a Doc),
    /// Open a backend file at a 1-based line (viewer), returning to
    /// `back` when closed ([`Effect::OpenAt`]).
    OpenAt {
        /// Backend path.
        path: &'a str,
        /// 1-based line number.
        line: usize,
        /// Pane to focus again on close.
        back: Option<&'static str>,
    },
    /// About once a second, for time-based refreshes.
    Tick,
}

/// What a dialog was opened for: given with [`Effect::Confirm`] or
/// [`Effect::Prompt`] or [`Effect::Choose`] and handed back with the answer
/// ([`PaneEvent::Confirmed`], [`PaneEvent::Input`]) to the pane that
/// asked. One variant per question, carrying what the answer acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogTag {
    /// The app's "kill it and quit?".
    Quit,
    /// Agent: the `URL MODEL` setting (also `:agent URL MODEL`).
    AgentModel,
    /// Command: run this earlier command again.
    Rerun(String),
    /// Command: kill the running command.
    KillCommand,
    /// Editor: close without saving.
    DiscardEdits,
    /// Editor: the file changed on disk; overwrite it with the edits
    /// (one-key answer `o` of an [`Effect::Choose`]).
    SaveOverwrite,
    /// Editor: the file changed on disk; reload it, dropping the edits
    /// (one-key answer `r`).
    SaveReload,
    /// Files: upload a host file into this backend directory.
    Upload {
        /// Backend directory to upload into.
        dir: String,
    },
    /// Files: download this backend file to a host path.
    Download {
        /// Backend path.
        path: String,
    },
    /// Files: rename this backend path.
    Rename {
        /// Backend path.
        path: String,
    },
    /// Files: delete this backend path.
    Delete {
        /// Backend path.
        path: String,
    },
    /// Logs: filter by source.
    LogSource,
    /// Logs: save the shown lines to a host file.
    LogSave,
    /// MCP: add a server (a declaration line).
    McpAdd,
    /// MCP: call a tool with JSON arguments.
    McpCall {
        /// Qualified tool name (`server.tool`).
        tool: String,
    },
    /// MCP: remove a server.
    McpRemove {
        /// Server name.
        name: String,
    },
    /// Skills: add a skill from a host path.
    SkillAdd,
    /// Skills: remove a skill.
    SkillRemove {
        /// Skill name.
        name: String,
    },
    /// Workspaces: create a workspace.
    WorkspaceNew,
    /// Workspaces: destroy a workspace.
    WorkspaceDestroy {
        /// Workspace id.
        id: String,
    },
    /// Workspaces: close (suspend) a workspace.
    WorkspaceClose {
        /// Workspace id.
        id: String,
    },
    /// Workspaces: run the gc sweep for real (close what its dry run
    /// listed as idle past the TTL).
    WorkspaceGc,
}

/// A document for the full-screen viewer.
#[derive(Debug, Clone, Default)]
pub struct Doc {
    /// Title (a path or a name).
    pub title: String,
    /// Lines.
    pub lines: Vec<crate::tui::widgets::ansi::StyledLine>,
    /// `(line index, target)` of links the viewer can open
    /// (`workspace:///data/...`).
    pub links: Vec<(usize, String)>,
}

/// What a pane asks the app to do.
#[derive(Debug)]
pub enum Effect {
    /// Show a transient message (also logged).
    Toast(Level, String),
    /// Make this the selected session.
    SelectSession(String),
    /// Open a backend path in the editor.
    OpenEditor(String),
    /// Show a document full screen.
    OpenViewer(Doc),
    /// Open the target of a `workspace:///` link (or a backend path) in
    /// the viewer as metadata.
    OpenLink(String),
    /// Open a backend file in the viewer scrolled to a line, the line
    /// marked (a Grep hit); closing the viewer focuses `back` again.
    OpenAt {
        /// Backend path of the file.
        path: String,
        /// 1-based line number to show.
        line: usize,
        /// Pane to return to when the viewer closes (`None`: the layout).
        back: Option<&'static str>,
    },
    /// Close the full-screen pane (editor or viewer).
    CloseModal,
    /// Show a backend path in the Files tree: focus Files, expand (and
    /// list) the folders above it, select it (the finder's Enter).
    Reveal(String),
    /// Ask yes/no; on yes the pane gets [`PaneEvent::Confirmed`] with `tag`.
    Confirm {
        /// Pane to answer.
        pane: &'static str,
        /// The question.
        message: String,
        /// Returned on yes.
        tag: DialogTag,
    },
    /// Ask for a line of text; the pane gets [`PaneEvent::Input`].
    Prompt {
        /// Pane to answer.
        pane: &'static str,
        /// Dialog title.
        title: String,
        /// Initial text.
        initial: String,
        /// Returned with the text.
        tag: DialogTag,
    },
    /// Ask a question one key answers (no Enter, issue 22): the pane gets
    /// [`PaneEvent::Confirmed`] with the tag of the choice whose key was
    /// pressed; Esc cancels (and toasts `on_cancel` when given).
    Choose {
        /// Pane to answer.
        pane: &'static str,
        /// The question.
        message: String,
        /// The answers, each a key and what it does.
        choices: Vec<Choice>,
        /// Said when the user cancels with Esc.
        on_cancel: Option<String>,
    },
    /// Copy text to the clipboard.
    Copy(String),
    /// Move focus to a pane.
    Focus(&'static str),
    /// Add a line to the Logs pane.
    Log(LogLine),
    /// Leave the TUI for an interactive shell in the workspace; come back
    /// when it exits.
    Shell,
}

/// One answer of an [`Effect::Choose`] dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The key that answers (a lower-case letter; its upper case counts
    /// too).
    pub key: char,
    /// What it does, shown after the key (`overwrite`).
    pub label: &'static str,
    /// Handed back in [`PaneEvent::Confirmed`].
    pub tag: DialogTag,
}
