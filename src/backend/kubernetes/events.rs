//! What the Kubernetes backend reports while it works ([`K8sEvent`]) and where it goes.

use std::sync::Arc;

use serde::Serialize;

use crate::backend::{BackendNotice, NoticeLevel};

/// What the Kubernetes backend reports while it works.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum K8sEvent {
    /// An object was created (`Namespace`, `PersistentVolumeClaim`, `Pod`).
    Created {
        /// Object kind.
        kind: String,
        /// Object name.
        name: String,
    },
    /// An object was deleted.
    Deleted {
        /// Object kind.
        kind: String,
        /// Object name.
        name: String,
    },
    /// A Pod's phase (or waiting reason) changed.
    PodPhase {
        /// Pod name.
        pod: String,
        /// Phase (`Pending`, `Running`, ...).
        phase: String,
        /// Waiting reason or scheduling message, when there is one.
        reason: Option<String>,
    },
    /// The Pod cannot be scheduled or its image cannot be pulled.
    Problem {
        /// Pod name.
        pod: String,
        /// Kubernetes reason (`Unschedulable`, `ImagePullBackOff`, ...).
        reason: String,
        /// Kubernetes message.
        message: String,
    },
    /// A command started.
    ExecStarted {
        /// Pod name.
        pod: String,
        /// Program and arguments.
        argv: Vec<String>,
    },
    /// A command ended.
    ExecExited {
        /// Pod name.
        pod: String,
        /// Exit code from the status channel.
        exit_code: Option<i32>,
        /// Wall time in milliseconds.
        duration_ms: u64,
    },
}

/// Receives [`K8sEvent`]s; called inline, so it must not block.
pub type EventSink = Arc<dyn Fn(K8sEvent) + Send + Sync>;

pub(super) fn emit(sink: &Option<EventSink>, ev: K8sEvent) {
    if let Some(s) = sink {
        s(ev);
    }
}

/// Most characters of a command line shown in a notice.
pub(super) const NOTICE_ARGV_CHARS: usize = 160;

impl K8sEvent {
    /// How much the event matters in a log: problems are errors; a phase
    /// other than `Pending` or `Running` (`Failed`, `Terminating`) a
    /// warning; objects made or deleted and other phase changes info;
    /// each exec debug (file operations are execs too, so at a higher
    /// level they would drown the rest).
    pub fn level(&self) -> NoticeLevel {
        match self {
            K8sEvent::Problem { .. } => NoticeLevel::Error,
            K8sEvent::PodPhase { phase, .. }
                if !matches!(phase.as_str(), "Pending" | "Running") =>
            {
                NoticeLevel::Warn
            }
            K8sEvent::Created { .. } | K8sEvent::Deleted { .. } | K8sEvent::PodPhase { .. } => {
                NoticeLevel::Info
            }
            K8sEvent::ExecStarted { .. } | K8sEvent::ExecExited { .. } => NoticeLevel::Debug,
        }
    }

    /// One line for a human (`pod wsbench-x-1a2b: Pending
    /// (ContainerCreating)`); long command lines are cut.
    pub fn message(&self) -> String {
        match self {
            K8sEvent::Created { kind, name } => format!("created {kind} {name}"),
            K8sEvent::Deleted { kind, name } => format!("deleted {kind} {name}"),
            K8sEvent::PodPhase { pod, phase, reason } => match reason {
                Some(r) => format!("pod {pod}: {phase} ({r})"),
                None => format!("pod {pod}: {phase}"),
            },
            K8sEvent::Problem {
                pod,
                reason,
                message,
            } => format!("pod {pod} cannot start: {reason}: {message}"),
            K8sEvent::ExecStarted { pod, argv } => {
                let line = argv.join(" ");
                let cut: String = line.chars().take(NOTICE_ARGV_CHARS).collect();
                let more = if cut.len() < line.len() { "…" } else { "" };
                format!("exec in {pod}: {cut}{more}")
            }
            K8sEvent::ExecExited {
                pod,
                exit_code,
                duration_ms,
            } => match exit_code {
                Some(c) => format!("exec in {pod} exited {c} after {duration_ms} ms"),
                None => format!("exec in {pod} ended without an exit code after {duration_ms} ms"),
            },
        }
    }

    /// The event as a [`BackendNotice`] about `workspace_id`.
    pub fn notice(&self, workspace_id: &str) -> BackendNotice {
        BackendNotice {
            workspace_id: workspace_id.to_string(),
            source: "kubernetes".into(),
            level: self.level(),
            message: self.message(),
        }
    }
}
