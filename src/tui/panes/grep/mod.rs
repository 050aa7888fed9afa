//! The Grep pane: searches file contents of the workspace with the
//! engine's Grep tool (in-process ripgrep crates on local and bubblewrap,
//! `rg` in the sandbox elsewhere) and lists the matching lines, the
//! matches highlighted; Enter opens a hit in the viewer at its line.
//!
//! Opened full screen by `ctrl-f` or `:grep PATTERN [PATH] [--glob G]`.
//! A search runs on a tokio task, never on the UI thread; a new query
//! cancels the one in flight (its result is dropped by sequence number).
//! Limits: the tool's output is sorted by path, so hits arrive when the
//! search ends (not one by one); at most [`query::MAX_HITS`] lines and
//! [`query::MAX_HIT_BYTES`] bytes are kept, and the pane says when more
//! exist or were dropped.

use std::time::SystemTime;

use grep_regex::RegexMatcher;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use ratatui::layout::Rect;
use tokio_util::sync::CancellationToken;

use crate::engine::tools::grep::Grep;
use crate::engine::tools::{BashOptions, Tool, ToolContext, ToolState};
use crate::tui::action::{Effect, Level};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{Ctx, ListMouse, Nav, Pane, TaskPane, list_mouse, nav};
use crate::tui::widgets::line::LineEdit;
use crate::tui::widgets::list::ListCursor;

pub mod query;
mod render;

pub use query::{GrepQuery, Hit, parse_command};

/// Pane id.
pub const ID: &str = "grep";

crate::pane_action_enum! {
    /// An action of the Grep pane (an entry of [`ACTIONS`]).
    pub(crate) enum GrepAction in "grep";
    Query => act("grep.query", ID, "edit the pattern", &["/", "i"], false, true),
    Open => act("grep.open", ID, "open hit in the viewer", &["enter"], false, true),
    Edit => act("grep.edit", ID, "open hit in the editor", &["e"], false, false),
    Next => act("grep.next", ID, "next hit", &["n"], false, true),
    Prev => act("grep.prev", ID, "previous hit", &["N"], false, false),
    Case => act("grep.case", ID, "toggle ignore case", &["alt-c"], false, true),
    Literal => act("grep.literal", ID, "toggle regex / literal", &["alt-r"], false, true),
    Hidden => act("grep.hidden", ID, "toggle hidden files", &["alt-h"], false, true),
    Cancel => act("grep.cancel", ID, "stop the search", &["ctrl-c"], false, false),
    Copy => act("grep.copy", ID, "copy path:line", &["y"], false, false),
    Back => act("grep.back", ID, "close", &["esc", "q"], false, true),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = GrepAction::TABLE;

/// Where the last search stands.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Nothing searched yet.
    Idle,
    /// In flight since `started` (the app's clock).
    Running { started: SystemTime },
    /// Finished in `ms`.
    Done {
        ms: u64,
        more: bool,
        dropped: usize,
        note: Option<String>,
    },
    /// Stopped by the user.
    Stopped,
    /// The tool failed (bad regex, path not found, timeout).
    Failed(String),
}

/// The result of one search task.
pub(crate) struct Finished {
    seq: u64,
    outcome: Result<query::Parsed, (ToolState, String)>,
}

/// The Grep pane.
pub struct GrepPane {
    query: GrepQuery,
    input: LineEdit,
    editing: bool,
    hits: Vec<Hit>,
    cursor: ListCursor,
    state: State,
    seq: u64,
    cancel: Option<CancellationToken>,
    highlighter: Option<RegexMatcher>,
    /// The list's last drawn rect (mouse).
    list_area: Rect,
    /// Where the terminal cursor goes while typing (set by render).
    caret: Option<(u16, u16)>,
}

impl Default for GrepPane {
    fn default() -> Self {
        Self::new()
    }
}

impl GrepPane {
    /// An empty pane, waiting for a pattern.
    pub fn new() -> Self {
        GrepPane {
            query: GrepQuery::default(),
            input: LineEdit::default(),
            editing: true,
            hits: Vec::new(),
            cursor: ListCursor::default(),
            state: State::Idle,
            seq: 0,
            cancel: None,
            highlighter: None,
            list_area: Rect::default(),
            caret: None,
        }
    }

