//! The E2B backend: the control plane (`e2b/openapi.yml`) makes, finds,
//! pauses and kills sandboxes; the in-sandbox daemon envd runs commands over
//! Connect-RPC (`process.Process/Start`, JSON codec, length-prefixed
//! envelopes) and serves files (`/files`, `filesystem.Filesystem/*`).
//! Contract §7.4; wire details in `MINIMAL-SURFACE.md` §1.
//!
//! Differences from the reference, on purpose: the workspace-id metadata is
//! `wsbench.workspace.id` and user metadata can never override it; a
//! command timeout kills the process with `SendSignal` and is reported as
//! `timed_out` (C15); the Connect deadline sent is never shorter than the
//! command's own timeout, and absent when there is none (C19); stdout and
//! stderr stay separate raw bytes; the provider's expiry is renewed by
//! [`Provisioner::keep_alive`](crate::backend::Provisioner::keep_alive) (docs/contract.md §11 point 15).
//!
//! The module by job: [`options`] (the profile's options), [`service`]
//! (the control plane, as a [`CloudService`](crate::backend::cloud::CloudService)),
//! [`sandbox`] (envd: URLs, headers, unary calls, errors), `connect`
//! (Connect envelopes and Start-stream events), `exec` (commands and
//! processes), `files` (envd's file API), `pty` (a terminal: `Start` with
//! `pty`, `SendInput`, `Update`).

mod connect;
mod exec;
mod files;
pub mod options;
mod pty;
pub mod sandbox;
pub mod service;

pub use connect::envelope;
pub use options::E2bOptions;
pub use service::{E2bProvisioner, E2bService};

/// Service name in errors.
const SERVICE: &str = "e2b";
/// envd's port inside every sandbox.
pub(crate) const ENVD_PORT: u16 = 49983;
