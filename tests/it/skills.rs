//! Skills on the local backend: the reference fixture, seeding, invalid
//! skills (C08), equipping, naming, archives (safe and hostile), removal and
//! agent-id checks (docs/contract.md §2.3, §4).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crate::support;
use sha2::{Digest, Sha256};
use wsbench::backend::local::LocalSandbox;
use wsbench::engine::events::{Event, Received, Subscriber};
use wsbench::engine::skills::{ArchiveFormat, SkillListing};
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig, WorkspaceError};

fn skills_src() -> PathBuf {
    support::fixtures().join("skills-src")
}

/// `cp -r` of the reference workspace into a temp dir, made writable.
fn fixture_copy() -> tempfile::TempDir {
    let src = support::fixtures().join("reference-workspace");
    assert!(src.is_dir(), "fixture missing: {}", src.display());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("ws");
    let ok = Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(&dest)
        .status()
        .unwrap();
    assert!(ok.success());
    let ok = Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(&dest)
        .status()
        .unwrap();
    assert!(ok.success());
    dir
}

async fn open_with(dir: &Path, skill_paths: Vec<PathBuf>, bus: EventBus) -> Arc<Workspace> {
    let sb = LocalSandbox::open(dir).unwrap();
    let config = WorkspaceConfig {
        skill_paths,
        ..Default::default()
    };
    Workspace::open(Arc::new(sb), config, bus).await.unwrap()
}

async fn open(dir: &Path, skill_paths: Vec<PathBuf>) -> Arc<Workspace> {
    open_with(dir, skill_paths, EventBus::default()).await
}

fn sha(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// sha-256 of every file under `dir`, by relative path.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, sha(&p));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn names(l: &SkillListing) -> Vec<&str> {
    l.names()
}

fn index_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Names of direct children of `dir` starting with `prefix`.
fn leftovers(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

fn drain(sub: &mut Subscriber) -> Vec<Event> {
    let mut out = Vec::new();
    while let Some(r) = sub.try_recv() {
        if let Received::Event(e) = r {
            out.push(e.event);
        }
    }
    out
}

fn write_skill(dir: &Path, front: &str, body: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\n{front}\n---\n{body}\n")).unwrap();
}

const C08_MD: &str = "---\nname: harness\ndescription: Configure the harness: Hooks, MCP Servers, Skills\n---\nBody text.\n";

#[tokio::test]
async fn reference_fixture_lists_with_index_untouched() {
    let tmp = fixture_copy();
    let root = tmp.path().join("ws");
    let index = root.join("skills/coder/.index");
    let before_index = std::fs::read(&index).unwrap();
    let before_tree = tree(&root.join("skills"));

    let ws = open(&root, vec![]).await;
    let listing = ws.skills().list("coder").await.unwrap();
    assert_eq!(names(&listing), ["git-helper", "test-runner"]);
    assert!(listing.invalid.is_empty(), "{:?}", listing.invalid);
    let git = listing.get("git-helper").unwrap();
    assert_eq!(
        git.description,
        "Summarise a repository's recent history and open branches."
    );
    assert_eq!(
        git.dir,
        format!("{}/skills/coder/git-helper", ws.layout().workdir())
    );
    assert!(
        git.markdown.starts_with("# Git helper\n\nRun `git log"),
        "{}",
        git.markdown
    );
    assert!(git.updated_at > 0.0);
    assert_eq!(
        listing.get("test-runner").unwrap().description,
        "Run the project's tests and report failures with file and line."
    );

    // Nothing changed, so nothing was written, twice over.
    ws.skills().list("coder").await.unwrap();
    assert_eq!(std::fs::read(&index).unwrap(), before_index);
    assert_eq!(tree(&root.join("skills")), before_tree);

    let md = ws.skills().markdown("test-runner", "coder").await.unwrap();
    assert!(md.starts_with("# Test runner"));
    let err = ws.skills().markdown("nope", "coder").await.unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::NotFound(m) if m.contains("git-helper, test-runner")),
        "{err}"
    );

    // A new agent is equipped from .seed, .index included.
    let fresh = ws.skills().list("").await.unwrap();
    assert_eq!(names(&fresh), ["git-helper", "test-runner"]);
    assert!(fresh.partition.ends_with("/skills/default"));
    assert_eq!(
        index_json(&root.join("skills/default/.index"))["skills"],
        index_json(&root.join("skills/.seed/.index"))["skills"]
    );
}

