//! The `:` command palette with completion.
//!
//! Commands: `:session <id>` (an id the workspace does not have is
//! refused with the close matches; `:session new <id>` starts a new
//! session), `:ws <id>` and `:profile <name>` (through the workspace
//! manager), `:theme <name>`, `:quit`, `:help`, `:agent [URL MODEL]` (the
//! Agent pane, optionally with a model), and any action by name
//! (`:files.delete`, `:logs.save`). Tab completes command words and their
//! arguments: session ids, workspace ids, profiles and themes.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::tui::keymap::ActionSpec;
use crate::tui::pane::Ctx;
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
    (
        "session",
        true,
        "select a session (`:session new <id>` starts one)",
    ),
    ("theme", true, "switch theme"),
    ("quit", false, "quit wsbench"),
    ("help", false, "show keys"),
    (
        "agent",
        false,
        "agent pane; `:agent URL MODEL` sets the model",
    ),
    ("ws", true, "open a workspace of the profile"),
    ("profile", true, "switch profile"),
    (
        "grep",
        true,
        "search file contents: PATTERN [PATH] [--glob G] [-i] [-F]",
    ),
];

/// Indexes of `items` (`(id, label)`) that fuzzy-match `needle`, best
/// first (nucleo's score of `label id`; smart case; ties keep table
/// order). An empty needle keeps every item in order.
pub fn fuzzy_rank(needle: &str, items: &[(String, String)]) -> Vec<usize> {
    use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
    use nucleo_matcher::{Config, Matcher, Utf32Str};
    if needle.trim().is_empty() {
        return (0..items.len()).collect();
    }
    let mut m = Matcher::new(Config::DEFAULT);
    let pat = Pattern::parse(needle, CaseMatching::Smart, Normalization::Smart);
    let mut buf = Vec::new();
    let mut scored: Vec<(u32, usize)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, (id, label))| {
            let hay = format!("{label} {id}");
            pat.score(Utf32Str::new(&hay, &mut buf), &mut m)
                .map(|s| (s, i))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, i)| i).collect()
}

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaletteCommand {
    /// Quit.
    Quit,
    /// Select a session.
    Session(String),
    /// `session new <id>`: select a session that need not exist yet (its
    /// first command creates it).
    NewSession(String),
    /// Switch theme.
    Theme(String),
    /// Run an action by name.
    Action(String),
    /// `agent URL MODEL`: open the Agent pane with this model server.
    Agent(String),
    /// `grep PATTERN [PATH] [--glob G]`: the Grep pane searches (the
    /// arguments as typed; empty opens the pane for typing).
    Grep(String),
    /// `ws <id>`: open a workspace of the current profile (through the
    /// Workspaces pane and its manager); `""` when no id was given.
    OpenWorkspace(String),
    /// `profile <name>`: switch to another profile's manager; `""` when
    /// no name was given.
    SwitchProfile(String),
    /// Not a command.
    Unknown(String),
}

/// What the palette completes from; the app fills it when the palette
/// opens and before each key (listings may land while it is open).
#[derive(Debug, Clone, Default)]
pub struct Completions {
    /// Action names (`files.delete`).
    pub actions: Vec<String>,
    /// `(action name, human label)` of every action (`("files.delete",
    /// "delete")`): what the fuzzy ranking matches and the list shows,
    /// the id dimmed beside it.
    pub labels: Vec<(String, String)>,
    /// Theme names.
    pub themes: Vec<String>,
    /// Session ids of the open workspace.
    pub sessions: Vec<String>,
    /// Workspace ids of the current profile.
    pub workspaces: Vec<String>,
    /// Profile names.
    pub profiles: Vec<String>,
    /// Built-in profiles that cannot work here, with the reason: listed
    /// under the usable ones so `:profile e2b` is never a mystery.
    pub unavailable_profiles: Vec<(String, String)>,
    /// A short description of each workspace id (`user/agent · state`).
    pub workspace_notes: Vec<(String, String)>,
}

/// State of the open palette.
#[derive(Debug, Default)]
pub struct PaletteOverlay {
    /// The typed text (without the leading `:`).
    pub input: String,
    selected: usize,
    candidates: Vec<(String, String)>,
    /// What it completes from.
    pub pools: Completions,
    /// Set when Esc closed it.
    pub closed: bool,
    /// Tab cycling through an ambiguous list: the list as it was at the
    /// first Tab, kept while the input is what the last Tab filled in (a
    /// filled-in id would otherwise narrow the list to itself).
    cycle: Option<Cycle>,
}

