//! Whole trees in and out of the Pod as tar streams (`kubectl cp`'s
//! way), through the shared script runner: every directory the transfer
//! touches is checked by the link check first, so a link in the
//! workspace cannot lead it out.

use std::collections::BTreeSet;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::exec::ExecTarget;
use crate::backend::shell::codes::failed;
use crate::backend::shell::{Follow, runner};
use crate::backend::{BackendError, BackendResult, StreamKind};

/// Script body of [`download_tar`].
const DOWNLOAD_BODY: &str = r#"if [ ! -d "$P1" ]; then exit 10; fi
exec tar cf - -C "$P1" ."#;

/// Streams `dir` as a tar archive (`tar cf - -C <dir> .`) into `sink`,
/// like `kubectl cp` from the Pod. Links inside the tree are archived as
/// links, not followed. Returns the bytes sent.
pub(crate) async fn download_tar(
    t: &ExecTarget,
    dir: &str,
    sink: mpsc::Sender<Bytes>,
) -> BackendResult<u64> {
    let req = runner::request(t, &[(dir, Follow::Yes)], DOWNLOAD_BODY, &[], None);
    let (tx, mut rx) = mpsc::channel::<crate::backend::OutputChunk>(64);
    let forward = async {
        let (mut n, mut err) = (0u64, Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => {
                    n += c.data.len() as u64;
                    let _ = sink.send(c.data).await;
                }
                StreamKind::Stderr => err.extend_from_slice(&c.data),
            }
        }
        (n, err)
    };
    let (res, (n, err)) = tokio::join!(t.exec(req, Some(tx)), forward);
    match res?.exit_code {
        Some(0) => Ok(n),
        c => Err(failed(
            c.unwrap_or(-1),
            dir,
            &String::from_utf8_lossy(&err),
            "archiving",
        )),
    }
}

/// The directories (relative to the destination, `.` for itself) that
/// unpacking `archive` enters or creates: every member's parents, its own
/// path when it is a directory, and the parents of hard-link targets.
///
/// Errors: [`BackendError::Escapes`] for a member or hard-link target that
/// is absolute, climbs with `..`, or lies under a symbolic link the
/// archive itself creates (`link -> /etc` then `link/passwd`); `Io` for
/// an archive `tar` cannot read.
fn archive_dirs(dir: &str, archive: &[u8]) -> BackendResult<BTreeSet<Vec<u8>>> {
    let bad = |name: &[u8]| {
        BackendError::Escapes(format!(
            "{dir}: archive member {}",
            String::from_utf8_lossy(name)
        ))
    };
    let parts = |name: &[u8]| -> BackendResult<Vec<Vec<u8>>> {
        if name.starts_with(b"/") {
            return Err(bad(name));
        }
        let mut v = Vec::new();
        for c in name.split(|b| *b == b'/') {
            match c {
                b"" | b"." => {}
                b".." => return Err(bad(name)),
                c => v.push(c.to_vec()),
            }
        }
        Ok(v)
    };
    let unreadable = |e: std::io::Error| BackendError::Io {
        context: format!("unpacking into {dir}"),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    };
    let mut links: BTreeSet<Vec<Vec<u8>>> = BTreeSet::new();
    // (path, is a directory) of members and hard-link targets.
    let mut paths: Vec<(Vec<u8>, Vec<Vec<u8>>, bool)> = Vec::new();
    let mut ar = tar::Archive::new(archive);
    for entry in ar.entries().map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let name = entry.path_bytes().into_owned();
        let p = parts(&name)?;
        let kind = entry.header().entry_type();
        if kind.is_symlink() {
            links.insert(p.clone());
        }
        if kind.is_hard_link()
            && let Some(target) = entry.link_name_bytes()
        {
            let tp = parts(&target)?;
            paths.push((target.into_owned(), tp, false));
        }
        paths.push((name, p, kind.is_dir()));
    }
    let mut dirs = BTreeSet::from([b".".to_vec()]);
    for (name, p, is_dir) in paths {
        let through = (1..p.len()).any(|i| links.contains(&p[..i]));
        if through {
            return Err(bad(&name));
        }
        let upto = if is_dir {
            p.len()
        } else {
            p.len().saturating_sub(1)
        };
        for i in 1..=upto {
            dirs.insert(p[..i].join(&b'/'));
        }
    }
    Ok(dirs)
}

