//! The one key map: it dispatches keys, fills the footer hints and the `?`
//! help overlay, so what the screen says is what the keys do (anchors §4.1).
//!
//! Every action is declared once as an [`ActionSpec`] (name, context,
//! description, default keys, whether it is destructive). Users rebind by
//! action name in the `[tui.keys]` table of the config file; an unknown
//! action or an unreadable key is reported, never ignored. In read-only
//! mode destructive actions are not bound at all, so they neither run nor
//! show up in hints or help (anchors §4.2).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Context of bindings that work everywhere (unless a text field or an
/// overlay takes the key first).
pub const GLOBAL: &str = "global";

/// One action a key can trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionSpec {
    /// Unique name, `<context>.<verb>` (`files.delete`); the key of
    /// `[tui.keys]` and of `:` palette commands.
    pub name: &'static str,
    /// Where it applies: [`GLOBAL`], a pane id, or an overlay id.
    pub context: &'static str,
    /// What it does, for hints and help.
    pub desc: &'static str,
    /// Default keys (see [`KeyChord::parse`]).
    pub keys: &'static [&'static str],
    /// Changes or deletes something: confirmed, and removed by
    /// `--read-only`.
    pub dangerous: bool,
    /// Shown in the footer.
    pub hint: bool,
}

/// A key with modifiers, normalised so `Q`, `shift-q` and a terminal's
/// `Char('Q') + SHIFT` compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyChord {
    /// The key.
    pub code: KeyCode,
    /// Ctrl / Alt (Shift is folded into characters and BackTab).
    pub mods: KeyModifiers,
}

impl KeyChord {
    /// The chord of a key event.
    pub fn from_event(ev: &KeyEvent) -> Self {
        Self::normalise(ev.code, ev.modifiers)
    }

    fn normalise(code: KeyCode, mods: KeyModifiers) -> Self {
        let mut mods = mods & (KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT);
        let code = match code {
            KeyCode::Char(c) => {
                if mods.contains(KeyModifiers::SHIFT) && c.is_ascii_lowercase() {
                    mods.remove(KeyModifiers::SHIFT);
                    KeyCode::Char(c.to_ascii_uppercase())
                } else {
                    mods.remove(KeyModifiers::SHIFT);
                    KeyCode::Char(c)
                }
            }
            KeyCode::BackTab => {
                mods.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            KeyCode::Tab if mods.contains(KeyModifiers::SHIFT) => {
                mods.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            c => c,
        };
        KeyChord { code, mods }
    }

    /// Parses `q`, `Q`, `ctrl-s`, `alt-enter`, `shift-tab`, `f1`, `space`,
    /// `pgdn`, `?`. Names are case-insensitive except single characters.
    pub fn parse(spec: &str) -> Result<KeyChord, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err("empty key".into());
        }
        let mut mods = KeyModifiers::empty();
        let mut rest = spec;
        loop {
            let lower = rest.to_ascii_lowercase();
            let (m, n) = if lower.starts_with("ctrl-") || lower.starts_with("ctrl+") {
                (KeyModifiers::CONTROL, 5)
            } else if lower.starts_with("c-") && rest.len() > 2 {
                (KeyModifiers::CONTROL, 2)
            } else if lower.starts_with("alt-") || lower.starts_with("alt+") {
                (KeyModifiers::ALT, 4)
            } else if lower.starts_with("m-") && rest.len() > 2 {
                (KeyModifiers::ALT, 2)
            } else if lower.starts_with("shift-") || lower.starts_with("shift+") {
                (KeyModifiers::SHIFT, 6)
            } else {
                break;
            };
            mods |= m;
            rest = &rest[n..];
        }
        let mut chars = rest.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => {
                if mods.contains(KeyModifiers::CONTROL) {
                    KeyCode::Char(c.to_ascii_lowercase())
                } else {
                    KeyCode::Char(c)
                }
            }
            _ => match rest.to_ascii_lowercase().as_str() {
                "enter" | "return" | "cr" => KeyCode::Enter,
                "esc" | "escape" => KeyCode::Esc,
                "tab" => KeyCode::Tab,
                "backtab" => KeyCode::BackTab,
                "space" => KeyCode::Char(' '),
                "backspace" | "bs" => KeyCode::Backspace,
                "delete" | "del" => KeyCode::Delete,
                "insert" | "ins" => KeyCode::Insert,
                "up" => KeyCode::Up,
                "down" => KeyCode::Down,
                "left" => KeyCode::Left,
                "right" => KeyCode::Right,
                "home" => KeyCode::Home,
                "end" => KeyCode::End,
                "pgup" | "pageup" => KeyCode::PageUp,
                "pgdn" | "pagedown" => KeyCode::PageDown,
                "minus" => KeyCode::Char('-'),
                "plus" => KeyCode::Char('+'),
                "lt" => KeyCode::Char('<'),
                "gt" => KeyCode::Char('>'),
                f if f.starts_with('f')
                    && f[1..].parse::<u8>().is_ok_and(|n| (1..=24).contains(&n)) =>
                {
                    KeyCode::F(f[1..].parse().unwrap_or(1))
                }
                _ => return Err(format!("unknown key `{spec}`")),
            },
        };
        Ok(Self::normalise(code, mods))
    }
}