#[derive(Debug)]
struct Cycle {
    list: Vec<(String, String)>,
    filled: String,
}

/// Up to `max` of `pool` that look like `wanted` (a typo, a prefix, a
/// part), best first: what an unknown id's error suggests. Empty when
/// nothing is close.
pub fn close_matches(wanted: &str, pool: &[String], max: usize) -> Vec<String> {
    let w = wanted.to_lowercase();
    let mut scored: Vec<(f32, &String)> = pool
        .iter()
        .filter_map(|c| {
            let l = c.to_lowercase();
            let score = if l.starts_with(&w) || w.starts_with(&l) {
                2.0
            } else if l.contains(&w) || w.contains(&l) {
                1.5
            } else {
                similar::TextDiff::from_chars(w.as_str(), l.as_str()).ratio()
            };
            (score >= 0.6 && !l.is_empty()).then_some((score, c))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(max)
        .map(|(_, c)| c.clone())
        .collect()
}

/// The first word of `s` (`""` when there is none).
fn first_word(s: &str) -> String {
    s.split_whitespace().next().unwrap_or("").to_string()
}

/// The focus action of a pane named by a palette word (`ws`, `files`,
/// `mcp`, …), for `:name` with no argument; `None` for other words.
pub fn pane_focus_action(word: &str) -> Option<&'static str> {
    Some(match word {
        "ws" | "workspace" | "workspaces" => "app.focus_workspaces",
        "session" | "sessions" | "s" => "app.focus_sessions",
        "files" | "file" => "app.focus_files",
        "skills" | "skill" => "app.focus_skills",
        "offload" => "app.focus_offload",
        "command" | "cmd" => "app.focus_command",
        "logs" | "log" => "app.focus_logs",
        "mcp" => "app.focus_mcp",
        _ => return None,
    })
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
        ("grep" | "rg", args) => PaletteCommand::Grep(args.to_string()),
        ("session" | "s", arg) if !arg.is_empty() => match arg.split_once(char::is_whitespace) {
            Some(("new", id)) => PaletteCommand::NewSession(id.trim().to_string()),
            _ => PaletteCommand::Session(arg.to_string()),
        },
        ("theme", name) if !name.is_empty() => PaletteCommand::Theme(name.to_string()),
        // `:ws`, `:files`, `:mcp` … alone focus their pane, as k9s's
        // `:pods` shows pods.
        (w, "") if pane_focus_action(w).is_some() => {
            PaletteCommand::Action(pane_focus_action(w).unwrap_or_default().into())
        }
        ("ws", arg) => PaletteCommand::OpenWorkspace(first_word(arg)),
        ("profile", arg) => PaletteCommand::SwitchProfile(first_word(arg)),
        (w, "") if actions.iter().any(|a| a == w) => PaletteCommand::Action(w.to_string()),
        _ => PaletteCommand::Unknown(line.to_string()),
    }
}

impl PaletteOverlay {
    /// An empty palette completing from `pools`.
    pub fn new(pools: Completions) -> Self {
        PaletteOverlay {
            pools,
            ..PaletteOverlay::default()
        }
    }

    /// Pasted text (already one line).
    pub fn paste(&mut self, s: &str) {
        self.input.push_str(s);
        self.selected = 0;
    }