/// `path` as one line `printf %b` turns back into it: `\` and control
/// bytes (a newline in a name) as octal escapes.
fn escape_line(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len() + 1);
    for &b in path {
        if b == b'\\' || b < 0x20 || b == 0x7f {
            out.extend_from_slice(format!("\\0{b:03o}").as_bytes());
        } else {
            out.push(b);
        }
    }
    out.push(b'\n');
    out
}

/// Script body of [`upload_tar`].
const UPLOAD_BODY: &str = r#"D=$P1
mkdir -p -- "$D" || exit 12
while IFS= read -r l; do
  [ -n "$l" ] || break
  case $l in *\\*) l=$(printf '%b.' "$l"); l=${l%.} ;; esac
  inside "$D/$l" f
done
exec tar xf - -C "$D""#;

/// Unpacks a tar archive into `dir` (created when missing), like
/// `kubectl cp` into the Pod. Before `tar` runs, every directory the
/// archive enters ([`archive_dirs`]) is checked by `CONFINE` in the
/// same exec — they travel ahead of the archive on stdin, one escaped
/// line each, ended by an empty line — so an existing link in the
/// workspace cannot lead the unpacking out of it.
///
/// Errors: `Escapes` (see [`archive_dirs`]), or `tar`'s message.
pub(crate) async fn upload_tar(t: &ExecTarget, dir: &str, archive: Bytes) -> BackendResult<()> {
    let dirs = archive_dirs(dir, &archive)?;
    let mut stdin = Vec::with_capacity(archive.len() + 64 * dirs.len());
    for d in &dirs {
        stdin.extend_from_slice(&escape_line(d));
    }
    stdin.push(b'\n');
    stdin.extend_from_slice(&archive);
    let paths = [(dir, Follow::Yes)];
    let out = runner::run(t, &paths, UPLOAD_BODY, &[], Some(Bytes::from(stdin))).await?;
    match out.code {
        0 => Ok(()),
        c => Err(failed(c, dir, &out.stderr, "unpacking into")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::FileKind;
    use crate::backend::shell::codes::{EXISTS, IS_ROOT};
    use crate::backend::shell::confine::{ESCAPES, LOOP, op_script};
    use crate::backend::shell::parse::records as parse_records;
    use crate::backend::shell::scripts::{
        CREATE_NEW as CREATE_NEW_BODY, MKDIR as MKDIR_BODY, READ as READ_BODY,
        REMOVE as REMOVE_BODY, RENAME as RENAME_BODY, WRITE as WRITE_BODY, list as list_body,
        stat as stat_body,
    };

    use crate::backend::shell::confine::test_shells::{Shell, shells};

    impl Shell {
        /// Runs `op_script(follows, body)` with `args` (paths first) in
        /// workspace `w`; returns exit code and stdout.
        fn op(
            &self,
            w: &std::path::Path,
            follows: &[Follow],
            body: &str,
            args: &[&str],
            stdin: &[u8],
        ) -> (i32, Vec<u8>) {
            self.run(w, &op_script(follows, body), args, stdin)
        }
    }

    /// A workspace `ws` next to an `outside` dir holding `secret.txt`,
    /// with links out of it (absolute, relative, through a directory,
    /// dangling) and links that stay in (one dangling).
    fn fixture() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("ws");
        let out = d.path().join("outside");
        std::fs::create_dir_all(w.join("sub")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(w.join("sub/in.txt"), "inside").unwrap();
        std::fs::write(out.join("secret.txt"), "TOP-SECRET").unwrap();
        let link = |name: &str, to: &str| std::os::unix::fs::symlink(to, w.join(name)).unwrap();
        link("abs", out.join("secret.txt").to_str().unwrap());
        link("rel", "../outside/secret.txt");
        link("dir", out.to_str().unwrap());
        link("etc", "/etc");
        link("far", out.join("not/yet").to_str().unwrap());
        link("gone", "/no/such/dir/file");
        link("in", "sub/in.txt");
        link("new", "sub/new.txt");
        link("newdir", "made");
        link("loop", "loop");
        link("nl\n", out.to_str().unwrap());
        (d, w, out)
    }

    #[test]
    fn every_operation_refuses_links_out_of_the_workspace() {
        for sh in shells() {
            let (_d, w, out) = fixture();
            let ws = w.to_str().unwrap().to_string();
            let p = |rel: &str| format!("{ws}/{rel}");
            let secret = out.join("secret.txt");
            let n = sh.name;
            let (y, no) = (Follow::Yes, Follow::No);

            // Reads and writes through links out of the workspace.
            for bad in [
                "abs",
                "rel",
                "dir/secret.txt",
                "etc/passwd",
                "nl\n/secret.txt",
            ] {
                let r = sh.op(&w, &[y], READ_BODY, &[&p(bad), "-", "-"], b"");
                assert_eq!(r.0, ESCAPES, "{n}: read {bad:?}");
                assert!(r.1.is_empty(), "{n}: read {bad:?}");
                for mode in ["w", "a"] {
                    let r = sh.op(&w, &[y], WRITE_BODY, &[&p(bad), "1", mode], b"x");
                    assert_eq!(r.0, ESCAPES, "{n}: write {mode} {bad:?}");
                }
            }
            for bad in ["gone", "far"] {
                let r = sh.op(&w, &[y], WRITE_BODY, &[&p(bad), "1", "w"], b"x");
                assert_eq!(r.0, ESCAPES, "{n}: write {bad}");
            }
            let r = sh.op(&w, &[y], READ_BODY, &[&p("in"), "-", "-"], b"");
            assert_eq!(r, (0, b"inside".to_vec()), "{n}");
            let r = sh.op(&w, &[y], READ_BODY, &[&p("in"), "1", "3"], b"");
            assert_eq!(r, (0, b"nsi".to_vec()), "{n}");
            // A dangling link whose target would be inside is written
            // through (BusyBox's `readlink -f` would refuse it).
            let r = sh.op(&w, &[y], WRITE_BODY, &[&p("new"), "2", "w"], b"hi");
            assert_eq!(r.0, 0, "{n}: write through a dangling link");
            assert_eq!(std::fs::read(w.join("sub/new.txt")).unwrap(), b"hi", "{n}");
            assert!(w.join("new").is_symlink(), "{n}");

            // mkdir: through a link out (existing dir, or dangling) is
            // refused and creates nothing; through one in, it works.
            for (bad, mode) in [("dir/made", "p"), ("dir/made", "-"), ("far/x", "p")] {
                let r = sh.op(&w, &[y], MKDIR_BODY, &[&p(bad), mode], b"");
                assert_eq!(r.0, ESCAPES, "{n}: mkdir {mode} {bad}");
            }
            assert!(
                !out.join("made").exists() && !out.join("not").exists(),
                "{n}"
            );
            let r = sh.op(&w, &[y], MKDIR_BODY, &[&p("newdir/a/b"), "p"], b"");
            assert_eq!(r.0, 0, "{n}");
            assert!(w.join("made/a/b").is_dir(), "{n}");
            let r = sh.op(&w, &[y], MKDIR_BODY, &[&p("sub"), "-"], b"");
            assert_eq!(r.0, EXISTS, "{n}");

            // stat and list: the link itself is fine and tells nothing of
            // its target; anything through it is refused.
            let r = sh.op(&w, &[no], &stat_body(), &[&p("dir/secret.txt"), "x"], b"");
            assert_eq!(r.0, ESCAPES, "{n}: stat through");
            let r = sh.op(&w, &[no], &stat_body(), &[&p("abs"), "abs"], b"");
            assert_eq!(r.0, 0, "{n}");
            let st = &parse_records(&r.1)[0];
            assert_eq!(
                (st.kind, st.size, st.target_is_dir),
                (FileKind::Symlink, 0, false)
            );
            assert_eq!(st.link_target.as_deref(), secret.to_str(), "{n}");
            let r = sh.op(&w, &[no], &stat_body(), &[&p("in"), "in"], b"");
            assert_eq!(
                parse_records(&r.1)[0].size,
                6,
                "{n}: a link inside shows its target"
            );
            let r = sh.op(&w, &[y], &list_body(), &[&p("dir")], b"");
            assert_eq!(r.0, ESCAPES, "{n}: list through");
            let r = sh.op(&w, &[y], &list_body(), &[&ws], b"");
            assert_eq!(r.0, 0, "{n}");
            let entries = parse_records(&r.1);
            let dir = entries.iter().find(|e| e.name == "dir").unwrap();
            assert!(!dir.target_is_dir && dir.size == 0, "{n}: {dir:?}");
            assert!(entries.iter().any(|e| e.name == "nl\n"), "{n}");
            assert!(entries.iter().find(|e| e.name == "sub").unwrap().kind == FileKind::Dir);

            // create_new, remove and rename act on a link itself, and
            // refuse what lies behind one.
            let r = sh.op(
                &w,
                &[no, no],
                CREATE_NEW_BODY,
                &[&p("dir/.t"), &p("dir/n.txt"), "1"],
                b"x",
            );
            assert_eq!(r.0, ESCAPES, "{n}: create_new through");
            let r = sh.op(
                &w,
                &[no, no],
                CREATE_NEW_BODY,
                &[&p(".t1"), &p("abs"), "1"],
                b"x",
            );
            assert_eq!(r.0, EXISTS, "{n}: create_new on a link");
            let r = sh.op(
                &w,
                &[no, no],
                CREATE_NEW_BODY,
                &[&p("sub/.t2"), &p("sub/c.txt"), "2"],
                b"ok",
            );
            assert_eq!(r.0, 0, "{n}");
            assert_eq!(std::fs::read(w.join("sub/c.txt")).unwrap(), b"ok");
            let r = sh.op(&w, &[no], REMOVE_BODY, &[&p("dir/secret.txt"), "-"], b"");
            assert_eq!(r.0, ESCAPES, "{n}: remove through");
            let r = sh.op(&w, &[no], REMOVE_BODY, &[&ws, "r"], b"");
            assert_eq!(r.0, IS_ROOT, "{n}: remove the root");
            let r = sh.op(
                &w,
                &[no, no],
                RENAME_BODY,
                &[&p("dir/secret.txt"), &p("x")],
                b"",
            );
            assert_eq!(r.0, ESCAPES, "{n}: rename from behind a link");
            let r = sh.op(
                &w,
                &[no, no],
                RENAME_BODY,
                &[&p("sub/c.txt"), &p("dir/c.txt")],
                b"",
            );
            assert_eq!(r.0, ESCAPES, "{n}: rename to behind a link");
            // Onto a link to a directory outside: the link is replaced;
            // `mv` alone would have moved the file into that directory.
            let r = sh.op(
                &w,
                &[no, no],
                RENAME_BODY,
                &[&p("sub/c.txt"), &p("dir")],
                b"",
            );
            assert_eq!(r.0, 0, "{n}: rename onto a link");
            assert!(!out.join("c.txt").exists(), "{n}");
            assert_eq!(std::fs::read(w.join("dir")).unwrap(), b"ok", "{n}");
            let r = sh.op(&w, &[no], REMOVE_BODY, &[&p("abs"), "-"], b"");
            assert_eq!(r.0, 0, "{n}: remove a link");
            assert!(
                !w.join("abs").exists() && !w.join("abs").is_symlink(),
                "{n}"
            );
            let r = sh.op(&w, &[no, no], RENAME_BODY, &[&p("in"), &p("in2")], b"");
            assert_eq!(r.0, 0, "{n}");
            assert!(w.join("in2").is_symlink(), "{n}: the link itself moved");

            // Tar both ways.
            let r = sh.op(&w, &[y], DOWNLOAD_BODY, &[&p("nl\n")], b"");
            assert_eq!(r.0, ESCAPES, "{n}: download through");
            let r = sh.op(&w, &[y], DOWNLOAD_BODY, &[&p("sub")], b"");
            assert_eq!(r.0, 0, "{n}");
            let archive = r.1;
            let upload = |dir: &str, archive: &[u8]| {
                let mut stdin = Vec::new();
                for d in archive_dirs(dir, archive).unwrap() {
                    stdin.extend_from_slice(&escape_line(&d));
                }
                stdin.push(b'\n');
                stdin.extend_from_slice(archive);
                sh.op(&w, &[y], UPLOAD_BODY, &[&p(dir)], &stdin).0
            };
            assert_eq!(upload("copy", &archive), 0, "{n}");
            assert_eq!(std::fs::read(w.join("copy/new.txt")).unwrap(), b"hi", "{n}");
            // Into a link out, or through one (a name with a newline too).
            assert_eq!(upload("nl\n", &archive), ESCAPES, "{n}");
            // (`dir` is a file by now: the rename above replaced it.)
            for name in ["etc/x.txt", "nl\n/x.txt"] {
                let mut b = tar::Builder::new(Vec::new());
                let mut h = tar::Header::new_gnu();
                h.set_size(1);
                h.set_mode(0o644);
                b.append_data(&mut h, name, &b"x"[..]).unwrap();
                let one = b.into_inner().unwrap();
                assert_eq!(upload(".", &one), ESCAPES, "{n}: {name:?}");
            }
            assert!(!out.join("x.txt").exists(), "{n}");
            assert_eq!(std::fs::read(&secret).unwrap(), b"TOP-SECRET", "{n}");

            // A link loop is ELOOP, not an escape.
            let r = sh.op(&w, &[y], READ_BODY, &[&p("loop"), "-", "-"], b"");
            assert_eq!(r.0, LOOP, "{n}");
            // Paths outside the workspace are the Pod's own business.
            let r = sh.op(
                &w,
                &[y],
                READ_BODY,
                &[secret.to_str().unwrap(), "-", "-"],
                b"",
            );
            assert_eq!(r.0, 0, "{n}");
        }
    }

    #[test]
    fn archives_that_climb_or_go_through_their_own_links_are_refused() {
        fn archive(f: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
            let mut b = tar::Builder::new(Vec::new());
            f(&mut b);
            b.into_inner().unwrap()
        }
        fn file(b: &mut tar::Builder<Vec<u8>>, name: &str) {
            let mut h = tar::Header::new_gnu();
            h.set_size(0);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            // Written by hand: `append_data` itself refuses `..`.
            h.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_cksum();
            b.append(&h, &b""[..]).unwrap();
        }
        fn link(b: &mut tar::Builder<Vec<u8>>, kind: tar::EntryType, name: &str, to: &str) {
            let mut h = tar::Header::new_gnu();
            h.set_size(0);
            h.set_entry_type(kind);
            h.set_link_name(to).unwrap();
            b.append_data(&mut h, name, &b""[..]).unwrap();
        }
        let ok = archive(|b| {
            file(b, "./a/b/c.txt");
            file(b, "top.txt");
            link(b, tar::EntryType::Symlink, "a/l", "/etc");
            link(b, tar::EntryType::Link, "a/h", "a/b/c.txt");
        });
        let dirs: Vec<String> = archive_dirs("d", &ok)
            .unwrap()
            .into_iter()
            .map(|d| String::from_utf8(d).unwrap())
            .collect();
        assert_eq!(dirs, [".", "a", "a/b"]);
        for bad in [
            archive(|b| file(b, "../x")),
            archive(|b| file(b, "a/../../x")),
            archive(|b| file(b, "/etc/x")),
            archive(|b| {
                link(b, tar::EntryType::Symlink, "l", "/etc");
                file(b, "l/passwd");
            }),
            // The link may come after what goes through it.
            archive(|b| {
                file(b, "l/passwd");
                link(b, tar::EntryType::Symlink, "l", "/etc");
            }),
            archive(|b| link(b, tar::EntryType::Link, "h", "/etc/passwd")),
            archive(|b| link(b, tar::EntryType::Link, "h", "../x")),
        ] {
            assert!(
                matches!(archive_dirs("d", &bad), Err(BackendError::Escapes(_))),
                "{:?}",
                archive_dirs("d", &bad)
            );
        }
        assert!(archive_dirs("d", b"not a tar archive, just text").is_err());
    }

    #[test]
    fn escaped_lines_decode_back() {
        assert_eq!(escape_line(b"a b"), b"a b\n");
        assert_eq!(escape_line(b"x\ny\\z"), b"x\\0012y\\0134z\n");
    }
}
