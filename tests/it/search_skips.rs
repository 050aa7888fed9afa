//! Glob and Grep name what they could not search (issue 14, smaller
//! gaps): files under paths too long for the OS and files whose names are
//! not UTF-8 are reported in the result instead of silently left out (or
//! listed under a lossy name Read cannot open).

use crate::support;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

use serde_json::json;

/// Makes `depth` nested directories of 200-character names below `base`
/// (with `*at` calls, as the whole path is longer than `PATH_MAX`) and a
/// file `deep.txt` holding `needle` in the last one.
fn deep_tree(base: &std::path::Path, depth: usize) {
    let name = CString::new("d".repeat(200)).unwrap();
    let c = CString::new(base.as_os_str().as_bytes()).unwrap();
    // SAFETY: plain syscalls on fds this function owns and closes.
    unsafe {
        let mut fd = libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        assert!(fd >= 0);
        for _ in 0..depth {
            assert_eq!(libc::mkdirat(fd, name.as_ptr(), 0o755), 0);
            let next = libc::openat(fd, name.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            assert!(next >= 0);
            libc::close(fd);
            fd = next;
        }
        let file = CString::new("deep.txt").unwrap();
        let f = libc::openat(fd, file.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644);
        assert!(f >= 0);
        assert_eq!(libc::write(f, b"needle\n".as_ptr().cast(), 7), 7);
        libc::close(f);
        libc::close(fd);
    }
}

/// Removes what [`deep_tree`] made (`rm -rf` copes with long paths).
fn remove_deep(base: &std::path::Path) {
    let _ = std::process::Command::new("rm")
        .arg("-rf")
        .arg(base)
        .status();
}

#[tokio::test]
async fn glob_and_grep_report_long_and_non_utf8_paths() {
    let (dir, ws) = support::temp_workspace().await;
    let wd = ws.layout().workdir().to_string();
    std::fs::create_dir_all(dir.path().join("deep")).unwrap();
    deep_tree(&dir.path().join("deep"), 25);
    let bad = std::ffi::OsStr::from_bytes(b"bad-\xff\xfe-name.txt");
    std::fs::write(dir.path().join(bad), "needle\n").unwrap();
    std::fs::write(dir.path().join("good.txt"), "needle\n").unwrap();

    let r = support::call(&ws, "Glob", json!({"pattern": "**/*.txt", "path": wd})).await;
    let text = r.text();
    assert!(text.contains("good.txt"), "{text}");
    assert!(!text.contains('\u{FFFD}'), "no lossy names: {text}");
    assert!(text.contains("could not be searched"), "{text}");
    assert!(text.contains(r"bad-\xFF\xFE-name.txt"), "{text}");
    assert!(text.contains("not UTF-8"), "{text}");
    assert!(
        text.contains("File name too long") || text.contains("os error 36"),
        "{text}"
    );

    let r = support::call(
        &ws,
        "Grep",
        json!({"pattern": "needle", "path": wd, "output_mode": "files_with_matches"}),
    )
    .await;
    let text = r.text();
    assert!(text.contains("good.txt"), "{text}");
    assert!(!text.contains('\u{FFFD}'), "no lossy names: {text}");
    assert!(text.contains(r"bad-\xFF\xFE-name.txt"), "{text}");
    remove_deep(&dir.path().join("deep"));
}

/// On bubblewrap the walk runs on the host folder behind `/workspace`:
/// the note names the sandbox path, never the host one (issue 14).
#[tokio::test]
async fn on_bubblewrap_the_note_names_sandbox_paths() {
    use std::sync::Arc;
    use wsbench::backend::bubblewrap::{BubblewrapOptions, BubblewrapSandbox};
    use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};
    if let Err(why) = support::images::bwrap_ready().await {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why}");
        }
        println!("SKIPPED: {why}");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let sb = BubblewrapSandbox::open(d.path(), BubblewrapOptions::default()).unwrap();
    let ws = Workspace::open(
        Arc::new(sb),
        WorkspaceConfig::default(),
        EventBus::default(),
    )
    .await
    .unwrap();
    let wd = ws.layout().workdir().to_string();
    let host = std::fs::canonicalize(d.path()).unwrap();
    std::fs::create_dir_all(host.join("gg")).unwrap();
    let bad = std::ffi::OsStr::from_bytes(b"bad-\xff\xfe-name.txt");
    std::fs::write(host.join("gg").join(bad), "needle\n").unwrap();
    let host_s = host.to_str().unwrap();
    for (tool, args) in [
        ("Glob", json!({"pattern": "**/*.txt"})),
        (
            "Glob",
            json!({"pattern": "*.txt", "path": format!("{wd}/gg")}),
        ),
        (
            "Grep",
            json!({"pattern": "needle", "output_mode": "files_with_matches"}),
        ),
        (
            "Grep",
            json!({"pattern": "needle", "path": format!("{wd}/gg")}),
        ),
    ] {
        let r = support::call(&ws, tool, args.clone()).await;
        let text = r.text();
        assert!(
            text.contains("could not be searched"),
            "{tool} {args}: {text}"
        );
        assert!(
            text.contains(&format!(r"{wd}/gg/bad-\xFF\xFE-name.txt")),
            "{tool} {args}: {text}"
        );
        assert!(!text.contains(host_s), "{tool} {args}: host path in {text}");
    }
}