    fn refresh(&mut self) {
        if let Some(c) = &self.cycle {
            if c.filled == self.input {
                self.candidates = c.list.clone();
                return;
            }
            self.cycle = None;
        }
        let input = self.input.trim_start();
        let p = &self.pools;
        let mut out: Vec<(String, String)> = Vec::new();
        if let Some((word, arg)) = input.split_once(' ') {
            let arg = arg.trim_start();
            let pool: &[String] = match word {
                "session" | "s" => &p.sessions,
                "theme" => &p.themes,
                "ws" => &p.workspaces,
                "profile" => &p.profiles,
                _ => &[],
            };
            let note = |s: &String| -> String {
                if word == "ws" {
                    p.workspace_notes
                        .iter()
                        .find(|(id, _)| id == s)
                        .map(|(_, n)| n.clone())
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            };
            let unavailable: &[(String, String)] = if word == "profile" {
                &p.unavailable_profiles
            } else {
                &[]
            };
            // Prefix matches first (unavailable profiles included, with
            // their reason), then names that merely contain the text:
            // `:profile e` means `e2b` before `docker`.
            for prefix in [true, false] {
                let fits = |s: &str| {
                    if prefix {
                        s.starts_with(arg)
                    } else {
                        !s.starts_with(arg) && s.contains(arg)
                    }
                };
                out.extend(
                    pool.iter()
                        .filter(|s| fits(s))
                        .map(|s| (format!("{word} {s}"), note(s))),
                );
                out.extend(
                    unavailable
                        .iter()
                        .filter(|(n, _)| fits(n))
                        .map(|(n, why)| (format!("profile {n}"), format!("unavailable: {why}"))),
                );
            }
        } else {
            for (w, _, d) in COMMANDS {
                if w.starts_with(input) {
                    out.push((w.to_string(), d.to_string()));
                }
            }
            // Actions by fuzzy score of their label and id (`gre` finds
            // `app.grep`, `search` finds every search).
            let labels: Vec<(String, String)> = if p.labels.is_empty() {
                p.actions
                    .iter()
                    .map(|a| (a.clone(), String::new()))
                    .collect()
            } else {
                p.labels.clone()
            };
            for i in fuzzy_rank(input, &labels) {
                out.push(labels[i].clone());
            }
        }
        self.candidates = out;
        if self.selected >= self.candidates.len() {
            self.selected = 0;
        }
    }

    /// Tab: one candidate is filled in; several (an empty or ambiguous
    /// argument) are kept listed and each Tab fills in the next one.
    fn complete(&mut self) {
        let n = self.candidates.len();
        if n == 0 {
            return;
        }
        if self.cycle.is_some() {
            // Already cycling: the next one, unless the arrows picked
            // another than the one filled in.
            if self.candidates[self.selected].0 == self.input {
                self.selected = (self.selected + 1) % n;
            }
        } else if n > 1 {
            self.cycle = Some(Cycle {
                list: self.candidates.clone(),
                filled: String::new(),
            });
        }
        let c = &self.candidates[self.selected].0;
        let takes_arg = COMMANDS.iter().any(|(w, arg, _)| *arg && w == c);
        self.input = if takes_arg {
            format!("{c} ")
        } else {
            c.clone()
        };
        match &mut self.cycle {
            Some(cy) => cy.filled = self.input.clone(),
            None => self.selected = 0,
        }
        self.refresh();
    }

    /// A key; returns a command when Enter runs one. Sets `closed` on Esc.
    pub fn on_key(&mut self, key: &KeyEvent) -> Option<PaletteCommand> {
        self.refresh();
        let actions = self.pools.actions.clone();
        match key.code {
            KeyCode::Esc => {
                self.closed = true;
                None
            }
            KeyCode::Enter => {
                // A partial word runs the highlighted completion; a
                // whole one-word command or action name runs as typed.
                let input = self.input.trim();
                let direct = parse(input, &actions);
                if !input.contains(char::is_whitespace)
                    && !matches!(direct, PaletteCommand::Unknown(_))
                {
                    return Some(direct);
                }
                if let Some((c, _)) = self.candidates.get(self.selected)
                    && (c.starts_with(input) || !input.contains(char::is_whitespace))
                    && c != input
                {
                    let picked = parse(c, &actions);
                    if !matches!(picked, PaletteCommand::Unknown(_)) {
                        return Some(picked);
                    }
                }
                Some(parse(&self.input, &actions))
            }
            KeyCode::Tab | KeyCode::Right => {
                self.complete();
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
                // On an empty line Backspace does nothing (Esc closes):
                // closing here would turn the next letters into pane keys.
                self.input.pop();
                self.selected = 0;
                self.refresh();
                None
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.input.clear();
                None
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.input.push(c);
                self.selected = 0;
                self.refresh();
                None
            }
            _ => None,
        }
    }

    /// Draws the palette near the top of `area`.
    pub fn render(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        let t = &cx.theme;
        self.refresh();
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
                // An action shows its label, the id dimmed beside it.
                if !d.is_empty() && self.pools.actions.contains(c) {
                    return Line::from(vec![
                        Span::styled(format!(" {d}"), st),
                        Span::styled(format!("  {c}"), t.muted),
                    ]);
                }
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
            PaletteCommand::OpenWorkspace(_)
        ));
        // `:ws` alone focuses the pane (k9s `:pods`), as every pane name.
        for (w, a) in [
            ("ws", "app.focus_workspaces"),
            (":mcp", "app.focus_mcp"),
            ("files", "app.focus_files"),
            ("sessions", "app.focus_sessions"),
            ("logs", "app.focus_logs"),
        ] {
            assert!(
                matches!(parse(w, &acts), PaletteCommand::Action(ref n) if n == a),
                "{w}"
            );
        }
        assert!(matches!(
            parse("frobnicate", &acts),
            PaletteCommand::Unknown(_)
        ));
    }

    #[test]
    fn tab_completes_commands_and_arguments() {
        let pools = Completions {
            themes: vec!["dark".to_string(), "light".to_string()],
            sessions: vec!["s-001".to_string(), "s-002".to_string()],
            workspaces: vec!["ws-alpha".to_string(), "ws-beta".to_string()],
            profiles: vec!["local".to_string(), "docker".to_string()],
            ..Completions::default()
        };
        let mut p = PaletteOverlay::new(pools.clone());
        for c in "ses".chars() {
            p.on_key(&k(KeyCode::Char(c)));
        }
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "session ");
        p.on_key(&k(KeyCode::Down));
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "session s-002");
        let cmd = p.on_key(&k(KeyCode::Enter));
        assert_eq!(cmd, Some(PaletteCommand::Session("s-002".into())));
        let mut p = PaletteOverlay::new(pools.clone());
        for c in "theme l".chars() {
            p.on_key(&k(KeyCode::Char(c)));
        }
        // Enter on a partial argument picks the highlighted completion.
        let cmd = p.on_key(&k(KeyCode::Enter));
        assert_eq!(cmd, Some(PaletteCommand::Theme("light".into())));
        // Workspace ids and profiles complete too.
        let mut p = PaletteOverlay::new(pools.clone());
        for c in "ws b".chars() {
            p.on_key(&k(KeyCode::Char(c)));
        }
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "ws ws-beta");
        let mut p = PaletteOverlay::new(pools);
        for c in "profile d".chars() {
            p.on_key(&k(KeyCode::Char(c)));
        }
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "profile docker");
    }

    #[test]
    fn unavailable_profiles_are_shown_with_the_reason() {
        let pools = Completions {
            profiles: vec!["local".to_string()],
            unavailable_profiles: vec![("e2b".to_string(), "needs E2B_API_KEY".to_string())],
            ..Completions::default()
        };
        let mut p = PaletteOverlay::new(pools);
        for c in "profile ".chars() {
            p.on_key(&k(KeyCode::Char(c)));
        }
        p.refresh();
        assert_eq!(
            p.candidates,
            [
                ("profile local".to_string(), String::new()),
                (
                    "profile e2b".to_string(),
                    "unavailable: needs E2B_API_KEY".to_string()
                )
            ]
        );
    }

    fn typed(pools: &Completions, line: &str) -> PaletteOverlay {
        let mut p = PaletteOverlay::new(pools.clone());
        for c in line.chars() {
            p.on_key(&k(KeyCode::Char(c)));
        }
        p
    }

    #[test]
    fn tab_on_an_empty_or_ambiguous_argument_cycles_the_list() {
        let pools = Completions {
            workspaces: vec!["ws-alpha".to_string(), "ws-beta".to_string()],
            workspace_notes: vec![
                ("ws-alpha".to_string(), "tester/coder · running".to_string()),
                (
                    "ws-beta".to_string(),
                    "tester/reviewer · stopped".to_string(),
                ),
            ],
            profiles: vec!["local".to_string(), "docker".to_string()],
            unavailable_profiles: vec![("e2b".to_string(), "needs E2B_API_KEY".to_string())],
            ..Completions::default()
        };
        let mut p = typed(&pools, "ws ");
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "ws ws-alpha");
        // The list stays, with its notes, while Tab cycles.
        assert_eq!(p.candidates.len(), 2);
        assert_eq!(p.candidates[1].1, "tester/reviewer · stopped");
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "ws ws-beta");
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "ws ws-alpha");
        // Typing ends the cycle: the list narrows again.
        p.on_key(&k(KeyCode::Backspace));
        assert_eq!(p.candidates.len(), 1);
        // Profiles: the unavailable one is in the cycle with its reason.
        let mut p = typed(&pools, "profile ");
        let mut seen = Vec::new();
        for _ in 0..3 {
            p.on_key(&k(KeyCode::Tab));
            seen.push(p.input.clone());
        }
        assert_eq!(seen, ["profile local", "profile docker", "profile e2b"]);
        assert_eq!(p.candidates[2].1, "unavailable: needs E2B_API_KEY");
        // Prefix before substring: `e` is e2b first, docker after.
        let mut p = typed(&pools, "profile e");
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "profile e2b");
        p.on_key(&k(KeyCode::Tab));
        assert_eq!(p.input, "profile docker");
        // Enter runs what Tab filled in.
        let cmd = p.on_key(&k(KeyCode::Enter));
        assert_eq!(cmd, Some(PaletteCommand::SwitchProfile("docker".into())));
    }

    #[test]
    fn backspace_on_an_empty_line_keeps_the_palette() {
        let mut p = PaletteOverlay::new(Completions::default());
        p.on_key(&k(KeyCode::Char('x')));
        p.on_key(&k(KeyCode::Backspace));
        p.on_key(&k(KeyCode::Backspace));
        assert!(!p.closed, "the next letters must not become pane keys");
        p.on_key(&k(KeyCode::Char('q')));
        assert_eq!(p.input, "q");
    }

    #[test]
    fn session_new_is_its_own_command() {
        assert_eq!(
            parse("session new s-9", &[]),
            PaletteCommand::NewSession("s-9".into())
        );
        // A session may be called `new`.
        assert_eq!(
            parse("session new", &[]),
            PaletteCommand::Session("new".into())
        );
    }

    #[test]
    fn close_matches_rank_typos_and_parts() {
        let pool: Vec<String> = ["s-001", "s-002", "demo-bugfix-1", "other"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(close_matches("s-01", &pool, 3), ["s-001", "s-002"]);
        assert_eq!(close_matches("bugfix", &pool, 3), ["demo-bugfix-1"]);
        assert!(close_matches("zzzzzz", &pool, 3).is_empty());
        assert_eq!(close_matches("s-00", &pool, 1), ["s-001"]);
    }
}

