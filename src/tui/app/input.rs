//! Routing keys and pastes: overlays first, then the focused pane's text
//! field, its bindings, and the global actions.

use ratatui::crossterm::event::{Event as TermEvent, KeyEvent, KeyEventKind};
use ratatui::layout::Direction;

use super::overlay::Overlay;
use super::{APP_DIALOG, App, HostRequest};
use crate::tui::action::{DialogTag, Effect, Level, PaneEvent};
use crate::tui::keymap::{GLOBAL, KeyChord};
use crate::tui::panes;
use crate::tui::panes::help::HelpOverlay;
use crate::tui::panes::palette::PaletteOverlay;
use crate::tui::widgets::paste::single_line;

impl App {
    /// Handles a terminal event.
    pub fn on_input(&mut self, ev: TermEvent) {
        match ev {
            TermEvent::Key(k) if k.kind != KeyEventKind::Release => self.on_key(k),
            TermEvent::Paste(text) => self.on_paste(&text),
            TermEvent::Mouse(m) => self.on_mouse(m),
            _ => {}
        }
        self.blur_unfocused();
    }

    pub(super) fn on_paste(&mut self, text: &str) {
        if let Some(ov) = &mut self.overlay {
            match ov {
                Overlay::Prompt { input, .. } => input.insert_str(&single_line(text)),
                Overlay::Palette(p) => p.paste(&single_line(text)),
                Overlay::Help(h) => h.paste(text),
                _ => {}
            }
            return;
        }
        let focus = self.focus();
        let taken = self
            .with_pane(focus, |p, cx| p.on_paste(text, cx))
            .unwrap_or(false);
        if !taken {
            self.apply(Effect::Toast(
                Level::Info,
                "paste ignored: no text field has the focus".into(),
            ));
        }
    }

    pub(super) fn on_key(&mut self, key: KeyEvent) {
        if let Some(plain) = self.esc_then_key(&key) {
            let esc = KeyEvent::new(
                ratatui::crossterm::event::KeyCode::Esc,
                ratatui::crossterm::event::KeyModifiers::NONE,
            );
            self.on_key(esc);
            self.blur_unfocused();
            self.on_key(plain);
            return;
        }
        if self.overlay.is_some() {
            self.overlay_key(key);
            return;
        }
        let chord = KeyChord::from_event(&key);
        let focus = self.focus();
        let Some(i) = self.pane_index(focus) else {
            return;
        };
        if self.panes[i].text_input_active() {
            let used = self.panes[i].on_key(&key, &mut self.cx);
            self.apply_effects();
            if used {
                return;
            }
        }
        let ctx = self.panes[i].context();
        if let Some(spec) = self.cx.keymap.lookup(ctx, chord).copied() {
            self.panes[i].on_action(spec.name, &mut self.cx);
            self.apply_effects();
            return;
        }
        if ctx != self.panes[i].id()
            && let Some(spec) = self.cx.keymap.lookup(self.panes[i].id(), chord).copied()
        {
            self.panes[i].on_action(spec.name, &mut self.cx);
            self.apply_effects();
            return;
        }
        if let Some(spec) = self.cx.keymap.lookup(GLOBAL, chord).copied() {
            self.run_action(spec.name);
        } else if let Some(d) = unbound_digit(&key) {
            // A k9s user tries every number: a digit with no pane says so
            // instead of doing nothing.
            let keys = self.focus_keys();
            self.apply(Effect::Toast(
                Level::Info,
                format!("no pane on {d}; focus keys: {keys}"),
            ));
        } else if chord == KeyChord::parse("esc").expect("a valid chord")
            && self.panes[i].clear_filter()
        {
            self.apply_effects();
        } else if chord == KeyChord::parse("ctrl-c").expect("a valid chord") {
            // Users press Ctrl-C to get out: say what quits instead of
            // doing nothing.
            let quit = self
                .cx
                .keymap
                .all()
                .iter()
                .find(|b| b.spec.name == "app.quit" && !b.keys.is_empty())
                .map(|b| crate::tui::keymap::keys_label(&b.keys))
                .unwrap_or_else(|| ":quit".into());
            self.apply(Effect::Toast(
                Level::Info,
                format!("ctrl-c stops a running command or agent; {quit} quits wsbench"),
            ));
        }
    }