    /// The hits shown (tests).
    pub fn hits(&self) -> &[Hit] {
        &self.hits
    }

    /// The query of the last search (tests).
    pub fn query(&self) -> &GrepQuery {
        &self.query
    }

    /// The selected hit's index (tests).
    pub fn selected(&self) -> usize {
        self.cursor.selected
    }

    /// Whether a search is in flight.
    pub fn running(&self) -> bool {
        matches!(self.state, State::Running { .. })
    }

    /// `:grep ARGS`: parses and runs; an empty `ARGS` only opens the pane
    /// for typing. A bad command is a toast and changes nothing.
    pub fn command(&mut self, args: &str, cx: &mut Ctx) {
        if args.trim().is_empty() {
            self.editing = true;
            return;
        }
        match parse_command(args) {
            Ok(q) => {
                self.input = LineEdit::new(q.pattern.clone());
                self.query = q;
                self.editing = false;
                self.search(cx);
            }
            Err(e) => cx.toast(Level::Warn, e),
        }
    }

    /// Opens the pane from its key: typing a pattern when none was
    /// searched yet.
    pub fn opened(&mut self) {
        if self.query.pattern.is_empty() {
            self.editing = true;
        }
    }

    /// Runs [`GrepPane::query`], cancelling the search in flight.
    fn search(&mut self, cx: &mut Ctx) {
        if let Some(c) = self.cancel.take() {
            c.cancel();
        }
        self.hits.clear();
        self.cursor = ListCursor::default();
        if self.query.pattern.is_empty() {
            self.state = State::Idle;
            return;
        }
        cx.remember_search(self.query.command_line());
        self.seq += 1;
        let seq = self.seq;
        let token = CancellationToken::new();
        self.cancel = Some(token.clone());
        self.highlighter = self.query.highlighter();
        self.state = State::Running {
            started: (cx.clock)(),
        };
        let ws = cx.ws.clone();
        let args = self.query.tool_args();
        let single = match &self.query.path {
            Some(p) => crate::backend::path::join(ws.layout().workdir(), p),
            None => String::new(),
        };
        cx.spawn::<GrepPane>(async move {
            let ctx = ToolContext {
                env: ws.tool_env(),
                agent: "",
                session: "",
                call_id: "tui-grep",
                cancel: token,
                output: None,
                bash: BashOptions::default(),
            };
            let r = Grep.call(&ctx, args).await;
            let text = r.text();
            let outcome = match r.state {
                ToolState::Success => Ok(query::parse_output(&text, &single)),
                s => Err((s, text)),
            };
            Finished { seq, outcome }
        });
    }

    /// Moves to the next (`dir` = 1) or previous hit, wrapping around.
    fn step_hit(&mut self, dir: isize) {
        let n = self.hits.len();
        if n > 0 {
            let i = self.cursor.selected as isize + dir;
            self.cursor.selected = i.rem_euclid(n as isize) as usize;
        }
    }

    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(crate) fn act(&mut self, a: GrepAction, cx: &mut Ctx) -> bool {
        let hit = self.hits.get(self.cursor.selected).cloned();
        match a {
            GrepAction::Nav(v) => nav(&mut self.cursor, v, self.hits.len()),
            GrepAction::Query => self.editing = true,
            GrepAction::Open => match hit {
                Some(h) => cx.effect(Effect::OpenAt {
                    path: h.path,
                    line: h.line,
                    back: Some(ID),
                }),
                None if self.query.pattern.is_empty() => self.editing = true,
                None => {}
            },
            GrepAction::Edit => {
                if let Some(h) = hit {
                    cx.effect(Effect::OpenEditor(h.path));
                }
            }
            GrepAction::Next => self.step_hit(1),
            GrepAction::Prev => self.step_hit(-1),
            GrepAction::Case | GrepAction::Literal | GrepAction::Hidden => {
                let (flag, what) = match a {
                    GrepAction::Case => (&mut self.query.ignore_case, "ignore case"),
                    GrepAction::Literal => (&mut self.query.literal, "literal pattern"),
                    _ => (&mut self.query.hidden, "hidden files"),
                };
                *flag = !*flag;
                let on = if *flag { "on" } else { "off" };
                cx.toast(Level::Info, format!("{what} {on}"));
                // The toggles apply to what is typed, searched or not.
                self.query.pattern = self.input.text().to_string();
                self.search(cx);
            }
            GrepAction::Cancel => {
                if let Some(c) = self.cancel.take() {
                    c.cancel();
                    self.seq += 1;
                    self.state = State::Stopped;
                }
            }
            GrepAction::Copy => {
                if let Some(h) = hit {
                    cx.effect(Effect::Copy(format!("{}:{}", h.path, h.line)));
                }
            }
            GrepAction::Back => cx.effect(Effect::CloseModal),
        }
        true
    }
}

