//! What the Docker backend reports while it works ([`DockerEvent`]) and where it goes.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::backend::{BackendNotice, NoticeLevel};

/// What the Docker backend reports while it works (the manager maps these
/// onto its event bus).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DockerEvent {
    /// A line of image pull progress.
    PullProgress {
        /// Image being pulled.
        image: String,
        /// Docker's status text (`Downloading`, `Pull complete`, ...).
        status: String,
        /// Layer id, when the line is about one layer.
        layer: Option<String>,
        /// Bytes done, when known.
        current: Option<i64>,
        /// Bytes in all, when known.
        total: Option<i64>,
    },
    /// A container was created.
    Created {
        /// Workspace id.
        workspace_id: String,
        /// Container id.
        container: String,
        /// Container name.
        name: String,
    },
    /// A container was started (or unpaused).
    Started {
        /// Container id.
        container: String,
    },
    /// A container was stopped (or paused).
    Stopped {
        /// Container id.
        container: String,
    },
    /// A container was removed.
    Removed {
        /// Container id.
        container: String,
    },
    /// An exec began.
    ExecStarted {
        /// Container id.
        container: String,
        /// Exec id.
        exec_id: String,
        /// Program and arguments.
        argv: Vec<String>,
    },
    /// An exec ended.
    ExecExited {
        /// Container id.
        container: String,
        /// Exec id.
        exec_id: String,
        /// Exit code from `inspect_exec`.
        exit_code: Option<i32>,
        /// Wall time (zero when not measured).
        #[serde(serialize_with = "ser_ms")]
        duration: Duration,
    },
    /// A provisioner operation failed (the pull, creating or starting the
    /// container, stopping or removing it); the error itself is returned
    /// to the caller as well.
    Problem {
        /// What failed: `create`, `attach`, `suspend`, `resume` or
        /// `destroy`.
        action: String,
        /// The error, as displayed.
        message: String,
    },
}

/// Most characters of a command line shown in a notice.
pub(super) const NOTICE_ARGV_CHARS: usize = 160;

/// The short form of a container id `docker ps` shows.
pub(super) fn short_id(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

impl DockerEvent {
    /// How much the event matters in a log: problems are errors;
    /// containers created, started, stopped or removed and pull steps
    /// info; byte counts of a pull and each exec debug (file operations
    /// without a bind mount are execs too, so at a higher level they
    /// would drown the rest).
    pub fn level(&self) -> NoticeLevel {
        match self {
            DockerEvent::Problem { .. } => NoticeLevel::Error,
            DockerEvent::PullProgress {
                current: Some(_), ..
            }
            | DockerEvent::ExecStarted { .. }
            | DockerEvent::ExecExited { .. } => NoticeLevel::Debug,
            DockerEvent::PullProgress { .. }
            | DockerEvent::Created { .. }
            | DockerEvent::Started { .. }
            | DockerEvent::Stopped { .. }
            | DockerEvent::Removed { .. } => NoticeLevel::Info,
        }
    }

    /// One line for a human (`created container wsbench-x (1a2b3c4d5e6f)`);
    /// containers by their short id, long command lines cut.
    pub fn message(&self) -> String {
        match self {
            DockerEvent::PullProgress {
                image,
                status,
                layer,
                current,
                total,
            } => {
                let layer = layer
                    .as_deref()
                    .map(|l| format!("{l}: "))
                    .unwrap_or_default();
                let bytes = match (current, total) {
                    (Some(c), Some(t)) if *t > 0 => format!(" ({c}/{t} bytes)"),
                    (Some(c), _) => format!(" ({c} bytes)"),
                    _ => String::new(),
                };
                format!("pulling {image}: {layer}{status}{bytes}")
            }
            DockerEvent::Created {
                container, name, ..
            } => format!("created container {name} ({})", short_id(container)),
            DockerEvent::Started { container } => {
                format!("started container {}", short_id(container))
            }
            DockerEvent::Stopped { container } => {
                format!("stopped container {}", short_id(container))
            }
            DockerEvent::Removed { container } => {
                format!("removed container {}", short_id(container))
            }
            DockerEvent::ExecStarted {
                container, argv, ..
            } => {
                let line = argv.join(" ");
                let cut: String = line.chars().take(NOTICE_ARGV_CHARS).collect();
                let more = if cut.len() < line.len() { "…" } else { "" };
                format!("exec in {}: {cut}{more}", short_id(container))
            }
            DockerEvent::ExecExited {
                container,
                exit_code,
                duration,
                ..
            } => {
                let ms = duration.as_millis();
                match exit_code {
                    Some(c) => format!("exec in {} exited {c} after {ms} ms", short_id(container)),
                    None => format!(
                        "exec in {} ended without an exit code after {ms} ms",
                        short_id(container)
                    ),
                }
            }
            DockerEvent::Problem { action, message } => format!("{action} failed: {message}"),
        }
    }

    /// The event as a [`BackendNotice`] about `workspace_id` (source
    /// `docker`).
    pub fn notice(&self, workspace_id: &str) -> BackendNotice {
        BackendNotice {
            workspace_id: workspace_id.to_string(),
            source: "docker".into(),
            level: self.level(),
            message: self.message(),
        }
    }
}

pub(super) fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Receives [`DockerEvent`]s; called inline, so it must not block.
pub type EventSink = Arc<dyn Fn(DockerEvent) + Send + Sync>;

pub(super) fn emit(sink: &Option<EventSink>, ev: DockerEvent) {
    if let Some(s) = sink {
        s(ev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_become_notices_with_levels_and_one_line_messages() {
        let cid = "0123456789abcdef0123";
        let pull = |current| DockerEvent::PullProgress {
            image: "debian:bookworm-slim".into(),
            status: "Downloading".into(),
            layer: Some("1a2b".into()),
            current,
            total: Some(100),
        };
        let n = pull(Some(40)).notice("ws-1");
        assert_eq!(
            (n.workspace_id.as_str(), n.source.as_str(), n.level),
            ("ws-1", "docker", NoticeLevel::Debug)
        );
        assert_eq!(
            n.message,
            "pulling debian:bookworm-slim: 1a2b: Downloading (40/100 bytes)"
        );
        assert_eq!(pull(None).level(), NoticeLevel::Info);
        let created = DockerEvent::Created {
            workspace_id: "ws-1".into(),
            container: cid.into(),
            name: "wsbench-ws-1".into(),
        };
        assert_eq!(created.level(), NoticeLevel::Info);
        assert_eq!(
            created.message(),
            "created container wsbench-ws-1 (0123456789ab)"
        );
        for (ev, text) in [
            (
                DockerEvent::Stopped {
                    container: cid.into(),
                },
                "stopped container 0123456789ab",
            ),
            (
                DockerEvent::Removed {
                    container: "short".into(),
                },
                "removed container short",
            ),
        ] {
            assert_eq!(
                (ev.level(), ev.message().as_str()),
                (NoticeLevel::Info, text)
            );
        }
        let exec = DockerEvent::ExecStarted {
            container: cid.into(),
            exec_id: "e".into(),
            argv: vec!["sh".into(), "-c".into(), "x".repeat(500)],
        };
        assert_eq!(exec.level(), NoticeLevel::Debug);
        assert!(exec.message().ends_with('…') && exec.message().chars().count() < 200);
        let problem = DockerEvent::Problem {
            action: "create".into(),
            message: "image `x` is not present locally".into(),
        };
        assert_eq!(problem.level(), NoticeLevel::Error);
        assert_eq!(
            problem.message(),
            "create failed: image `x` is not present locally"
        );
    }
}