impl fmt::Display for KeyChord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mods.contains(KeyModifiers::CONTROL) {
            f.write_str("ctrl-")?;
        }
        if self.mods.contains(KeyModifiers::ALT) {
            f.write_str("alt-")?;
        }
        if self.mods.contains(KeyModifiers::SHIFT) {
            f.write_str("shift-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => f.write_str("enter"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::BackTab => f.write_str("shift-tab"),
            KeyCode::Backspace => f.write_str("backspace"),
            KeyCode::Delete => f.write_str("del"),
            KeyCode::Insert => f.write_str("ins"),
            KeyCode::Up => f.write_str("↑"),
            KeyCode::Down => f.write_str("↓"),
            KeyCode::Left => f.write_str("←"),
            KeyCode::Right => f.write_str("→"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::PageUp => f.write_str("pgup"),
            KeyCode::PageDown => f.write_str("pgdn"),
            KeyCode::F(n) => write!(f, "F{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// What is wrong with a `[tui.keys]` table (see [`KeyMap::build`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyProblem {
    /// No action has this name.
    UnknownAction {
        /// The name as written.
        action: String,
    },
    /// A key of this action cannot be read.
    BadKey {
        /// The action.
        action: &'static str,
        /// Why (`unknown key `hyper-x``).
        message: String,
    },
    /// Two actions on one key where both apply.
    Conflict {
        /// The key.
        key: KeyChord,
        /// The action the user bound (its entry is where the error is
        /// placed).
        action: &'static str,
        /// The action that has the key too.
        other: &'static str,
        /// Where they collide: a pane or overlay id, or [`GLOBAL`].
        context: &'static str,
    },
}

impl KeyProblem {
    /// The `[tui.keys]` entry the problem is at, for file and line.
    pub fn action(&self) -> &str {
        match self {
            KeyProblem::UnknownAction { action } => action,
            KeyProblem::BadKey { action, .. } | KeyProblem::Conflict { action, .. } => action,
        }
    }
}

impl fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyProblem::UnknownAction { action } => {
                write!(f, "[tui.keys]: unknown action `{action}`")
            }
            KeyProblem::BadKey { action, message } => {
                write!(f, "[tui.keys] {action}: {message}")
            }
            KeyProblem::Conflict {
                key,
                action,
                other,
                context,
            } => write!(
                f,
                "[tui.keys]: `{key}` is bound to both `{action}` and `{other}` in {context}"
            ),
        }
    }
}

