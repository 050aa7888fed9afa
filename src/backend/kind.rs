//! The seven backend kinds and their names (config files, labels, CLI,
//! the workspace instructions).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The seven backend kinds wsbench drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Commands run on the host as the current user; no isolation.
    Local,
    /// One `bwrap` process per exec on a host directory. Config files may
    /// also spell it `bwrap` (the program's and the built-in profile's
    /// name).
    #[serde(alias = "bwrap")]
    Bubblewrap,
    /// One Docker container per workspace.
    Docker,
    /// One Pod + PVC per workspace.
    Kubernetes,
    /// An E2B cloud sandbox.
    E2b,
    /// A Daytona sandbox.
    Daytona,
    /// An OpenSandbox sandbox.
    Opensandbox,
}

impl BackendKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [BackendKind; 7] = [
        BackendKind::Local,
        BackendKind::Bubblewrap,
        BackendKind::Docker,
        BackendKind::Kubernetes,
        BackendKind::E2b,
        BackendKind::Daytona,
        BackendKind::Opensandbox,
    ];

    /// Lower-case name used in config files, labels and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Bubblewrap => "bubblewrap",
            BackendKind::Docker => "docker",
            BackendKind::Kubernetes => "kubernetes",
            BackendKind::E2b => "e2b",
            BackendKind::Daytona => "daytona",
            BackendKind::Opensandbox => "opensandbox",
        }
    }

    /// Label used in the workspace instructions (docs/contract.md §1.1).
    pub fn instructions_label(self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Bubblewrap => "Bubblewrap-based",
            BackendKind::Docker => "Docker-based",
            BackendKind::Kubernetes => "Kubernetes-based",
            BackendKind::E2b => "E2B-based",
            BackendKind::Daytona => "Daytona-based",
            BackendKind::Opensandbox => "OpenSandbox",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
