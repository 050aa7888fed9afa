//! The `:` command palette with completion.
//!
//! Commands: `:session <id>`, `:theme <name>`, `:quit`, `:help`,
//! `:agent [URL MODEL]` (the Agent pane, optionally with a model), and any
//! action by name (`:files.delete`, `:logs.save`). `:ws <id>` and
//! `:profile <name>` are parsed now and answered with a note until the
//! workspace manager exists; a later helper replaces
//! [`PaletteCommand::NeedsManager`] with real switching.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::Ctx;
use crate::tui::keymap::ActionSpec;
use crate::tui::widgets::text;

/// Keymap context of the palette (for help; the palette reads keys raw).
pub const ID: &str = "palette";

/// Keys of the palette, listed for the footer and help.
pub const ACTIONS: &[ActionSpec] = &[
    a("palette.complete", "complete", &["tab"]),
    a("palette.run", "run", &["enter"]),
    a("palette.close", "close", &["esc"]),
];

const fn a(name: &'static str, desc: &'static str, keys: &'static [&'static str]) -> ActionSpec {
    ActionSpec {
        name,
        context: ID,
        desc,
        keys,
        dangerous: false,
        hint: true,
    }
}

/// Words the palette knows besides action names: `(word, takes an
/// argument, description)`.
const COMMANDS: &[(&str, bool, &str)] = &[
    ("session", true, "select a session"),
    ("theme", true, "switch theme"),
    ("quit", false, "quit wsbench"),
    ("help", false, "show keys"),
    (
        "agent",
        false,
        "agent pane; `:agent URL MODEL` sets the model",
    ),
    ("ws", true, "open a workspace (manager)"),
    ("profile", true, "switch profile (manager)"),
];

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaletteCommand {
    /// Quit.
    Quit,
    /// Select a session.
    Session(String),
    /// Switch theme.
    Theme(String),
    /// Run an action by name.
    Action(String),
    /// `agent URL MODEL`: open the Agent pane with this model server.
    Agent(String),
    /// `ws` / `profile`: needs the workspace manager.
    NeedsManager(String),
    /// Not a command.
    Unknown(String),
}

/// State of the open palette.
#[derive(Debug, Default)]
pub struct PaletteOverlay {
    /// The typed text (without the leading `:`).
    pub input: String,
    selected: usize,
    candidates: Vec<(String, String)>,
    /// Set when Esc closed it.
    pub closed: bool,
}

/// Parses a palette line.
pub fn parse(line: &str, actions: &[String]) -> PaletteCommand {
    let line = line.trim().trim_start_matches(':').trim();
    let (word, arg) = match line.split_once(char::is_whitespace) {
        Some((w, a)) => (w, a.trim()),
        None => (line, ""),
    };
    match (word, arg) {
        ("q" | "quit" | "q!" | "qa", "") => PaletteCommand::Quit,
        ("help", "") => PaletteCommand::Action("app.help".into()),
        ("agent", "") => PaletteCommand::Action("app.agent".into()),
        ("agent", setting) => PaletteCommand::Agent(setting.to_string()),
        ("session" | "s", id) if !id.is_empty() => PaletteCommand::Session(id.to_string()),
        ("theme", name) if !name.is_empty() => PaletteCommand::Theme(name.to_string()),
        ("ws" | "profile", _) => PaletteCommand::NeedsManager(line.to_string()),
        (w, "") if actions.iter().any(|a| a == w) => PaletteCommand::Action(w.to_string()),
        _ => PaletteCommand::Unknown(line.to_string()),
    }
}

impl PaletteOverlay {
    /// An empty palette.
    pub fn new() -> Self {
        PaletteOverlay::default()
    }

    /// Pasted text (already one line).
    pub fn paste(&mut self, s: &str) {
        self.input.push_str(s);
        self.selected = 0;
    }

