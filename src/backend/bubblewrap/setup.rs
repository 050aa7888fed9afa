//! Setup failures as errors that name the cause and the fix: bwrap's own
//! stderr when the sandbox could not be set up (case C11), and a missing
//! `bwrap` binary.

use std::path::Path;

use crate::backend::BackendError;

/// Turns bwrap's stderr, when it failed before running the command, into
/// an error naming the cause and the fix (case C11).
///
/// * user-namespace failures (`setting up uid map`, `Creating new
///   namespace failed`, `No permissions to create new namespace`, ...):
///   unprivileged user namespaces are restricted by the host; fix with an
///   AppArmor profile for bwrap or the
///   `kernel.apparmor_restrict_unprivileged_userns` sysctl (Ubuntu ≥ 23.10),
///   `kernel.unprivileged_userns_clone` (older Debian) or
///   `user.max_user_namespaces`;
/// * network-namespace failures (`loopback: Failed RTM_NEWADDR`): the
///   sandbox's network namespace could not be set up;
/// * anything else: bwrap's message as it is.
pub(crate) fn diagnose_setup_failure(
    bwrap: &Path,
    stderr: &str,
    exit_code: Option<i32>,
) -> BackendError {
    let line = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    let quoted = if line.is_empty() {
        format!(
            "bwrap exited with {} and no message",
            exit_code.map_or("no exit code".to_string(), |c| format!("code {c}"))
        )
    } else {
        format!("bwrap said: `{line}`")
    };
    let low = stderr.to_ascii_lowercase();
    let reason = if low.contains("loopback")
        || low.contains("rtm_newaddr")
        || low.contains("network namespace")
    {
        format!(
            "the sandbox's network namespace could not be set up ({quoted}). \
             The host restricts network namespaces for unprivileged users (AppArmor on Ubuntu \
             ≥ 23.10 does). Fix: install an AppArmor profile that allows `userns` for bwrap \
             (for example /etc/apparmor.d/bwrap), or run `sysctl -w \
             kernel.apparmor_restrict_unprivileged_userns=0`; or set `share_net = true` in the \
             profile to use the host network (no network isolation). wsbench does not fall \
             back to running commands outside the sandbox."
        )
    } else if low.contains("uid map")
        || low.contains("gid map")
        || low.contains("new namespace")
        || low.contains("user namespace")
        || low.contains("setgroups")
        || (low.contains("unshare") && low.contains("not permitted"))
        || low.contains("operation not permitted")
    {
        format!(
            "unprivileged user namespaces look restricted by the host ({quoted}). \
             Fix one of: install an AppArmor profile that allows `userns` for bwrap (for \
             example /etc/apparmor.d/bwrap), or allow them for all users with `sysctl -w \
             kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu ≥ 23.10); on older \
             kernels `sysctl -w kernel.unprivileged_userns_clone=1`, and \
             `user.max_user_namespaces` must be above 0. wsbench does not fall back to running \
             commands outside the sandbox."
        )
    } else {
        format!("bwrap could not set up the sandbox ({quoted})")
    };
    BackendError::Spawn {
        program: bwrap.display().to_string(),
        reason,
    }
}

pub(super) fn missing_bwrap(bwrap: &Path, err: &std::io::Error) -> BackendError {
    BackendError::Spawn {
        program: bwrap.display().to_string(),
        reason: if err.kind() == std::io::ErrorKind::NotFound {
            format!(
                "{err}: bubblewrap is not installed (apt-get install bubblewrap, dnf install \
                 bubblewrap) or `bwrap_path` in the profile is wrong"
            )
        } else {
            err.to_string()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnoses_c11_messages() {
        let b = Path::new("bwrap");
        let e =
            diagnose_setup_failure(b, "bwrap: setting up uid map: Permission denied\n", Some(1))
                .to_string();
        assert!(
            e.contains("bwrap: setting up uid map: Permission denied"),
            "{e}"
        );
        assert!(e.contains("user namespaces look restricted"), "{e}");
        assert!(
            e.contains("kernel.apparmor_restrict_unprivileged_userns"),
            "{e}"
        );
        assert!(e.contains("AppArmor profile"), "{e}");
        let e = diagnose_setup_failure(
            b,
            "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n",
            Some(1),
        )
        .to_string();
        assert!(e.contains("network namespace could not be set up"), "{e}");
        assert!(e.contains("share_net"), "{e}");
        let e = diagnose_setup_failure(b, "", Some(3)).to_string();
        assert!(e.contains("code 3"), "{e}");
    }
}
