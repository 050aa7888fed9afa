//! Link confinement for backends whose file operations are shell scripts
//! run inside the sandbox (Kubernetes always; Docker without a bind
//! mount): the same rule bubblewrap's and Docker's `HostDir` applies on
//! the host — a path under the workspace that a symbolic link leads out
//! of is refused ([`BackendError::Escapes`](super::BackendError::Escapes))
//! — as one shell preamble ([`CONFINE`]) that every script starts with
//! ([`op_script`]).
//!
//! The check resolves links itself, one component at a time, instead of
//! calling `readlink -f`: BusyBox's `readlink -f` fails on a dangling link
//! (so a write through a link to a file not yet created inside the
//! workspace would be refused), and `dirname`/`basename` or a command
//! substitution would drop a trailing newline from a name and check
//! another path than the one used.
//!
//! Limit (as with `HostDir`): the check and the operation are separate
//! steps, so a process in the sandbox that swaps a directory for a link
//! in between could redirect one operation.

/// Exit code of a script whose path a link leads out of the workspace.
pub(crate) const ESCAPES: i32 = 16;

/// Exit code of a script whose path has more than 40 links in a row (a
/// loop: `ELOOP`).
pub(crate) const LOOP: i32 = 18;

/// Whether an operation follows its path's last component when it is a
/// symbolic link (the links before it are always followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Follow {
    /// Act on what the link points to (read, write, list, mkdir, tar).
    Yes,
    /// Act on the link itself (stat, remove, rename, exclusive create).
    No,
}