    fn refresh(&mut self, actions: &[String], themes: &[String], sessions: &[String]) {
        let input = self.input.trim_start();
        let mut out: Vec<(String, String)> = Vec::new();
        if let Some((word, arg)) = input.split_once(' ') {
            let arg = arg.trim_start();
            let pool: &[String] = match word {
                "session" | "s" => sessions,
                "theme" => themes,
                _ => &[],
            };
            let mut hits: Vec<&String> = pool.iter().filter(|s| s.starts_with(arg)).collect();
            hits.extend(
                pool.iter()
                    .filter(|s| !s.starts_with(arg) && s.contains(arg)),
            );
            out.extend(
                hits.into_iter()
                    .map(|s| (format!("{word} {s}"), String::new())),
            );
        } else {
            for (w, _, d) in COMMANDS {
                if w.starts_with(input) {
                    out.push((w.to_string(), d.to_string()));
                }
            }
            for a in actions {
                if a.starts_with(input) || (!input.is_empty() && a.contains(input)) {
                    out.push((a.clone(), String::new()));
                }
            }
        }
        self.candidates = out;
        if self.selected >= self.candidates.len() {
            self.selected = 0;
        }
    }

    /// A key; returns a command when Enter runs one. Sets `closed` on Esc.
    pub fn on_key(
        &mut self,
        key: &KeyEvent,
        actions: &[String],
        themes: &[String],
        sessions: &[String],
    ) -> Option<PaletteCommand> {
        self.refresh(actions, themes, sessions);
        match key.code {
            KeyCode::Esc => {
                self.closed = true;
                None
            }
            KeyCode::Enter => {
                // A partial word runs the highlighted completion.
                let input = self.input.trim();
                if let Some((c, _)) = self.candidates.get(self.selected)
                    && c.starts_with(input)
                    && c != input
                {
                    let picked = parse(c, actions);
                    if !matches!(picked, PaletteCommand::Unknown(_)) {
                        return Some(picked);
                    }
                }
                Some(parse(&self.input, actions))
            }
            KeyCode::Tab | KeyCode::Right => {
                if let Some((c, _)) = self.candidates.get(self.selected) {
                    let takes_arg = COMMANDS.iter().any(|(w, arg, _)| *arg && w == c);
                    self.input = if takes_arg {
                        format!("{c} ")
                    } else {
                        c.clone()
                    };
                    self.selected = 0;
                    self.refresh(actions, themes, sessions);
                }
                None
            }
            KeyCode::Down => {
                if !self.candidates.is_empty() {
                    self.selected = (self.selected + 1) % self.candidates.len();
                }
                None
            }
            KeyCode::Up | KeyCode::BackTab => {
                if !self.candidates.is_empty() {
                    self.selected =
                        (self.selected + self.candidates.len() - 1) % self.candidates.len();
                }
                None
            }
            KeyCode::Backspace => {
                if self.input.pop().is_none() {
                    self.closed = true;
                }
                self.selected = 0;
                self.refresh(actions, themes, sessions);
                None
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.input.clear();
                None
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.input.push(c);
                self.selected = 0;
                self.refresh(actions, themes, sessions);
                None
            }
            _ => None,
        }
    }

