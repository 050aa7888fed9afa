//! The Command stream: a multi-line prompt that runs commands through the
//! Bash tool in the selected session, their output live, and the session's
//! past commands from the journal.
//!
//! * Output keeps SGR colours; every other escape or control sequence is
//!   swallowed ([`crate::tui::widgets::ansi`], C24). The engine still
//!   stores and offloads the raw bytes.
//! * Output lives in a ring of `output_buffer_lines` lines: memory stays
//!   flat however much a command prints.
//! * Each session has its own ring: the pane, titled with the session,
//!   shows only what ran there; switching back shows the old output again,
//!   and a command still running in another session keeps writing to that
//!   session's ring.
//! * A paste goes into the prompt as text: newlines never submit, ESC is
//!   shown as `␛` (C23). Enter runs; Alt-Enter / Ctrl-J add a line.
//! * Commands get the Bash tool's largest timeout (`bash_max_timeout_ms`)
//!   rather than its 2-minute default, since a person is watching and can
//!   kill them (Ctrl-C).

use std::time::Instant;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui_textarea::{CursorMove, TextArea};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::{OutputChunk, StreamKind};
use crate::engine::journal::JournalEntry;
use crate::engine::workspace::ToolCall;
use crate::tui::action::{DialogTag, Effect, Level, PaneEvent, TaskResult};
use crate::tui::config::TuiConfig;
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{Ctx, ListMouse, Pane, TaskPane, act, deliver, list_mouse, placeholder};
use crate::tui::widgets::ansi::{AnsiParser, StyledLine};
use crate::tui::widgets::list::{ListCursor, render_rows};
use crate::tui::widgets::paste::clean_paste as editor_paste;
use crate::tui::widgets::ring::Ring;
use crate::tui::widgets::text;

/// Pane id (and keymap context outside the prompt).
pub const ID: &str = "command";

/// Keymap context while the prompt has the keyboard.
pub const PROMPT: &str = "command.prompt";

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = crate::pane_actions!("command";
    act("command.prompt", ID, "type a command", &["i", "enter"], false, true),
    act("command.history", ID, "past commands", &["h"], false, true),
    act("command.rerun", ID, "re-run selected", &["r"], true, true),
    act("command.kill", ID, "kill running", &["ctrl-c"], true, true),
    act("command.follow", ID, "follow / pause", &["f"], false, true),
    act("command.copy", ID, "copy last output", &["y"], false, false),
    act("command.clear", ID, "clear output", &["C"], false, false),
    act("command.run", PROMPT, "run", &["enter"], true, true),
    act("command.newline", PROMPT, "new line", &["alt-enter", "shift-enter", "ctrl-j"], false, true),
    act("command.leave", PROMPT, "leave prompt", &["esc"], false, true),
);

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
}

pub(crate) enum Msg {
    Chunk(String, OutputChunk),
    Finished {
        call_id: String,
        exit_code: Option<i32>,
        state: String,
        timed_out: bool,
        error: Option<String>,
    },
    Journal(String, Result<Vec<JournalEntry>, String>),
}

/// The Command pane.
pub struct CommandPane {
    prompt: TextArea<'static>,
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
}

fn new_prompt() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_placeholder_text("type a command · enter runs · alt-enter new line");
    t.set_cursor_line_style(Style::default());
    t
}

impl CommandPane {
    /// A pane with buffers sized from the config.
    pub fn new(cfg: &TuiConfig) -> Self {
        CommandPane {
            prompt: new_prompt(),
            typing: true,
            output: Ring::new(cfg.output_buffer_lines),
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
        }
    }

    /// The prompt's lines (tests).
    pub fn prompt_lines(&self) -> &[String] {
        self.prompt.lines()
    }

    /// The prompt's cursor as (row, column) (tests).
    pub fn prompt_cursor(&self) -> (usize, usize) {
        let c = self.prompt.cursor();
        (c.0, c.1)
    }