/// The verbs that keep one meaning in every pane (issue 22), shown in
/// help as `(key, meaning)`: a pane binds the key to that verb or not at
/// all (`every_pane_keeps_the_verb_letters` in `app::actions` checks it). `d` is
/// describe, as k9s users read it (every field of the selection, in the
/// viewer; `tui::panes::describe`).
pub const VERBS: &[(&str, &str)] = &[
    ("enter", "view / open the selection (a folder expands)"),
    ("e", "edit"),
    ("D", "delete / remove / destroy (asks first)"),
    ("y", "copy"),
    ("/", "filter or search (esc clears)"),
    ("S", "save to a host file"),
    ("r", "refresh (re-run in Command, run in Agent)"),
    ("!", "shell in the workspace"),
    ("ctrl-p", "find a file by name (fuzzy, from anywhere)"),
    ("6", "logs"),
    ("d", "describe: every field of the selection"),
];

/// One resolved binding.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The action.
    pub spec: ActionSpec,
    /// Keys bound to it (may be empty when the user unbound it).
    pub keys: Vec<KeyChord>,
}

/// Keys per context, built from action specs plus the user's overrides.
#[derive(Debug, Clone, Default)]
pub struct KeyMap {
    bindings: Vec<Binding>,
    index: HashMap<(&'static str, KeyChord), usize>,
}

impl KeyMap {
    /// Builds the map. `overrides` maps action names to key lists (empty =
    /// unbound). Returns the map and one [`KeyProblem`] per problem
    /// (unknown action, bad key, two actions on one key in one context, a
    /// global key a pane's key hides): the default is kept for a bad entry
    /// and the user's binding wins a conflict, never silently dropped.
    /// `wsbench` refuses to start on any of them (`tui::run`, exit 2).
    pub fn build(
        specs: &[ActionSpec],
        overrides: &BTreeMap<String, Vec<String>>,
        read_only: bool,
    ) -> (KeyMap, Vec<KeyProblem>) {
        let mut problems = Vec::new();
        for name in overrides.keys() {
            if !specs.iter().any(|s| s.name == name) {
                problems.push(KeyProblem::UnknownAction {
                    action: name.clone(),
                });
            }
        }
        let mut map = KeyMap::default();
        for spec in specs {
            if read_only && spec.dangerous {
                continue;
            }
            let keys: Vec<KeyChord> = match overrides.get(spec.name) {
                Some(list) => {
                    let mut parsed = Vec::new();
                    let mut ok = true;
                    for k in list {
                        match KeyChord::parse(k) {
                            Ok(c) => parsed.push(c),
                            Err(e) => {
                                problems.push(KeyProblem::BadKey {
                                    action: spec.name,
                                    message: e,
                                });
                                ok = false;
                            }
                        }
                    }
                    if ok { parsed } else { default_keys(spec) }
                }
                None => default_keys(spec),
            };
            let i = map.bindings.len();
            for k in &keys {
                if let Some(prev) = map.index.insert((spec.context, *k), i) {
                    let other = map.bindings[prev].spec.name;
                    // A user override wins over a default on the same key.
                    let (mine, theirs) =
                        if overrides.contains_key(other) && !overrides.contains_key(spec.name) {
                            map.index.insert((spec.context, *k), prev);
                            (other, spec.name)
                        } else {
                            (spec.name, other)
                        };
                    problems.push(KeyProblem::Conflict {
                        key: *k,
                        action: mine,
                        other: theirs,
                        context: spec.context,
                    });
                }
            }
            map.bindings.push(Binding { spec: *spec, keys });
        }
        // A global key the user chose that a pane binds too never reaches
        // the global action there (`app.quit = "j"` would quit from the
        // Sessions list but move down in Files): refused as well.
        for b in map.bindings.iter().filter(|b| b.spec.context == GLOBAL) {
            if !overrides.contains_key(b.spec.name) {
                continue;
            }
            let defaults = default_keys(&b.spec);
            // The built-in keys already yield to panes by design (`q`
            // closes the viewer): only a key the user added is checked.
            for k in b.keys.iter().filter(|k| !defaults.contains(k)) {
                if let Some((&(ctx, _), &j)) = map
                    .index
                    .iter()
                    .filter(|((ctx, key), _)| *ctx != GLOBAL && key == k)
                    .min_by_key(|(_, j)| **j)
                {
                    problems.push(KeyProblem::Conflict {
                        key: *k,
                        action: b.spec.name,
                        other: map.bindings[j].spec.name,
                        context: ctx,
                    });
                }
            }
        }
        (map, problems)
    }

