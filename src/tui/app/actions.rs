//! The app's own actions (quit, help, palette, focus, layout, mouse,
//! shell) and the table of every action the keymap is built from.

use crate::tui::keymap::{ActionSpec, GLOBAL};
use crate::tui::panes;

/// The app's own actions.
pub const ACTIONS: &[ActionSpec] = &[
    spec("app.quit", "quit", &["q", "ctrl-q"], false, true),
    spec("app.help", "help", &["?", "f1"], false, true),
    spec("app.palette", "command palette", &[":"], false, true),
    // Before the focus and zoom hints: the full-screen Agent pane has no
    // place in the layout, so the footer is where users find it.
    spec("app.agent", "Agent pane", &["A"], false, true),
    // One key from anywhere to the prompt (vim's insert): the TUI starts
    // on the Files list (issue 22). Panes with their own `i` keep it.
    spec("app.prompt", "type a command", &["i"], false, true),
    spec(
        "app.grep",
        "grep: search file contents",
        &["ctrl-f"],
        false,
        false,
    ),
    spec(
        "app.find",
        "find a file by name (fuzzy)",
        &["ctrl-p"],
        false,
        false,
    ),
    spec("app.focus_next", "next pane", &["tab"], false, true),
    spec(
        "app.focus_prev",
        "previous pane",
        &["shift-tab"],
        false,
        false,
    ),
    spec("app.zoom", "zoom pane", &["z"], false, true),
    spec("app.wider", "widen left column", &[">"], false, false),
    spec("app.narrower", "narrow left column", &["<"], false, false),
    spec("app.taller", "grow pane height", &["+", "="], false, false),
    spec("app.shorter", "shrink pane height", &["-"], false, false),
    spec("app.focus_sessions", "focus Sessions", &["1"], false, false),
    spec("app.focus_files", "focus Files", &["2"], false, false),
    spec("app.focus_skills", "focus Skills", &["3"], false, false),
    spec("app.focus_offload", "focus Offload", &["4"], false, false),
    spec("app.focus_command", "focus Command", &["5"], false, false),
    spec("app.focus_logs", "focus Logs", &["6"], false, false),
    spec(
        "app.focus_workspaces",
        "focus Workspaces",
        &["0"],
        false,
        false,
    ),
    spec("app.focus_mcp", "focus MCP", &["9"], false, false),
    spec("app.mouse", "toggle mouse capture", &["M"], false, false),
    spec("app.shell", "shell in the workspace", &["!"], true, false),
    spec(
        "app.suspend",
        "suspend to the shell",
        &["ctrl-z"],
        false,
        false,
    ),
    spec("app.redraw", "redraw the screen", &["ctrl-l"], false, false),
];

const fn spec(
    name: &'static str,
    desc: &'static str,
    keys: &'static [&'static str],
    dangerous: bool,
    hint: bool,
) -> ActionSpec {
    ActionSpec {
        name,
        context: GLOBAL,
        desc,
        keys,
        dangerous,
        hint,
    }
}