    /// Command lines sent to the Bash tool so far (tests).
    pub fn sent(&self) -> &[String] {
        &self.sent
    }

    /// The output buffer.
    pub fn output(&self) -> &Ring<OutLine> {
        &self.output
    }

    /// Whether a command is running.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Appends raw output bytes of the current run as if they came from
    /// `stream` (the streaming path; public for benchmarks and tests).
    pub fn feed(&mut self, stream: StreamKind, data: &[u8], err_style: Style) {
        let Some(r) = &mut self.running else {
            return;
        };
        let run = r.run;
        let parser = match stream {
            StreamKind::Stdout => &mut r.out,
            StreamKind::Stderr => &mut r.err,
        };
        let out = if r.session == self.output_session {
            &mut self.output
        } else {
            let cap = self.output.capacity();
            self.parked
                .entry(r.session.clone())
                .or_insert_with(|| Ring::new(cap))
        };
        parser.feed(data, &mut |mut l| {
            if stream == StreamKind::Stderr {
                stderr_style(&mut l, err_style);
            }
            out.push(OutLine { run, line: l });
        });
    }

    /// Starts a run record without a real command (benchmarks, tests).
    pub fn begin_run(&mut self, command: &str, header: Style) -> u64 {
        self.runs += 1;
        let run = self.runs;
        for (i, l) in command.lines().enumerate() {
            let p = if i == 0 { "$ " } else { "> " };
            self.output.push(OutLine {
                run,
                line: StyledLine::plain(&format!("{p}{l}"), header),
            });
        }
        self.running = Some(Running {
            run,
            session: self.output_session.clone(),
            command: command.to_string(),
            call_id: String::new(),
            started: Instant::now(),
            cancel: CancellationToken::new(),
            out: AnsiParser::new(),
            err: AnsiParser::new(),
        });
        run
    }

    /// The output ring of `session`: the shown one or a parked one.
    fn ring_for(&mut self, session: &str) -> &mut Ring<OutLine> {
        if session == self.output_session {
            return &mut self.output;
        }
        let cap = self.output.capacity();
        self.parked
            .entry(session.to_string())
            .or_insert_with(|| Ring::new(cap))
    }

    /// Shows the output of `session`, setting the shown one aside.
    fn show_session(&mut self, session: &str) {
        if session == self.output_session {
            return;
        }
        let cap = self.output.capacity();
        let next = self
            .parked
            .remove(session)
            .unwrap_or_else(|| Ring::new(cap));
        let old = std::mem::replace(&mut self.output, next);
        let old_session = std::mem::replace(&mut self.output_session, session.to_string());
        if !old.is_empty() {
            self.parked.insert(old_session, old);
        }
        self.follow = true;
        self.back = 0;
    }

    fn push_status(&mut self, session: &str, run: u64, text_: String, style: Style) {
        self.ring_for(session).push(OutLine {
            run,
            line: StyledLine::plain(&text_, style),
        });
    }

    fn remember(&mut self, cmd: &str) {
        if self.history.last().map(String::as_str) != Some(cmd) {
            self.history.push(cmd.to_string());
        }
        if self.history.len() > self.max_history {
            let extra = self.history.len() - self.max_history;
            self.history.drain(..extra);
        }
    }

    fn load_journal(&mut self, cx: &mut Ctx) {
        let ws = cx.ws.clone();
        let s = cx.session.clone();
        cx.spawn::<CommandPane>(async move {
            let r = ws
                .journal()
                .read(&s)
                .await
                .map(|j| j.entries.into_iter().filter(|e| e.tool == "Bash").collect())
                .map_err(|e| e.to_string());
            Msg::Journal(s, r)
        });
    }

