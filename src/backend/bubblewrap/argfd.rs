//! bwrap's arguments passed over a file descriptor (`bwrap --args FD`),
//! so that nothing of them is in bwrap's command line.
//!
//! Why (issue 14, the newcomer trial): bwrap is PID 1 of the sandbox's
//! PID namespace, and `/proc/1/cmdline` inside showed its whole argv: the
//! host paths of the workspace (under `XDG_DATA_HOME`), of the private
//! `/tmp` and of every bind, and each `--setenv` pair. With `--args` its
//! argv is `bwrap --args <n> -- <command>`; bwrap reads the NUL-separated arguments
//! from the descriptor and closes it before the command runs (checked
//! with bubblewrap 0.8; `--args` exists since 0.1.8), so the command
//! inherits no handle on them either.
//!
//! The arguments live in an anonymous memory file (`memfd_create`), not a
//! pipe: a pipe's buffer (64 KiB) would block a large environment before
//! bwrap reads it. The descriptor is close-on-exec in wsbench (no other
//! child inherits it); a `pre_exec` hook clears that flag in bwrap's
//! child alone, so std spawns bwrap with `fork` rather than `vfork`
//! (negligible beside bwrap's namespace setup).
//!
//! Limit: the command (after bwrap's `--`; bwrap refuses it in the file)
//! is still in bwrap's command line, as it is in the command's own
//! `/proc/<pid>/cmdline` in any sandbox; it holds no host path unless the
//! caller put one there.

use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::process::Command;

/// A `bwrap` command that reads the options `args` from a memory file:
/// its argv is `<program> --args <fd> <rest>`. `rest` is `--` and the
/// command: bwrap takes only options from the file, the command must be
/// on its command line.
///
/// Errors: an argument holding a NUL byte (it cannot be passed either
/// way), or the memory file cannot be created or written.
pub(super) fn command_with_args_fd(
    program: &std::path::Path,
    args: &[String],
    rest: &[String],
) -> std::io::Result<Command> {
    if let Some(a) = args.iter().find(|a| a.contains('\0')) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a bwrap argument holds a NUL byte: {a:?}"),
        ));
    }
    let fd = memfd()?;
    let mut file = std::fs::File::from(fd);
    let mut data = Vec::with_capacity(args.iter().map(|a| a.len() + 1).sum());
    for a in args {
        data.extend_from_slice(a.as_bytes());
        data.push(0);
    }
    file.write_all(&data)?;
    file.seek(SeekFrom::Start(0))?;
    let fd = OwnedFd::from(file);
    let raw = fd.as_raw_fd();
    let mut cmd = Command::new(program);
    cmd.arg("--args").arg(raw.to_string()).args(rest);
    // SAFETY: runs in the forked child before exec and calls only
    // `fcntl`, an async-signal-safe system call; `fd` is owned by the
    // closure, so it stays open in the parent until the command is
    // dropped (after the spawn) and the number cannot be reused before.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(cmd)
}

/// A close-on-exec anonymous memory file, at a descriptor above the
/// standard three (the child's stdio setup overwrites 0–2).
fn memfd() -> std::io::Result<OwnedFd> {
    // SAFETY: plain system calls on a C string literal and a descriptor
    // we own; each result is checked before it is wrapped.
    unsafe {
        let raw = libc::memfd_create(c"wsbench-bwrap-args".as_ptr(), libc::MFD_CLOEXEC);
        if raw == -1 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(raw);
        if raw > 2 {
            return Ok(fd);
        }
        let high = libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 3);
        if high == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(high))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_arguments_are_in_the_memory_file_and_argv_holds_none() {
        let args: Vec<String> = ["/very/secret/host/path", "two words", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let rest = ["--".to_string(), "true".to_string()];
        let cmd = command_with_args_fd(std::path::Path::new("bwrap"), &args, &rest).unwrap();
        let argv: Vec<String> = cmd
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(argv.len(), 4, "{argv:?}");
        assert_eq!(argv[0], "--args");
        assert_eq!(argv[2..], ["--", "true"]);
        let fd: i32 = argv[1].parse().unwrap();
        assert!(fd > 2, "{fd}");
        // The file is open in this process while the command lives; a
        // child reads it as bwrap would (from offset 0, NUL-separated).
        let out = Command::new("sh")
            .args([
                "-c",
                &format!("tr '\\0' '|' < /proc/{}/fd/{fd}", std::process::id()),
            ])
            .output()
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "/very/secret/host/path|two words||"
        );
    }

    #[test]
    fn a_nul_in_an_argument_is_refused() {
        let e =
            command_with_args_fd(std::path::Path::new("bwrap"), &["a\0b".into()], &[]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }
}
