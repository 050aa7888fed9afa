//! File operations done with small POSIX `sh` scripts inside a sandbox,
//! for every backend that has no file API of its own for them: Kubernetes
//! (all of them), Docker without a bind mount (all but the archive API's
//! reads and writes), and the cloud backends (remove, rename, mkdir,
//! exclusive create, and the link check in front of their native file
//! API). One set of scripts, one exit-code table and one runner, so the
//! backends cannot drift apart again.
//!
//! * [`confine`]: the link check every script starts with (a path under
//!   the workspace that a link leads out of is refused).
//! * [`scripts`]: the script bodies, one per operation.
//! * [`codes`]: the exit codes the scripts use and their mapping to
//!   [`BackendError`](super::BackendError)s.
//! * [`runner`]: [`ScriptHost`] (anything that can run a command with
//!   stdin to completion) and the call that runs one script on it.
//! * [`ops`]: the operations themselves (read, write, append, exclusive
//!   create, list, stat, remove, rename, mkdir, resolve), generic over
//!   [`ScriptHost`].
//! * [`parse`]: the stat records the list and stat scripts print.
//! * [`marker`]: the process marker and the one script that kills every
//!   process carrying it.
//!
//! Where the copies this module replaces disagreed, the safer behaviour
//! was kept: removing or renaming the workspace root itself is refused
//! on every backend (Kubernetes did, Docker and the cloud backends did
//! not or did it differently).

pub(crate) mod codes;
pub(crate) mod confine;
pub mod marker;
pub(crate) mod ops;
pub(crate) mod parse;
pub(crate) mod runner;
pub(crate) mod scripts;

pub(crate) use confine::Follow;
pub(crate) use runner::ScriptHost;

#[cfg(test)]
mod tests;