#[tokio::test]
async fn partition_without_index_still_lists_and_gets_the_reference_index() {
    let tmp = fixture_copy();
    let root = tmp.path().join("ws");
    std::fs::remove_file(root.join("skills/reviewer/.index")).unwrap();
    let ws = open(&root, vec![]).await;
    let listing = ws.skills().list("reviewer").await.unwrap();
    assert_eq!(names(&listing), ["git-helper", "test-runner"]);
    let rebuilt = index_json(&root.join("skills/reviewer/.index"));
    let reference = index_json(&root.join("skills/coder/.index"));
    assert_eq!(rebuilt["skills"], reference["skills"]);
    assert!(rebuilt["skills_dir_mtime"].as_f64().unwrap() > 0.0);
}

/// Issue 23 point 2: the reference's `list_skills` reconciles (and rewrites
/// `.index`) when `os.stat(partition).st_mtime != skills_dir_mtime`
/// (workspace/_local_workspace.py `_list_partition_skills`). So the mtime
/// wsbench records must be the folder's mtime after its own write, as
/// CPython's float (`sec + nsec * 1e-9`; the formula is checked against
/// CPython in `tests/fixtures/skill-index/mtimes.json`). The recorded text
/// is read as Python's `json.loads` reads it (correctly rounded: Rust's
/// `str::parse`), not only through serde_json: its default float parser was
/// one ulp off for about one mtime in eight, which made this test flaky
/// until `float_roundtrip` was enabled.
#[tokio::test]
async fn a_wsbench_written_index_records_the_folders_mtime_after_the_write() {
    use std::os::unix::fs::MetadataExt;
    let tmp = fixture_copy();
    let root = tmp.path().join("ws");
    for agent in ["reviewer", "coder"] {
        std::fs::remove_file(root.join(format!("skills/{agent}/.index"))).unwrap();
        let ws = open(&root, vec![]).await;
        ws.skills().list(agent).await.unwrap();
        let part = root.join(format!("skills/{agent}"));
        let meta = std::fs::metadata(&part).unwrap();
        let st_mtime = meta.mtime() as f64 + meta.mtime_nsec() as f64 * 1e-9;
        let recorded = index_json(&part.join(".index"))["skills_dir_mtime"]
            .as_f64()
            .unwrap();
        let text = std::fs::read_to_string(part.join(".index")).unwrap();
        let as_python: f64 = text
            .split("\"skills_dir_mtime\": ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(recorded.to_bits(), as_python.to_bits(), "{text}");
        assert_eq!(
            recorded.to_bits(),
            st_mtime.to_bits(),
            "{agent}: recorded {recorded}, folder {st_mtime}: the reference would rewrite .index"
        );
        // A second listing (wsbench's own check) leaves it byte-identical.
        let before = std::fs::read(part.join(".index")).unwrap();
        ws.skills().list(agent).await.unwrap();
        assert_eq!(std::fs::read(part.join(".index")).unwrap(), before);
    }
}

/// Found by issue 23's both-directions trial: a partition wsbench equips
/// from a reference-written `.seed` keeps the seed folder's mtime, as the
/// reference's own equip (`shutil.copytree`, which ends with `copystat`),
/// so the `.index` copied with it matches and the reference's first
/// `list_skills` does not rewrite it.
#[tokio::test]
async fn a_partition_equipped_from_the_seed_keeps_the_seeds_mtime() {
    use std::os::unix::fs::MetadataExt;
    let tmp = fixture_copy();
    let root = tmp.path().join("ws");
    let seed = root.join("skills/.seed");
    // The seed as the reference left it: its mtime is the one its .index
    // records (the copy into the temp dir changed it).
    let recorded = index_json(&seed.join(".index"))["skills_dir_mtime"]
        .as_f64()
        .unwrap();
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(recorded);
    std::fs::File::open(&seed).unwrap().set_modified(t).unwrap();
    let ws = open(&root, vec![]).await;
    ws.skills().list("tester").await.unwrap();
    let part = root.join("skills/tester");
    let meta = std::fs::metadata(&part).unwrap();
    let st_mtime = meta.mtime() as f64 + meta.mtime_nsec() as f64 * 1e-9;
    let copied = index_json(&part.join(".index"))["skills_dir_mtime"]
        .as_f64()
        .unwrap();
    assert_eq!(
        copied.to_bits(),
        st_mtime.to_bits(),
        "recorded {copied}, folder {st_mtime}: the reference would rewrite .index"
    );
}

#[tokio::test]
async fn seeding_from_skills_src_lists_broken_skill_as_invalid_and_changes_nothing() {
    let src_before = tree(&skills_src());
    let dir = tempfile::tempdir().unwrap();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(skills_src())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let bus = EventBus::default();
    let mut sub = bus.subscribe();
    let ws = open_with(dir.path(), paths, bus).await;

    let events = drain(&mut sub);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Log { level, message, .. }
            if level == "warn" && message.contains("broken-skill"))),
        "a warning names the invalid seed: {events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::SkillAdded { name, .. } if name == "git-helper"))
    );

    // .seed/.index is what the reference wrote for the same sources.
    let seed_index = index_json(&dir.path().join("skills/.seed/.index"));
    let reference =
        index_json(&support::fixtures().join("reference-workspace/skills/.seed/.index"));
    assert_eq!(seed_index["skills"], reference["skills"]);

    let listing = ws.skills().list("coder").await.unwrap();
    assert_eq!(names(&listing), ["git-helper", "test-runner"]);
    assert_eq!(listing.invalid.len(), 1, "{:?}", listing.invalid);
    let bad = &listing.invalid[0];
    let workdir = ws.layout().workdir();
    assert_eq!(bad.dir, format!("{workdir}/skills/coder/broken-skill"));
    assert_eq!(
        bad.path,
        format!("{workdir}/skills/coder/broken-skill/SKILL.md")
    );
    assert_eq!(bad.line, Some(3), "the `description:` line");
    assert!(
        bad.reason.contains("did not find expected"),
        "{}",
        bad.reason
    );
    assert!(
        bad.hint.as_deref().unwrap().contains("quote"),
        "{:?}",
        bad.hint
    );
    let err = ws.skills().get("broken-skill", "coder").await.unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Invalid(m) if m.contains("line 3")),
        "{err}"
    );

    // Listing again changes nothing; every copy is byte-identical to its
    // source, and the sources are untouched.
    ws.skills().list("coder").await.unwrap();
    let coder = tree(&dir.path().join("skills/coder"));
    for (rel, hash) in &src_before {
        assert_eq!(coder.get(rel), Some(hash), "{rel}");
    }
    assert_eq!(tree(&skills_src()), src_before);
    let idx = index_json(&dir.path().join("skills/coder/.index"));
    assert!(
        idx["skills"].get("broken-skill").is_none(),
        "invalid skills are not indexed"
    );

    // Executable bits survive the copies.
    use std::os::unix::fs::PermissionsExt;
    let src_mode = std::fs::metadata(skills_src().join("git-helper/scripts/recent.sh"))
        .unwrap()
        .permissions()
        .mode();
    let mode = std::fs::metadata(dir.path().join("skills/coder/git-helper/scripts/recent.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, src_mode & 0o111);

    // A reopened workspace does not seed again: .seed is not empty.
    let seed_before = tree(&dir.path().join("skills/.seed"));
    drop(ws);
    let _ws = open(dir.path(), vec![skills_src().join("git-helper")]).await;
    assert_eq!(tree(&dir.path().join("skills/.seed")), seed_before);
}

#[tokio::test]
async fn c08_colon_in_description_is_listed_invalid_next_to_a_valid_sibling() {
    let dir = tempfile::tempdir().unwrap();
    let part = dir.path().join("skills/agent-1");
    std::fs::create_dir_all(part.join("harness")).unwrap();
    std::fs::write(part.join("harness/SKILL.md"), C08_MD).unwrap();
    write_skill(
        &part.join("notes"),
        "name: notes\ndescription: Keep notes.",
        "Notes body.",
    );
    let before = tree(&part);

    let ws = open(dir.path(), vec![]).await;
    let listing = ws.skills().list("agent-1").await.unwrap();
    assert_eq!(names(&listing), ["notes"]);
    assert_eq!(listing.invalid.len(), 1);
    let bad = &listing.invalid[0];
    assert!(
        bad.path.ends_with("/skills/agent-1/harness/SKILL.md"),
        "{}",
        bad.path
    );
    assert_eq!(bad.line, Some(3));
    assert!(
        bad.reason
            .contains("mapping values are not allowed in this context"),
        "{}",
        bad.reason
    );
    assert!(
        bad.hint
            .as_deref()
            .unwrap()
            .contains(r#"description: "Configure the harness: Hooks, MCP Servers, Skills""#),
        "{:?}",
        bad.hint
    );
    let after = tree(&part);
    assert_eq!(
        after.get("harness/SKILL.md"),
        before.get("harness/SKILL.md")
    );
    assert_eq!(after.get("notes/SKILL.md"), before.get("notes/SKILL.md"));

    // Adding the same file is an error that says why, not a silent skip.
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("SKILL.md"), C08_MD).unwrap();
    let err = ws.skills().add(host.path(), "agent-1").await.unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Invalid(m) if m.contains("line 3") && m.contains("quote")),
        "{err}"
    );
}

