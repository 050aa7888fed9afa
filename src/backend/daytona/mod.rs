//! The Daytona backend: the REST API (`daytona/api/openapi.yaml`) makes,
//! finds, starts, stops, recovers and deletes sandboxes; the in-sandbox
//! toolbox (`daytona/toolbox/openapi.yaml`, reached at
//! `{toolboxProxyUrl}/{sandboxId}`) runs commands and serves files.
//! Contract §7.5; wire details in `MINIMAL-SURFACE.md` §2.
//!
//! Commands run, by default, in a throw-away toolbox *session*: the
//! command is started asynchronously and its log is followed over a
//! WebSocket whose frames tag stdout with `\x01\x01\x01` and stderr with
//! `\x02\x02\x02` (a tag may split across frames), so stdout and stderr
//! stay separate and byte-exact, unlike the reference's `2>&1` (contract
//! §11 point 18). The blocking `/process/execute` call is the alternative
//! ([`DaytonaExecMode::Execute`]); it always sends an explicit timeout,
//! never leaving the daemon's hidden 10 s default in force, and its output
//! is the daemon's merged text. A Daytona answer of exit code -1 with no
//! output means the toolbox could not start the command (C17); it is
//! reported as [`BackendError::Spawn`](crate::backend::BackendError::Spawn), never as the command's status.
//!
//! The module by job: [`options`] (the profile's options), [`service`]
//! (the REST API, as a [`CloudService`](crate::backend::cloud::CloudService)),
//! [`sandbox`] (the toolbox: URLs, errors), `logs` (splitting the
//! followed log), `exec` (session and execute commands), `files` (the
//! toolbox's file API), `pty` (a terminal: the toolbox's PTY sessions).

mod exec;
mod files;
mod logs;
pub mod options;
mod pty;
pub mod sandbox;
pub mod service;

pub use options::{DaytonaExecMode, DaytonaOptions};
pub use service::{DaytonaProvisioner, DaytonaService};

/// Service name in errors.
const SERVICE: &str = "daytona";
/// The toolbox picks its log format from this header: versions from
/// 0.167.0 get JSON with separate stdout and stderr
/// (`MINIMAL-SURFACE.md` §2.1). This is the SDK version the specs were
/// matched against.
const SDK_VERSION: &str = "0.226.1";
