//! The typed event bus: how the TUI and headless commands see the engine
//! live.
//!
//! Bounded (a `tokio::sync::broadcast` ring): publishing never waits, a slow
//! subscriber is never able to block the engine, and when it falls behind it
//! is told how many events it missed ([`Received::Missed`]). Nothing here
//! formats text for a screen.

use std::time::SystemTime;

use bytes::Bytes;
use serde::Serialize;

use super::bus::{self, Bus};

use crate::backend::{ChangeKind, Health, StreamKind};

/// Default ring size of a bus, in events.
pub const DEFAULT_CAPACITY: usize = 4096;

/// Most bytes of output one [`Event::CommandOutput`] carries: with
/// [`DEFAULT_CAPACITY`] events a lagging subscriber holds at most 16 MiB
/// of output however much a command prints.
pub const OUTPUT_EVENT_BYTES: usize = 4096;

/// Least time between two [`Event::CommandOutput`] of one stream of one
/// command (20 a second).
pub const OUTPUT_EVENT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// Lifecycle state of a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum WorkspaceState {
    /// Being provisioned or initialised.
    Provisioning,
    /// Ready for tool calls.
    Ready,
    /// Provisioning or initialisation failed.
    Failed {
        /// Human-readable reason.
        reason: String,
    },
    /// A lease was taken.
    Leased,
    /// The last lease was released.
    Idle,
    /// Closed by TTL eviction.
    Evicted,
    /// Found again after a restart.
    Reattached,
    /// The provider did not have the workspace's sandbox and a new one
    /// was made (first use, or the old one is gone). `files_kept`: its
    /// workdir already held files (a bind mount, volume or PVC that
    /// outlived the old sandbox); false for an empty one. A front end
    /// that knows the workspace had a sandbox says so
    /// (`root::sandbox_record`).
    Created {
        /// The new sandbox's workdir held files before setup.
        files_kept: bool,
    },
    /// Closed.
    Closed,
    /// Destroyed with its state.
    Destroyed,
    /// Reset: sessions, data, skills and `.mcp` deleted.
    Reset,
    /// A call found the sandbox under the open workspace gone or stopped
    /// (issue 15); the manager recovers it next.
    Lost {
        /// `gone` or `stopped`.
        health: Health,
        /// The error the call failed with.
        reason: String,
    },
    /// The manager is bringing the sandbox back (once per id, however
    /// many callers saw it lost).
    Recovering,
    /// Recovered with a new sandbox; `notice` says whether files were
    /// kept ("the sandbox was deleted by the service; a new one was
    /// created; files from the old one are lost").
    Replaced {
        /// What happened, for a human.
        notice: String,
    },
    /// Recovered by restarting or resuming the same sandbox ("the sandbox
    /// was stopped; it was restarted; files kept").
    Restarted {
        /// What happened, for a human.
        notice: String,
    },
}

/// What kind of thing was offloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OffloadKind {
    /// Messages appended to `context.jsonl`.
    Context,
    /// A `tool_result-<id>.txt` file.
    ToolResult,
    /// A `data/<sha256><ext>` blob.
    Data,
}

