//! The Command stream: a multi-line prompt that runs commands through the
//! Bash tool in the selected session, their output live, and the session's
//! past commands from the journal.
//!
//! * Output keeps SGR colours; every other escape or control sequence is
//!   swallowed ([`crate::tui::widgets::ansi`], C24). The engine still
//!   stores and offloads the raw bytes.
//! * Output lives in a ring of `output_buffer_lines` lines and
//!   `output_buffer_bytes` bytes: memory stays flat however much a command
//!   prints.
//! * Output reaches the pane through an [`OutputMerge`] per run, taken once
//!   a frame (at most `output_frame_bytes`, the newest): a flood costs the
//!   UI one merged chunk per frame, never one message per read, and keys
//!   are never queued behind output. What did not fit is counted and
//!   shown as a `… N skipped` line.
//! * Each session has its own ring: the pane, titled with the session,
//!   shows only what ran there; switching back shows the old output again,
//!   and a command still running in another session keeps writing to that
//!   session's ring.
//! * A paste goes into the prompt as text: newlines never submit, ESC is
//!   shown as `␛` (C23). Enter runs; Alt-Enter / Ctrl-J add a line.
//! * Commands get the Bash tool's largest timeout (`bash_max_timeout_ms`)
//!   rather than its 2-minute default, since a person is watching and can
//!   kill them (Ctrl-X, with a confirmation: the whole tree, and with a
//!   session shell the shell too).
//! * Commands run in the session's long-lived shell (issue 17 point 4,
//!   `engine::shell_session`): `cd`, `export` and functions carry over,
//!   and the title shows the shell's directory. `[tui]
//!   command_session_shell = false` gives each command a fresh shell.
//! * A running command takes input (point 3): Enter sends the prompt's
//!   line and a newline to its stdin, Ctrl-D closes it, Ctrl-C sends
//!   SIGINT to it (the shell's trap runs, as in a terminal), and Ctrl-T
//!   toggles raw mode, where every key goes to it as bytes. Its stdin is a
//!   pipe, not a terminal: programs that insist on a TTY want `!`.
//!
//! Files of the pane, one job each:
//! * `mod.rs`: the pane's types, settings and state accessors.
//! * [`output`]: the per-session output rings (feeding, parking, drawing).
//! * [`history`]: the prompt history and the journal's past commands.
//! * [`run`]: running a command through the Bash tool, its input and
//!   its result.
//! * [`keys`]: raw mode's key-to-bytes table.
//! * [`pane`]: the `Pane` glue (keys, actions, events, mouse, render).
//! * [`search`]: `/` and `?` in the output, as in the viewer.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::tui::widgets::prompt::PromptField;
use ratatui::layout::Rect;
use tokio_util::sync::CancellationToken;

use crate::engine::bus::OutputMerge;
use crate::engine::journal::JournalEntry;
use crate::engine::shell_session::InputMsg;
use crate::tui::config::TuiConfig;
use crate::tui::keymap::ActionSpec;
use crate::tui::widgets::ansi::{AnsiParser, StyledLine};
use crate::tui::widgets::list::ListCursor;
use crate::tui::widgets::ring::Ring;

mod history;
mod keys;
mod output;
mod pane;
mod run;
mod search;

pub use output::{PULL_FRAME_TIME, PULL_SLICE, Pull, STOPPED_TAIL_BYTES, exit_label};

/// Pane id (and keymap context outside the prompt).
pub const ID: &str = "command";

/// Keymap context while the prompt has the keyboard.
pub const PROMPT: &str = "command.prompt";

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum CommandAction in "command";
    Prompt => act("command.prompt", ID, "type a command", &["i", "enter"], false, true),
    History => act("command.history", ID, "past commands", &["h"], false, true),
    Rerun => act("command.rerun", ID, "re-run selected", &["r"], true, true),
    Interrupt => act("command.interrupt", ID, "interrupt (SIGINT)", &["ctrl-c"], false, true),
    Kill => act("command.kill", ID, "kill running tree", &["ctrl-x"], true, true),
    Raw => act("command.raw", ID, "raw keys to command", &["ctrl-t"], false, true),
    Follow => act("command.follow", ID, "follow / pause", &["f"], false, true),
    Copy => act("command.copy", ID, "copy last output", &["y"], false, false),
    Clear => act("command.clear", ID, "clear output", &["C"], false, false),
    // The viewer's search keys, in the output (issue 19), but `?` stays
    // help here: the pane users land in after `i` keeps that habit; `/`
    // then `N` searches upward, and `[tui.keys]` can bind this one.
    Search => act("command.search", ID, "search", &["/"], false, true),
    SearchBack => act("command.search_back", ID, "search output backward", &[], false, false),
    NextMatch => act("command.next_match", ID, "next match", &["n"], false, false),
    PrevMatch => act("command.prev_match", ID, "previous match", &["N"], false, false),
    Run => act("command.run", PROMPT, "run", &["enter"], true, true),
    Newline => act("command.newline", PROMPT, "new line", &["alt-enter", "shift-enter", "ctrl-j"], false, true),
    Leave => act("command.leave", PROMPT, "leave prompt", &["esc"], false, true),
    Eof => act("command.eof", PROMPT, "end of input", &["ctrl-d"], false, true),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = CommandAction::TABLE;

/// One line of the output buffer.
#[derive(Debug, Clone)]
pub struct OutLine {
    /// Which command printed it.
    pub run: u64,
    /// The text and styles.
    pub line: StyledLine,
}

