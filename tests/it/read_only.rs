//! Issue 14 ("smaller clear-error gaps"): `--read-only` writes nothing.
//! Opening the reference fixture copy and a fresh empty directory with
//! `--read-only` through the CLI leaves every file, name and mode as it
//! was; a write that is asked for is refused with an error naming the
//! mode, and still changes nothing.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Output;

use sha2::{Digest, Sha256};

use crate::support::{self, cli};

/// Every entry under `root`: relative path → (mode, SHA-256 of the
/// content, or the link target, or "dir").
fn tree(root: &Path) -> BTreeMap<String, (u32, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (u32, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let what = if meta.is_dir() {
                walk(root, &p, out);
                "dir".to_string()
            } else if meta.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(&p).unwrap().display())
            } else {
                hex(&Sha256::digest(std::fs::read(&p).unwrap()))
            };
            out.insert(rel, (meta.mode(), what));
        }
    }
    let mut out = BTreeMap::new();
    let m = std::fs::metadata(root).unwrap();
    out.insert(".".into(), (m.permissions().mode(), "dir".into()));
    walk(root, root, &mut out);
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn run(home: &Path, w: &Path, args: &[&str]) -> Output {
    cli::wsbench_cmd(home)
        .arg("--config")
        .arg(home.join("wsbench.toml"))
        .args(["--read-only", "--workdir"])
        .arg(w)
        .args(args)
        .output()
        .unwrap()
}

/// A config whose skill paths would seed the fixture skills.
fn home_with_skill_paths() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let src = support::fixtures().join("skills-src");
    let paths: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| format!("{:?}", e.unwrap().path().display().to_string()))
        .collect();
    std::fs::write(
        home.path().join("wsbench.toml"),
        format!("[workspace]\nskill_paths = [{}]\n", paths.join(", ")),
    )
    .unwrap();
    home
}

const READS: &[&[&str]] = &[
    &["skills", "list"],
    &["skills", "list", "--json"],
    &["sessions", "list"],
    &["offload", "list"],
    &["mcp", "list"],
    &["info"],
    &["status"],
];

fn reads_change_nothing(w: &Path) {
    let home = home_with_skill_paths();
    let before = tree(w);
    for args in READS {
        let o = run(home.path(), w, args);
        // A listing with an invalid skill or a failed server exits
        // EXIT_PARTIAL after printing it: a read, not a failure.
        assert!(
            matches!(o.status.code(), Some(0 | wsbench::cli::EXIT_PARTIAL)),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(tree(w), before, "{args:?} changed the workspace");
    }
}

#[test]
fn read_only_reads_of_the_reference_workspace_write_nothing() {
    let w = support::fixture_copy();
    reads_change_nothing(w.path());
}

#[test]
fn read_only_reads_of_an_empty_directory_write_nothing() {
    let w = tempfile::tempdir().unwrap();
    reads_change_nothing(w.path());
    let home = home_with_skill_paths();
    let o = run(home.path(), w.path(), &["skills", "list"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("read-only: skills not seeded"), "{out}");
}

#[test]
fn read_only_tool_calls_do_not_try_to_journal() {
    // A read-only run writes nothing, the journal included, so it has
    // nothing to warn about either (it used to warn that the append was
    // refused).
    let w = support::fixture_copy();
    let home = home_with_skill_paths();
    let file = w.path().join("probe.txt");
    std::fs::write(&file, "hello\n").unwrap();
    let before = tree(w.path());
    let args = serde_json::json!({"file_path": file.display().to_string()}).to_string();
    let o = run(home.path(), w.path(), &["tool", "Read", &args]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("hello"));
    assert!(!err.contains("journal"), "a read-only call warned: {err}");
    assert_eq!(tree(w.path()), before);
}

#[test]
fn read_only_lists_the_seed_of_an_unequipped_partition() {
    let w = support::fixture_copy();
    let home = home_with_skill_paths();
    let before = tree(w.path());
    let o = run(
        home.path(),
        w.path(),
        &["--agent", "never-used", "skills", "list"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("is not equipped; listing"), "{out}");
    assert_eq!(tree(w.path()), before);
}

#[test]
fn read_only_refuses_writes_with_a_clear_error() {
    let w = support::fixture_copy();
    let home = home_with_skill_paths();
    let before = tree(w.path());
    // An absolute path, so the Write reaches the read-only refusal (a
    // relative one is refused earlier, for another reason).
    let target = w.path().join("new.txt").display().to_string();
    let write = serde_json::json!({"file_path": target, "content": "x"}).to_string();
    for args in [
        &["tool", "Write", &write][..],
        &["exec", "--", "touch", "new.txt"],
        &["--agent", "coder", "skills", "remove", "git-helper"],
        &["mcp", "add", "x", "--", "true"],
    ] {
        let o = run(home.path(), w.path(), args);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(all.contains("--read-only"), "{args:?}: {all}");
        assert_eq!(tree(w.path()), before, "{args:?} changed the workspace");
    }
}

/// Every sub-command that changes something, with the workspace it would
/// change (the fixture's skills, its `.mcp`, the profile's workspaces).
const CHANGES: &[&[&str]] = &[
    &["workspaces", "create"],
    &["workspaces", "create", "--new"],
    &["workspaces", "close", "some-id"],
    &["workspaces", "destroy", "--yes", "some-id"],
    &["--agent", "coder", "skills", "remove", "git-helper"],
    &["mcp", "add", "x", "--", "true"],
    &["mcp", "remove", "x"],
    &["mcp", "call", "x", "t"],
    &["mcp", "restart", "x"],
    &["exec", "--", "touch", "new.txt"],
    &["demo", "explore"],
    &[
        "agent",
        "--model-url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "hi",
    ],
];

#[test]
fn read_only_refuses_every_change_in_one_line_and_writes_nothing() {
    let w = support::fixture_copy();
    let home = home_with_skill_paths();
    let skill = support::fixtures().join("skills-src");
    let skill = std::fs::read_dir(&skill)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let add = ["skills", "add", skill.to_str().unwrap()];
    let before = tree(w.path());
    let home_before = tree(home.path());
    for args in CHANGES.iter().copied().chain([&add[..]]) {
        let o = run(home.path(), w.path(), args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{args:?} succeeded");
        assert!(err.contains("--read-only"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert_eq!(tree(w.path()), before, "{args:?} changed the workspace");
        assert_eq!(tree(home.path()), home_before, "{args:?} wrote to the home");
    }
}

#[test]
fn read_only_does_not_provision_a_missing_workspace() {
    // A profile's workspace that was never made: reading it under
    // --read-only is an error, and nothing appears on disk.
    let home = tempfile::tempdir().unwrap();
    let base = home.path().join("base");
    std::fs::write(
        home.path().join("wsbench.toml"),
        format!(
            "[profiles.loc]\nbackend = \"local\"\n\n[profiles.loc.options]\nbase_dir = {:?}\n",
            base.display().to_string()
        ),
    )
    .unwrap();
    let before = tree(home.path());
    for args in [&["skills", "list"][..], &["status"], &["sessions", "list"]] {
        let o = cli::wsbench_cmd(home.path())
            .arg("--config")
            .arg(home.path().join("wsbench.toml"))
            .args(["--read-only", "--profile", "loc"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{args:?} succeeded");
        assert!(err.contains("does not exist"), "{args:?}: {err}");
        assert!(
            err.contains("--read-only does not create it"),
            "{args:?}: {err}"
        );
        assert!(!base.exists(), "{args:?} made {}", base.display());
        assert_eq!(tree(home.path()), before, "{args:?} wrote to the home");
    }
}
