//! What the cloud backends share above HTTP: turning an argv into the one
//! shell line the services take (C18: a user's line reaches a real shell
//! unchanged), and the file operations that are done with small shell
//! scripts run through [`Sandbox::exec`] (remove, rename, mkdir,
//! exclusive create), so each service needs only exec + read + write +
//! list + stat natively (`MINIMAL-SURFACE.md`, introduction).

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::backend::{
    BackendError, BackendResult, ExecOutcome, ExecRequest, Sandbox, StreamKind, path as bpath,
};

/// Quotes `s` for a POSIX shell (single quotes; `'` becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `argv` as one shell line. `["sh"|"/bin/sh", "-c", line]` gives `line`
/// itself, verbatim; anything else is quoted word by word so the shell
/// runs exactly that argv.
///
/// Errors: an empty argv.
pub fn command_line(argv: &[String]) -> BackendResult<String> {
    if argv.is_empty() {
        return Err(BackendError::Spawn {
            program: String::new(),
            reason: "empty argv".into(),
        });
    }
    if let Some(line) = plain_shell_line(argv) {
        return Ok(line.to_string());
    }
    Ok(argv
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" "))
}

/// The line of an argv of exactly `sh -c <line>` (or `/bin/sh -c`).
pub fn plain_shell_line(argv: &[String]) -> Option<&str> {
    match argv {
        [sh, c, line] if (sh == "sh" || sh == "/bin/sh") && c == "-c" => Some(line),
        _ => None,
    }
}

/// `export K='v'; ` for each variable, for services whose command call has
/// no environment field.
///
/// Errors: a name that is not a valid shell variable name.
pub fn env_prefix<'a>(
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> BackendResult<String> {
    let mut out = String::new();
    for (k, v) in env {
        let valid = !k.is_empty()
            && !k.as_bytes()[0].is_ascii_digit()
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(BackendError::Spawn {
                program: String::new(),
                reason: format!("invalid environment variable name `{k}`"),
            });
        }
        out.push_str(&format!("export {k}={}; ", shell_quote(v)));
    }
    Ok(out)
}

/// Runs `argv` in the workdir and collects its output.
///
/// Errors: those of [`Sandbox::exec`].
pub async fn exec_capture(
    sb: &dyn Sandbox,
    argv: Vec<String>,
    timeout: Duration,
) -> BackendResult<(ExecOutcome, Vec<u8>, Vec<u8>)> {
    let req = ExecRequest {
        argv,
        timeout: Some(timeout),
        ..Default::default()
    };
    exec_request_capture(sb, req).await
}

/// Runs `req` and collects its output.
///
/// Errors: those of [`Sandbox::exec`].
pub async fn exec_request_capture(
    sb: &dyn Sandbox,
    req: ExecRequest,
) -> BackendResult<(ExecOutcome, Vec<u8>, Vec<u8>)> {
    let (tx, mut rx) = mpsc::channel(64);
    let run = sb.exec(req, Some(tx));
    let collect = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => out.extend_from_slice(&c.data),
                StreamKind::Stderr => err.extend_from_slice(&c.data),
            }
        }
        (out, err)
    };
    let (res, (out, err)) = tokio::join!(run, collect);
    Ok((res?, out, err))
}

pub use crate::backend::process_tree::MARKER_VAR;

/// A fresh marker value for [`MARKER_VAR`] (hex, safe in a shell word).
pub fn new_marker() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A shell line that SIGKILLs every process whose environment holds
/// `MARKER_VAR=<marker>`: the whole tree of a command, including children
/// that left its process group, which a service's own kill (one pid, one
/// session) may miss. Portable to busybox (`tr`, `grep -x`).
pub fn kill_marked_line(marker: &str) -> String {
    format!(
        "for p in /proc/[0-9]*; do if tr '\\000' '\\n' < \"$p/environ\" 2>/dev/null | grep -qx '{MARKER_VAR}={marker}'; then kill -9 \"${{p#/proc/}}\" 2>/dev/null; fi; done; true"
    )
}