/// One engine event.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// Workspace lifecycle transition.
    Workspace {
        /// New state.
        #[serde(flatten)]
        state: WorkspaceState,
    },
    /// A tool call began.
    ToolStarted {
        /// Call id.
        call_id: String,
        /// Agent id (`""` for none).
        agent: String,
        /// Session id.
        session: String,
        /// Tool name.
        tool: String,
        /// Arguments, bounded like the journal's
        /// (`engine::journal::bounded_args`): long strings cut.
        args: serde_json::Value,
    },
    /// A tool call finished.
    ToolFinished {
        /// Call id.
        call_id: String,
        /// Tool name.
        tool: String,
        /// `success`, `error` or `interrupted`.
        state: String,
        /// Duration in milliseconds.
        duration_ms: u64,
    },
    /// A command (Bash tool or exec) started.
    CommandStarted {
        /// Call id.
        call_id: String,
        /// Session id.
        session: String,
        /// The command line.
        command: String,
    },
    /// Output of a running command, raw bytes, merged: the Bash tool
    /// publishes at most one of these per stream every
    /// [`OUTPUT_EVENT_INTERVAL`], each at most [`OUTPUT_EVENT_BYTES`]
    /// (the newest), so a flood cannot fill the bus; the whole output
    /// goes to the call's output sink and the offload file.
    CommandOutput {
        /// Call id.
        call_id: String,
        /// stdout or stderr.
        stream: StreamKind,
        /// Bytes of this stream left out before `data` (older output that
        /// did not fit the event).
        skipped: u64,
        /// Raw bytes.
        #[serde(serialize_with = "ser_lossy")]
        data: Bytes,
    },
    /// A command finished.
    CommandExited {
        /// Call id.
        call_id: String,
        /// Exit code (`None` if unknown).
        exit_code: Option<i32>,
        /// The timeout fired.
        timed_out: bool,
        /// The call was cancelled.
        cancelled: bool,
        /// Duration in milliseconds.
        duration_ms: u64,
    },
    /// A file in the workspace changed.
    FileChanged {
        /// Backend path.
        path: String,
        /// Change kind.
        kind: ChangeKind,
    },
    /// A skill was installed.
    SkillAdded {
        /// Agent partition.
        agent: String,
        /// Skill name.
        name: String,
    },
    /// A skill was removed.
    SkillRemoved {
        /// Agent partition.
        agent: String,
        /// Skill name.
        name: String,
    },
    /// Something was offloaded.
    OffloadWritten {
        /// Session id (`""` for data blobs).
        session: String,
        /// Kind.
        kind: OffloadKind,
        /// Backend path written.
        path: String,
        /// Bytes written.
        bytes: u64,
    },
    /// MCP server state changed (agent, session, server, state text).
    McpState {
        /// Agent id.
        agent: String,
        /// Session id.
        session: String,
        /// Server name.
        server: String,
        /// New state (`starting`, `ready`, `failed`, ...).
        state: String,
        /// Details: tool count, reason, stderr tail.
        detail: Option<String>,
    },
    /// A log line from the engine.
    Log {
        /// `error`, `warn`, `info`, `debug`.
        level: String,
        /// Module or component.
        source: String,
        /// The message.
        message: String,
    },
}

fn ser_lossy<S: serde::Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(b))
}

/// An event with its sequence number, time and workspace.
#[derive(Debug, Clone, Serialize)]
pub struct Envelope {
    /// Monotonic per bus, starting at 1.
    pub seq: u64,
    /// Wall-clock time of publication.
    #[serde(serialize_with = "ser_time")]
    pub at: SystemTime,
    /// Workspace id the event concerns.
    pub workspace: String,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

fn ser_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let dt: chrono::DateTime<chrono::Utc> = (*t).into();
    s.serialize_str(&dt.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// The bus. Cheap to clone; all clones publish to the same subscribers.
#[derive(Debug, Clone)]
pub struct EventBus {
    bus: Bus<Envelope>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl EventBus {
    /// A bus that keeps at most `capacity` events for a lagging subscriber.
    pub fn new(capacity: usize) -> Self {
        EventBus {
            bus: Bus::new(capacity),
        }
    }

    /// Publishes an event; never blocks, and is a no-op without subscribers.
    pub fn publish(&self, workspace: &str, event: Event) {
        self.bus.publish_with(|seq| Envelope {
            seq,
            at: SystemTime::now(),
            workspace: workspace.to_string(),
            event,
        });
    }

    /// A new subscriber that sees events published from now on.
    pub fn subscribe(&self) -> Subscriber {
        self.bus.subscribe()
    }
}

/// What a subscriber receives: [`Received::Event`] with the next event,
/// or [`Received::Missed`] with how many were dropped for a lagging one.
pub type Received = bus::Received<Envelope>;

/// One subscription to an [`EventBus`] (`recv`, `try_recv`).
pub type Subscriber = bus::Subscriber<Envelope>;

#[cfg(test)]
mod tests {
    use super::*;

    fn log(i: usize) -> Event {
        Event::Log {
            level: "info".into(),
            source: "test".into(),
            message: i.to_string(),
        }
    }

    #[tokio::test]
    async fn slow_subscriber_is_told_what_it_missed() {
        let bus = EventBus::new(4);
        let mut sub = bus.subscribe();
        for i in 0..10 {
            bus.publish("w", log(i));
        }
        match sub.recv().await.unwrap() {
            Received::Missed(n) => assert_eq!(n, 6),
            other => panic!("expected Missed, got {other:?}"),
        }
        match sub.recv().await.unwrap() {
            Received::Event(e) => assert_eq!(e.seq, 7),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn publish_without_subscribers_is_fine() {
        let bus = EventBus::default();
        bus.publish("w", log(0));
    }

    #[test]
    fn events_serialize_as_json_lines() {
        let bus = EventBus::new(4);
        let mut sub = bus.subscribe();
        bus.publish(
            "w",
            Event::Workspace {
                state: WorkspaceState::Failed {
                    reason: "boom".into(),
                },
            },
        );
        let Some(Received::Event(e)) = sub.try_recv() else {
            panic!()
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "workspace");
        assert_eq!(v["state"], "failed");
        assert_eq!(v["reason"], "boom");
    }
}