/// Shell functions every file script starts with (POSIX `sh`; dash,
/// bash and BusyBox `ash` alike, only builtins but `readlink` without
/// `-f`, which BusyBox and GNU treat the same).
///
/// * `walk P F` sets `R` to `P` with its links followed one component at
///   a time, as the kernel resolves a path: a link's target replaces it
///   (from `/` when absolute), `..` pops a component of the already
///   resolved (link-free) prefix, missing components are kept as they are
///   (a file about to be created), and the last component is followed
///   only when `F` is `f`. A dangling link is followed to where its target
///   would be, so a write through a link to a missing file inside the
///   workspace creates that file — BusyBox's `readlink -f` fails on
///   such links, which is why it is not used. Returns 2 after 40 links
///   (a loop), 1 when a link cannot be read.
/// * `confined P F`: true when `P` is not under the workspace
///   (`$WSBENCH_WORKDIR` or its real path `$Wr`, lexically — paths
///   elsewhere in the sandbox are its own business, `R` is then `P`) or its
///   resolution stays under the workspace's real path; `R` is the resolved
///   path. (`$Wr` counts because scripts check entries of a directory they
///   already resolved, which begin with it when the workdir itself lies
///   behind a link.)
/// * `inside P F`: `confined`, or exit [`ESCAPES`] ([`LOOP`] for a loop).
///
/// Names are never passed through `dirname`, `basename` or a command
/// substitution, which would drop a trailing newline and check another
/// path than the one used.
pub(crate) const CONFINE: &str = r#"W=$WSBENCH_WORKDIR
walk() {
  R= rest=$1 n=0
  while [ -n "$rest" ]; do
    case $rest in
      */*) c=${rest%%/*} rest=${rest#*/} ;;
      *) c=$rest rest= ;;
    esac
    case $c in
      ''|.) continue ;;
      ..) R=${R%/*}; continue ;;
    esac
    R=$R/$c
    if [ -z "$rest" ] && [ "$2" != f ]; then break; fi
    [ -L "$R" ] || continue
    n=$((n + 1))
    [ "$n" -le 40 ] || return 2
    t=$(readlink -- "$R" && echo .) || return 1
    t=${t%?.}
    case $t in /*) R= ;; *) R=${R%/*} ;; esac
    rest=$t${rest:+/$rest}
  done
  R=${R:-/}
}
walk "$W" f || exit 16
Wr=$R
confined() {
  case $1 in "$W"|"$W"/*|"$Wr"|"$Wr"/*) ;; *) R=$1; return 0 ;; esac
  walk "$1" "$2" || return
  case $R in "$Wr"|"$Wr"/*|"$W") return 0 ;; esac
  return 1
}
inside() {
  confined "$1" "$2" && return 0
  [ $? = 2 ] && exit 18
  exit 16
}
"#;

/// The script of one file operation: [`CONFINE`], then `inside` on
/// positional parameter `i` with `follows[i-1]`, the result in `$P<i>`,
/// then the paths are shifted away so `body` sees its own arguments as
/// `$1`, `$2`, .... Run it with the paths first, then those arguments.
pub(crate) fn op_script(follows: &[Follow], body: &str) -> String {
    let mut s = String::from(CONFINE);
    for (i, f) in follows.iter().enumerate() {
        let f = match f {
            Follow::Yes => "f",
            Follow::No => "n",
        };
        s.push_str(&format!("inside \"${}\" {f}; P{}=$R\n", i + 1, i + 1));
    }
    if !follows.is_empty() {
        s.push_str(&format!("shift {}\n", follows.len()));
    }
    s.push_str(body);
    s
}

#[cfg(test)]
pub(crate) mod test_shells {
    //! The shells the scripts must work in, for the backends' tests.

    use std::path::{Path, PathBuf};

    /// The system `sh` (dash on Debian, GNU tools), or BusyBox `sh` with
    /// only BusyBox applets on `PATH`, as in a busybox image.
    pub(crate) struct Shell {
        /// `sh` or `busybox`.
        pub name: &'static str,
        program: Vec<String>,
        path: Option<PathBuf>,
        _applets: Option<tempfile::TempDir>,
    }

    /// `sh`, and BusyBox when installed (`SKIPPED` otherwise; required
    /// under `CI=true`).
    pub(crate) fn shells() -> Vec<Shell> {
        let mut v = vec![Shell {
            name: "sh",
            program: vec!["sh".into()],
            path: None,
            _applets: None,
        }];
        let busybox = ["/usr/bin/busybox", "/bin/busybox"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists());
        match busybox {
            Some(bb) => {
                let d = tempfile::tempdir().unwrap();
                for applet in [
                    "sh", "cat", "head", "tail", "wc", "mkdir", "rm", "rmdir", "mv", "ln", "ls",
                    "stat", "readlink", "tar", "printf", "find", "dirname", "chmod", "truncate",
                    "dd", "tr", "grep", "sleep",
                ] {
                    std::os::unix::fs::symlink(bb, d.path().join(applet)).unwrap();
                }
                v.push(Shell {
                    name: "busybox",
                    program: vec![bb.display().to_string(), "sh".into()],
                    path: Some(d.path().to_path_buf()),
                    _applets: Some(d),
                });
            }
            None if std::env::var("CI").as_deref() == Ok("true") => {
                panic!("busybox is required to test the scripts under BusyBox")
            }
            None => println!("SKIPPED: busybox is not installed (BusyBox half of the test)"),
        }
        v
    }

    impl Shell {
        /// Runs `script` with `args` from `/`, the workspace `w` in
        /// `WSBENCH_WORKDIR`, feeding `stdin`; returns exit code and
        /// stdout.
        pub(crate) fn run(
            &self,
            w: &Path,
            script: &str,
            args: &[&str],
            stdin: &[u8],
        ) -> (i32, Vec<u8>) {
            use std::io::Write;
            let mut c = std::process::Command::new(&self.program[0]);
            c.args(&self.program[1..])
                .arg("-c")
                .arg(script)
                .arg("wsbench")
                .args(args)
                .env("WSBENCH_WORKDIR", w)
                .current_dir("/")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            if let Some(p) = &self.path {
                c.env("PATH", p);
            }
            let mut child = c.spawn().unwrap();
            let mut sin = child.stdin.take().unwrap();
            let data = stdin.to_vec();
            let feeder = std::thread::spawn(move || {
                let _ = sin.write_all(&data);
            });
            let out = child.wait_with_output().unwrap();
            feeder.join().unwrap();
            (out.status.code().unwrap_or(-1), out.stdout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_shells::shells;
    use super::*;

    #[test]
    fn links_are_resolved_like_the_kernel_and_escapes_refused() {
        for sh in shells() {
            let d = tempfile::tempdir().unwrap();
            let w = d.path().join("ws");
            std::fs::create_dir_all(w.join("sub")).unwrap();
            std::fs::write(d.path().join("secret"), "s").unwrap();
            let link = |name: &str, to: &str| std::os::unix::fs::symlink(to, w.join(name)).unwrap();
            link("abs", d.path().join("secret").to_str().unwrap());
            link("rel", "../secret");
            link("deep", &format!("sub/../../ws/sub/../{}", "../secret"));
            link("up", "..");
            link("gone", "/no/such/dir/f");
            link("dang", "sub/new.txt");
            link("self", ".");
            link("loop", "loop");
            link("chain", "dang");
            let real = w.canonicalize().unwrap();
            let ws = w.to_str().unwrap();
            let check = |p: &str, f: Follow| {
                let script = op_script(&[f], "printf %s \"$P1\"");
                let (code, out) = sh.run(&w, &script, &[&format!("{ws}/{p}")], b"");
                (code, String::from_utf8(out).unwrap())
            };
            let n = sh.name;
            for bad in ["abs", "rel", "deep", "up", "up/secret", "gone", "up/ws/abs"] {
                assert_eq!(check(bad, Follow::Yes).0, ESCAPES, "{n}: {bad}");
            }
            // The link itself is inside; what lies behind it is not.
            assert_eq!(check("abs", Follow::No).0, 0, "{n}");
            assert_eq!(check("up/secret", Follow::No).0, ESCAPES, "{n}");
            let inside = |p: &str| real.join(p).display().to_string();
            assert_eq!(
                check("dang", Follow::Yes),
                (0, inside("sub/new.txt")),
                "{n}"
            );
            assert_eq!(
                check("chain", Follow::Yes),
                (0, inside("sub/new.txt")),
                "{n}"
            );
            assert_eq!(check("chain", Follow::No), (0, inside("chain")), "{n}");
            assert_eq!(
                check("self/self/sub/x", Follow::Yes),
                (0, inside("sub/x")),
                "{n}"
            );
            assert_eq!(check("new/a/b", Follow::Yes), (0, inside("new/a/b")), "{n}");
            assert_eq!(check("loop", Follow::Yes).0, LOOP, "{n}");
            // Paths outside the workspace are not judged.
            let script = op_script(&[Follow::Yes], "printf %s \"$P1\"");
            let (code, out) = sh.run(&w, &script, &["/etc/hostname"], b"");
            assert_eq!((code, out.as_slice()), (0, &b"/etc/hostname"[..]), "{n}");
            // A workspace behind a link: paths under its real path are
            // judged too (entries of a directory already resolved).
            let via = d.path().join("via");
            std::os::unix::fs::symlink(&w, &via).unwrap();
            let script = op_script(&[], "confined \"$1\" f");
            let judge = |p: String| sh.run(&via, &script, &[&p], b"").0;
            assert_eq!(judge(inside("abs")), 1, "{n}");
            assert_eq!(judge(inside("sub")), 0, "{n}");
            // Arguments after the paths reach the body as $1, $2.
            let script = op_script(&[Follow::Yes, Follow::No], "printf '%s|%s' \"$1\" \"$2\"");
            let (code, out) = sh.run(
                &w,
                &script,
                &[&real.display().to_string(), ws, "a", "b c"],
                b"",
            );
            assert_eq!((code, out.as_slice()), (0, &b"a|b c"[..]), "{n}");
        }
    }
}
