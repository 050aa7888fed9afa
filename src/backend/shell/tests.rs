//! The file scripts run in the shells they must work in (`sh`, and
//! BusyBox `sh` with only BusyBox applets), against a real workspace
//! with links out of it.

use super::codes;
use super::confine::{ESCAPES, Follow, op_script};
use super::scripts::{
    CREATE_NEW, MKDIR, REMOVE, RENAME, RESOLVE, RESOLVE_LIST, RESOLVE_STAT, WRITE,
};

#[test]
fn file_scripts_refuse_links_out_in_sh_and_busybox() {
    use super::confine::test_shells::shells;
    use std::os::unix::fs::symlink;
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let (w, out) = (d.path().join("ws"), d.path().join("out"));
        std::fs::create_dir_all(w.join("sub")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("secret"), "s").unwrap();
        symlink(&out, w.join("out")).unwrap();
        symlink("/etc", w.join(".hid")).unwrap();
        symlink("sub", w.join("in")).unwrap();
        symlink("sub/new", w.join("dang")).unwrap();
        let real = w.canonicalize().unwrap().display().to_string();
        let ws = w.display().to_string();
        let run = |follows: &[Follow], body: &str, args: &[&str]| {
            let (c, o) = sh.run(&w, &op_script(follows, body), args, b"");
            let fields: Vec<String> = o
                .split(|b| *b == 0)
                .filter(|f| !f.is_empty())
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect();
            (c, fields)
        };
        let at = |p: &str| format!("{ws}/{p}");
        // The check: the resolved path, then the links out.
        let (c, f) = run(&[Follow::Yes], RESOLVE_LIST, &[&ws]);
        assert_eq!(c, 0, "{n}");
        assert_eq!(f[0], real, "{n}");
        let mut links_out = f[1..].to_vec();
        links_out.sort();
        assert_eq!(links_out, [".hid", "out"], "{n}");
        let (c, f) = run(&[Follow::Yes], RESOLVE, &[&at("in/x")]);
        assert_eq!((c, f), (0, vec![format!("{real}/sub/x")]), "{n}");
        assert_eq!(run(&[Follow::Yes], RESOLVE, &[&at("out")]).0, ESCAPES);
        assert_eq!(run(&[Follow::Yes], RESOLVE_LIST, &[&at("out")]).0, ESCAPES);
        let (c, f) = run(&[Follow::No], RESOLVE_STAT, &[&at("out")]);
        assert_eq!(
            (c, f),
            (0, vec![format!("{real}/out"), "out".into()]),
            "{n}"
        );
        let (c, f) = run(&[Follow::No], RESOLVE_STAT, &[&at("in")]);
        assert_eq!((c, f), (0, vec![format!("{real}/in")]), "{n}");
        assert_eq!(
            run(&[Follow::No], RESOLVE_STAT, &[&at("out/secret")]).0,
            ESCAPES
        );
        // mkdir follows links that stay inside, never those out.
        for p in ["p", "-"] {
            let r = run(&[Follow::Yes], MKDIR, &[&at("out/made"), p]);
            assert_eq!(r.0, ESCAPES, "{n}: mkdir {p}");
        }
        assert_eq!(
            run(&[Follow::Yes], MKDIR, &[&at("dang/a"), "p"]).0,
            0,
            "{n}"
        );
        assert!(w.join("sub/new/a").is_dir(), "{n}");
        // remove acts on the link, refuses what lies behind it.
        let r = run(&[Follow::No], REMOVE, &[&at("out/secret"), "-"]);
        assert_eq!(r.0, ESCAPES, "{n}");
        // rename: a link out at the target is replaced, not entered.
        std::fs::write(w.join("f"), "f").unwrap();
        let both = [Follow::No, Follow::No];
        assert_eq!(run(&both, RENAME, &[&at("f"), &at("out")]).0, 0, "{n}");
        assert_eq!(std::fs::read_to_string(w.join("out")).unwrap(), "f");
        assert!(!out.join("f").exists(), "{n}");
        let r = run(&both, RENAME, &[&at("out"), &at(".hid/x")]);
        assert_eq!(r.0, ESCAPES, "{n}");
        // A directory replaces an empty one, not a full one.
        std::fs::create_dir_all(w.join("full/x")).unwrap();
        std::fs::create_dir_all(w.join("empty")).unwrap();
        let r = run(&both, RENAME, &[&at("sub"), &at("full")]);
        assert_eq!(r.0, codes::NOT_EMPTY, "{n}");
        assert_eq!(run(&both, RENAME, &[&at("sub"), &at("empty")]).0, 0, "{n}");
        assert!(w.join("empty/new/a").is_dir(), "{n}");
        let r = run(&both, RENAME, &[&at("out"), &at("empty")]);
        assert_eq!(r.0, codes::IS_DIR, "{n}");
        assert_eq!(run(&[Follow::No], REMOVE, &[&at(".hid"), "-"]).0, 0, "{n}");
        assert!(!w.join(".hid").is_symlink() && out.join("secret").exists());
        // An exclusive create finds a dangling link's name taken.
        std::fs::write(w.join("tmp"), "t").unwrap();
        let r = run(&both, CREATE_NEW, &[&at("tmp"), &at("dang"), "-"]);
        assert_eq!(r.0, codes::EXISTS, "{n}");
        assert!(!w.join("tmp").exists(), "{n}");
    }
}