#[cfg(test)]
mod fuzzy_tests {
    use super::*;

    fn items() -> Vec<(String, String)> {
        [
            ("logs.search", "search"),
            ("app.grep", "grep: search file contents"),
            ("mcp_tools.page_up", "page up"),
            ("files.filter", "filter"),
            ("app.palette", "command palette"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
    }

    /// Issue 19: `gre` and `search` find the Grep action; ranking is by
    /// score (the tighter match first), not table order; a needle that
    /// matches nothing lists nothing; an empty one lists all in order.
    #[test]
    fn fuzzy_rank_orders_a_fixed_list_by_score() {
        let it = items();
        let names = |needle: &str| -> Vec<&str> {
            fuzzy_rank(needle, &it)
                .into_iter()
                .map(|i| it[i].0.as_str())
                .collect()
        };
        assert_eq!(names("gre")[0], "app.grep");
        assert_eq!(names("search"), ["logs.search", "app.grep"]);
        assert_eq!(names("pgup")[0], "mcp_tools.page_up");
        assert_eq!(names("fltr")[0], "files.filter");
        assert!(names("zzzq").is_empty());
        assert_eq!(names("").len(), it.len());
    }

    /// The palette lists actions by label, ranked, and Enter on a fuzzy
    /// fragment runs the highlighted action.
    #[test]
    fn enter_on_a_fragment_runs_the_best_action() {
        let pools = Completions {
            actions: items().into_iter().map(|(a, _)| a).collect(),
            labels: items(),
            ..Completions::default()
        };
        let mut p = PaletteOverlay::new(pools);
        for c in "contents".chars() {
            p.on_key(&KeyEvent::from(KeyCode::Char(c)));
        }
        assert_eq!(
            p.on_key(&KeyEvent::from(KeyCode::Enter)),
            Some(PaletteCommand::Action("app.grep".into()))
        );
    }
}