#[tokio::test]
async fn oversized_skill_md_is_invalid_and_a_corrupt_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let part = dir.path().join("skills/q");
    write_skill(&part.join("ok"), "name: ok\ndescription: Fine.", "Body.");
    std::fs::create_dir_all(part.join("huge")).unwrap();
    let mut big = b"---\nname: huge\ndescription: Big.\n---\n".to_vec();
    big.resize(4 * 1024 * 1024 + 10, b'x');
    std::fs::write(part.join("huge/SKILL.md"), &big).unwrap();
    std::fs::write(part.join(".index"), b"not json").unwrap();
    let bus = EventBus::default();
    let mut sub = bus.subscribe();
    let ws = open_with(dir.path(), vec![], bus).await;

    let listing = ws.skills().list("q").await.unwrap();
    assert_eq!(names(&listing), ["ok"]);
    assert_eq!(listing.invalid.len(), 1);
    assert!(
        listing.invalid[0].reason.contains("larger than 4 MiB"),
        "{:?}",
        listing.invalid
    );
    let idx = index_json(&part.join(".index"));
    assert_eq!(idx["skills"]["ok"]["skill_name"], "ok");
    assert_eq!(idx["skills"]["ok"]["hash"], sha(&part.join("ok/SKILL.md")));
    assert!(
        drain(&mut sub)
            .iter()
            .any(|e| matches!(e, Event::Log { level, message, .. } if level == "warn" && message.contains(".index")))
    );
}

