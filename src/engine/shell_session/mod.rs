//! Session shells: a long-lived shell per (workspace, session) that keeps
//! `cd`, `export`, functions and traps between commands (issue 17 point
//! 4), with input and Ctrl-C for the command that runs (point 3). The
//! Command pane and the Bash tool (`[tools] bash_session = true`) share
//! this one implementation.
//!
//! Files, one job each:
//! * [`types`]: options, requests, outcomes, errors.
//! * [`script`]: the shell text (set-up, per-command frame, quoting).
//! * [`frame`]: finding a command's end token in its output.
//! * [`live`]: one shell process: starting it, reading to an end token.
//! * [`input`]: the stdin writer and Ctrl-C of a running command.
//! * [`session`]: [`ShellSession`], restarts and notices; [`run_once`].
//! * [`registry`]: [`ShellSessions`], one shell per session id.

mod frame;
mod input;
mod live;
pub mod registry;
mod script;
pub mod session;
pub mod types;

pub use registry::ShellSessions;
pub use session::{ShellSession, run_once};
pub use types::{InputMsg, RunOutcome, RunRequest, ShellError, ShellOptions};