    /// The action bound to `chord` in `context` (no fallback to global).
    pub fn lookup(&self, context: &str, chord: KeyChord) -> Option<&ActionSpec> {
        // The index is keyed by &'static str; find the static one first.
        let ctx = self
            .bindings
            .iter()
            .find(|b| b.spec.context == context)?
            .spec
            .context;
        self.index
            .get(&(ctx, chord))
            .map(|&i| &self.bindings[i].spec)
    }

    /// Bindings of one context, in declaration order.
    pub fn bindings(&self, context: &str) -> impl Iterator<Item = &Binding> {
        self.bindings
            .iter()
            .filter(move |b| b.spec.context == context)
    }

    /// Every binding.
    pub fn all(&self) -> &[Binding] {
        &self.bindings
    }

    /// Whether an action is bound (false for destructive ones in read-only
    /// mode).
    pub fn has_action(&self, name: &str) -> bool {
        self.bindings.iter().any(|b| b.spec.name == name)
    }

    /// The spec of an action by name.
    pub fn action(&self, name: &str) -> Option<&ActionSpec> {
        self.bindings
            .iter()
            .find(|b| b.spec.name == name)
            .map(|b| &b.spec)
    }

    /// `(keys, description)` hints of a context for the footer.
    pub fn hints(&self, context: &str) -> Vec<(String, &'static str)> {
        self.bindings(context)
            .filter(|b| b.spec.hint && !b.keys.is_empty())
            .map(|b| (keys_label(&b.keys), b.spec.desc))
            .collect()
    }

