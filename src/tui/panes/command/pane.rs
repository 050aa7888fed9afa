//! The Command pane's `Pane` glue: keys, actions, events, mouse, render.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::style::Modifier;

use crate::tui::action::{DialogTag, Effect, Level, PaneEvent};
use crate::tui::pane::{Ctx, ListMouse, Nav, Pane, list_mouse, nav};
use crate::tui::widgets::follow;
use crate::tui::widgets::text;

use super::{CommandAction, CommandPane, ID, PROMPT};
use crate::engine::shell_session::InputMsg;

impl CommandPane {
    /// Puts the keyboard in the prompt, as `i` in the pane does (the
    /// app's global `i` and `[tui] start_in_prompt` use it); in read-only
    /// mode it says why not instead.
    pub(crate) fn start_typing(&mut self, cx: &mut Ctx) {
        self.act(CommandAction::Prompt, cx);
    }

    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: CommandAction, cx: &mut Ctx) -> bool {
        match action {
            CommandAction::Run => {
                let cmd = self.prompt.text();
                if self.running.is_some() {
                    // Input to the command, an empty line too.
                    self.send_line(cx);
                    return true;
                }
                if cmd.trim().is_empty() {
                    return true;
                }
                if self.running.is_some() {
                    self.send_line(cx);
                    return true;
                }
                self.prompt.clear();
                self.hist_pos = None;
                self.run(cmd, cx);
            }
            CommandAction::Newline => self.prompt.insert_newline(),
            CommandAction::Leave => self.typing = false,
            // Read-only: the prompt never takes the keyboard (keys stay
            // pane and focus keys), and `i`/Enter say why.
            CommandAction::Prompt if !cx.can("command.run") => {
                self.show_past = false;
                cx.toast(
                    Level::Warn,
                    "read-only mode: commands do not run (start wsbench without --read-only)",
                );
            }
            CommandAction::Prompt => {
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
            CommandAction::History => {
                self.show_past = !self.show_past;
                if self.show_past {
                    self.load_journal(cx);
                }
            }
            CommandAction::Rerun => {
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
            // Ctrl-C, as in a shell, never quits: SIGINT to what runs,
            // else it clears the line being typed.
            CommandAction::Interrupt => {
                if self.send_input(InputMsg::Interrupt) {
                    if let Some(r) = &mut self.running {
                        r.stopping = true;
                    }
                    cx.toast(Level::Info, "SIGINT sent (ctrl-x kills the tree)");
                } else if self.typing {
                    self.prompt.clear();
                    self.hist_pos = None;
                } else {
                    cx.toast(Level::Info, "no command is running (ctrl-q quits wsbench)");
                }
            }
            CommandAction::Eof => {
                if !self.send_input(InputMsg::Eof) {
                    cx.toast(Level::Info, "no command is running to take end of input");
                }
            }
            CommandAction::Raw => {
                if self.running.is_some() {
                    self.raw = !self.raw;
                    let m = if self.raw {
                        "raw mode: keys go to the command (ctrl-t leaves)"
                    } else {
                        "line mode: enter sends the line"
                    };
                    cx.toast(Level::Info, m);
                } else {
                    cx.toast(Level::Info, "raw mode needs a running command");
                }
            }
            CommandAction::Kill => match &self.running {
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
                        self.prompt.clear();
                        self.hist_pos = None;
                    } else {
                        cx.toast(Level::Info, "no command is running (ctrl-q quits wsbench)");
                    }
                }
            },
            CommandAction::Follow => {
                self.follow = !self.follow;
                let m = if self.follow {
                    "following output"
                } else {
                    "output paused (f follows)"
                };
                cx.toast(Level::Info, m);
            }
            CommandAction::Copy => {
                let s = self.last_output();
                if !s.is_empty() {
                    cx.effect(Effect::Copy(s));
                }
            }
            CommandAction::Clear => {
                self.output.clear();
                self.mark = None;
            }
            CommandAction::Search | CommandAction::SearchBack => {
                // The search is of the output: leave the past commands.
                self.show_past = false;
                self.search.begin(action == CommandAction::SearchBack);
            }
            CommandAction::NextMatch | CommandAction::PrevMatch => {
                if !self.search.active() {
                    cx.toast(Level::Info, "no search: / or ? starts one");
                } else if !self.find(action == CommandAction::PrevMatch) {
                    cx.toast(Level::Info, format!("no match for {}", self.search.text));
                }
            }
            CommandAction::Nav(verb) => {
                if self.show_past {
                    nav(&mut self.past_cursor, verb, self.past.len());
                } else {
                    let page = self.out_height.max(1);
                    let total = self.output.len();
                    match verb {
                        Nav::Down => self.back = self.back.saturating_sub(1),
                        Nav::Up => self.back += 1,
                        Nav::PageDown | Nav::PageUp | Nav::HalfDown | Nav::HalfUp => {
                            let rows = verb.page_rows(page).unwrap_or(0);
                            self.back = self.back.saturating_add_signed(-rows);
                        }
                        Nav::Top => self.back = total,
                        Nav::Bottom => self.back = 0,
                    }
                    self.follow = self.back == 0;
                }
            }
        }
        true
    }
}