#[tokio::test]
async fn equip_copies_the_seed_once_and_deleted_seed_skills_stay_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let paths = vec![
        skills_src().join("git-helper"),
        skills_src().join("test-runner"),
    ];
    let ws = open(dir.path(), paths.clone()).await;
    assert_eq!(
        names(&ws.skills().list("a").await.unwrap()),
        ["git-helper", "test-runner"]
    );

    // The agent deletes a seed skill by hand.
    std::fs::remove_dir_all(dir.path().join("skills/a/git-helper")).unwrap();
    assert_eq!(
        names(&ws.skills().list("a").await.unwrap()),
        ["test-runner"]
    );
    let idx = index_json(&dir.path().join("skills/a/.index"));
    assert!(idx["skills"].get("git-helper").is_none());

    // A new workspace object (empty cache) does not re-equip.
    drop(ws);
    let ws = open(dir.path(), paths).await;
    assert_eq!(
        names(&ws.skills().list("a").await.unwrap()),
        ["test-runner"]
    );
    assert_eq!(
        names(&ws.skills().list("b").await.unwrap()),
        ["git-helper", "test-runner"]
    );
    assert!(leftovers(&dir.path().join("skills"), "a.equipping").is_empty());
    assert!(leftovers(&dir.path().join("skills"), "b.equipping").is_empty());

    // Concurrent first listings of one agent: one copy wins, none is left.
    let (x, y) = tokio::join!(ws.skills().list("c"), ws.skills().list("c"));
    assert_eq!(names(&x.unwrap()), ["git-helper", "test-runner"]);
    assert_eq!(names(&y.unwrap()), ["git-helper", "test-runner"]);
    let skills = dir.path().join("skills");
    let mut entries = leftovers(&skills, "");
    entries.sort();
    assert_eq!(entries, [".seed", "a", "b", "c"]);
}

#[tokio::test]
async fn migration_moves_stray_skills_into_seed() {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        &dir.path().join("skills/legacy"),
        "name: legacy\ndescription: Old layout.",
        "Body.",
    );
    std::fs::write(
        dir.path().join("skills/.skills"),
        br#"{"skills_dir_mtime": 1.0, "skills": {}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("skills/someagent/x")).unwrap();
    let ws = open(dir.path(), vec![]).await;
    assert!(dir.path().join("skills/.seed/legacy/SKILL.md").is_file());
    assert!(dir.path().join("skills/.seed/.index").is_file());
    assert!(!dir.path().join("skills/legacy").exists());
    assert!(!dir.path().join("skills/.skills").exists());
    assert!(
        dir.path().join("skills/someagent/x").is_dir(),
        "partitions stay"
    );
    assert_eq!(names(&ws.skills().list("new").await.unwrap()), ["legacy"]);
}

