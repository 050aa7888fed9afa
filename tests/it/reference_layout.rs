//! Issue 23 point 5: a local profile with `layout = "reference"` reads and
//! writes the reference's local layout, every workspace of an agent at
//! `<base>/<agent>` (docs/contract.md §8.3, §11 point 26), on a base the
//! reference made (`tests/fixtures/reference-base/`, written by
//! agentscope 2.0.11's `LocalWorkspaceManager`).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::{cli, fixtures};

struct Env {
    home: tempfile::TempDir,
    base: tempfile::TempDir,
}

impl Env {
    /// A copy of the reference's base and a profile `shared` on it.
    fn new(layout: Option<&str>) -> Env {
        let home = tempfile::tempdir().unwrap();
        let base = tempfile::tempdir().unwrap();
        crate::support::copy_dir(&fixtures().join("reference-base/base"), base.path());
        let conf = home.path().join("config/wsbench");
        std::fs::create_dir_all(&conf).unwrap();
        let layout = layout.map_or(String::new(), |l| format!("layout = \"{l}\"\n"));
        std::fs::write(
            conf.join("config.toml"),
            format!(
                "[profiles.shared]\nbackend = \"local\"\n\n[profiles.shared.options]\n\
                 base_dir = \"{}\"\n{layout}",
                base.path().display()
            ),
        )
        .unwrap();
        Env { home, base }
    }

    fn run(&self, args: &[&str]) -> Output {
        cli::wsbench_cmd(self.home.path())
            .args(["--profile", "shared"])
            .args(args)
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let o = self.run(&[args, &["--json"]].concat());
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }
}

fn ids(list: &Value) -> Vec<String> {
    list["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_string())
        .collect()
}

fn sessions(v: &Value) -> Vec<String> {
    let arr = v.as_array().or_else(|| v["sessions"].as_array()).unwrap();
    let mut out: Vec<String> = arr
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

#[test]
fn the_reference_layout_lists_opens_and_writes_the_references_folders() {
    let env = Env::new(Some("reference"));
    // What the reference made is listed, one workspace per agent folder.
    let list = env.json(&["workspaces", "list"]);
    assert_eq!(ids(&list), ["coder", "reviewer"], "{list}");
    let opened = env.json(&["workspaces", "open", "coder"]);
    assert_eq!(
        Path::new(opened["host_dir"].as_str().unwrap()),
        env.base.path().join("coder").canonicalize().unwrap(),
        "{opened}"
    );
    // Any user of agent coder gets the one folder, as in the reference:
    // both users' sessions are there.
    for user in ["alice", "carol"] {
        let s = env.json(&["--user", user, "--agent", "coder", "sessions", "list"]);
        assert_eq!(sessions(&s), ["s-alice", "s-bob"], "{user}: {s}");
    }
    // What wsbench writes lands in <base>/<agent>, where the reference
    // looks.
    let o = env.run(&[
        "--user",
        "dave",
        "--agent",
        "reviewer",
        "--session",
        "s-dave",
        "exec",
        "--",
        "echo hi > note.txt",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(env.base.path().join("reviewer/note.txt")).unwrap(),
        "hi\n"
    );
    assert!(
        env.base
            .path()
            .join("reviewer/sessions/s-dave/journal.jsonl")
            .is_file()
    );
    // Each (user, agent) wsbench opened is listed by its id, the one the
    // reference assigned (ids.json), in the agent's one folder; a folder a
    // record names is no longer listed by its bare name.
    let list = env.json(&["workspaces", "list"]);
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("reference-base/ids.json")).unwrap(),
    )
    .unwrap();
    let mut seen: Vec<(String, String)> = list["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let dir = Path::new(w["location"].as_str().unwrap());
            let folder = dir.file_name().unwrap().to_str().unwrap().to_string();
            (w["id"].as_str().unwrap().to_string(), folder)
        })
        .collect();
    seen.sort();
    let alice = want["alice/coder"].as_str().unwrap().to_string();
    assert!(seen.contains(&(alice, "coder".into())), "{list}");
    assert_eq!(
        seen.len(),
        3,
        "alice, carol (coder), dave (reviewer): {list}"
    );
    assert!(!ids(&list).contains(&"coder".to_string()), "{list}");
    // No user folders were made beside the agents'.
    let mut top: Vec<String> = std::fs::read_dir(env.base.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with('.'))
        .collect();
    top.sort();
    assert_eq!(top, ["coder", "reviewer"]);
}

#[test]
fn the_default_layout_does_not_see_the_references_folders() {
    let env = Env::new(None);
    let list = env.json(&["workspaces", "list"]);
    assert_eq!(ids(&list), Vec::<String>::new(), "{list}");
    let s = env.json(&["--user", "alice", "--agent", "coder", "sessions", "list"]);
    assert_eq!(sessions(&s), Vec::<String>::new(), "{s}");
}

#[test]
fn a_bad_layout_is_an_error_naming_the_option() {
    let env = Env::new(Some("flat"));
    let o = env.run(&["workspaces", "list"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("layout") && err.contains("\"reference\""),
        "{err}"
    );
}
