//! What the three cloud backends (E2B, Daytona, OpenSandbox) share that
//! is not HTTP: [`RemoteSandbox`] and its blanket
//! [`Sandbox`](crate::backend::Sandbox) impl ([`sandbox`]), the parts of
//! running a command every service needs ([`command`]), the one
//! provisioning flow over a small per-service protocol ([`provision`]),
//! the records of which sandbox holds which workspace ([`records`]), and
//! waiting for a sandbox to reach a state ([`state`]). The HTTP layer
//! itself is `backend::http`.
//!
//! A service module implements [`CloudService`] (list one page, create,
//! wake, connect, pause, resume, renew, delete) and gets the whole
//! [`Provisioner`](crate::backend::Provisioner) from [`CloudProvisioner`].

pub mod command;
pub mod provision;
pub mod records;
pub mod sandbox;
pub mod state;

pub use crate::backend::path::shell_quote;
pub use command::{
    MARKER_VAR, cancelled, command_line, env_prefix, exec_capture, exec_request_capture,
    kill_marked, kill_marked_line, new_marker, shell_mkdir, sleep_until,
};
pub use provision::{CloudProvisioner, CloudService, Listed, Page, workspace_filter};
pub use records::{Known, labels_for, newest, workspaces};
pub use sandbox::{KILL_GRACE, RemoteSandbox, UPLOAD_TIMEOUT, read_all, slice_range};
pub use state::{StateCheck, wait_for_state};