#[tokio::test]
async fn add_skill_names_conflicts_dedups_and_follows_edits() {
    let dir = tempfile::tempdir().unwrap();
    let bus = EventBus::default();
    let mut sub = bus.subscribe();
    let ws = open_with(dir.path(), vec![], bus).await;
    let host = tempfile::tempdir().unwrap();
    let one = host.path().join("one");
    let two = host.path().join("two");
    let dup = host.path().join("dup");
    write_skill(&one, "name: My Tool\ndescription: First.", "One.");
    write_skill(&two, "name: My Tool\ndescription: Second.", "Two.");
    std::fs::create_dir_all(&dup).unwrap();
    std::fs::copy(one.join("SKILL.md"), dup.join("SKILL.md")).unwrap();

    let a = ws.skills().add(&one, "x").await.unwrap();
    assert_eq!((a.name.as_str(), a.already_installed), ("My Tool", false));
    assert!(a.dir.ends_with("/skills/x/My_Tool"), "{}", a.dir);
    let b = ws.skills().add(&two, "x").await.unwrap();
    assert_eq!(b.name, "My Tool (1)");
    assert!(b.dir.ends_with("/skills/x/My_Tool_1"), "{}", b.dir);
    let c = ws.skills().add(&dup, "x").await.unwrap();
    assert!(c.already_installed);
    assert_eq!(c.name, "My Tool");

    let listing = ws.skills().list("x").await.unwrap();
    assert_eq!(names(&listing), ["My Tool", "My Tool (1)"]);
    assert_eq!(listing.get("My Tool (1)").unwrap().description, "Second.");
    let events = drain(&mut sub);
    let added: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::SkillAdded { agent, name } => Some((agent.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(added, [("x", "My Tool"), ("x", "My Tool (1)")]);

    // Editing only the description keeps the suffixed name; renaming is
    // picked up (the reference misses both: weak point 21).
    let md = dir.path().join("skills/x/My_Tool_1/SKILL.md");
    std::fs::write(
        &md,
        "---\nname: My Tool\ndescription: Second, edited.\n---\nTwo.\n",
    )
    .unwrap();
    let listing = ws.skills().list("x").await.unwrap();
    assert_eq!(
        listing.get("My Tool (1)").unwrap().description,
        "Second, edited."
    );
    std::fs::write(
        &md,
        "---\nname: Other Tool\ndescription: Renamed.\n---\nTwo.\n",
    )
    .unwrap();
    let listing = ws.skills().list("x").await.unwrap();
    assert_eq!(names(&listing), ["My Tool", "Other Tool"]);
    let idx = index_json(&dir.path().join("skills/x/.index"));
    assert_eq!(idx["skills"]["My_Tool_1"]["skill_name"], "Other Tool");
    assert_eq!(idx["skills"]["My_Tool_1"]["hash"], sha(&md));

    // Bad input is a clear error that copies nothing.
    let err = ws
        .skills()
        .add(&host.path().join("missing"), "x")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Invalid(m) if m.contains("not a directory")),
        "{err}"
    );
    let empty = host.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let err = ws.skills().add(&empty, "x").await.unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Invalid(m) if m.contains("no SKILL.md")),
        "{err}"
    );
    let nameless = host.path().join("nameless");
    write_skill(&nameless, "description: No name.", "");
    let err = ws.skills().add(&nameless, "x").await.unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Invalid(m) if m.contains("no `name`")),
        "{err}"
    );
    assert_eq!(
        names(&ws.skills().list("x").await.unwrap()),
        ["My Tool", "Other Tool"]
    );
    assert!(leftovers(dir.path(), ".skill-staging").is_empty());
}

