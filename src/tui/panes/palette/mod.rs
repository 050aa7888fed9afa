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

/// The palette's human label of an action: its pane, then what it does
/// (`Logs: search`, `MCP tools: page up`); an action of the whole app is
/// just its description (`quit`). Many panes share a description (`page
/// up`), so the pane is part of what is matched and shown.
pub fn action_label(spec: &ActionSpec) -> String {
    let pane = match spec.context {
        crate::tui::keymap::GLOBAL => return spec.desc.to_string(),
        "mcp" => "MCP".to_string(),
        "mcp_tools" => "MCP tools".to_string(),
        other => {
            let words = other.replace(['_', '.'], " ");
            let mut c = words.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        }
    };
    format!("{pane}: {}", spec.desc)
}

/// The argument entries the palette ranks with the actions: `session
/// <id>`, `ws <id>`, `profile <name>`, `theme <name>`, recent searches
/// (`grep <args>`, newest first), each with what
/// picking it does, so an id typed alone (`s-002`) finds its command.
fn argument_entries(p: &Completions) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in &p.sessions {
        out.push((format!("session {s}"), "select this session".to_string()));
    }
    for w in &p.workspaces {
        let note = p
            .workspace_notes
            .iter()
            .find(|(id, _)| id == w)
            .map(|(_, n)| format!("open workspace · {n}"))
            .unwrap_or_else(|| "open workspace".to_string());
        out.push((format!("ws {w}"), note));
    }
    for pr in &p.profiles {
        out.push((format!("profile {pr}"), "switch profile".to_string()));
    }
    for t in &p.themes {
        out.push((format!("theme {t}"), "switch theme".to_string()));
    }
    for q in p.searches.iter().rev() {
        out.push((format!("grep {q}"), "search again".to_string()));
    }
    out
}

/// True when `word` starts a command that takes arguments (`session`,
/// `s`, `ws`, `grep` …): what follows it completes from that command's
/// pool instead of being fuzzy words.
fn takes_argument(word: &str) -> bool {
    matches!(word, "s" | "rg" | "agent") || COMMANDS.iter().any(|(w, arg, _)| *arg && *w == word)
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
    /// "Files: delete")`, see [`action_label`]): what the fuzzy ranking
    /// matches and the list shows, the id dimmed beside it.
    pub labels: Vec<(String, String)>,
    /// Theme names.
    pub themes: Vec<String>,
    /// Session ids of the open workspace.
    pub sessions: Vec<String>,
    /// Workspace ids of the current profile.
    pub workspaces: Vec<String>,
    /// Profile names.
    pub profiles: Vec<String>,
    /// Recent Grep searches as `:grep` arguments, oldest first.
    pub searches: Vec<String>,
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
        // `word arg` only for a command word: other words are fuzzy
        // words of one query (`logs search`, fzf's spaces).
        if let Some((word, arg)) = input.split_once(' ')
            && takes_argument(word)
        {
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
            // Actions, sessions, workspaces, profiles and themes by fuzzy
            // score of their label and id (`gre` finds `app.grep`, `search`
            // finds every search, `s-002` finds `session s-002`); an empty
            // line lists them all, actions first.
            let mut items: Vec<(String, String)> = if p.labels.is_empty() {
                p.actions
                    .iter()
                    .map(|a| (a.clone(), String::new()))
                    .collect()
            } else {
                p.labels.clone()
            };
            items.extend(argument_entries(p));
            for i in fuzzy_rank(input, &items) {
                out.push(items[i].clone());
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
            // A command word filled in: its arguments are listed next,
            // not the rest of the cycle.
            Some(_) if takes_arg => {
                self.cycle = None;
                self.selected = 0;
            }
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
                    && (c.starts_with(input)
                        || !input.contains(char::is_whitespace)
                        || !takes_argument(first_word(input).as_str()))
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
mod tests;
