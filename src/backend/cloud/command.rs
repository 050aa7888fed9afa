//! Commands in a cloud sandbox, the parts every service shares: the one
//! shell line an argv becomes (C18: a user's `sh -c` line reaches a real
//! shell unchanged), environment exports for services without an env
//! field, collecting a command's output, the marker kill, and waiting on
//! a timeout or a cancel.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::backend::path::shell_quote;
use crate::backend::shell::{marker, ops, runner};
use crate::backend::{BackendError, BackendResult, ExecOutcome, ExecRequest, Sandbox};

/// Sleeps until `when`; never returns for `None` (a limit not set, or
/// not started yet), so it can stand in a `select!` either way.
pub async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// Returns when `token` is cancelled; never without a token.
pub async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(c) => c.cancelled().await,
        None => std::future::pending().await,
    }
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
pub(crate) fn plain_shell_line(argv: &[String]) -> Option<&str> {
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
    runner::capture(sb, req).await
}

pub use crate::backend::shell::marker::{MARKER_VAR, kill_line as kill_marked_line, new_marker};

/// Runs [`kill_line`](crate::backend::shell::marker::kill_line) in the
/// sandbox; failures are only logged (the service's own kill has already
/// been sent).
pub async fn kill_marked(sb: &dyn Sandbox, marker: &str) {
    let req = ExecRequest {
        argv: marker::kill_argv(marker),
        cwd: Some("/".into()),
        timeout: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    if let Err(e) = sb.exec(req, None).await {
        tracing::warn!(error = %e, "killing a stopped command's processes failed");
    }
}

/// Creates a directory (and its parents when `parents`): the shared
/// script ([`ops::mkdir`]), for the provisioners' workdir.
///
/// Errors: those of [`ops::mkdir`].
pub async fn shell_mkdir(sb: &dyn Sandbox, path: &str, parents: bool) -> BackendResult<()> {
    ops::mkdir(sb, path, parents).await
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
            r#"rg --files 'a b' "it's" ''"#
        );
        // bash -c keeps bash: it is quoted, not unwrapped into sh.
        assert_eq!(
            command_line(&v(&["bash", "-c", "echo $0"])).unwrap(),
            "bash -c 'echo $0'"
        );
        assert!(command_line(&[]).is_err());
    }

    #[test]
    fn env_prefix_quotes_values_and_rejects_bad_names() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("A_1".to_string(), "x y'z".to_string());
        assert_eq!(env_prefix(&m).unwrap(), r#"export A_1="x y'z"; "#);
        m.insert("1A".to_string(), "x".to_string());
        assert!(env_prefix(&m).is_err());
    }
}