#[tokio::test]
async fn remove_skill_by_name_and_unknown_names() {
    let dir = tempfile::tempdir().unwrap();
    let bus = EventBus::default();
    let mut sub = bus.subscribe();
    let ws = open_with(
        dir.path(),
        vec![
            skills_src().join("git-helper"),
            skills_src().join("test-runner"),
        ],
        bus,
    )
    .await;
    ws.skills().list("r").await.unwrap();
    drain(&mut sub);

    ws.skills().remove("git-helper", "r").await.unwrap();
    assert!(!dir.path().join("skills/r/git-helper").exists());
    assert_eq!(
        names(&ws.skills().list("r").await.unwrap()),
        ["test-runner"]
    );
    let idx = index_json(&dir.path().join("skills/r/.index"));
    assert!(idx["skills"].get("git-helper").is_none());
    assert!(idx["skills"].get("test-runner").is_some());
    assert!(drain(&mut sub).iter().any(
        |e| matches!(e, Event::SkillRemoved { agent, name } if agent == "r" && name == "git-helper")
    ));
    // Other partitions and the seed keep it.
    assert!(
        dir.path()
            .join("skills/.seed/git-helper/SKILL.md")
            .is_file()
    );

    let err = ws.skills().remove("git-helper", "r").await.unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::NotFound(m) if m.contains("available: test-runner")),
        "{err}"
    );

    // An invalid skill is removed by its folder name.
    std::fs::create_dir_all(dir.path().join("skills/r/harness")).unwrap();
    std::fs::write(dir.path().join("skills/r/harness/SKILL.md"), C08_MD).unwrap();
    assert_eq!(ws.skills().list("r").await.unwrap().invalid.len(), 1);
    ws.skills().remove("harness", "r").await.unwrap();
    let listing = ws.skills().list("r").await.unwrap();
    assert!(listing.invalid.is_empty());
    assert_eq!(names(&listing), ["test-runner"]);
}

#[tokio::test]
async fn agent_ids_that_escape_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), vec![skills_src().join("git-helper")]).await;
    for bad in [".x", "a/b", "..", ".seed", "a\\b"] {
        let err = ws.skills().list(bad).await.unwrap_err();
        assert!(matches!(err, WorkspaceError::Id(_)), "{bad}: {err}");
        let err = ws
            .skills()
            .add(&skills_src().join("test-runner"), bad)
            .await
            .unwrap_err();
        assert!(matches!(err, WorkspaceError::Id(_)), "{bad}: {err}");
        let err = ws.skills().remove("git-helper", bad).await.unwrap_err();
        assert!(matches!(err, WorkspaceError::Id(_)), "{bad}: {err}");
    }
    let mut entries = leftovers(&dir.path().join("skills"), "");
    entries.sort();
    assert_eq!(entries, [".seed"]);
    assert!(!dir.path().join("a").exists());
}

// ------------------------------------------------------------- archives

const ARCHIVE_MD: &str = "---\nname: packed\ndescription: From an archive.\n---\nPacked body.\n";

fn zip_bytes(members: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data, mode) in members {
        let opts = zip::write::SimpleFileOptions::default().unix_permissions(*mode);
        zip.start_file(*name, opts).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// One raw tar member: name bytes are written as given, so hostile names
/// (`../x`, `/abs`) can be built.
struct RawMember<'a> {
    name: &'a str,
    kind: tar::EntryType,
    link: Option<&'a str>,
    data: &'a [u8],
    mode: u32,
}

fn file<'a>(name: &'a str, data: &'a [u8]) -> RawMember<'a> {
    RawMember {
        name,
        kind: tar::EntryType::Regular,
        link: None,
        data,
        mode: 0o644,
    }
}

fn symlink<'a>(name: &'a str, target: &'a str) -> RawMember<'a> {
    RawMember {
        name,
        kind: tar::EntryType::Symlink,
        link: Some(target),
        data: b"",
        mode: 0o777,
    }
}

