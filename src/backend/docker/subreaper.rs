//! Every command exec runs under `/sbin/docker-init -s --`, a child
//! subreaper, so a double-forked escapee stays findable.
//!
//! The kill line (`kill_line`) finds a command's processes by their
//! marker and then by parent links. `setsid -f env -i sleep …` loses
//! both: `setsid -f` forks and its middle process exits at once, so the
//! escapee is re-parented to the container's PID 1 before anything is
//! killed, and `env -i` drops the marker. Containers run with Docker's
//! init (`init: true`), which mounts tini at `/sbin/docker-init`; tini's
//! `-s` registers it as a child subreaper (`PR_SET_CHILD_SUBREAPER`), so
//! such an orphan becomes *its* child. tini carries the marker, so the
//! parent walk from it reaches the escapee (the same as the local
//! backend's `subreaper.rs`).
//!
//! tini keeps the command's exit code (128+N for a signal), passes stdin,
//! stdout and stderr through, forwards the signals it gets to the command,
//! and puts the command in a process group of its own (the terminal's
//! foreground group under a PTY, as `docker run --init -it` does). A
//! command that cannot start is 127 (not found) or 126 (not executable),
//! as without tini; its message is tini's, rewritten by
//! [`start_failure_message`] to the one Docker gives.
//!
//! Whether the wrapper works is probed once per sandbox handle (one exec
//! of `docker-init -s -- docker-init --version`, started in the
//! background when the handle is made); a container without it (made by
//! hand without `--init`, an init that is not tini) runs commands
//! unwrapped, with the reason in the log.
//!
//! Limits: tini exits when the command's main process does, so an orphan
//! left by a command that already ended is re-parented to PID 1 and no
//! longer found (background children of a finished command are meant to
//! live on anyway); a process that changed user cannot be killed by the
//! command's user.

use std::collections::BTreeMap;

use bollard::container::LogOutput;
use bytes::Bytes;
use futures::StreamExt;

use super::exec::ExecTarget;
use crate::backend::shell::marker::new_marker;

/// Where Docker mounts its init (tini) in a container started with
/// `--init` (moby: `/sbin/` + `docker-init`, whatever the host path).
pub(crate) const DOCKER_INIT: &str = "/sbin/docker-init";

/// Bytes of the probe's output kept for the log line.
const PROBE_KEEP: usize = 512;

/// `argv` run under the subreaper: `[DOCKER_INIT, "-s", "--", argv...]`.
pub(crate) fn wrapped(argv: &[String]) -> Vec<String> {
    let mut v = Vec::with_capacity(argv.len() + 3);
    v.extend([DOCKER_INIT.to_string(), "-s".into(), "--".into()]);
    v.extend(argv.iter().cloned());
    v
}