/// Ctrl-X (kill), Ctrl-D (end of input), Ctrl-T (raw mode) while typing.
fn running_key(key: &KeyEvent) -> Option<CommandAction> {
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};
    if !key.modifiers.contains(KeyModifiers::CONTROL) {
        return None;
    }
    match key.code {
        KeyCode::Char('x') => Some(CommandAction::Kill),
        KeyCode::Char('d') => Some(CommandAction::Eof),
        KeyCode::Char('t') => Some(CommandAction::Raw),
        _ => None,
    }
}

impl Pane for CommandPane {
    crate::task_pane_glue!(actions: CommandAction);

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
        self.typing || self.search.editing
    }

    fn clear_filter(&mut self) -> bool {
        if self.search.editing || !self.search.active() {
            return false;
        }
        self.clear_search();
        true
    }

    /// The keys that act on a running command (interrupt, kill, raw
    /// mode, end of input) leave the footer while none runs, so the
    /// room goes to what works now (the pane and focus keys).
    fn hint_off(&self, action: &str) -> bool {
        self.running.is_none()
            && matches!(
                action,
                "command.eof" | "command.interrupt" | "command.kill" | "command.raw"
            )
    }

    fn blur(&mut self) {
        self.typing = false;
        // A search typed so far stays applied, as after Enter.
        self.search.editing = false;
    }

    fn on_key(&mut self, key: &KeyEvent, cx: &mut Ctx) -> bool {
        // The prompt keeps most Ctrl keys for editing; while a command
        // runs, these three are the pane's (the key map gives them when
        // the prompt is not typing).
        if let Some(a) = self.running.as_ref().and_then(|_| running_key(key)) {
            return self.act(a, cx);
        }
        if self.search.editing {
            use crate::tui::widgets::filter::FilterOutcome;
            return match self.search.key(key) {
                FilterOutcome::Ignored => false,
                FilterOutcome::Changed => true,
                FilterOutcome::Done => {
                    self.mark = None;
                    if self.search.active() && !self.find(false) {
                        cx.toast(Level::Info, format!("no match for {}", self.search.text));
                    }
                    true
                }
            };
        }
        if self.raw && self.running.is_some() {
            if let Some(b) = super::keys::key_bytes(key) {
                self.send_input(InputMsg::Data(b.into()));
            }
            return true;
        }
        // Up on the first row and Down on the last step through the
        // history; run, new line, leave, focus, scroll, kill, quit and
        // help are the key map's.
        if let Some(dir) = self.prompt.edge(key) {
            self.history_step(dir);
            return true;
        }
        self.prompt.key(key)
    }

    fn on_paste(&mut self, s: &str, _cx: &mut Ctx) -> bool {
        if self.search.editing {
            self.search.paste(s);
            return true;
        }
        if !self.typing {
            return false;
        }
        self.prompt.paste(s);
        true
    }

    fn needs_frame(&self) -> bool {
        self.has_deferred_output()
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

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::Confirmed(DialogTag::KillCommand) => match &mut self.running {
                Some(r) => {
                    r.stopping = true;
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
                self.clear_search();
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
                ListMouse::Clicked(_, true) => self.act(CommandAction::Prompt, cx),
                ListMouse::None => false,
                _ => true,
            };
        }
        if follow::wheel(ev.kind, &mut self.back, &mut self.follow) {
            return true;
        }
        match ev.kind {
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
        // Output is taken once a frame, here: however fast a command
        // prints, the pane parses at most `output_frame_bytes` per frame,
        // for at most the frame's output time (one slice at least).
        let until = std::time::Instant::now() + cx.output_time;
        self.pull(cx.theme.warn, cx.theme.muted, super::Pull::Until(until));
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
        if self.skipped > 0 {
            note = format!("{note} · {} skipped", text::human_size(self.skipped))
                .trim_start_matches(" · ")
                .to_string();
        }
        if self.output.dropped() > 0 {
            note = format!("{note} · {} older lines dropped", self.output.dropped())
                .trim_start_matches(" · ")
                .to_string();
        }
        let cwd = self.session_shell.then(|| self.shell_cwd(cx)).flatten();
        let title = if self.show_past {
            format!("Command · past commands of {}", cx.session)
        } else if let Some(d) = &cwd {
            format!("Command · session {} · {d}", cx.session)
        } else {
            format!("Command · session {}", cx.session)
        };
        let block = cx.block_for(area, &title, &note, focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        if inner.height == 0 || inner.width == 0 {
            return;
        }
        let prompt_h = self
            .prompt
            .rows()
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
            } else if self.raw && self.running.is_some() {
                "─ raw keys → command (ctrl-t line mode) "
            } else if self.running.is_some() {
                "─ input → command (enter sends · ctrl-d eof · ctrl-c SIGINT) "
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
        if !cx.can("command.run") {
            self.prompt
                .set_placeholder("read-only mode: commands do not run");
        }
        let cursor = if self.typing && focused {
            t.base.add_modifier(Modifier::REVERSED)
        } else {
            st
        };
        self.prompt.render(f, pa, st, t.muted, cursor);
    }
}