/// Every action: the app's own first, then every pane's and overlay's.
pub fn all_actions() -> Vec<ActionSpec> {
    let mut v = ACTIONS.to_vec();
    v.extend(panes::pane_actions());
    v
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::backend::local::LocalSandbox;
    use crate::engine::{EventBus, Workspace, WorkspaceConfig};
    use crate::tui::app::{App, AppOptions};
    use crate::tui::config::TuiConfig;
    use crate::tui::keymap::GLOBAL;
    use crate::tui::panes;

    /// The README's keys table lists every key bound everywhere, and the
    /// list keys its text promises are the ones the table binds.
    #[test]
    fn the_readme_keys_table_agrees_with_the_key_map() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
            .expect("README.md");
        let everywhere: String = readme
            .lines()
            .filter(|l| l.starts_with("| everywhere |"))
            .collect::<Vec<_>>()
            .join("\n");
        let specs = super::all_actions();
        let (m, _) =
            crate::tui::keymap::KeyMap::build(&specs, &std::collections::BTreeMap::new(), false);
        for b in m.all().iter().filter(|b| b.spec.context == GLOBAL) {
            for k in &b.keys {
                let k = k.to_string();
                let in_range = k.len() == 1
                    && ('1'..='6').contains(&k.chars().next().unwrap_or(' '))
                    && everywhere.contains("`1`–`6`");
                assert!(
                    in_range || everywhere.contains(&format!("`{k}`")),
                    "README's `everywhere` rows miss `{k}` ({})",
                    b.spec.name
                );
            }
        }
        // Every list pane: j/k, pgdn/pgup, ctrl-d/ctrl-u, g/G, as the
        // README's text says.
        for key in ["[j]/[k]", "[pgdn]/[pgup]", "[ctrl-d]/[ctrl-u]", "[g]/[G]"] {
            assert!(readme.contains(key), "README misses {key}");
        }
        for (key, verb) in [
            ("ctrl-d", "half_down"),
            ("ctrl-u", "half_up"),
            ("pgdn", "page_down"),
            ("g", "top"),
            ("G", "bottom"),
        ] {
            let chord = crate::tui::keymap::KeyChord::parse(key).expect(key);
            for pane in ["files", "sessions", "logs", "viewer", "help"] {
                let got = m.lookup(pane, chord).map(|s| s.name);
                assert_eq!(
                    got,
                    Some(format!("{pane}.{verb}")).as_deref(),
                    "{key} in {pane}"
                );
            }
        }
    }

    #[test]
    fn the_built_in_table_has_no_conflict() {
        let (_, problems) = crate::tui::keymap::KeyMap::build(
            &super::all_actions(),
            &std::collections::BTreeMap::new(),
            false,
        );
        assert!(problems.is_empty(), "{problems:?}");
    }

    /// The letters of `keymap::VERBS` mean the same in every pane.
    #[test]
    fn every_pane_keeps_the_verb_letters() {
        let specs = super::all_actions();
        let (m, _) =
            crate::tui::keymap::KeyMap::build(&specs, &std::collections::BTreeMap::new(), false);
        let verb_of = |key: &str| -> &[&str] {
            match key {
                "e" => &["edit"],
                "D" => &["delete", "remove", "destroy"],
                "y" => &["copy", "copy_path"],
                "/" => &["filter", "search", "query"],
                "S" => &["save", "download"],
                "d" => &["describe"],
                _ => &[],
            }
        };
        for key in ["e", "D", "y", "/", "S", "d"] {
            let chord = crate::tui::keymap::KeyChord::parse(key).unwrap();
            for b in m.all().iter().filter(|b| b.keys.contains(&chord)) {
                let verb = b.spec.name.rsplit('.').next().unwrap();
                assert!(
                    verb_of(key).contains(&verb),
                    "`{key}` is `{}` in {}: not the verb of the table",
                    b.spec.name,
                    b.spec.context
                );
            }
        }
        assert!(crate::tui::keymap::VERBS.iter().any(|(k, _)| *k == "d"));
        // Describe is offered wherever there is an item to describe.
        for ctx in [
            "files",
            "workspaces",
            "sessions",
            "skills",
            "mcp",
            "offload",
        ] {
            let name = format!("{ctx}.describe");
            let b = m.all().iter().find(|b| b.spec.name == name);
            assert!(
                b.is_some_and(|b| b
                    .keys
                    .contains(&crate::tui::keymap::KeyChord::parse("d").unwrap())),
                "{name} is not on `d`"
            );
        }
    }

    /// Every action of every table reaches a handler: the app's own run
    /// in `run_global`, a pane's in the `on_action` of the pane whose id
    /// starts its context (`command.prompt` → `command`, `mcp_tools` →
    /// `mcp`). A new table entry without a handler fails here.
    #[tokio::test]
    async fn every_action_of_every_table_has_a_handler() {
        let dir = tempfile::tempdir().unwrap();
        let sb = LocalSandbox::open(dir.path()).unwrap();
        let ws = Workspace::open(
            Arc::new(sb),
            WorkspaceConfig::default(),
            EventBus::default(),
        )
        .await
        .unwrap();
        let mut opts = AppOptions::new(TuiConfig::default());
        opts.watch = false;
        let mut app = App::new(ws, opts);
        let mut unhandled = Vec::new();
        for spec in super::all_actions() {
            if matches!(spec.name, "app.quit" | "app.shell" | "app.suspend") {
                // Handled, but they end the test's app or leave the terminal.
                assert!(super::ACTIONS.iter().any(|a| a.name == spec.name));
                continue;
            }
            let handled = if spec.context == GLOBAL {
                app.run_global(spec.name)
            } else if spec.context == panes::help::ID || spec.context == panes::palette::ID {
                // Overlays: checked by their own tests.
                continue;
            } else {
                let owner = app.panes.iter().position(|p| {
                    let id = p.id();
                    spec.context == id
                        || spec
                            .context
                            .strip_prefix(id)
                            .is_some_and(|r| r.starts_with('.') || r.starts_with('_'))
                });
                match owner {
                    Some(i) => app.panes[i].on_action(spec.name, &mut app.cx),
                    None => false,
                }
            };
            app.overlay = None;
            app.cx.effects.clear();
            if !handled {
                unhandled.push(spec.name);
            }
        }
        assert!(
            unhandled.is_empty(),
            "actions without a handler: {unhandled:?}"
        );
    }
}
