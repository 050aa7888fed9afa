//! Conventions of a good command-line tool (issue 22): the version names
//! its commit, a man page, options from the environment, global options
//! apart in `--help`, JSON errors under `--json`, exit codes of listings.

use crate::support::cli;

use std::path::Path;
use std::process::Output;

fn run(home: &Path, args: &[&str]) -> Output {
    cli::wsbench_cmd(home).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn version_names_the_commit_and_its_date() {
    let home = tempfile::tempdir().unwrap();
    let out = text(&run(home.path(), &["--version"]).stdout);
    // `wsbench 0.1.0 (<12 hex or unknown> <YYYY-MM-DD or unknown>)`
    let inner = out
        .trim()
        .strip_prefix(&format!("wsbench {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{out}"));
    let (commit, date) = inner.split_once(' ').unwrap();
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{out}"
    );
    assert!(
        date == "unknown" || (date.len() == 10 && date.as_bytes()[4] == b'-'),
        "{out}"
    );
}

#[test]
fn the_man_page_renders_with_man() {
    let home = tempfile::tempdir().unwrap();
    let o = run(home.path(), &["man"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let roff = text(&o.stdout);
    assert!(roff.contains(".TH wsbench 1"), "{roff}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(roff.contains(section), "{section} missing");
    }
    // A sub-command's own page, and a clear error for an unknown one.
    let o = run(home.path(), &["man", "mcp", "add"]);
    assert!(text(&o.stdout).contains(".TH wsbench-mcp-add 1"));
    let o = run(home.path(), &["man", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no sub-command \"nope\""),
        "{}",
        text(&o.stderr)
    );
    // `--out DIR` writes one page per sub-command.
    let dir = tempfile::tempdir().unwrap();
    let o = run(home.path(), &["man", "--out", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for page in ["wsbench.1", "wsbench-exec.1", "wsbench-mcp-add.1"] {
        assert!(dir.path().join(page).is_file(), "{page}");
    }

    // `man -l` renders it (a real part: man-db).
    let page = dir.path().join("wsbench.1");
    let Ok(out) = std::process::Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
    else {
        assert!(std::env::var_os("CI").is_none(), "man is missing under CI");
        println!("SKIPPED: man (man-db) is not installed");
        return;
    };
    assert!(out.status.success(), "man -l: {}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("NAME") && shown.contains("--read-only"),
        "{shown}"
    );
}

#[test]
fn agent_and_session_come_from_the_environment() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let o = cli::wsbench_cmd(home.path())
        .args(["--json", "--workdir", w.path().to_str().unwrap(), "info"])
        .env("WSBENCH_AGENT", "coder")
        .env("WSBENCH_SESSION", "s-env")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let shown = text(&o.stdout);
    assert!(
        shown.contains("\"coder\"") && shown.contains("\"s-env\""),
        "{shown}"
    );
    // The command line wins over the environment.
    let o = cli::wsbench_cmd(home.path())
        .args([
            "--json",
            "--workdir",
            w.path().to_str().unwrap(),
            "--agent",
            "other",
            "info",
        ])
        .env("WSBENCH_AGENT", "coder")
        .output()
        .unwrap();
    let shown = text(&o.stdout);
    assert!(
        shown.contains("\"other\"") && !shown.contains("\"coder\""),
        "{shown}"
    );
}

#[test]
fn global_options_have_their_own_heading_in_help() {
    let home = tempfile::tempdir().unwrap();
    let help = text(&run(home.path(), &["exec", "--help"]).stdout);
    let (own, global) = help
        .split_once("Global options:")
        .unwrap_or_else(|| panic!("{help}"));
    assert!(own.contains("--timeout"), "{help}");
    assert!(!own.contains("--workdir"), "{help}");
    assert!(
        global.contains("--workdir") && global.contains("WSBENCH_AGENT"),
        "{help}"
    );
}

#[test]
fn errors_under_json_are_json_on_stdout() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("nope");
    let o = run(
        home.path(),
        &["--json", "--workdir", missing.to_str().unwrap(), "status"],
    );
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o.stdout)));
    assert!(
        v["error"].as_str().unwrap().contains("does not exist"),
        "{v}"
    );
    assert!(v["causes"].is_array(), "{v}");
    // stderr keeps its one text line for people.
    assert!(
        text(&o.stderr).starts_with("error: "),
        "{}",
        text(&o.stderr)
    );

    // A usage error: JSON too, exit 2 as clap's.
    let o = run(home.path(), &["--json", "exec"]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o.stdout)));
    assert_eq!(v["kind"], "usage");
    assert!(v["error"].as_str().unwrap().contains("<COMMAND>"), "{v}");
    // Without --json, stdout stays empty.
    let o = run(
        home.path(),
        &["--workdir", missing.to_str().unwrap(), "status"],
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn mcp_list_with_a_failed_server_lists_it_and_exits_3() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let wd = w.path().to_str().unwrap();
    let o = run(
        home.path(),
        &[
            "--workdir",
            wd,
            "mcp",
            "add",
            "broken",
            "--no-connect",
            "--",
            "sh",
            "-c",
            "exit 1",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    for json in [false, true] {
        let mut args = vec!["--workdir", wd, "mcp", "list"];
        if json {
            args.push("--json");
        }
        let o = run(home.path(), &args);
        assert_eq!(
            o.status.code(),
            Some(wsbench::cli::EXIT_PARTIAL),
            "{}",
            text(&o.stderr)
        );
        assert!(text(&o.stdout).contains("broken"), "{}", text(&o.stdout));
    }
}

/// A log file under the data dir that `info` names; what wsbench did at
/// info level lands there although stderr stays quiet; `WSBENCH_LOG_FILE`
/// moves it or turns it off.
#[test]
fn a_log_file_keeps_what_stderr_hides() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data").join("wsbench");
    let log = data.join("logs").join("wsbench.log");
    let info = text(&run(home.path(), &["info"]).stdout);
    assert!(
        info.contains(&format!("log file:         {}", log.display())),
        "{info}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&run(home.path(), &["--json", "info"]).stdout).unwrap();
    assert_eq!(json["log_file"], log.display().to_string(), "{json}");
    // A skill in the old flat layout is migrated: an info line.
    let skills = data.join("workspaces").join("default").join("skills");
    std::fs::create_dir_all(skills.join("s")).unwrap();
    std::fs::write(
        skills.join("s").join("SKILL.md"),
        "---\nname: s\ndescription: d\n---\n",
    )
    .unwrap();
    let out = run(home.path(), &["skills", "list"]);
    assert!(
        !text(&out.stderr).contains("migrated"),
        "{}",
        text(&out.stderr)
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(" INFO wsbench::skills: migrated 1 skill"),
        "{logged}"
    );
    // Elsewhere, or off.
    let other = home.path().join("elsewhere.log");
    let out = cli::wsbench_cmd(home.path())
        .env("WSBENCH_LOG_FILE", &other)
        .env("WSBENCH_LOG", "wsbench=debug")
        .args(["info"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(text(&out.stdout).contains(&other.display().to_string()));
    assert!(other.exists());
    let home2 = tempfile::tempdir().unwrap();
    let out = cli::wsbench_cmd(home2.path())
        .env("WSBENCH_LOG_FILE", "off")
        .args(["info"])
        .output()
        .unwrap();
    assert!(text(&out.stdout).contains("log file:         none"));
    assert!(
        !home2
            .path()
            .join("data")
            .join("wsbench")
            .join("logs")
            .exists()
    );
}

/// A log folder that cannot be made is named once on stderr; the command
/// still runs.
#[test]
fn an_unwritable_log_file_is_named_and_the_command_runs() {
    let home = tempfile::tempdir().unwrap();
    let plain = home.path().join("plain");
    std::fs::write(&plain, "x").unwrap();
    let out = cli::wsbench_cmd(home.path())
        .env("WSBENCH_LOG_FILE", plain.join("x.log"))
        .args(["exec", "--", "echo", "ran"])
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "ran\n");
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("no log file: cannot create"), "{err}");
}

/// Dynamic completions (`WSBENCH_COMPLETE=fish`: one `value<TAB>help`
/// per line): profiles, the profile's workspace ids, the folder's
/// sessions and the pair's MCP servers, reading what was typed so far.
#[test]
fn dynamic_completions_offer_ids_sessions_and_servers() {
    let home = tempfile::tempdir().unwrap();
    let complete = |words: &[&str]| -> Vec<String> {
        let out = cli::wsbench_cmd(home.path())
            .env("WSBENCH_COMPLETE", "fish")
            .arg("--")
            .arg("wsbench")
            .args(words)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("--"))
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    // The hook script itself.
    let hook = cli::wsbench_cmd(home.path())
        .env("WSBENCH_COMPLETE", "bash")
        .output()
        .unwrap();
    assert!(
        text(&hook.stdout).contains("complete "),
        "{}",
        text(&hook.stdout)
    );
    assert!(complete(&["--profile", ""]).contains(&"local".to_string()));
    // The local profile's default workspace, once made.
    let made = run(home.path(), &["exec", "--", "true"]);
    assert!(made.status.success());
    let listed: serde_json::Value =
        serde_json::from_slice(&run(home.path(), &["--json", "workspaces", "list"]).stdout)
            .unwrap();
    let id = listed["workspaces"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(complete(&["workspaces", "open", ""]), [id]);
    let ws = home
        .path()
        .join("data")
        .join("wsbench")
        .join("workspaces")
        .join("default");
    std::fs::create_dir_all(ws.join("sessions").join("s-b")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-workspace/.mcp"),
        ws.join(".mcp"),
    )
    .unwrap();
    let sessions = complete(&["sessions", "show", ""]);
    assert!(sessions.contains(&"s-b".to_string()), "{sessions:?}");
    assert_eq!(
        complete(&["--agent", "coder", "--session", "s-001", "mcp", "tools", ""]),
        ["docs", "everything"]
    );
    assert!(complete(&["mcp", "tools", ""]).is_empty());
}

/// `wsbench completions bash | head -1` and `wsbench man | head -1`: a
/// reader that stops early is not an error (clap_complete panicked on the
/// broken pipe, found by the issue 22 trial).
#[test]
fn completions_and_man_into_a_closed_pipe_exit_quietly() {
    let home = tempfile::tempdir().unwrap();
    for args in [&["completions", "bash"][..], &["man"][..]] {
        let mut child = crate::support::cli::wsbench_cmd(home.path())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Read nothing and close the pipe: every write of wsbench fails.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}