fn tar_bytes(members: &[RawMember<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for m in members {
        let mut h = tar::Header::new_old();
        let old = h.as_old_mut();
        old.name[..m.name.len()].copy_from_slice(m.name.as_bytes());
        if let Some(link) = m.link {
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        h.set_entry_type(m.kind);
        h.set_size(m.data.len() as u64);
        h.set_mode(m.mode);
        h.set_cksum();
        b.append(&h, m.data).unwrap();
    }
    b.into_inner().unwrap()
}

/// Rewrites the uncompressed size of member `name` in both its local
/// header and its central directory entry (no zip64 in these tests).
fn understate_zip_size(zip: &mut [u8], name: &str, size: u32) {
    let find = |zip: &[u8], sig: &[u8], name_at: usize| -> Vec<usize> {
        (0..zip.len().saturating_sub(name_at + name.len()))
            .filter(|&i| {
                zip[i..].starts_with(sig) && zip[i + name_at..].starts_with(name.as_bytes())
            })
            .collect()
    };
    let local = find(zip, b"PK\x03\x04", 30);
    let central = find(zip, b"PK\x01\x02", 46);
    assert_eq!((local.len(), central.len()), (1, 1));
    zip[local[0] + 22..local[0] + 26].copy_from_slice(&size.to_le_bytes());
    zip[central[0] + 24..central[0] + 28].copy_from_slice(&size.to_le_bytes());
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[tokio::test]
async fn archives_in_every_format_install() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), vec![]).await;
    let script = b"#!/bin/sh\necho run\n";

    // zip with a top-level folder, from a reader.
    let z = zip_bytes(&[
        ("packed/SKILL.md", ARCHIVE_MD.as_bytes(), 0o644),
        ("packed/scripts/run.sh", script, 0o755),
    ]);
    let got = ws
        .skills()
        .add_archive(std::io::Cursor::new(z), ArchiveFormat::Zip, "z", None)
        .await
        .unwrap();
    assert_eq!(
        (got.name.as_str(), got.already_installed),
        ("packed", false)
    );
    let run = dir.path().join("skills/z/packed/scripts/run.sh");
    assert_eq!(std::fs::read(&run).unwrap(), script);
    assert_eq!(
        std::fs::metadata(&run).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let listing = ws.skills().list("z").await.unwrap();
    assert_eq!(names(&listing), ["packed"]);
    assert_eq!(listing.skills[0].markdown, "Packed body.");

    // tar with SKILL.md at the root and an internal link, from a file.
    let t = tar_bytes(&[
        file("SKILL.md", ARCHIVE_MD.as_bytes()),
        RawMember {
            mode: 0o755,
            ..file("scripts/run.sh", script)
        },
        symlink("scripts/alias.sh", "run.sh"),
    ]);
    let host = tempfile::tempdir().unwrap();
    let tar_path = host.path().join("s.tar");
    std::fs::write(&tar_path, &t).unwrap();
    let got = ws
        .skills()
        .add_archive_file(&tar_path, ArchiveFormat::Tar, "t", None)
        .await
        .unwrap();
    assert_eq!(got.name, "packed");
    let alias = dir.path().join("skills/t/packed/scripts/alias.sh");
    assert!(
        !std::fs::symlink_metadata(&alias)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&alias).unwrap(), script);

    // tar.gz, and the same content again is a duplicate.
    let tgz = gz(&tar_bytes(&[file(
        "packed/SKILL.md",
        ARCHIVE_MD.as_bytes(),
    )]));
    let got = ws
        .skills()
        .add_archive(
            std::io::Cursor::new(tgz.clone()),
            ArchiveFormat::TarGz,
            "g",
            None,
        )
        .await
        .unwrap();
    assert!(!got.already_installed);
    let again = ws
        .skills()
        .add_archive(std::io::Cursor::new(tgz), ArchiveFormat::TarGz, "g", None)
        .await
        .unwrap();
    assert!(again.already_installed);
    assert_eq!(names(&ws.skills().list("g").await.unwrap()), ["packed"]);

    assert!(leftovers(dir.path(), ".skill-staging").is_empty());
}

/// Runs one refused archive and checks nothing was installed or left over.
async fn assert_refused(
    ws: &Workspace,
    root: &Path,
    bytes: Vec<u8>,
    fmt: ArchiveFormat,
    max: Option<u64>,
    why: &str,
) {
    let err = ws
        .skills()
        .add_archive(std::io::Cursor::new(bytes), fmt, "victim", max)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WorkspaceError::Invalid(m) if m.contains(why)),
        "expected `{why}`: {err}"
    );
    assert!(
        leftovers(root, ".skill-staging").is_empty(),
        "staging left behind"
    );
    let listing = ws.skills().list("victim").await.unwrap();
    assert!(
        listing.skills.is_empty() && listing.invalid.is_empty(),
        "{listing:?}"
    );
    assert!(leftovers(&root.join("skills/victim"), "").is_empty());
}

