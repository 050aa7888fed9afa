//! The OpenSandbox backend: the lifecycle server
//! (`opensandbox/sandbox-lifecycle.yml`, header `OPEN-SANDBOX-API-KEY`)
//! makes, finds, pauses, resumes, renews and deletes sandboxes and tells
//! where each sandbox's execd listens (port 44772); execd
//! (`opensandbox/execd-api.yaml`) runs commands with an event stream and
//! serves files. Contract §7.7; wire details in `MINIMAL-SURFACE.md` §3.
//!
//! What the service cannot do, stated in [`Capabilities`](crate::backend::Capabilities): execd re-splits
//! output into lines and replaces invalid UTF-8, so output is not
//! byte-exact (`byte_exact_output = false`: each line event becomes the
//! line plus `\n`, never a heuristic join like the reference's); commands
//! take no stdin (`exec_stdin = false`, `processes = false`).
//!
//! Differences from the reference, on purpose: uploads send `mode` as the
//! octal digits `644` (the reference's `0o644` became `0o420` on the
//! server); a timeout interrupts the command (`DELETE /command`) and is
//! reported as `timed_out`; the expiry is renewed by
//! [`Provisioner::keep_alive`](crate::backend::Provisioner::keep_alive).
//!
//! The module by job: [`options`] (the profile's options), [`service`]
//! (the lifecycle server, as a [`CloudService`](crate::backend::cloud::CloudService)),
//! [`sandbox`] (execd: URLs, headers), `events` (execd's event stream),
//! `exec` (commands), `session` (bash sessions: the line-mode shell),
//! `files` (execd's file API).

mod events;
mod exec;
mod files;
pub mod options;
pub mod sandbox;
pub mod service;
mod session;

pub use options::OpenSandboxOptions;
pub use service::{OpenSandboxProvisioner, OpenSandboxService};

/// Service name in errors.
const SERVICE: &str = "opensandbox";
/// execd's port inside every sandbox.
pub const EXECD_PORT: u16 = 44772;
