//! Tests of the palette: parsing, completion, fuzzy ranking.

mod keys {
    use super::super::*;
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

mod fuzzy {
    use super::super::*;

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

    /// Issue 19: labels name the pane (many panes share `page up`); an
    /// app action is its description alone.
    #[test]
    fn labels_name_the_pane() {
        let specs = crate::tui::panes::pane_actions();
        let label = |name: &str| action_label(specs.iter().find(|s| s.name == name).expect(name));
        assert_eq!(label("logs.search"), "Logs: search");
        assert_eq!(label("mcp_tools.page_up"), "MCP tools: page up");
        assert_eq!(label("files.delete"), "Files: delete");
        let quit = ActionSpec {
            name: "app.quit",
            context: crate::tui::keymap::GLOBAL,
            desc: "quit",
            keys: &[],
            dangerous: false,
            hint: true,
        };
        assert_eq!(action_label(&quit), "quit");
    }

    /// Sessions, workspaces, profiles, themes and recent searches are ranked with the
    /// actions: an id typed alone finds its command and Enter runs it; a
    /// pane word and a verb fragment pick that pane's action; an empty
    /// line lists everything (commands, actions, then the rest).
    #[test]
    fn ids_rank_with_the_actions_and_an_empty_line_lists_all() {
        let specs = crate::tui::panes::pane_actions();
        let labels: Vec<(String, String)> = specs
            .iter()
            .map(|s| (s.name.to_string(), action_label(s)))
            .collect();
        let pools = Completions {
            actions: labels.iter().map(|(a, _)| a.clone()).collect(),
            labels: labels.clone(),
            sessions: vec!["s-001".into(), "s-002".into()],
            workspaces: vec!["3aea3aff7319".into()],
            profiles: vec!["local".into(), "docker".into()],
            themes: vec!["dark".into(), "light".into()],
            searches: vec!["-- connect_server".into(), "-i -- todo src".into()],
            ..Completions::default()
        };
        let mut p = PaletteOverlay::new(pools.clone());
        p.refresh();
        assert_eq!(
            p.candidates.len(),
            COMMANDS.len() + labels.len() + 2 + 1 + 2 + 2 + 2,
            "an empty line lists every entry"
        );
        assert!(p.candidates.iter().any(|(c, _)| c == "theme light"));
        let run = |line: &str| {
            let mut p = PaletteOverlay::new(pools.clone());
            for c in line.chars() {
                p.on_key(&KeyEvent::from(KeyCode::Char(c)));
            }
            let top = p.candidates.first().map(|(c, _)| c.clone());
            (top, p.on_key(&KeyEvent::from(KeyCode::Enter)))
        };
        assert_eq!(
            run("s-002").1,
            Some(PaletteCommand::Session("s-002".into()))
        );
        assert_eq!(
            run("3aea").1,
            Some(PaletteCommand::OpenWorkspace("3aea3aff7319".into()))
        );
        assert_eq!(run("light").1, Some(PaletteCommand::Theme("light".into())));
        // A recent search runs again as it was typed.
        assert_eq!(
            run("connect").1,
            Some(PaletteCommand::Grep("-- connect_server".into()))
        );
        assert_eq!(
            run("mcp tools pgup").0.as_deref(),
            Some("mcp_tools.page_up")
        );
        assert_eq!(
            run("logs search").1,
            Some(PaletteCommand::Action("logs.search".into()))
        );
    }
}