struct Running {
    run: u64,
    /// The session it runs in: its output goes to that session's ring.
    session: String,
    /// The command line (the kill dialog names it).
    command: String,
    call_id: String,
    started: Instant,
    cancel: CancellationToken,
    out: AnsiParser,
    err: AnsiParser,
    /// Output not yet taken by the pane (the forwarding task fills it).
    merge: Arc<Mutex<OutputMerge>>,
    /// Set when the forwarding task has told the pane about new output
    /// it has not taken yet: at most one message in flight per run.
    woken: Arc<AtomicBool>,
    /// The last frame ran out of time with output left in `merge`.
    deferred: bool,
    /// The user asked it to stop (Ctrl-C, Ctrl-X): its end shows only the
    /// newest output ([`output::Pull::Tail`]) so the status is not late.
    stopping: bool,
}

pub(crate) enum Msg {
    /// New output waits in the run's merge (taken when drawn).
    Output,
    /// The run's processes are gone (call id); its tool result is still
    /// being written. A run the user stopped shows it at once.
    Ended(String, crate::engine::tools::ProcessEnded),
    Finished {
        call_id: String,
        exit_code: Option<i32>,
        state: String,
        timed_out: bool,
        /// The one duration of the call (the tool's own clock).
        duration_ms: Option<u64>,
        error: Option<String>,
        /// The session shell's notice (a replaced shell, lost state).
        notice: Option<String>,
    },
    Journal(String, Result<Vec<JournalEntry>, String>),
}

/// The Command pane.
pub struct CommandPane {
    prompt: PromptField,
    typing: bool,
    /// Output of the session shown ([`Self::output_session`]).
    output: Ring<OutLine>,
    /// The session whose output `output` holds.
    output_session: String,
    /// Output rings of the other sessions, set aside on a switch.
    parked: std::collections::HashMap<String, Ring<OutLine>>,
    follow: bool,
    /// Lines up from the bottom when not following.
    back: usize,
    running: Option<Running>,
    runs: u64,
    history: Vec<String>,
    hist_pos: Option<usize>,
    draft: Vec<String>,
    max_history: usize,
    past: Vec<JournalEntry>,
    show_past: bool,
    past_cursor: ListCursor,
    out_height: usize,
    list_area: Rect,
    sent: Vec<String>,
    /// Run in the session's shell (`[tui] command_session_shell`).
    session_shell: bool,
    /// Raw mode: every key goes to the running command as bytes.
    raw: bool,
    /// Lines, end of file and Ctrl-C for the running command.
    input: Option<tokio::sync::mpsc::Sender<InputMsg>>,
    /// Byte budget of each output ring.
    budget_bytes: usize,
    /// Newest output bytes taken per frame.
    frame_bytes: usize,
    /// Output bytes of the current or last run skipped because they came
    /// faster than frames took them (shown in the title).
    skipped: u64,
    /// The `/` search of the output (typed or applied).
    search: crate::tui::widgets::search::Search,
    /// Ring sequence number of the output line the search found.
    mark: Option<u64>,
    /// Output bytes parsed from the merges since the pane was made
    /// ([`CommandPane::parsed_bytes`]).
    parsed: u64,
}

fn new_prompt() -> PromptField {
    PromptField::new("type a command · enter runs · alt-enter new line")
}

impl CommandPane {
    /// A pane with buffers sized from the config.
    pub fn new(cfg: &TuiConfig) -> Self {
        CommandPane {
            prompt: new_prompt(),
            // The keyboard starts on the Files list unless the config asks
            // for the prompt (issue 22: stray `j`/`k` ran as commands).
            typing: cfg.start_in_prompt,
            output: Ring::with_budget(cfg.output_buffer_lines, cfg.output_buffer_bytes),
            output_session: String::new(),
            parked: std::collections::HashMap::new(),
            follow: true,
            back: 0,
            running: None,
            runs: 0,
            history: Vec::new(),
            hist_pos: None,
            draft: Vec::new(),
            max_history: cfg.prompt_history.max(1),
            past: Vec::new(),
            show_past: false,
            past_cursor: ListCursor::default(),
            out_height: 10,
            list_area: Rect::default(),
            sent: Vec::new(),
            session_shell: cfg.command_session_shell,
            raw: false,
            input: None,
            budget_bytes: cfg.output_buffer_bytes,
            frame_bytes: cfg.output_frame_bytes,
            skipped: 0,
            search: Default::default(),
            mark: None,
            parsed: 0,
        }
    }

    /// The prompt's lines (tests).
    pub fn prompt_lines(&self) -> &[String] {
        self.prompt.lines()
    }

    /// The prompt's cursor as (row, column) (tests).
    pub fn prompt_cursor(&self) -> (usize, usize) {
        self.prompt.cursor()
    }

    /// Command lines sent to the Bash tool so far (tests).
    pub fn sent(&self) -> &[String] {
        &self.sent
    }

    /// The output buffer.
    pub fn output(&self) -> &Ring<OutLine> {
        &self.output
    }

    /// The session shell's directory, when it has one.
    fn shell_cwd(&self, cx: &crate::tui::pane::Ctx) -> Option<String> {
        cx.ws.shells().peek(&cx.session)?.cwd()
    }

    /// Whether raw mode is on (tests).
    pub fn is_raw(&self) -> bool {
        self.raw
    }

    /// Output bytes of the current or last run skipped because they came
    /// faster than the frames took them.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Whether a command is running.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }
}
