//! The local backend's terminal: the program on a host PTY, as the
//! current user, in the workspace directory, with no isolation at all
//! (front ends say so before attaching).

use super::{KILL_GRACE, LocalSandbox, spawn_error};
use crate::backend::host::pty;
use crate::backend::shell::marker::{MARKER_VAR, new_marker};
use crate::backend::{BackendResult, PtyRequest, PtySession};

/// [`Sandbox::pty`](crate::backend::Sandbox::pty) of [`LocalSandbox`].
pub(super) fn start(sb: &LocalSandbox, req: PtyRequest) -> BackendResult<PtySession> {
    let marker = new_marker();
    let mut env = req.env_with_term();
    env.insert(MARKER_VAR.into(), marker.clone());
    let mut cmd = sb.base_command(&req.argv, req.cwd.as_deref(), &env)?;
    super::subreaper::adopt_orphans(&mut cmd);
    pty::start(cmd, req.size, marker, KILL_GRACE).map_err(|e| spawn_error(&req.argv[0], e))
}
