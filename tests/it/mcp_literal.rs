//! Issue 23 point 3: wsbench fills `${VAR}` in `.mcp` header and env
//! values from its environment; the reference sends them as written
//! (`Bearer ${TEAM_TOKEN}` on the wire). `mcp add` and `mcp list` say so,
//! and `mcp add --literal` writes the value itself so both send the same.

use crate::support::cli;

use std::path::Path;
use std::process::Output;

/// A port nothing answers on; `--no-connect` never dials it.
const URL: &str = "http://127.0.0.1:9/mcp";
const HEADER: &str = "Authorization=Bearer ${TEAM_TOKEN}";

fn run(home: &Path, w: &Path, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = cli::wsbench_cmd(home);
    cmd.env_remove("TEAM_TOKEN");
    if let Some(t) = token {
        cmd.env("TEAM_TOKEN", t);
    }
    cmd.arg("--workdir").arg(w).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn mcp_file(w: &Path) -> String {
    std::fs::read_to_string(w.join(".mcp")).unwrap_or_default()
}

#[test]
fn add_and_list_say_when_a_declaration_uses_a_variable() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let add = ["mcp", "add", "docs", "--url", URL, "--header", HEADER];
    let o = run(
        home.path(),
        w.path(),
        None,
        &[&add[..], &["--no-connect"]].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("note: docs fills ${TEAM_TOKEN}"), "{out}");
    assert!(out.contains("sends the text as written"), "{out}");
    assert!(out.contains("--literal"), "{out}");
    // The reference kept as written.
    assert!(mcp_file(w.path()).contains("Bearer ${TEAM_TOKEN}"));

    let o = run(
        home.path(),
        w.path(),
        None,
        &["mcp", "list", "--no-connect"],
    );
    assert!(
        text(&o).contains("note: docs fills ${TEAM_TOKEN}"),
        "{}",
        text(&o)
    );
    let o = run(
        home.path(),
        w.path(),
        None,
        &["mcp", "list", "--no-connect", "--json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["servers"][0]["expands"],
        serde_json::json!(["TEAM_TOKEN"])
    );
}

#[test]
fn literal_writes_the_value_itself() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let add = [
        "mcp",
        "add",
        "docs",
        "--url",
        URL,
        "--header",
        HEADER,
        "--no-connect",
        "--literal",
    ];
    let o = run(home.path(), w.path(), Some("tok-123"), &add);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("fills"), "{}", text(&o));
    assert!(
        text(&o).contains("which the agent can read"),
        "{}",
        text(&o)
    );
    let file = mcp_file(w.path());
    assert!(
        file.contains("\"Authorization\": \"Bearer tok-123\""),
        "{file}"
    );
    assert!(!file.contains("${"), "{file}");
    let o = run(
        home.path(),
        w.path(),
        None,
        &["mcp", "list", "--no-connect", "--json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["servers"][0]["expands"], serde_json::json!([]));
}

#[test]
fn literal_refuses_what_the_two_would_read_differently() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let add = |header: &str, token: Option<&str>| {
        run(
            home.path(),
            w.path(),
            token,
            &[
                "mcp",
                "add",
                "docs",
                "--url",
                URL,
                "--header",
                header,
                "--no-connect",
                "--literal",
            ],
        )
    };
    // An unset variable: nothing to write.
    let o = add(HEADER, None);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("`TEAM_TOKEN` is not set"), "{}", text(&o));
    // A value that, once filled, wsbench would still read as `${...}`.
    let o = add(HEADER, Some("x${Y}"));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("mcp_config.headers.Authorization") && text(&o).contains("`$$`"),
        "{}",
        text(&o)
    );
    assert_eq!(mcp_file(w.path()), "", "nothing saved");
    // `$$` is wsbench's escape of `$`: filled, it is one `$`, which both
    // read as it is.
    let o = add("X-Price=5$$", None);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        mcp_file(w.path()).contains("\"X-Price\": \"5$\""),
        "{}",
        mcp_file(w.path())
    );
}