impl Pane for GrepPane {
    crate::task_pane_glue!(actions: GrepAction);

    fn title(&self) -> String {
        "Grep".into()
    }

    fn text_input_active(&self) -> bool {
        self.editing
    }

    fn blur(&mut self) {
        self.editing = false;
    }

    fn on_key(&mut self, key: &KeyEvent, cx: &mut Ctx) -> bool {
        // The toggles work while typing too (as in editors' find bars).
        if key.modifiers.contains(KeyModifiers::ALT) {
            let a = match key.code {
                KeyCode::Char('c') => Some(GrepAction::Case),
                KeyCode::Char('r') => Some(GrepAction::Literal),
                KeyCode::Char('h') => Some(GrepAction::Hidden),
                _ => None,
            };
            return a.is_some_and(|a| self.act(a, cx));
        }
        match key.code {
            KeyCode::Enter => {
                self.editing = false;
                self.query.pattern = self.input.text().to_string();
                self.search(cx);
                true
            }
            KeyCode::Esc => {
                self.editing = false;
                self.input = LineEdit::new(self.query.pattern.clone());
                true
            }
            KeyCode::Down | KeyCode::Up if !self.hits.is_empty() => {
                self.editing = false;
                let v = if key.code == KeyCode::Down {
                    Nav::Down
                } else {
                    Nav::Up
                };
                nav(&mut self.cursor, v, self.hits.len());
                true
            }
            _ => self.input.key(key),
        }
    }

    fn on_paste(&mut self, text: &str, _cx: &mut Ctx) -> bool {
        if !self.editing {
            return false;
        }
        // One line: a pasted newline never submits.
        let line = text.lines().next().unwrap_or("");
        self.input.insert_str(line);
        true
    }

    fn busy(&self) -> Option<String> {
        None
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        match list_mouse(&mut self.cursor, ev, self.list_area, self.hits.len()) {
            ListMouse::None => false,
            ListMouse::Scrolled | ListMouse::Clicked(_, false) => true,
            ListMouse::Clicked(_, true) => self.act(GrepAction::Open, cx),
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        render::draw(self, f, area, focused, cx);
    }

    fn cursor(&self) -> Option<(u16, u16)> {
        self.caret.filter(|_| self.editing)
    }
}

impl TaskPane for GrepPane {
    const ID: &'static str = ID;
    type Msg = Finished;

    fn on_msg(&mut self, msg: Finished, cx: &mut Ctx) {
        if msg.seq != self.seq {
            return; // A search since replaced or stopped.
        }
        self.cancel = None;
        let ms = match self.state {
            State::Running { started } => cx.elapsed_ms(started),
            _ => 0,
        };
        match msg.outcome {
            Ok(p) => {
                self.hits = p.hits;
                self.cursor = ListCursor::default();
                self.state = State::Done {
                    ms,
                    more: p.more,
                    dropped: p.dropped,
                    note: p.note,
                };
            }
            Err((ToolState::Interrupted, _)) => self.state = State::Stopped,
            Err((_, text)) => self.state = State::Failed(text.trim().to_string()),
        }
    }
}