/// Runs [`kill_marked_line`] in the sandbox; failures are only logged (the
/// service's own kill has already been sent).
pub async fn kill_marked(sb: &dyn Sandbox, marker: &str) {
    let req = ExecRequest {
        argv: vec!["/bin/sh".into(), "-c".into(), kill_marked_line(marker)],
        cwd: Some("/".into()),
        timeout: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    if let Err(e) = sb.exec(req, None).await {
        tracing::warn!(error = %e, "killing a stopped command's processes failed");
    }
}

/// Limit for one helper script (they touch a single path).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Exit codes the helper scripts use to say what went wrong.
mod code {
    pub const NOT_FOUND: i32 = 10;
    pub const IS_DIR: i32 = 11;
    pub const NOT_DIR: i32 = 12;
    pub const EXISTS: i32 = 13;
    pub const NOT_EMPTY: i32 = 14;
}

async fn run_script(sb: &dyn Sandbox, script: &str, args: &[&str]) -> BackendResult<(i32, String)> {
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        script.into(),
        "wsbench".into(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    // From `/`: the workdir itself may not exist yet (creating it is one
    // of these scripts' jobs).
    let req = ExecRequest {
        argv,
        cwd: Some("/".into()),
        timeout: Some(SCRIPT_TIMEOUT),
        ..Default::default()
    };
    let (outcome, _out, err) = exec_request_capture(sb, req).await?;
    if outcome.timed_out {
        return Err(BackendError::Io {
            context: format!("file operation on {}", args.first().unwrap_or(&"")),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "helper script timed out"),
        });
    }
    Ok((
        outcome.exit_code.unwrap_or(-1),
        String::from_utf8_lossy(&err).trim().to_string(),
    ))
}

fn script_error(code: i32, path: &str, stderr: String, what: &str) -> BackendError {
    match code {
        code::NOT_FOUND => BackendError::NotFound(path.to_string()),
        code::IS_DIR => BackendError::IsADirectory(path.to_string()),
        code::NOT_DIR => BackendError::NotADirectory(path.to_string()),
        code::EXISTS => BackendError::AlreadyExists(path.to_string()),
        code::NOT_EMPTY => BackendError::Io {
            context: path.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::DirectoryNotEmpty,
                "directory not empty",
            ),
        },
        _ if stderr.contains("ermission denied") => BackendError::PermissionDenied(path.into()),
        _ => BackendError::Io {
            context: format!("{what} {path}"),
            source: std::io::Error::other(format!("exit {code}: {stderr}")),
        },
    }
}

/// Removes a file or directory with `rm`/`rmdir` in the sandbox.
///
/// Errors: `NotFound`, a non-empty directory without `recursive`, or the
/// shell's message.
pub async fn shell_remove(sb: &dyn Sandbox, path: &str, recursive: bool) -> BackendResult<()> {
    const SCRIPT: &str = r#"p=$1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit 10; fi
if [ -d "$p" ] && [ ! -L "$p" ]; then
  if [ "$2" = r ]; then rm -rf -- "$p"; exit $?; fi
  if [ -n "$(ls -A -- "$p")" ]; then exit 14; fi
  rmdir -- "$p"; exit $?
fi
rm -f -- "$p""#;
    let (c, err) = run_script(sb, SCRIPT, &[path, if recursive { "r" } else { "-" }]).await?;
    match c {
        0 => Ok(()),
        c => Err(script_error(c, path, err, "removing")),
    }
}

/// Creates a directory (and its parents when `parents`).
///
/// Errors: `AlreadyExists` without `parents`, `NotFound` for a missing
/// parent, `NotADirectory` when a file is in the way.
pub async fn shell_mkdir(sb: &dyn Sandbox, path: &str, parents: bool) -> BackendResult<()> {
    const SCRIPT: &str = r#"p=$1
if [ -d "$p" ]; then if [ "$2" = p ]; then exit 0; fi; exit 13; fi
if [ -e "$p" ] || [ -L "$p" ]; then exit 13; fi
if [ "$2" = p ]; then mkdir -p -- "$p" || exit 12; exit 0; fi
d=$(dirname -- "$p")
if [ ! -e "$d" ]; then exit 10; fi
if [ ! -d "$d" ]; then exit 12; fi
mkdir -- "$p""#;
    let (c, err) = run_script(sb, SCRIPT, &[path, if parents { "p" } else { "-" }]).await?;
    match c {
        0 => Ok(()),
        c => Err(script_error(c, path, err, "creating directory")),
    }
}