#[tokio::test]
async fn hostile_archives_are_refused_and_leave_nothing() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("ws");
    let outside = base.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let ws = open(&root, vec![]).await;
    let passwd_before = std::fs::read("/etc/passwd").ok();
    let md = ARCHIVE_MD.as_bytes();

    // `..` escaping the staging dir (would land in the workdir and above).
    let t = tar_bytes(&[
        file("SKILL.md", md),
        file("../evil", b"x"),
        file("../../evil", b"x"),
    ]);
    assert_refused(
        &ws,
        &root,
        t,
        ArchiveFormat::Tar,
        None,
        "outside the archive",
    )
    .await;
    assert!(!root.join("evil").exists() && !base.path().join("evil").exists());

    // An absolute member pointing at a directory we can check.
    let abs = format!("{}/abs-evil", outside.display());
    let t = tar_bytes(&[file("SKILL.md", md), file(&abs, b"x")]);
    assert_refused(
        &ws,
        &root,
        gz(&t),
        ArchiveFormat::TarGz,
        None,
        "absolute path",
    )
    .await;

    // A symlink to /etc/passwd, then a file written "through" it.
    let t = tar_bytes(&[
        file("SKILL.md", md),
        symlink("passwd", "/etc/passwd"),
        file("passwd", b"root::0:0::/:/bin/sh\n"),
    ]);
    assert_refused(&ws, &root, t, ArchiveFormat::Tar, None, "points outside").await;
    assert_eq!(std::fs::read("/etc/passwd").ok(), passwd_before);

    // A symlink to a directory outside, then a file under it.
    let target = outside.display().to_string();
    let t = tar_bytes(&[
        file("SKILL.md", md),
        symlink("d", &target),
        file("d/planted", b"x"),
    ]);
    assert_refused(&ws, &root, t, ArchiveFormat::Tar, None, "points outside").await;
    // A relative symlink climbing out, then a file under it.
    let t = tar_bytes(&[
        file("SKILL.md", md),
        symlink("d", "../../outside"),
        file("d/planted", b"x"),
    ]);
    assert_refused(&ws, &root, t, ArchiveFormat::Tar, None, "points outside").await;
    // An internal link, then a file under it: still refused.
    let t = tar_bytes(&[
        file("SKILL.md", md),
        symlink("d", "sub"),
        file("d/planted", b"x"),
    ]);
    assert_refused(
        &ws,
        &root,
        t,
        ArchiveFormat::Tar,
        None,
        "passes through the link",
    )
    .await;
    assert!(
        leftovers(&outside, "").is_empty(),
        "nothing written outside"
    );

    // Zip bomb: 8 MiB of zeros compress to a few KiB; the cap is 1 MiB.
    let zeros = vec![0u8; 8 * 1024 * 1024];
    let z = zip_bytes(&[("SKILL.md", md, 0o644), ("big.bin", &zeros, 0o644)]);
    assert!(z.len() < 64 * 1024, "compressed to {} bytes", z.len());
    assert_refused(
        &ws,
        &root,
        z,
        ArchiveFormat::Zip,
        Some(1024 * 1024),
        "byte limit",
    )
    .await;
    // The same for a tar.gz (sizes declared as the stream goes).
    let t = gz(&tar_bytes(&[file("SKILL.md", md), file("big.bin", &zeros)]));
    assert_refused(
        &ws,
        &root,
        t,
        ArchiveFormat::TarGz,
        Some(1024 * 1024),
        "byte limit",
    )
    .await;

    // A zip whose directory understates a member's size (100 bytes declared,
    // 2 MiB inside): the bytes actually read are what count.
    let two_mib = vec![0u8; 2 * 1024 * 1024];
    let mut z = zip_bytes(&[("SKILL.md", md, 0o644), ("liar.bin", &two_mib, 0o644)]);
    understate_zip_size(&mut z, "liar.bin", 100);
    assert_refused(
        &ws,
        &root,
        z,
        ArchiveFormat::Zip,
        Some(1024 * 1024),
        "byte limit",
    )
    .await;

    // A zip symlink pointing outside.
    let mut zw = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    zw.start_file("SKILL.md", opts).unwrap();
    zw.write_all(md).unwrap();
    zw.add_symlink("evil", "/etc/passwd", opts).unwrap();
    let z = zw.finish().unwrap().into_inner();
    assert_refused(&ws, &root, z, ArchiveFormat::Zip, None, "points outside").await;

    // Not an archive at all, and an archive without a skill.
    assert_refused(
        &ws,
        &root,
        b"garbage".to_vec(),
        ArchiveFormat::Zip,
        None,
        "not a valid zip",
    )
    .await;
    let t = tar_bytes(&[file("README.md", b"no skill here")]);
    assert_refused(&ws, &root, t, ArchiveFormat::Tar, None, "holds no SKILL.md").await;
    // An archive whose skill is invalid (C08) says why.
    let t = tar_bytes(&[file("harness/SKILL.md", C08_MD.as_bytes())]);
    assert_refused(
        &ws,
        &root,
        t,
        ArchiveFormat::Tar,
        None,
        "mapping values are not allowed",
    )
    .await;

    assert!(leftovers(&outside, "").is_empty());
}