    /// Runs `command` through the Bash tool in the selected session.
    pub fn run(&mut self, command: String, cx: &mut Ctx) {
        if command.trim().is_empty() {
            return;
        }
        if !cx.can("command.run") {
            cx.toast(Level::Warn, "read-only mode: commands cannot run");
            return;
        }
        if self.running.is_some() {
            cx.toast(Level::Warn, "a command is running: ctrl-c kills it");
            return;
        }
        self.remember(&command);
        self.sent.push(command.clone());
        let session = cx.session.clone();
        self.show_session(&session);
        let header = cx.theme.accent.add_modifier(Modifier::BOLD);
        let run = self.begin_run(&command, header);
        let call_id = format!("tui_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let cancel = CancellationToken::new();
        if let Some(r) = &mut self.running {
            r.call_id = call_id.clone();
            r.cancel = cancel.clone();
        }
        let _ = run;
        self.follow = true;
        self.back = 0;
        let (otx, mut orx) = mpsc::channel::<OutputChunk>(256);
        let tx = cx.tasks::<CommandPane>();
        let cid = call_id.clone();
        let forward = tokio::spawn(async move {
            while let Some(chunk) = orx.recv().await {
                if !tx.send(Msg::Chunk(cid.clone(), chunk)).await {
                    break;
                }
            }
        });
        let ws = cx.ws.clone();
        let call = ToolCall {
            agent: cx.agent.clone(),
            session: cx.session.clone(),
            tool: "Bash".into(),
            args: json!({"command": command, "timeout": cx.ws.limits().bash_max_timeout_ms}),
            call_id: Some(call_id.clone()),
            cancel: Some(cancel),
            output: Some(otx),
        };
        cx.spawn::<CommandPane>(async move {
            let r = ws.call_tool(call).await;
            // Every chunk reaches the pane before the exit status.
            let _ = forward.await;
            let error = (r.exit_code.is_none() && !r.is_success()).then(|| r.text());
            Msg::Finished {
                call_id,
                exit_code: r.exit_code,
                state: r.state.as_str().to_string(),
                timed_out: r.timed_out,
                error,
            }
        });
    }

    fn finish(
        &mut self,
        exit_code: Option<i32>,
        state: &str,
        timed_out: bool,
        error: Option<&str>,
        cx: &mut Ctx,
    ) {
        let Some(mut r) = self.running.take() else {
            return;
        };
        let run = r.run;
        let err_style = cx.theme.warn;
        let out = self.ring_for(&r.session);
        r.out.finish(&mut |l| {
            out.push(OutLine { run, line: l });
        });
        r.err.finish(&mut |mut l| {
            stderr_style(&mut l, err_style);
            out.push(OutLine { run, line: l });
        });
        let took = text::duration_ms(r.started.elapsed().as_millis() as u64);
        let t = &cx.theme;
        let (msg, style) = if let Some(e) = error {
            (
                format!("✗ failed · {}", e.lines().last().unwrap_or(e)),
                t.error,
            )
        } else if timed_out {
            // The exit status (143, SIGTERM) is wsbench's own kill: say so.
            let limit = cx.ws.limits().bash_max_timeout_ms / 1000;
            (
                format!("⏱ killed by wsbench after {limit}s timeout · {took}"),
                t.error,
            )
        } else if state == "interrupted" {
            (format!("✗ killed · {took}"), t.warn)
        } else {
            match exit_code {
                Some(0) => (format!("✓ exit 0 · {took}"), t.success),
                Some(c) => (format!("✗ exit {} · {took}", exit_label(c)), t.error),
                None => (format!("✗ exit ? · {took}"), t.error),
            }
        };
        self.push_status(&r.session, run, msg, style.add_modifier(Modifier::BOLD));
        self.load_journal(cx);
    }

    fn history_step(&mut self, dir: isize) {
        if self.history.is_empty() {
            return;
        }
        let pos = match (self.hist_pos, dir) {
            (None, d) if d < 0 => {
                self.draft = self.prompt.lines().to_vec();
                Some(self.history.len() - 1)
            }
            (None, _) => return,
            (Some(p), d) if d < 0 => Some(p.saturating_sub(1)),
            (Some(p), _) if p + 1 < self.history.len() => Some(p + 1),
            (Some(_), _) => None,
        };
        self.hist_pos = pos;
        let lines: Vec<String> = match pos {
            Some(p) => self.history[p].lines().map(String::from).collect(),
            None => std::mem::take(&mut self.draft),
        };
        self.set_prompt(lines);
    }

    fn set_prompt(&mut self, lines: Vec<String>) {
        let mut t = new_prompt();
        t.insert_str(lines.join("\n"));
        t.move_cursor(CursorMove::Bottom);
        t.move_cursor(CursorMove::End);
        self.prompt = t;
    }

    fn last_output(&self) -> String {
        let last = self.output.iter().last().map(|l| l.run);
        self.output
            .iter()
            .filter(|l| Some(l.run) == last)
            .map(|l| l.line.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn render_output(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        let t = &cx.theme;
        self.out_height = area.height as usize;
        if self.output.is_empty() {
            let msg = if cx.can("command.run") {
                format!("commands run with the Bash tool in session {}", cx.session)
            } else {
                "read-only mode: commands cannot run".to_string()
            };
            placeholder(f, area, &msg, t.muted);
            return;
        }
        let shown = &self.output_session;
        let partial: Option<StyledLine> = self
            .running
            .as_ref()
            .filter(|r| &r.session == shown)
            .and_then(|r| {
                let p = r.out.partial();
                (!p.text.is_empty()).then(|| p.clone())
            });
        let total = self.output.len() + usize::from(partial.is_some());
        let h = area.height as usize;
        let max_back = total.saturating_sub(h);
        if self.follow {
            self.back = 0;
        }
        self.back = self.back.min(max_back);
        let end = total - self.back;
        let start = end.saturating_sub(h);
        let buf = f.buffer_mut();
        for (row, i) in (start..end).enumerate() {
            let y = area.y + row as u16;
            let line = if i < self.output.len() {
                self.output.get(i).map(|l| &l.line)
            } else {
                partial.as_ref()
            };
            if let Some(l) = line {
                buf.set_line(area.x, y, &l.to_line(t.base), area.width);
            }
        }
    }

    fn render_past(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        self.list_area = area;
        if self.past.is_empty() {
            placeholder(
                f,
                area,
                "no commands in this session's journal yet",
                t.muted,
            );
            return;
        }
        let past = &self.past;
        let w = area.width as usize;
        render_rows(
            f.buffer_mut(),
            area,
            &mut self.past_cursor,
            past.len(),
            focused,
            t.selection,
            |i| {
                let e = &past[past.len() - 1 - i];
                let (mark, st) = match (e.exit_code, e.timed_out) {
                    (_, true) => ("⏱".to_string(), t.error),
                    (Some(0), _) => ("✓ 0".to_string(), t.success),
                    (Some(c), _) => (format!("✗ {c}"), t.error),
                    (None, _) => ("✗ ?".to_string(), t.error),
                };
                let when = e.started_at.format("%m-%d %H:%M").to_string();
                let left = format!("{when} {mark:<5} {:>7} ", text::duration_ms(e.duration_ms));
                let mut cmd = e.summary().replace('\n', " ⏎ ");
                if e.timed_out {
                    cmd.push_str("  (killed by wsbench: timeout)");
                }
                let room = w.saturating_sub(text::width(&left));
                Line::from(vec![
                    Span::styled(format!("{when} "), t.muted),
                    Span::styled(format!("{mark:<5} "), st),
                    Span::styled(format!("{:>7} ", text::duration_ms(e.duration_ms)), t.muted),
                    Span::styled(
                        text::truncate(&text::display(&cmd), room).into_owned(),
                        t.base,
                    ),
                ])
            },
        );
    }
}

/// An exit status, with the signal named when it is 128 + a signal
/// number (`143 (SIGTERM)`): a process killed from outside (not by
/// wsbench's timeout, which says so itself).
pub fn exit_label(code: i32) -> String {
    if code > 128
        && let Ok(sig) = nix::sys::signal::Signal::try_from(code - 128)
    {
        return format!("{code} ({sig})");
    }
    code.to_string()
}

/// Stderr lines get the warning colour where the program set none.
fn stderr_style(l: &mut StyledLine, style: Style) {
    if l.runs.first().is_none_or(|r| r.0 > 0) {
        l.runs.insert(0, (0, style));
    }
    for r in &mut l.runs {
        if r.1.fg.is_none() {
            r.1.fg = style.fg;
        }
    }
}

impl Pane for CommandPane {
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
        "Command".into()
    }

    fn context(&self) -> &'static str {
        if self.typing { PROMPT } else { ID }
    }

    fn init(&mut self, cx: &mut Ctx) {
        self.output_session = cx.session.clone();
        self.load_journal(cx);
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
            // Left to the key map: run, new line, leave, focus, scroll,
            // kill, quit, help.
            KeyCode::Enter | KeyCode::Esc | KeyCode::Tab | KeyCode::BackTab => false,
            KeyCode::F(_) | KeyCode::PageUp | KeyCode::PageDown => false,
            KeyCode::Char('c' | 'q' | 'j' | 'z' | 'l') if ctrl => false,
            KeyCode::Up if self.prompt.cursor().0 == 0 => {
                self.history_step(-1);
                true
            }
            KeyCode::Down if self.prompt.cursor().0 + 1 >= self.prompt.lines().len() => {
                self.history_step(1);
                true
            }
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
        self.prompt.insert_str(editor_paste(s));
        true
    }

    fn busy(&self) -> Option<String> {
        self.running
            .as_ref()
            .map(|_| "a command is running".to_string())
    }

    fn shutdown(&mut self, _cx: &mut Ctx) {
        if let Some(r) = &self.running {
            r.cancel.cancel();
        }
    }

    fn on_action(&mut self, action: &'static str, cx: &mut Ctx) -> bool {
        let verb = action.strip_prefix("command.").unwrap_or(action);
        match verb {
            "run" => {
                let cmd = self.prompt.lines().join("\n");
                if cmd.trim().is_empty() {
                    return true;
                }
                if self.running.is_some() {
                    cx.toast(Level::Warn, "a command is running: ctrl-c kills it");
                    return true;
                }
                self.prompt = new_prompt();
                self.hist_pos = None;
                self.run(cmd, cx);
            }
            "newline" => self.prompt.insert_newline(),
            "leave" => self.typing = false,
            // Read-only: the prompt never takes the keyboard (keys stay
            // pane and focus keys), and `i`/Enter say why.
            "prompt" if !cx.can("command.run") => {
                self.show_past = false;
                cx.toast(
                    Level::Warn,
                    "read-only mode: commands do not run (start wsbench without --read-only)",
                );
            }
            "prompt" => {
                if self.show_past {
                    let n = self.past.len();
                    if let Some(e) = n
                        .checked_sub(1 + self.past_cursor.selected)
                        .and_then(|i| self.past.get(i))
                    {
                        let lines = e.summary().lines().map(String::from).collect();
                        self.set_prompt(lines);
                    }
                    self.show_past = false;
                }
                self.typing = true;
            }
            "history" => {
                self.show_past = !self.show_past;
                if self.show_past {
                    self.load_journal(cx);
                }
            }
            "rerun" => {
                let n = self.past.len();
                let cmd = if self.show_past {
                    let e = n
                        .checked_sub(1 + self.past_cursor.selected)
                        .and_then(|i| self.past.get(i));
                    if e.is_some_and(|e| e.args_cut_bytes > 0) {
                        // The journal keeps long commands cut: never run a
                        // cut one as if it were whole.
                        cx.toast(
                            Level::Warn,
                            "this command was too long to journal whole; not re-run",
                        );
                        return true;
                    }
                    e.map(|e| e.summary())
                } else {
                    self.history.last().cloned()
                };
                // Re-running is marked dangerous (and `r` refreshes elsewhere):
                // ask first, naming the command.
                if let Some(c) = cmd {
                    cx.effect(crate::tui::action::Effect::Confirm {
                        pane: ID,
                        message: format!("Run `{c}` again?"),
                        tag: DialogTag::Rerun(c.clone()),
                    });
                }
            }
            // Ctrl-C, as in a shell, never quits: it offers to kill what
            // runs, else clears the line being typed.
            "kill" => match &self.running {
                Some(r) => {
                    let shown = r.command.replace('\n', " ⏎ ");
                    cx.effect(crate::tui::action::Effect::Confirm {
                        pane: ID,
                        message: format!("Kill `{shown}` and its children?"),
                        tag: DialogTag::KillCommand,
                    });
                }
                None => {
                    if self.typing {
                        self.prompt = new_prompt();
                        self.hist_pos = None;
                    } else {
                        cx.toast(Level::Info, "no command is running (ctrl-q quits wsbench)");
                    }
                }
            },
            "follow" => {
                self.follow = !self.follow;
                let m = if self.follow {
                    "following output"
                } else {
                    "output paused (f follows)"
                };
                cx.toast(Level::Info, m);
            }
            "copy" => {
                let s = self.last_output();
                if !s.is_empty() {
                    cx.effect(Effect::Copy(s));
                }
            }
            "clear" => self.output.clear(),
            "down" | "up" | "page_down" | "page_up" | "top" | "bottom" => {
                if self.show_past {
                    crate::tui::pane::navigate(&mut self.past_cursor, verb, self.past.len());
                } else {
                    let page = self.out_height.max(1);
                    let total = self.output.len();
                    match verb {
                        "down" => self.back = self.back.saturating_sub(1),
                        "up" => self.back += 1,
                        "page_down" => self.back = self.back.saturating_sub(page),
                        "page_up" => self.back += page,
                        "top" => self.back = total,
                        _ => self.back = 0,
                    }
                    self.follow = self.back == 0;
                }
            }
            _ => return false,
        }
        true
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::Confirmed(DialogTag::KillCommand) => match &self.running {
                Some(r) => {
                    r.cancel.cancel();
                    cx.toast(Level::Info, "killing the command and its children");
                }
                None => cx.toast(Level::Info, "the command had already ended"),
            },
            PaneEvent::Confirmed(DialogTag::Rerun(c)) => {
                self.show_past = false;
                self.run(c.to_string(), cx);
            }
            PaneEvent::SessionChanged => {
                let s = cx.session.clone();
                self.show_session(&s);
                self.history.clear();
                self.past.clear();
                self.load_journal(cx);
            }
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, area: Rect, cx: &mut Ctx) -> bool {
        use ratatui::crossterm::event::{MouseButton, MouseEventKind};
        if self.show_past {
            return match list_mouse(&mut self.past_cursor, ev, self.list_area, self.past.len()) {
                ListMouse::Clicked(_, true) => self.on_action("command.prompt", cx),
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
            MouseEventKind::Down(MouseButton::Left) => {
                // A click on the prompt rows focuses the prompt.
                if ev.row + 4 >= area.y + area.height && cx.can("command.run") {
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
        if let Some(r) = &self.running {
            note = format!(
                "running {}",
                text::duration_ms(r.started.elapsed().as_millis() as u64)
            );
        } else if !self.follow {
            note = "paused".into();
        }
        if self.output.dropped() > 0 {
            note = format!("{note} · {} older lines dropped", self.output.dropped())
                .trim_start_matches(" · ")
                .to_string();
        }
        let title = if self.show_past {
            format!("Command · past commands of {}", cx.session)
        } else {
            format!("Command · session {}", cx.session)
        };
        let block = cx.block_for(area, &title, &note, focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        if inner.height == 0 || inner.width == 0 {
            return;
        }
        let prompt_h = (self.prompt.lines().len() as u16)
            .clamp(1, 5)
            .min(inner.height.saturating_sub(1).max(1));
        let sep = u16::from(inner.height > prompt_h);
        let out_h = inner.height.saturating_sub(prompt_h + sep);
        let out_area = Rect::new(inner.x, inner.y, inner.width, out_h);
        if self.show_past {
            self.render_past(f, out_area, focused && !self.typing, cx);
        } else {
            self.render_output(f, out_area, cx);
        }
        if sep == 1 {
            let y = inner.y + out_h;
            let label = if !cx.can("command.run") {
                "─ $ (read-only) "
            } else if self.typing && focused {
                "─ $ "
            } else {
                "─ $ (i to type) "
            };
            let line: String = format!("{label}{}", "─".repeat(inner.width as usize));
            f.buffer_mut().set_stringn(
                inner.x,
                y,
                line,
                inner.width as usize,
                if focused { t.border_focused } else { t.border },
            );
        }
        let pa = Rect::new(inner.x, inner.y + out_h + sep, inner.width, prompt_h);
        let mut st = t.base;
        if !(self.typing && focused) {
            st = st.add_modifier(Modifier::DIM);
        }
        self.prompt.set_style(st);
        if !cx.can("command.run") {
            self.prompt
                .set_placeholder_text("read-only mode: commands do not run");
        }
        self.prompt.set_placeholder_style(t.muted);
        self.prompt.set_cursor_style(if self.typing && focused {
            t.base.add_modifier(Modifier::REVERSED)
        } else {
            st
        });
        f.render_widget(&self.prompt, pa);
    }
}

impl TaskPane for CommandPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Chunk(cid, chunk) if self.running.as_ref().is_some_and(|r| &r.call_id == cid) => {
                let st = cx.theme.warn;
                self.feed(chunk.stream, &chunk.data, st);
            }
            Msg::Finished {
                call_id,
                exit_code,
                state,
                timed_out,
                error,
            } if self.running.as_ref().is_some_and(|r| &r.call_id == call_id) => {
                self.finish(*exit_code, state, *timed_out, error.as_deref(), cx);
            }
            Msg::Journal(s, r) if *s == cx.session => match r {
                Ok(entries) => {
                    self.past = entries.clone();
                    if self.history.is_empty() {
                        for e in entries {
                            let c = e.summary();
                            self.remember(&c);
                        }
                    }
                    self.past_cursor.clamp(self.past.len());
                }
                Err(e) => cx.toast(Level::Warn, format!("reading the journal: {e}")),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_memory_is_bounded() {
        let cfg = TuiConfig {
            output_buffer_lines: 100,
            ..Default::default()
        };
        let mut p = CommandPane::new(&cfg);
        p.begin_run("seq", Style::default());
        for i in 0..10_000 {
            p.feed(
                StreamKind::Stdout,
                format!("{i}\n").as_bytes(),
                Style::default(),
            );
        }
        assert_eq!(p.output().len(), 100);
        assert_eq!(p.output().iter().last().unwrap().line.text, "9999");
    }

    #[test]
    fn signal_exits_are_named() {
        assert_eq!(exit_label(143), "143 (SIGTERM)");
        assert_eq!(exit_label(137), "137 (SIGKILL)");
        assert_eq!(exit_label(3), "3");
        assert_eq!(exit_label(128), "128");
    }

    #[test]
    fn stderr_gets_the_warning_colour_only_where_unset() {
        let mut l = StyledLine::plain("x", Style::default());
        stderr_style(&mut l, Style::default().fg(ratatui::style::Color::Yellow));
        assert_eq!(l.runs[0].1.fg, Some(ratatui::style::Color::Yellow));
    }
}