    /// The bound focus keys as `1 Sessions · 2 Files · …`, for the toast
    /// of a digit with no pane.
    fn focus_keys(&self) -> String {
        let mut v: Vec<(String, &str)> = self
            .cx
            .keymap
            .all()
            .iter()
            .filter(|b| b.spec.name.starts_with("app.focus_") && !b.keys.is_empty())
            .map(|b| {
                let label = crate::tui::keymap::keys_label(&b.keys);
                let what = b.spec.desc.strip_prefix("focus ").unwrap_or(b.spec.desc);
                (label, what)
            })
            .filter(|(label, _)| label.chars().all(|c| c.is_ascii_digit()))
            .collect();
        v.sort();
        v.iter()
            .map(|(k, w)| format!("{k} {w}"))
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// Runs an action by name, as a key or the palette would.
    pub fn run_action(&mut self, name: &str) {
        let Some(spec) = self.cx.keymap.action(name).copied() else {
            let msg = if super::all_actions().iter().any(|a| a.name == name) {
                format!("`{name}` is not available in read-only mode")
            } else {
                format!("unknown action `{name}`")
            };
            self.apply(Effect::Toast(Level::Warn, msg));
            return;
        };
        if spec.context != GLOBAL {
            // A pane's action from the palette: give it to that pane.
            let target = self
                .panes
                .iter()
                .position(|p| p.id() == spec.context || p.context() == spec.context);
            if let Some(i) = target {
                let id = self.panes[i].id();
                if self.layout.contains(id) {
                    self.focus = id;
                }
                self.panes[i].on_action(spec.name, &mut self.cx);
                self.apply_effects();
            }
            return;
        }
        self.run_global(spec.name);
    }

    /// Runs one of the app's own actions ([`super::ACTIONS`]); false when
    /// `name` is not one (a test checks every entry of the table has a
    /// handler here).
    pub(super) fn run_global(&mut self, name: &str) -> bool {
        match name {
            "app.quit" => self.request_quit(),
            "app.help" => {
                self.overlay = Some(Overlay::Help(HelpOverlay::new(
                    &self.cx.keymap,
                    self.pane(self.focus())
                        .map(|p| p.context())
                        .unwrap_or(GLOBAL),
                )))
            }
            "app.palette" => {
                self.overlay = Some(Overlay::Palette(PaletteOverlay::new(self.completions())));
            }
            "app.focus_next" => self.cycle_focus(1),
            "app.focus_prev" => self.cycle_focus(-1),
            "app.zoom" => self.zoom = !self.zoom,
            "app.wider" => {
                self.layout
                    .resize(panes::sessions::ID, Direction::Horizontal, 5);
            }
            "app.narrower" => {
                self.layout
                    .resize(panes::sessions::ID, Direction::Horizontal, -5);
            }
            "app.taller" => {
                let f = self.focus;
                self.layout.resize(f, Direction::Vertical, 5);
            }
            "app.shorter" => {
                let f = self.focus;
                self.layout.resize(f, Direction::Vertical, -5);
            }
            "app.focus_sessions" => self.set_focus(panes::sessions::ID),
            "app.focus_files" => self.set_focus(panes::files::ID),
            "app.focus_skills" => self.set_focus(panes::skills::ID),
            "app.focus_offload" => self.set_focus(panes::offload::ID),
            "app.focus_command" => self.set_focus(panes::command::ID),
            "app.prompt" => {
                self.set_focus(panes::command::ID);
                self.pane_call::<panes::command::CommandPane, _>(panes::command::ID, |p, cx| {
                    p.start_typing(cx)
                });
            }
            "app.focus_logs" => self.set_focus(panes::logs::ID),
            "app.agent" => self.set_focus(panes::agent::ID),
            "app.grep" => {
                self.set_focus(panes::grep::ID);
                self.pane_call::<panes::grep::GrepPane, _>(panes::grep::ID, |p, _| p.opened());
            }
            "app.find" => {
                self.set_focus(panes::finder::ID);
                self.pane_call::<panes::finder::FinderPane, _>(panes::finder::ID, |p, cx| {
                    p.opened(cx)
                });
            }
            "app.focus_workspaces" => self.set_focus(panes::workspaces::ID),
            "app.focus_mcp" => self.set_focus(panes::mcp::ID),
            "app.mouse" => {
                self.mouse = !self.mouse;
                self.requests.push(HostRequest::Mouse(self.mouse));
                let msg = if self.mouse {
                    "mouse capture on"
                } else {
                    "mouse capture off: the terminal selects text now"
                };
                self.apply(Effect::Toast(Level::Info, msg.into()));
            }
            "app.shell" => self.apply(Effect::Shell),
            "app.suspend" => self.requests.push(HostRequest::Suspend),
            "app.redraw" => self.requests.push(HostRequest::Redraw),
            _ => return false,
        }
        true
    }

    /// The global action a key runs in a text field (help, quit): only
    /// keys that cannot be typed count, so `?` and `q` stay text.
    pub(super) fn text_field_global(&self, chord: KeyChord) -> Option<&'static str> {
        if is_printable(&chord) {
            return None;
        }
        self.cx
            .keymap
            .lookup(GLOBAL, chord)
            .map(|s| s.name)
            .filter(|n| matches!(*n, "app.help" | "app.quit"))
    }

