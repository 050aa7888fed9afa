//! Issue 14 point 3: workspace and server data never drive the terminal
//! through the CLI. A skill description and context text holding OSC 52
//! (clipboard write), BEL and `ESC [2J` (clear screen) are printed with
//! visible stand-ins by `skills list/show`, `sessions show [--context]`
//! and `tool`; `--json` keeps the exact text (JSON escapes it).

use crate::support::cli;

use std::path::Path;
use std::process::Output;

/// OSC 52 (set the clipboard to "evil"), then a clear-screen.
const HOSTILE: &str = "grab \u{1b}]52;c;ZXZpbA==\u{7} then \u{1b}[2J";

fn run(home: &Path, w: &Path, args: &[&str]) -> Output {
    let o = cli::wsbench_cmd(home)
        .arg("--workdir")
        .arg(w)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// No ESC, BEL or other control byte but `\n` and `\t` in either stream,
/// and the stand-in `␛` shown where the ESC was.
#[track_caller]
fn assert_inert(what: &str, o: &Output) {
    for (name, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        let bad: Vec<u8> = bytes
            .iter()
            .copied()
            .filter(|&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
            .collect();
        assert!(
            bad.is_empty(),
            "{what}: {name} holds control bytes {bad:?}: {}",
            String::from_utf8_lossy(bytes)
        );
    }
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("␛]52;c;ZXZpbA==␇") && out.contains("␛[2J"),
        "{what}: {out}"
    );
}

#[test]
fn skill_and_context_text_with_escapes_is_printed_inert() {
    let home = tempfile::tempdir().unwrap();
    let w = tempfile::tempdir().unwrap();
    let skill = home.path().join("evil-skill");
    std::fs::create_dir_all(&skill).unwrap();
    // YAML double quotes: \e is ESC, \a is BEL.
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: evil\ndescription: \"grab \\e]52;c;ZXZpbA==\\a then \\e[2J\"\n---\nBody \u{1b}]52;c;ZXZpbA==\u{7} \u{1b}[2J\n",
    )
    .unwrap();
    run(
        home.path(),
        w.path(),
        &["skills", "add", skill.to_str().unwrap()],
    );

    assert_inert(
        "skills list",
        &run(home.path(), w.path(), &["skills", "list"]),
    );
    assert_inert(
        "skills show",
        &run(home.path(), w.path(), &["skills", "show", "evil"]),
    );
    // --json: the exact text, escaped by JSON.
    let o = run(home.path(), w.path(), &["--json", "skills", "list"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.to_string().contains("\\u001b]52"), "{v}");
    assert!(
        serde_json::to_string(&v)
            .unwrap()
            .contains(&serde_json::to_string(HOSTILE).unwrap()[1..20]),
        "{v}"
    );

    // Context text of a session.
    let msg = serde_json::json!({
        "name": "user", "role": "user", "id": "m1", "metadata": {},
        "created_at": "2026-11-29T07:35:18.480114",
        "content": [{"type": "text", "text": HOSTILE, "id": "b1",
                     "created_at": "2026-11-29T07:35:18.480082"}]
    });
    let dir = w.path().join("sessions/s1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("context.jsonl"), format!("{msg}\n")).unwrap();
    assert_inert(
        "sessions show --context",
        &run(
            home.path(),
            w.path(),
            &["sessions", "show", "s1", "--context"],
        ),
    );

    // Tool output and the journal's record of the call.
    let args = serde_json::json!({"command": format!("echo '{HOSTILE}'")}).to_string();
    assert_inert(
        "tool Bash",
        &run(
            home.path(),
            w.path(),
            &["--session", "s2", "tool", "Bash", &args],
        ),
    );
    let o = run(home.path(), w.path(), &["sessions", "show", "s2"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.stdout.contains(&0x1b), "sessions show: {out}");
}