    /// The first key of an action, for messages (`press e to edit`).
    pub fn key_for(&self, name: &str) -> Option<String> {
        self.bindings
            .iter()
            .find(|b| b.spec.name == name)
            .and_then(|b| b.keys.first())
            .map(|k| k.to_string())
    }
}

fn default_keys(spec: &ActionSpec) -> Vec<KeyChord> {
    spec.keys
        .iter()
        .map(|k| {
            KeyChord::parse(k).unwrap_or_else(|e| panic!("built-in key of {}: {e}", spec.name))
        })
        .collect()
}

/// Keys joined with `/` (`j/↓`).
pub fn keys_label(keys: &[KeyChord]) -> String {
    keys.iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyEventKind;

    const SPECS: &[ActionSpec] = &[
        ActionSpec {
            name: "app.quit",
            context: GLOBAL,
            desc: "quit",
            keys: &["q", "ctrl-q"],
            dangerous: false,
            hint: true,
        },
        ActionSpec {
            name: "files.delete",
            context: "files",
            desc: "delete",
            keys: &["D"],
            dangerous: true,
            hint: true,
        },
        ActionSpec {
            name: "files.open",
            context: "files",
            desc: "open",
            keys: &["enter"],
            dangerous: false,
            hint: false,
        },
    ];

    fn key(code: KeyCode, mods: KeyModifiers) -> KeyChord {
        KeyChord::from_event(&KeyEvent {
            code,
            modifiers: mods,
            kind: KeyEventKind::Press,
            state: ratatui::crossterm::event::KeyEventState::NONE,
        })
    }

    #[test]
    fn parses_and_normalises_keys() {
        assert_eq!(
            KeyChord::parse("Q").unwrap(),
            key(KeyCode::Char('Q'), KeyModifiers::SHIFT)
        );
        assert_eq!(
            KeyChord::parse("shift-q").unwrap(),
            KeyChord::parse("Q").unwrap()
        );
        assert_eq!(
            KeyChord::parse("ctrl-S").unwrap(),
            key(KeyCode::Char('s'), KeyModifiers::CONTROL)
        );
        assert_eq!(
            KeyChord::parse("shift-tab").unwrap(),
            key(KeyCode::BackTab, KeyModifiers::SHIFT)
        );
        assert_eq!(KeyChord::parse("F5").unwrap().code, KeyCode::F(5));
        assert_eq!(
            KeyChord::parse("alt-enter").unwrap().mods,
            KeyModifiers::ALT
        );
        assert!(KeyChord::parse("hyper-x").is_err());
        assert_eq!(KeyChord::parse("ctrl-s").unwrap().to_string(), "ctrl-s");
    }

    #[test]
    fn overrides_rebind_and_problems_are_reported() {
        let mut o = BTreeMap::new();
        o.insert("app.quit".to_string(), vec!["x".to_string()]);
        o.insert("nope".to_string(), vec!["y".to_string()]);
        o.insert("files.open".to_string(), vec!["bogus-key".to_string()]);
        let (m, problems) = KeyMap::build(SPECS, &o, false);
        assert_eq!(
            m.lookup(GLOBAL, KeyChord::parse("x").unwrap())
                .unwrap()
                .name,
            "app.quit"
        );
        assert!(m.lookup(GLOBAL, KeyChord::parse("q").unwrap()).is_none());
        assert_eq!(
            m.lookup("files", KeyChord::parse("enter").unwrap())
                .unwrap()
                .name,
            "files.open"
        );
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems.iter().any(|p| p.to_string().contains("nope")));
        assert!(problems.iter().any(|p| p.to_string().contains("bogus-key")));
    }

    #[test]
    fn read_only_strips_dangerous_actions_from_dispatch_and_hints() {
        let (m, _) = KeyMap::build(SPECS, &BTreeMap::new(), true);
        assert!(m.lookup("files", KeyChord::parse("D").unwrap()).is_none());
        assert!(!m.has_action("files.delete"));
        assert!(m.hints("files").is_empty());
        let (m, _) = KeyMap::build(SPECS, &BTreeMap::new(), false);
        assert_eq!(m.hints("files"), vec![("D".to_string(), "delete")]);
    }

    #[test]
    fn a_global_key_a_pane_hides_is_a_conflict_but_restated_defaults_are_not() {
        let mut specs = SPECS.to_vec();
        specs.push(ActionSpec {
            name: "files.down",
            context: "files",
            desc: "down",
            keys: &["j", "q"],
            dangerous: false,
            hint: false,
        });
        let mut o = BTreeMap::new();
        o.insert("app.quit".to_string(), vec!["j".to_string()]);
        let (_, problems) = KeyMap::build(&specs, &o, false);
        assert_eq!(
            problems,
            [KeyProblem::Conflict {
                key: KeyChord::parse("j").unwrap(),
                action: "app.quit",
                other: "files.down",
                context: "files",
            }]
        );
        assert_eq!(problems[0].action(), "app.quit");
        // `q` is shadowed in files by default: restating it is no error.
        o.insert("app.quit".to_string(), vec!["q".to_string()]);
        let (_, problems) = KeyMap::build(&specs, &o, false);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn conflicts_are_reported() {
        let mut o = BTreeMap::new();
        o.insert("files.open".to_string(), vec!["D".to_string()]);
        let (m, problems) = KeyMap::build(SPECS, &o, false);
        assert!(
            problems
                .iter()
                .any(|p| p.to_string().contains("bound to both")),
            "{problems:?}"
        );
        // The user's own binding wins.
        assert_eq!(
            m.lookup("files", KeyChord::parse("D").unwrap())
                .unwrap()
                .name,
            "files.open"
        );
    }
}