    pub(super) fn overlay_key(&mut self, key: KeyEvent) {
        let chord = KeyChord::from_event(&key);
        let is_help = matches!(self.overlay, Some(Overlay::Help(_)));
        match self.text_field_global(chord) {
            // F1 over a palette or dialog: help on top, the overlay back
            // when help closes. F1 in help closes it.
            Some("app.help") if !is_help => {
                let ctx = match &self.overlay {
                    Some(Overlay::Palette(_)) => panes::palette::ID,
                    _ => GLOBAL,
                };
                self.behind_help = self.overlay.take();
                self.overlay = Some(Overlay::Help(HelpOverlay::new(&self.cx.keymap, ctx)));
                return;
            }
            Some("app.help") => {
                self.overlay = self.behind_help.take();
                return;
            }
            Some("app.quit") => {
                self.overlay = None;
                self.behind_help = None;
                self.request_quit();
                return;
            }
            _ => {}
        }
        self.overlay_key_inner(key);
        if is_help && self.overlay.is_none() {
            self.overlay = self.behind_help.take();
        }
    }

    pub(super) fn overlay_key_inner(&mut self, key: KeyEvent) {
        let Some(ov) = self.overlay.take() else {
            return;
        };
        use ratatui::crossterm::event::KeyCode;
        let chord = KeyChord::from_event(&key);
        match ov {
            Overlay::Help(mut h) => {
                if h.typing() {
                    // The search prompt takes every key (Enter, Esc too).
                    h.on_key(&key);
                } else if let Some(spec) = self.cx.keymap.lookup(panes::help::ID, chord).copied() {
                    if !h.on_action(spec.name) {
                        return;
                    }
                } else if matches!(key.code, KeyCode::Esc) {
                    return;
                } else {
                    h.on_key(&key);
                }
                self.overlay = Some(Overlay::Help(h));
            }
            Overlay::Palette(mut p) => {
                p.pools = self.completions();
                match p.on_key(&key) {
                    Some(cmd) => self.run_palette(cmd),
                    None if p.closed => {}
                    None => self.overlay = Some(Overlay::Palette(p)),
                }
            }
            Overlay::Confirm { pane, message, tag } => match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter
                    if pane == APP_DIALOG && tag == DialogTag::Quit =>
                {
                    self.quit = true;
                }
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    self.with_pane(pane, |p, cx| p.on_event(&PaneEvent::Confirmed(tag), cx));
                }
                KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => {}
                _ => self.overlay = Some(Overlay::Confirm { pane, message, tag }),
            },
            Overlay::Choose {
                pane,
                message,
                choices,
                on_cancel,
            } => {
                let picked = match key.code {
                    KeyCode::Char(c) if chord.mods.is_empty() => choices
                        .iter()
                        .find(|ch| ch.key.eq_ignore_ascii_case(&c))
                        .map(|ch| ch.tag.clone()),
                    _ => None,
                };
                match (picked, key.code) {
                    (Some(tag), _) => {
                        self.with_pane(pane, |p, cx| p.on_event(&PaneEvent::Confirmed(tag), cx));
                    }
                    (None, KeyCode::Esc) => {
                        if let Some(m) = on_cancel {
                            self.apply(Effect::Toast(Level::Info, m));
                        }
                    }
                    // Any other key leaves the question up (a stray Enter
                    // must not pick for the user).
                    (None, _) => {
                        self.overlay = Some(Overlay::Choose {
                            pane,
                            message,
                            choices,
                            on_cancel,
                        })
                    }
                }
            }
            Overlay::Prompt {
                pane,
                title,
                mut input,
                tag,
            } => match key.code {
                KeyCode::Enter => {
                    let text = input.into_text();
                    self.with_pane(pane, |p, cx| {
                        p.on_event(&PaneEvent::Input { tag, text }, cx)
                    });
                }
                KeyCode::Esc => {}
                _ => {
                    input.key(&key);
                    self.overlay = Some(Overlay::Prompt {
                        pane,
                        title,
                        input,
                        tag,
                    });
                }
            },
        }
    }
}