    /// Draws the palette near the top of `area`.
    pub fn render(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        let t = &cx.theme;
        let actions: Vec<String> = cx
            .keymap
            .all()
            .iter()
            .map(|b| b.spec.name.to_string())
            .collect();
        let themes = crate::tui::theme::Theme::available(None);
        self.refresh(&actions, &themes, &cx.sessions);
        let w = area.width.saturating_sub(4).clamp(10, 70);
        let list_h = (self.candidates.len() as u16).min(8);
        let h = (3 + list_h).min(area.height);
        let r = Rect::new(
            area.x + (area.width.saturating_sub(w)) / 2,
            area.y + 1.min(area.height),
            w,
            h,
        );
        let r = r.intersection(area);
        if r.height < 3 {
            return;
        }
        f.render_widget(Clear, r);
        let block = cx.block("Command", "tab complete · enter run", true);
        let inner = block.inner(r);
        f.render_widget(block, r);
        let shown = format!(":{}", text::display(&self.input));
        let visible = text::truncate_left(&shown, inner.width.saturating_sub(1) as usize);
        f.buffer_mut()
            .set_string(inner.x, inner.y, &visible, t.base);
        f.set_cursor_position((
            (inner.x + text::width(&visible) as u16).min(inner.x + inner.width.saturating_sub(1)),
            inner.y,
        ));
        let rows = inner.height.saturating_sub(1) as usize;
        let start = self.selected.saturating_sub(rows.saturating_sub(1));
        let lines: Vec<Line<'_>> = self
            .candidates
            .iter()
            .enumerate()
            .skip(start)
            .take(rows)
            .map(|(i, (c, d))| {
                let st = if i == self.selected {
                    t.selection
                } else {
                    t.base
                };
                Line::from(vec![
                    Span::styled(format!(" {c}"), st),
                    Span::styled(
                        if d.is_empty() {
                            String::new()
                        } else {
                            format!("  {d}")
                        },
                        t.muted,
                    ),
                ])
            })
            .collect();
        let list = Rect::new(
            inner.x,
            inner.y + 1,
            inner.width,
            inner.height.saturating_sub(1),
        );
        f.render_widget(Paragraph::new(lines), list);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEventKind;

    fn k(code: KeyCode) -> KeyEvent {
        KeyEvent::new_with_kind(code, KeyModifiers::NONE, KeyEventKind::Press)
    }

    #[test]
    fn parses_commands() {
        let acts = vec!["files.delete".to_string()];
        assert_eq!(
            parse(":agent http://h:1/v1 m", &acts),
            PaletteCommand::Agent("http://h:1/v1 m".into())
        );
        assert_eq!(
            parse(":agent", &acts),
            PaletteCommand::Action("app.agent".into())
        );
        assert_eq!(parse(":quit", &acts), PaletteCommand::Quit);
        assert_eq!(
            parse("session s-001", &acts),
            PaletteCommand::Session("s-001".into())
        );
        assert_eq!(
            parse("theme light", &acts),
            PaletteCommand::Theme("light".into())
        );
        assert_eq!(
            parse("files.delete", &acts),
            PaletteCommand::Action("files.delete".into())
        );
        assert!(matches!(
            parse("ws abc", &acts),
            PaletteCommand::NeedsManager(_)
        ));
        assert!(matches!(
            parse("frobnicate", &acts),
            PaletteCommand::Unknown(_)
        ));
    }

    #[test]
    fn tab_completes_commands_and_arguments() {
        let acts: Vec<String> = vec![];
        let themes = vec!["dark".to_string(), "light".to_string()];
        let sessions = vec!["s-001".to_string(), "s-002".to_string()];
        let mut p = PaletteOverlay::new();
        for c in "ses".chars() {
            p.on_key(&k(KeyCode::Char(c)), &acts, &themes, &sessions);
        }
        p.on_key(&k(KeyCode::Tab), &acts, &themes, &sessions);
        assert_eq!(p.input, "session ");
        p.on_key(&k(KeyCode::Down), &acts, &themes, &sessions);
        p.on_key(&k(KeyCode::Tab), &acts, &themes, &sessions);
        assert_eq!(p.input, "session s-002");
        let cmd = p.on_key(&k(KeyCode::Enter), &acts, &themes, &sessions);
        assert_eq!(cmd, Some(PaletteCommand::Session("s-002".into())));
        let mut p = PaletteOverlay::new();
        for c in "theme l".chars() {
            p.on_key(&k(KeyCode::Char(c)), &acts, &themes, &sessions);
        }
        // Enter on a partial argument picks the highlighted completion.
        let cmd = p.on_key(&k(KeyCode::Enter), &acts, &themes, &sessions);
        assert_eq!(cmd, Some(PaletteCommand::Theme("light".into())));
    }
}
