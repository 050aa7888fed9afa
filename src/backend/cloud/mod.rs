//! What the three cloud backends (E2B, Daytona, OpenSandbox) share that
//! is not HTTP: the one provisioning flow over a small per-service
//! protocol ([`provision`]), the records of which sandbox holds which
//! workspace ([`records`]), and waiting for a sandbox to reach a state
//! ([`state`]). The HTTP layer itself is `backend::http`.
//!
//! A service module implements [`CloudService`] (list one page, create,
//! wake, connect, pause, resume, renew, delete) and gets the whole
//! [`Provisioner`](crate::backend::Provisioner) from [`CloudProvisioner`].

pub mod provision;
pub mod records;
pub mod state;

pub use provision::{CloudProvisioner, CloudService, Listed, Page};
pub use records::{Known, labels_for, newest, workspaces};
pub use state::{StateCheck, wait_for_state};