/// Alt+key chords ratatui-textarea gives a meaning to (word and
/// paragraph moves, word deletes, scroll): the editor keeps them whole.
const EDITOR_ALT_CHARS: &str = "hdbf<>pn[]v";

impl App {
    /// The key a terminal without the keyboard enhancement protocol meant
    /// when it sent Alt+`c`: Esc pressed then `c` quickly arrive as the
    /// bytes of Alt+`c` (crossterm reads `ESC 2` in one read as Alt-2).
    /// Taken as Esc then `c` when nothing is bound to Alt+`c` where the
    /// key lands (the overlay, or the focused pane's contexts and the
    /// global one) and the editor does not use it; `None` otherwise, and
    /// always when the terminal speaks the kitty protocol (an Alt+key is
    /// then really one).
    pub(super) fn esc_then_key(&self, key: &KeyEvent) -> Option<KeyEvent> {
        use ratatui::crossterm::event::{KeyCode, KeyModifiers};
        if self.keyboard_enhanced || key.modifiers != KeyModifiers::ALT {
            return None;
        }
        let KeyCode::Char(c) = key.code else {
            return None;
        };
        let chord = KeyChord::from_event(key);
        let contexts: Vec<&str> = match &self.overlay {
            Some(Overlay::Help(_)) => vec![panes::help::ID],
            Some(Overlay::Palette(_)) => vec![panes::palette::ID],
            Some(_) => vec![],
            None => {
                let p = self.pane(self.focus())?;
                if p.id() == panes::editor::ID
                    && p.text_input_active()
                    && EDITOR_ALT_CHARS.contains(c)
                {
                    return None;
                }
                vec![p.context(), p.id(), GLOBAL]
            }
        };
        if contexts
            .iter()
            .any(|ctx| self.cx.keymap.lookup(ctx, chord).is_some())
        {
            return None;
        }
        Some(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
    }
}

/// Whether a key types a character (no Ctrl or Alt).
pub(super) fn is_printable(k: &KeyChord) -> bool {
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};
    matches!(k.code, KeyCode::Char(_))
        && !k.mods.intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
}

/// The digit of a plain digit key (no ctrl/alt), else `None`.
fn unbound_digit(key: &KeyEvent) -> Option<char> {
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};
    match key.code {
        KeyCode::Char(c)
            if c.is_ascii_digit()
                && !key
                    .modifiers
                    .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            Some(c)
        }
        _ => None,
    }
}