#[test]
fn appends_are_line_safe_in_sh_and_busybox() {
    use super::confine::test_shells::shells;
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("ws");
        std::fs::create_dir_all(&w).unwrap();
        let f = w.join("j.jsonl");
        let at = f.display().to_string();
        let append_at = |args: &[&str], data: &[u8]| {
            let mut all = vec![at.as_str()];
            all.extend_from_slice(args);
            sh.run(&w, &op_script(&[Follow::Yes], WRITE), &all, data)
        };
        let append = |args: &[&str], data: &[u8]| append_at(args, data).0;
        // A torn last record gets its line ended before the next one, and
        // the offset printed is where the record starts, after that `\n`.
        std::fs::write(&f, "{\"a\":1}\n{\"to").unwrap();
        let (code, out) = append_at(&["8", "a", "nl"], b"{\"b\":2}\n");
        assert_eq!(
            (code, String::from_utf8_lossy(&out).trim()),
            (0, "13"),
            "{n}"
        );
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "{\"a\":1}\n{\"to\n{\"b\":2}\n",
            "{n}"
        );
        // A short append (fewer bytes arrived than were sent) is cut back.
        let before = std::fs::read(&f).unwrap();
        assert_eq!(append(&["20", "a", "nl"], b"{\"c\""), codes::SHORT, "{n}");
        assert_eq!(std::fs::read(&f).unwrap(), before, "{n}");
        // Data that is not a line is appended as it is.
        let (code, out) = append_at(&["2", "a", "-"], b"xy");
        assert_eq!(
            (code, String::from_utf8_lossy(&out).trim()),
            (0, "21"),
            "{n}"
        );
        assert!(std::fs::read(&f).unwrap().ends_with(b"}\nxy"), "{n}");
    }
}

#[test]
fn writes_keep_a_replaced_files_mode_in_sh_and_busybox() {
    use super::confine::test_shells::shells;
    use std::os::unix::fs::PermissionsExt;
    for sh in shells() {
        let n = sh.name;
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("ws");
        std::fs::create_dir_all(&w).unwrap();
        let f = w.join("f.sh");
        std::fs::write(&f, "old").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o750)).unwrap();
        let at = f.display().to_string();
        let (c, _) = sh.run(
            &w,
            &op_script(&[Follow::Yes], WRITE),
            &[&at, "3", "w"],
            b"new",
        );
        assert_eq!(c, 0, "{n}");
        assert_eq!(std::fs::read(&f).unwrap(), b"new", "{n}");
        let m = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o750, "{n}");
    }
}