/// Renames `from` to `to` with `mv`, creating the target's parent.
///
/// Errors: `NotFound` when `from` is missing, or the shell's message.
pub async fn shell_rename(sb: &dyn Sandbox, from: &str, to: &str) -> BackendResult<()> {
    const SCRIPT: &str = r#"if [ ! -e "$1" ] && [ ! -L "$1" ]; then exit 10; fi
if [ -d "$2" ] && [ ! -L "$2" ] && ! [ -d "$1" ]; then exit 11; fi
mkdir -p -- "$(dirname -- "$2")" && mv -f -- "$1" "$2""#;
    let (c, err) = run_script(sb, SCRIPT, &[from, to]).await?;
    match c {
        0 => Ok(()),
        code::IS_DIR => Err(BackendError::IsADirectory(to.to_string())),
        c => Err(script_error(c, from, err, "renaming")),
    }
}

/// Creates `path` only if it does not exist: uploads to a temp name in
/// the same directory, then hard-links it into place, which fails
/// atomically when the name is taken. `Ok(false)` when it already exists.
///
/// Errors: those of the upload, or the shell's message.
pub async fn shell_create_new(sb: &dyn Sandbox, path: &str, data: &[u8]) -> BackendResult<bool> {
    const SCRIPT: &str = r#"if ln -- "$1" "$2" 2>/dev/null; then rm -f -- "$1"; exit 0; fi
rm -f -- "$1"
if [ -e "$2" ] || [ -L "$2" ]; then exit 13; fi
exit 1"#;
    let parent = bpath::join(path, "..");
    let tmp = bpath::join(
        &parent,
        &format!(".wsbench-new-{}", uuid::Uuid::new_v4().simple()),
    );
    sb.write(&tmp, data).await?;
    let (c, err) = run_script(sb, SCRIPT, &[&tmp, path]).await?;
    match c {
        0 => Ok(true),
        code::EXISTS => Ok(false),
        c => Err(script_error(c, path, err, "creating")),
    }
}

/// Reads an async reader to the end (for services whose upload needs the
/// whole body, or whose multipart part must know its length).
///
/// Errors: the reader fails.
pub async fn read_all(
    mut reader: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    path: &str,
) -> BackendResult<Bytes> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    reader
        .read_to_end(&mut buf)
        .await
        .map_err(|e| BackendError::from_io(e, path))?;
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_shell_line_passes_verbatim() {
        let line = "sh -c 'sleep 0.2; echo one > one.txt' & echo two && cat <<'EOF'\nx\nEOF";
        assert_eq!(command_line(&v(&["/bin/sh", "-c", line])).unwrap(), line);
        assert_eq!(command_line(&v(&["sh", "-c", line])).unwrap(), line);
    }

    #[test]
    fn argv_words_are_quoted() {
        assert_eq!(
            command_line(&v(&["rg", "--files", "a b", "it's", ""])).unwrap(),
            r#"rg --files 'a b' 'it'\''s' ''"#
        );
        // bash -c keeps bash: it is quoted, not unwrapped into sh.
        assert_eq!(
            command_line(&v(&["bash", "-c", "echo $0"])).unwrap(),
            "bash -c 'echo $0'"
        );
        assert!(command_line(&[]).is_err());
    }

    #[test]
    fn marker_kill_finds_only_marked_processes() {
        let line = kill_marked_line("abc123");
        assert!(line.contains("grep -qx 'WSBENCH_EXEC_ID=abc123'"), "{line}");
        // The line parses as shell.
        let ok = std::process::Command::new("sh")
            .args(["-n", "-c", &line])
            .status()
            .map(|s| s.success())
            .unwrap_or(true);
        assert!(ok);
    }

    #[tokio::test]
    async fn marker_kill_kills_a_detached_child() {
        // A child that left the process group, found by its marker.
        let marker = new_marker();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & wait"])
            .env(MARKER_VAR, &marker)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let st = std::process::Command::new("sh")
            .args(["-c", &kill_marked_line(&marker)])
            .status()
            .unwrap();
        assert!(st.success());
        let t0 = std::time::Instant::now();
        let _ = child.wait();
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn env_prefix_quotes_values_and_rejects_bad_names() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("A_1".to_string(), "x y'z".to_string());
        assert_eq!(env_prefix(&m).unwrap(), r#"export A_1='x y'\''z'; "#);
        m.insert("1A".to_string(), "x".to_string());
        assert!(env_prefix(&m).is_err());
    }
}