/// Runs the probe: `docker-init -s -- docker-init --version` must exit 0,
/// print tini's version and nothing on stderr (tini warns there when it
/// cannot become a subreaper). `Err` holds why not, for the log.
pub(crate) async fn probe(target: &ExecTarget) -> Result<(), String> {
    let argv = wrapped(&[DOCKER_INIT.to_string(), "--version".to_string()]);
    let id = target
        .create(&argv, Some("/"), &BTreeMap::new(), &new_marker(), false)
        .await
        .map_err(|e| e.to_string())?;
    let (mut output, _input) = target.start(&id).await.map_err(|e| e.to_string())?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    while let Some(item) = output.next().await {
        let (buf, message) = match item {
            Ok(LogOutput::StdOut { message }) => (&mut out, message),
            Ok(LogOutput::StdErr { message } | LogOutput::Console { message }) => {
                (&mut err, message)
            }
            Ok(LogOutput::StdIn { .. }) => continue,
            Err(e) => return Err(format!("probe stream: {e}")),
        };
        let room = PROBE_KEEP.saturating_sub(buf.len());
        buf.extend_from_slice(&message[..message.len().min(room)]);
    }
    let code = target
        .exit_code(&id, std::time::Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    if code == Some(0) && out.contains("tini") && err.trim().is_empty() {
        Ok(())
    } else {
        Err(format!(
            "`{} -s -- {0} --version` gave exit {code:?}, stdout {:?}, stderr {:?} \
             (at most {PROBE_KEEP} bytes each)",
            DOCKER_INIT,
            out.trim(),
            err.trim()
        ))
    }
}

/// When `data` (the first stderr bytes of a wrapped command) is tini's
/// report that the command could not be started (`[FATAL tini (N)] exec
/// X failed: <strerror>`), the message Docker itself gives for that
/// (`exec: "X": executable file not found in $PATH` for a bare name not
/// found, else `exec: "X": <strerror>`), so a missing program reads the
/// same with and without the subreaper. `None` for anything else.
pub(crate) fn start_failure_message(data: &[u8]) -> Option<Bytes> {
    let text = std::str::from_utf8(data).ok()?;
    let line = text.strip_suffix('\n').unwrap_or(text);
    if line.contains('\n') || !line.starts_with("[FATAL tini (") {
        return None;
    }
    let rest = &line[line.find("] exec ")? + "] exec ".len()..];
    let at = rest.rfind(" failed: ")?;
    let (program, why) = (&rest[..at], &rest[at + " failed: ".len()..]);
    let msg = if why == "No such file or directory" && !program.contains('/') {
        format!("exec: \"{program}\": executable file not found in $PATH\n")
    } else {
        format!("exec: \"{program}\": {}\n", why.to_lowercase())
    };
    Some(Bytes::from(msg))
}

/// Bytes of stderr held while they may still be tini's start-failure
/// line (the line is a few dozen bytes; more is never it).
const HOLD_MAX: usize = 4096;

/// The first stderr bytes of a wrapped command, held while they may be
/// tini's start-failure line (tini writes it in three `write`s, which
/// Docker may frame apart), then passed on, rewritten by
/// [`start_failure_message`] when they are that line.
#[derive(Debug, Default)]
pub(crate) struct FirstStderr {
    /// `Some` while undecided.
    held: Option<Vec<u8>>,
}

impl FirstStderr {
    /// Holds nothing when `wrapped` is false (the command runs without
    /// tini, so no line of tini's can come).
    pub(crate) fn new(wrapped: bool) -> Self {
        FirstStderr {
            held: wrapped.then(Vec::new),
        }
    }

    /// Takes one stderr chunk; returns what to pass on now (`None`: held).
    pub(crate) fn feed(&mut self, data: Bytes) -> Option<Bytes> {
        let Some(buf) = self.held.as_mut() else {
            return Some(data);
        };
        buf.extend_from_slice(&data);
        const HEAD: &[u8] = b"[FATAL tini (";
        let n = buf.len().min(HEAD.len());
        if buf[..n] != HEAD[..n] || buf.len() > HOLD_MAX {
            return self.finish();
        }
        // No newline yet: still held.
        let nl = buf.iter().position(|&b| b == b'\n')?;
        let mut buf = self.held.take().unwrap_or_default();
        let rest = buf.split_off(nl + 1);
        let mut out = match start_failure_message(&buf) {
            Some(m) => m.to_vec(),
            None => buf,
        };
        out.extend_from_slice(&rest);
        Some(Bytes::from(out))
    }

    /// What is still held (at the end of the stream, or once decided).
    pub(crate) fn finish(&mut self) -> Option<Bytes> {
        self.held.take().filter(|b| !b.is_empty()).map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_with_the_subreaper_flag() {
        let v = wrapped(&["sh".into(), "-c".into(), "x".into()]);
        assert_eq!(v, [DOCKER_INIT, "-s", "--", "sh", "-c", "x"]);
    }

    #[test]
    fn tini_start_failures_read_as_dockers() {
        let m = start_failure_message(
            b"[FATAL tini (7)] exec definitely_missing_cmd failed: No such file or directory\n",
        )
        .unwrap();
        assert_eq!(
            &m[..],
            b"exec: \"definitely_missing_cmd\": executable file not found in $PATH\n"
        );
        let m =
            start_failure_message(b"[FATAL tini (7)] exec /etc/passwd failed: Permission denied\n")
                .unwrap();
        assert_eq!(&m[..], b"exec: \"/etc/passwd\": permission denied\n");
        // The command's own output is never rewritten.
        assert!(start_failure_message(b"exec x failed: No such file or directory\n").is_none());
        assert!(start_failure_message(b"[FATAL tini (7)] exec a failed: b\nmore\n").is_none());
        assert!(start_failure_message(b"[FATAL tini (7)] fork failed: x\n").is_none());
    }

    #[test]
    fn a_start_failure_split_over_frames_is_joined_and_rewritten() {
        let mut f = FirstStderr::new(true);
        assert!(f.feed(Bytes::from_static(b"[FATAL tini (7)] ")).is_none());
        assert!(
            f.feed(Bytes::from_static(
                b"exec nope failed: No such file or directory"
            ))
            .is_none()
        );
        let out = f.feed(Bytes::from_static(b"\n")).unwrap();
        assert_eq!(
            &out[..],
            b"exec: \"nope\": executable file not found in $PATH\n"
        );
        // Decided: later bytes pass as they are.
        assert_eq!(&f.feed(Bytes::from_static(b"x")).unwrap()[..], b"x");
        // Other stderr passes at once, and nothing is held unwrapped.
        let mut f = FirstStderr::new(true);
        assert_eq!(
            &f.feed(Bytes::from_static(b"oops\n")).unwrap()[..],
            b"oops\n"
        );
        let mut f = FirstStderr::new(false);
        assert_eq!(
            &f.feed(Bytes::from_static(b"[FATAL")).unwrap()[..],
            b"[FATAL"
        );
        // A held prefix is given back at the end of the stream.
        let mut f = FirstStderr::new(true);
        assert!(f.feed(Bytes::from_static(b"[FAT")).is_none());
        assert_eq!(&f.finish().unwrap()[..], b"[FAT");
    }
}
