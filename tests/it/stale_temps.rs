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
