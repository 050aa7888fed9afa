//! Issue 14 point 8: temp files left by writes killed mid-way are removed
//! when the workspace is opened again, once they are old enough that no
//! live writer can own them; a fresh one (a concurrent writer's) stays,
//! and `--read-only` removes nothing. Through the real binary, on a
//! `--workdir` and on a local profile's workspace (the manager's path).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::support::cli;

/// An old and a fresh temp file in `dir/sub`; returns them.
fn plant(dir: &Path) -> (PathBuf, PathBuf) {
    let sub = dir.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let (old, fresh) = (sub.join(".wsbench-tmp-old1"), sub.join(".wsbench-tmp-new1"));
    std::fs::write(&old, "half a write").unwrap();
    std::fs::write(&fresh, "a write in flight").unwrap();
    let f = std::fs::File::options().write(true).open(&old).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    (old, fresh)
}

fn status(home: &Path, args: &[&str]) {
    let o = cli::wsbench_cmd(home)
        .arg("--config")
        .arg(home.join("wsbench.toml"))
        .args(args)
        .arg("status")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn opening_a_workdir_removes_old_temp_files_and_keeps_fresh_ones() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("wsbench.toml"), "").unwrap();
    let w = tempfile::tempdir().unwrap();
    let (old, fresh) = plant(w.path());
    let wd = w.path().to_str().unwrap();
    status(home.path(), &["--read-only", "--workdir", wd]);
    assert!(old.exists(), "--read-only removed a file");
    status(home.path(), &["--workdir", wd]);
    assert!(!old.exists(), "the old temp file is still there");
    assert!(fresh.exists(), "the fresh temp file was removed");
}

#[test]
fn opening_a_profile_workspace_removes_old_temp_files() {
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
    status(home.path(), &["--profile", "loc"]);
    // The workspace directory: the one holding `skills/` under the base.
    let root = ignore::WalkBuilder::new(&base)
        .hidden(false)
        .build()
        .filter_map(Result::ok)
        .find(|e| e.file_name() == "skills")
        .and_then(|e| e.path().parent().map(Path::to_path_buf))
        .expect("the workspace was made");
    let (old, fresh) = plant(&root);
    status(home.path(), &["--profile", "loc"]);
    assert!(!old.exists(), "the old temp file is still there");
    assert!(fresh.exists(), "the fresh temp file was removed");
}

/// The private `/tmp` dirs of bubblewrap sandboxes under `tmp`.
fn bwrap_tmps(tmp: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("wsbench-bwrap-tmp-"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_sigkilled_bwrap_exec_leaves_its_tmp_dir_only_until_the_next_sandbox() {
    // Issue 14, newcomer trial: a SIGKILLed wsbench dropped nothing, so its
    // sandbox's host-side /tmp stayed. The next sandbox sweeps dirs whose
    // owner process is gone; a live owner's dir stays.
    if !crate::support::have("bwrap") {
        crate::support::skip_or_fail("bwrap is not installed");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = home.path().join("bwrap");
    std::fs::write(
        home.path().join("wsbench.toml"),
        format!(
            "[profiles.box]\nbackend = \"bubblewrap\"\n\n[profiles.box.options]\nbase_dir = \"{}\"\n",
            base.display()
        ),
    )
    .unwrap();
    let cmd = |args: &[&str]| {
        let mut c = cli::wsbench_cmd(home.path());
        c.env("TMPDIR", tmp.path())
            .arg("--config")
            .arg(home.path().join("wsbench.toml"))
            .args(["--profile", "box"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        c
    };
    // A long exec, SIGKILLed once it runs (its start byte came: it
    // printed a line).
    let mut killed = cmd(&["exec", "--", "echo up; sleep 305"]).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(killed.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "up\n");
    let left = bwrap_tmps(tmp.path());
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(bwrap_tmps(tmp.path()), left, "the SIGKILL removed it?");
    // A new sandbox sweeps the dead one's dir; its own, live, must
    // survive the next sandbox's sweep.
    let mut live = cmd(&["exec", "--", "echo up; sleep 307"]).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(live.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let with_live = bwrap_tmps(tmp.path());
    let o = cmd(&["exec", "--", "true"]).output().unwrap();
    let after = bwrap_tmps(tmp.path());
    let _ = live.kill();
    let _ = live.wait();
    assert!(o.status.success(), "{o:?}");
    // The live sandbox's open swept the dead one's dir; the next open
    // kept the live one's (and removed its own at its end).
    assert_eq!(with_live.len(), 1, "{with_live:?}");
    assert_ne!(with_live, left, "the dead owner's dir stayed");
    assert_eq!(after, with_live, "the live owner's dir was removed");
}
