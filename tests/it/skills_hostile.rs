//! Issue 14 point 2: hostile skill folders and archives. A link that
//! leads out of a skill folder is refused with its name, never followed
//! (absolute, `../`, to a directory); a link to a file inside becomes a
//! copy, as in an archive; a name that reads as a path is refused; an
//! archive with two skills is refused naming both, never half-installed.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use crate::support;
use wsbench::engine::skills::ArchiveFormat;
use wsbench::engine::{Workspace, WorkspaceConfig, WorkspaceError};

/// Makes one link in the skill folder (host dir, skill dir).
type MakeLink = fn(&Path, &Path);

const SECRET: &str = "host-secret-7b1e";

fn write_skill(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: d\n---\nBody.\n"),
    )
    .unwrap();
}

/// A host with a secret file and a secret dir next to the skill folder.
fn host() -> tempfile::TempDir {
    let h = tempfile::tempdir().unwrap();
    std::fs::write(h.path().join("secret.txt"), SECRET).unwrap();
    std::fs::create_dir(h.path().join("private")).unwrap();
    std::fs::write(h.path().join("private/key"), SECRET).unwrap();
    h
}

/// The refusal of `skills add`, asserting the partition stayed empty and
/// nothing of the host's secrets reached the workspace.
async fn refused(ws: &Arc<Workspace>, root: &Path, dir: &Path) -> String {
    let err = ws.skills().add(dir, "victim").await.unwrap_err();
    let WorkspaceError::Invalid(msg) = &err else {
        panic!("not Invalid: {err}");
    };
    let listing = ws.skills().list("victim").await.unwrap();
    assert!(listing.skills.is_empty(), "{listing:?}");
    let out = Command::new("grep")
        .args(["-rl", SECRET])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "secret copied: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    msg.clone()
}

#[tokio::test]
async fn links_out_of_a_skill_folder_are_refused_by_name() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("ws");
    let ws = support::open(&root, WorkspaceConfig::default()).await;

    let cases: [(&str, MakeLink); 3] = [
        (
            "abs-link",
            (|h: &Path, s: &Path| symlink(h.join("secret.txt"), s.join("abs-link")).unwrap()),
        ),
        (
            "up-link",
            (|_h: &Path, s: &Path| symlink("../secret.txt", s.join("up-link")).unwrap()),
        ),
        (
            "dir-link",
            (|_h: &Path, s: &Path| symlink("../private", s.join("dir-link")).unwrap()),
        ),
    ];
    for (link, make) in cases {
        let h = host();
        let skill = h.path().join("skill");
        write_skill(&skill, "hostile");
        make(h.path(), &skill);
        let msg = refused(&ws, &root, &skill).await;
        assert!(
            msg.contains(link) && msg.contains("outside"),
            "{link}: {msg}"
        );
    }
}

#[tokio::test]
async fn a_link_to_a_file_inside_is_copied_as_a_file() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("ws");
    let ws = support::open(&root, WorkspaceConfig::default()).await;
    let h = host();
    let skill = h.path().join("skill");
    write_skill(&skill, "inside");
    std::fs::write(skill.join("real.sh"), "echo hi\n").unwrap();
    symlink("real.sh", skill.join("alias.sh")).unwrap();
    let done = ws.skills().add(&skill, "a").await.unwrap();
    let alias = root.join(done.dir.trim_start_matches('/')).join("alias.sh");
    let alias = if alias.exists() {
        alias
    } else {
        // `dir` is a sandbox path; on local it is the host path itself.
        Path::new(&done.dir).join("alias.sh")
    };
    let meta = std::fs::symlink_metadata(&alias).unwrap();
    assert!(meta.is_file(), "{alias:?} is not a plain file");
    assert_eq!(std::fs::read_to_string(&alias).unwrap(), "echo hi\n");
}

#[tokio::test]
async fn a_name_that_reads_as_a_path_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("ws");
    let ws = support::open(&root, WorkspaceConfig::default()).await;
    let h = host();
    for name in ["../../etc/evil", "a/b", ".."] {
        let skill = h.path().join("named");
        let _ = std::fs::remove_dir_all(&skill);
        write_skill(&skill, name);
        let msg = refused(&ws, &root, &skill).await;
        assert!(msg.contains("skill name"), "{name}: {msg}");
    }
}

fn tar_of(files: &[(&str, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, text) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, text.as_bytes()).unwrap();
    }
    b.into_inner().unwrap()
}

#[tokio::test]
async fn an_archive_with_two_skills_is_refused_naming_both() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("ws");
    let ws = support::open(&root, WorkspaceConfig::default()).await;
    let md = |n: &str| format!("---\nname: {n}\ndescription: d\n---\n");
    let (a, b) = (md("alpha"), md("beta"));
    let bytes = tar_of(&[("alpha/SKILL.md", &a), ("beta/SKILL.md", &b)]);
    let err = ws
        .skills()
        .add_archive(std::io::Cursor::new(bytes), ArchiveFormat::Tar, "two", None)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("2 skills") && msg.contains("alpha") && msg.contains("beta"),
        "{msg}"
    );
    let listing = ws.skills().list("two").await.unwrap();
    assert!(listing.skills.is_empty(), "{listing:?}");
}
