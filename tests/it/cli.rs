//! The headless CLI as a user runs it: the acceptance points of the engine
//! issue, through the real binary.

use crate::support::{self, cli};

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        Env {
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        cli::wsbench_cmd(self.home.path())
            .args(args)
            .output()
            .unwrap()
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn exec_prints_output_and_passes_exit_codes() {
    let env = Env::new();
    let t = tempfile::tempdir().unwrap();
    let w = t.path().to_str().unwrap();
    let o = env.run(&["exec", "--workdir", w, "--", "echo", "hi"]);
    assert_eq!(stdout(&o), "hi\n");
    assert_eq!(o.status.code(), Some(0));
    let o = env.run(&["exec", "--workdir", w, "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7));
}

#[test]
fn exec_timeout_exits_124_fast_and_leaves_nothing() {
    let env = Env::new();
    let t = tempfile::tempdir().unwrap();
    let marker = format!("wsbench-cli-{}", uuid::Uuid::new_v4().simple());
    let t0 = Instant::now();
    let o = env.run(&[
        "exec",
        "--workdir",
        t.path().to_str().unwrap(),
        "--timeout",
        "1",
        "--",
        &format!("sh -c 'sleep 100' {marker}"),
    ]);
    assert_eq!(
        o.status.code(),
        Some(124),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let left = Command::new("pgrep").args(["-f", &marker]).output();
    if let Ok(left) = left {
        assert!(left.stdout.is_empty(), "left behind: {}", stdout(&left));
    }
}

#[test]
fn default_workspace_lives_under_xdg_data() {
    let env = Env::new();
    let o = env.run(&["exec", "--", "pwd"]);
    assert_eq!(o.status.code(), Some(0));
    let expected = env.home.path().join("data/wsbench/workspaces/default");
    assert_eq!(
        stdout(&o).trim(),
        std::fs::canonicalize(expected).unwrap().to_str().unwrap()
    );
    let info = env.run(&["info", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["workspace"]["backend"], "local");
    assert!(
        v["config_file"]
            .as_str()
            .unwrap()
            .ends_with("config/wsbench/config.toml")
    );
}

#[test]
fn fixture_sessions_and_offloads() {
    let env = Env::new();
    let f = support::fixture_copy();
    let w = f.path().to_str().unwrap();
    let o = env.run(&["sessions", "list", "--workdir", w, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        ids.contains(&"s-001".to_string()) && ids.contains(&"s-002".to_string()),
        "{ids:?}"
    );
    let o = env.run(&["sessions", "show", "s-001", "--workdir", w]);
    let text = stdout(&o);
    assert!(
        text.contains("tool_result-call_grep_1(1).txt") && text.contains("context.jsonl"),
        "{text}"
    );
    let o = env.run(&[
        "offload",
        "show",
        "workspace:///data/917aad4aef88aecc230e317ee79eb894a1d10029b849705f0b9fbd028a8e4f91.png",
        "--workdir",
        w,
    ]);
    let text = stdout(&o);
    assert!(
        text.contains("45 bytes") && text.contains("image/png"),
        "{text}"
    );
    let o = env.run(&["sessions", "show", "nope", "--workdir", w]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no session `nope`"));
}

/// `sessions show --timeline` on sessions the reference wrote: its tool
/// calls are counted and paired across messages (call in one message,
/// result in the next: `tests/fixtures/reference-lines/make.py`), with the
/// time between them; offloaded results are rows of their own; `sessions
/// list` counts the same calls (issue 20).
#[test]
fn fixture_session_timeline() {
    let env = Env::new();
    let f = support::fixture_copy();
    let w = f.path().to_str().unwrap();
    let dir = f.path().join("sessions/ref-calls");
    std::fs::create_dir_all(&dir).unwrap();
    let lines = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference-lines/tool-call.jsonl");
    std::fs::copy(lines, dir.join("context.jsonl")).unwrap();

    let o = env.run(&[
        "sessions",
        "show",
        "ref-calls",
        "--timeline",
        "--workdir",
        w,
    ]);
    let text = stdout(&o);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(
        rows[0], "session ref-calls  (2 tool calls, 0 errors)",
        "{text}"
    );
    assert!(
        rows[1].contains("turn") && rows[1].contains("Looking."),
        "{text}"
    );
    assert!(
        rows[2].contains("Glob")
            && rows[2].contains("success")
            && rows[2].contains("1000ms")
            && rows[2].contains("pattern=*.rs"),
        "{text}"
    );
    assert!(
        rows[3].contains("Bash") && rows[3].contains("command=ls"),
        "{text}"
    );

    let o = env.run(&[
        "sessions",
        "show",
        "ref-calls",
        "--timeline",
        "--json",
        "--workdir",
        w,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tool_calls"], 2, "{v}");
    let calls: Vec<(&str, &str)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "tool_call")
        .map(|r| (r["tool"].as_str().unwrap(), r["call_id"].as_str().unwrap()))
        .collect();
    assert_eq!(calls, [("Glob", "call-1"), ("Bash", "call-2")], "{v}");

    // The fixture's own session: a turn and its two offloaded results.
    let o = env.run(&[
        "sessions",
        "show",
        "s-001",
        "--timeline",
        "--json",
        "--workdir",
        w,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kinds: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["turn", "offload", "offload"], "{v}");
    assert!(v["rows"][1]["offload"]["full"] == 115889, "{v}");

    let o = env.run(&["sessions", "list", "--workdir", w, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let listed = v
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "ref-calls")
        .unwrap();
    assert_eq!(listed["tool_calls"], 2, "{listed}");
}

/// `sessions export` of the fixture session (issue 20 point 7): the
/// Markdown report is stable (snapshot; the workspace path filtered), the
/// HTML one is one page with the picture embedded and every element
/// closed, `-o` picks the format from the extension and writes the file,
/// and an unknown session is an error.
#[test]
fn fixture_session_export() {
    let env = Env::new();
    let f = support::fixture_copy();
    let w = f.path().to_str().unwrap();
    let o = env.run(&["sessions", "export", "s-001", "--workdir", w]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let md = stdout(&o);
    let mut s = insta::Settings::clone_current();
    s.add_filter(&regex::escape(w), "[WORKDIR]");
    s.add_filter(
        r"exported by wsbench [0-9.]+\S*",
        "exported by wsbench [VERSION]",
    );
    s.bind(|| insta::assert_snapshot!("session_export_md", md));

    let out = f.path().join("report.html");
    let o = env.run(&[
        "sessions",
        "export",
        "s-001",
        "--workdir",
        w,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(
        h.starts_with("<!DOCTYPE html>") && h.ends_with("</html>\n"),
        "{h}"
    );
    assert!(
        h.contains("<img alt=\"shot.png\" src=\"data:image/png;base64,iVBORw0KGgo"),
        "{h}"
    );
    for tag in ["html", "body", "table", "tr", "p", "h4"] {
        assert_eq!(
            h.matches(&format!("<{tag}>")).count() + h.matches(&format!("<{tag} ")).count(),
            h.matches(&format!("</{tag}>")).count(),
            "<{tag}> balanced:\n{h}"
        );
    }
    let o = env.run(&["sessions", "export", "nope", "--workdir", w]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no session `nope`"),
        "{o:?}"
    );
}

#[test]
fn tool_command_and_errors() {
    let env = Env::new();
    let t = tempfile::tempdir().unwrap();
    let w = t.path().to_str().unwrap();
    let o = env.run(&[
        "tool",
        "Bash",
        r#"{"command":"echo x"}"#,
        "--workdir",
        w,
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["state"], "success");
    let o = env.run(&["tool", "Bash", "{not json", "--workdir", w]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not valid JSON"));
    let o = env.run(&["tool", "list", "--workdir", w, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 6);
}

#[test]
fn bad_config_is_reported_with_file_and_line() {
    let env = Env::new();
    let cfg = env.home.path().join("bad.toml");
    std::fs::write(&cfg, "[limits]\nnope = 1\n").unwrap();
    let o = env.run(&["info", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.toml:2:") && err.contains("nope"), "{err}");
}

#[test]
fn one_parse_checks_the_tui_section_with_the_rest() {
    let env = Env::new();
    let cfg = env.home.path().join("c.toml");
    let c = cfg.to_str().unwrap();
    // A typo in [tui] is placed at its line by the parse that checks
    // every other section.
    std::fs::write(&cfg, "[workspace]\n\n[tui]\nmouse = false\nmose = 1\n").unwrap();
    let o = env.run(&["info", "--config", c]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("c.toml:5:1: ") && err.contains("unknown field `mose`"),
        "{err}"
    );
    // A valid [tui] is part of the config; errors after it keep their lines.
    std::fs::write(
        &cfg,
        "[tui]\ntheme = \"light\"\n[tui.keys]\n\"app.quit\" = \"x\"\n[limits]\nread_max_lines = 0\n",
    )
    .unwrap();
    let err = String::from_utf8_lossy(&env.run(&["info", "--config", c]).stderr).into_owned();
    assert!(
        err.contains("c.toml:6:") && err.contains("read_max_lines"),
        "{err}"
    );
    std::fs::write(&cfg, "[tui]\ntheme = \"light\"\nmax_fps = 30\n").unwrap();
    let o = env.run(&["info", "--config", c, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["config"]["tui"]["theme"], "light");
    assert_eq!(v["config"]["tui"]["max_fps"], 30);
}

#[test]
fn the_fast_version_answer_is_clap_s() {
    use clap::CommandFactory;
    let want = wsbench::cli::Cli::command().render_version();
    let env = Env::new();
    for flag in ["--version", "-V"] {
        let o = env.run(&[flag]);
        assert!(o.status.success(), "{o:?}");
        assert_eq!(stdout(&o), want, "{flag}");
    }
    // With anything else on the line, clap answers (and checks the rest).
    let o = env.run(&["--json", "--version"]);
    assert_eq!(stdout(&o), want);
}

#[test]
fn completions_print() {
    let o = Env::new().run(&["completions", "bash"]);
    assert!(stdout(&o).contains("wsbench"));
}

#[test]
fn skills_on_the_fixture_and_a_seeded_workspace() {
    let env = Env::new();
    let f = support::fixture_copy();
    let o = env.run(&[
        "skills",
        "list",
        "--agent",
        "coder",
        "--workdir",
        f.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "all skills valid");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<_> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["git-helper", "test-runner"]);

    let src = support::fixtures().join("skills-src");
    let cfg = env.home.path().join("config/wsbench/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let paths: Vec<String> = ["git-helper", "test-runner", "broken-skill"]
        .iter()
        .map(|n| format!("{:?}", src.join(n).to_str().unwrap()))
        .collect();
    std::fs::write(
        &cfg,
        format!("[workspace]\nskill_paths = [{}]\n", paths.join(", ")),
    )
    .unwrap();
    let t = tempfile::tempdir().unwrap();
    let o = env.run(&[
        "skills",
        "list",
        "--agent",
        "coder",
        "--workdir",
        t.path().to_str().unwrap(),
    ]);
    let text = stdout(&o);
    assert!(
        text.contains("git-helper") && text.contains("test-runner"),
        "{text}"
    );
    assert!(
        text.contains("broken-skill  INVALID") && text.contains("line 3"),
        "{text}"
    );
    // The whole listing is printed, and the invalid skill shows in the
    // exit code (EXIT_PARTIAL), with and without --json.
    assert_eq!(o.status.code(), Some(wsbench::cli::EXIT_PARTIAL), "{text}");
    let o = env.run(&[
        "skills",
        "list",
        "--agent",
        "coder",
        "--workdir",
        t.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(wsbench::cli::EXIT_PARTIAL));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["invalid"].as_array().unwrap().len(), 1, "{v}");
}

#[test]
fn status_lists_mcp_declarations_of_the_fixture() {
    let env = Env::new();
    let f = support::fixture_copy();
    let o = env.run(&[
        "status",
        "--workdir",
        f.path().to_str().unwrap(),
        "--agent",
        "coder",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let decl = &v["mcp_declarations"];
    assert_eq!(decl[0]["session"], "s-001");
    assert_eq!(decl[0]["mcps"], serde_json::json!(["docs", "everything"]));
    assert_eq!(decl[1]["mcps"], serde_json::json!(["search"]));
    assert_eq!(v["skills"]["skills"].as_array().unwrap().len(), 2);
}

#[test]
fn sigterm_or_ctrl_c_kills_the_command_tree_and_journals_it() {
    for (sig, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let env = Env::new();
        let t = tempfile::tempdir().unwrap();
        let marker = format!("wsbench-sig-{}", uuid::Uuid::new_v4().simple());
        let mut child = cli::wsbench_cmd(env.home.path())
            .args([
                "exec",
                "--workdir",
                t.path().to_str().unwrap(),
                "--",
                &format!("sh -c 'sleep 100' {marker}"),
            ])
            .spawn()
            .unwrap();
        // The marker is also in wsbench's own argv: match the shells only,
        // so the signal is sent once the command really runs.
        let shells = format!("^(/bin/)?sh -c .*{marker}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Command::new("pgrep")
            .args(["-f", &shells])
            .output()
            .unwrap()
            .stdout
            .is_empty()
        {
            assert!(Instant::now() < deadline, "command never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(code));
        let left = Command::new("pgrep")
            .args(["-f", &shells])
            .output()
            .unwrap();
        assert!(left.stdout.is_empty(), "left behind: {}", stdout(&left));
        let journal =
            std::fs::read_to_string(t.path().join("sessions/default/journal.jsonl")).unwrap();
        assert!(journal.contains("\"state\":\"interrupted\""), "{journal}");
    }
}

#[test]
fn workdir_typos_and_files_are_refused() {
    let env = Env::new();
    let t = tempfile::tempdir().unwrap();
    let deep = t.path().join("no/such/parent/ws");
    let o = env.run(&[
        "exec",
        "--workdir",
        deep.to_str().unwrap(),
        "--create-workdir",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("parent directory"));
    assert!(!t.path().join("no").exists());
    let file = t.path().join("f.txt");
    std::fs::write(&file, "x").unwrap();
    let o = env.run(&["exec", "--workdir", file.to_str().unwrap(), "--", "true"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a directory"));
    let o = env.run(&[
        "exec",
        "--workdir",
        t.path().to_str().unwrap(),
        "--timeout",
        "601",
        "--",
        "true",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("at most 600 seconds"));
    let o = env.run(&["info", "--config", "/nonexistent/wsbench.toml"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not exist"));
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let env = Env::new();
    let t = tempfile::tempdir().unwrap();
    let big = t.path().join("big.txt");
    std::fs::write(&big, "line\n".repeat(200_000)).unwrap();
    let mut child = cli::wsbench_cmd(env.home.path())
        .args([
            "tool",
            "Read",
            &format!(r#"{{"file_path": "{}"}}"#, big.display()),
            "--workdir",
            t.path().to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A port on 127.0.0.1 that nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// An unreachable Kubernetes API server: one error line naming the server
/// and the cause; kube's own ERROR log line stays quiet by default.
#[test]
fn an_unreachable_cluster_is_one_line_naming_server_and_cause() {
    let env = Env::new();
    let port = closed_port();
    let kc = env.home.path().join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    let cfg = env.home.path().join("k8s.toml");
    std::fs::write(
        &cfg,
        format!(
            "[profiles.k8s]\nbackend = \"kubernetes\"\n\n[profiles.k8s.options]\nkubeconfig = {:?}\n",
            kc.to_str().unwrap()
        ),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let run = |log: Option<&str>| {
        let mut c = cli::wsbench_cmd(env.home.path());
        c.args(["--config", cfg, "--profile", "k8s", "workspaces", "list"]);
        if let Some(l) = log {
            c.env("WSBENCH_LOG", l);
        }
        c.output().unwrap()
    };
    let o = run(None);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(&format!("http://127.0.0.1:{port}"))
            && lines[0].contains("connection refused"),
        "{err}"
    );
    // A filter that does not parse is said so, not silently dropped.
    let o = run(Some("wsbench=loud"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("wsbench: ignoring WSBENCH_LOG=\"wsbench=loud\""),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "{err}");
}

/// `info` on a cloud profile describes it without contacting the service
/// (it would create a sandbox): `${VAR}` placeholders kept, secrets masked.
#[test]
fn info_on_a_cloud_profile_is_read_only() {
    let env = Env::new();
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    server.set_nonblocking(true).unwrap();
    let url = format!("http://{}", server.local_addr().unwrap());
    let cfg = env.home.path().join("e2b.toml");
    std::fs::write(
        &cfg,
        format!(
            "[profiles.e2b]\nbackend = \"e2b\"\n\n[profiles.e2b.options]\napi_url = \"{url}\"\nenvd_url = \"{url}\"\napi_key = \"${{MY_E2B_KEY}}\"\ntemplate = \"base\"\n"
        ),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let o = env.run(&["--config", cfg, "--profile", "e2b", "info"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = stdout(&o);
    assert!(
        text.contains("profile:          e2b (e2b backend"),
        "{text}"
    );
    assert!(text.contains("option api_key = ${MY_E2B_KEY}"), "{text}");
    assert!(text.contains("option template = base"), "{text}");
    let o = env.run(&["--config", cfg, "--profile", "e2b", "info", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["workspace"]["backend"], "e2b");
    assert!(v["workspace"]["root"].is_null());
    assert_eq!(
        v["profile"]["settings"]["options"]["api_key"],
        "${MY_E2B_KEY}"
    );
    assert!(server.accept().is_err(), "info connected to the service");
}

/// A journal append that fails (here: `journal.jsonl` is a directory; a
/// read-only copy of a workspace fails the same way for a normal user)
/// does not fail the command, but it is said once on stderr instead of
/// being lost silently.
#[test]
fn a_failed_journal_append_is_reported_once() {
    let env = Env::new();
    let t = tempfile::tempdir().unwrap();
    let w = t.path().to_str().unwrap();
    std::fs::create_dir_all(t.path().join("sessions/s-001/journal.jsonl")).unwrap();
    let o = env.run(&[
        "exec",
        "--workdir",
        w,
        "--session",
        "s-001",
        "--",
        "echo",
        "hi",
    ]);
    assert_eq!(stdout(&o), "hi\n");
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("could not append to the journal of session s-001"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("warning: "), "{err}");

    // A healthy workspace says nothing.
    let ok = tempfile::tempdir().unwrap();
    let o = env.run(&[
        "exec",
        "--workdir",
        ok.path().to_str().unwrap(),
        "--",
        "echo",
        "hi",
    ]);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
