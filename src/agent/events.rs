//! The agent's typed event stream: what a TUI pane or a headless printer
//! subscribes to while an agent runs.
//!
//! Bounded like the engine bus (a `tokio::sync::broadcast` ring): the agent
//! never waits for a subscriber, and a subscriber that falls behind is told
//! how many events it missed. The same steps also reach the workspace bus
//! as `Event::Log { source: "agent", .. }` lines (text deltas excepted),
//! next to the `Tool*` and `OffloadWritten` events the engine publishes.

use std::time::SystemTime;

use serde::Serialize;

use crate::engine::bus::{Bus, Received, Subscriber};

/// Ring size of an agent's event stream, in events. Text deltas are small
/// and frequent, so this is larger than the engine bus's.
pub const AGENT_EVENT_CAPACITY: usize = 8192;

/// Why a reply ended (the reference's `ReplyFinishedReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model answered without calling a tool.
    Completed,
    /// Stopped by the user.
    Interrupted,
    /// `max_iters` model turns without a final answer.
    ExceedMaxIters,
    /// The model call failed; the error is recorded in the conversation.
    Error,
}

impl FinishReason {
    /// Lower-case name, as in `Msg.finished_reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Completed => "completed",
            FinishReason::Interrupted => "interrupted",
            FinishReason::ExceedMaxIters => "exceed_max_iters",
            FinishReason::Error => "error",
        }
    }
}

/// What was offloaded by the agent's policies (docs/contract.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentOffload {
    /// The overflow of a tool result, to `tool_result-<id>.txt`.
    ToolResult,
    /// Compressed messages, appended to `context.jsonl`.
    Context,
    /// An image past `max_image_num`, to `data/`.
    Image,
}

/// One step of an agent run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A reply to a user message began.
    ReplyStarted {
        /// Session id.
        session: String,
        /// Reply id (= the id of the assistant message it fills).
        reply_id: String,
        /// The user's text.
        user_text: String,
    },
    /// A model turn began.
    TurnStarted {
        /// Reply id.
        reply_id: String,
        /// 1-based turn number within the reply.
        turn: usize,
        /// Estimated size of the request in tokens.
        estimated_tokens: usize,
    },
    /// More answer text streamed in.
    TextDelta {
        /// Reply id.
        reply_id: String,
        /// The new text.
        delta: String,
    },
    /// A tool call is being streamed in (its arguments arrive as
    /// [`AgentEvent::ToolCallDelta`]).
    ToolCallStarted {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolCallDelta {
        /// Call id.
        call_id: String,
        /// The next characters.
        delta: String,
    },
    /// A model turn finished.
    TurnFinished {
        /// Reply id.
        reply_id: String,
        /// The turn's whole text.
        text: String,
        /// Number of tool calls it made.
        tool_calls: usize,
        /// Tokens reported by the server, if any: `(input, output)`.
        usage: Option<(u64, u64)>,
    },
    /// A tool call is about to run.
    ToolCall {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Raw JSON arguments as the model wrote them.
        input: String,
    },
    /// A tool call finished and its result was recorded.
    ToolResult {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// `success`, `error`, `interrupted`.
        state: String,
        /// The result text as the model sees it (after truncation).
        text: String,
        /// Characters of the full result.
        full_chars: usize,
        /// Backend path of the offloaded overflow, when it was split.
        offloaded_to: Option<String>,
        /// Duration in milliseconds.
        duration_ms: u64,
    },
    /// A policy offloaded something.
    OffloadWritten {
        /// What.
        kind: AgentOffload,
        /// Backend path (or `workspace:///` URL for images).
        path: String,
        /// Characters (tool results), messages (context) or bytes (images).
        size: u64,
    },
    /// The oldest messages were compressed into a summary.
    CompressionDone {
        /// Backend path of `context.jsonl`.
        path: String,
        /// Messages offloaded (a split boundary message counts once).
        compressed_messages: usize,
        /// Messages kept in the live context.
        kept_messages: usize,
        /// Estimated tokens before compression.
        tokens_before: usize,
        /// Estimated tokens after.
        tokens_after: usize,
        /// The summary now sent after the system prompt.
        summary: String,
        /// True when the model could not summarise and a mechanical
        /// summary was used instead.
        fallback: bool,
    },
    /// Step mode is waiting for [`super::StepControl::step`].
    StepPaused {
        /// What runs next.
        next: String,
    },
    /// Something went wrong; the run goes on where it can.
    Error {
        /// The reference's error classification.
        kind: String,
        /// Message.
        message: String,
    },
    /// A reply ended.
    ReplyFinished {
        /// Reply id.
        reply_id: String,
        /// Why.
        reason: FinishReason,
        /// Text of the final answer (may be empty).
        text: String,
    },
}

impl AgentEvent {
    /// Lines for the workspace bus and the session's agent log; `None`
    /// for streaming pieces, which only the typed stream carries.
    pub fn summary_line(&self) -> Option<String> {
        fn short(s: &str, max: usize) -> String {
            let one_line = s.replace('\n', " ⏎ ");
            if one_line.chars().count() <= max {
                one_line
            } else {
                let cut: String = one_line.chars().take(max).collect();
                format!("{cut}…")
            }
        }
        Some(match self {
            AgentEvent::ReplyStarted {
                session, user_text, ..
            } => format!(
                "reply started in session {session}: {}",
                short(user_text, 160)
            ),
            AgentEvent::TurnStarted {
                turn,
                estimated_tokens,
                ..
            } => format!("model turn {turn} started (~{estimated_tokens} tokens of context)"),
            AgentEvent::TextDelta { .. }
            | AgentEvent::ToolCallStarted { .. }
            | AgentEvent::ToolCallDelta { .. } => return None,
            AgentEvent::TurnFinished {
                text, tool_calls, ..
            } => format!(
                "model turn finished: {} tool call(s); text: {}",
                tool_calls,
                short(text, 200)
            ),
            AgentEvent::ToolCall { name, input, .. } => {
                format!("tool call {name} {}", short(input, 200))
            }
            AgentEvent::ToolResult {
                name,
                state,
                full_chars,
                offloaded_to,
                ..
            } => match offloaded_to {
                Some(p) => format!(
                    "tool result {name}: {state}, {full_chars} chars, overflow offloaded to {p}"
                ),
                None => format!("tool result {name}: {state}, {full_chars} chars"),
            },
            AgentEvent::OffloadWritten { kind, path, size } => {
                format!("offload written ({kind:?}): {path} ({size})")
            }
            AgentEvent::CompressionDone {
                path,
                compressed_messages,
                kept_messages,
                tokens_before,
                tokens_after,
                ..
            } => format!(
                "context compressed: {compressed_messages} message(s) offloaded to {path}, \
                 {kept_messages} kept, ~{tokens_before} → ~{tokens_after} tokens"
            ),
            AgentEvent::StepPaused { next } => format!("step mode: waiting before {next}"),
            AgentEvent::Error { kind, message } => format!("error ({kind}): {message}"),
            AgentEvent::ReplyFinished { reason, text, .. } => {
                format!("reply finished ({}): {}", reason.as_str(), short(text, 200))
            }
        })
    }

    /// A copy for the session's agent log, with long texts clipped to
    /// `max` characters (the full texts are in the conversation and the
    /// tool-result files; the log is for following the steps).
    pub fn clipped(&self, max: usize) -> AgentEvent {
        fn clip(s: &str, max: usize) -> String {
            if s.chars().count() <= max {
                s.to_string()
            } else {
                let head: String = s.chars().take(max).collect();
                format!("{head}… [clipped]")
            }
        }
        let mut e = self.clone();
        match &mut e {
            AgentEvent::ToolResult { text, .. }
            | AgentEvent::TurnFinished { text, .. }
            | AgentEvent::ReplyFinished { text, .. } => *text = clip(text, max),
            AgentEvent::CompressionDone { summary, .. } => *summary = clip(summary, max),
            AgentEvent::ToolCall { input, .. } => *input = clip(input, max),
            AgentEvent::ReplyStarted { user_text, .. } => *user_text = clip(user_text, max),
            _ => {}
        }
        e
    }

    /// Log level for the workspace bus.
    pub fn level(&self) -> &'static str {
        match self {
            AgentEvent::Error { .. } => "error",
            AgentEvent::ReplyFinished {
                reason: FinishReason::Error,
                ..
            } => "warn",
            _ => "info",
        }
    }
}

/// An event with its sequence number and time.
#[derive(Debug, Clone, Serialize)]
pub struct AgentEnvelope {
    /// Monotonic per stream, from 1.
    pub seq: u64,
    /// Wall-clock time, RFC 3339 with milliseconds.
    pub at: String,
    /// The event.
    #[serde(flatten)]
    pub event: AgentEvent,
}

/// The sending side; cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentEvents {
    bus: Bus<AgentEnvelope>,
}

impl Default for AgentEvents {
    fn default() -> Self {
        Self::new(AGENT_EVENT_CAPACITY)
    }
}

impl AgentEvents {
    /// A stream keeping at most `capacity` events for a lagging subscriber.
    pub fn new(capacity: usize) -> Self {
        AgentEvents {
            bus: Bus::new(capacity),
        }
    }

    /// Publishes; never blocks. Returns the envelope (for the log file).
    pub fn publish(&self, event: AgentEvent) -> AgentEnvelope {
        self.bus.publish_returning(|seq| {
            let at: chrono::DateTime<chrono::Utc> = SystemTime::now().into();
            AgentEnvelope {
                seq,
                at: at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                event,
            }
        })
    }

    /// A subscriber that sees events published from now on.
    pub fn subscribe(&self) -> AgentSubscriber {
        self.bus.subscribe()
    }
}

/// What a subscriber receives: [`AgentReceived::Event`] with the next
/// event, or [`AgentReceived::Missed`] with how many a lagging one lost.
pub type AgentReceived = Received<AgentEnvelope>;

/// One subscription to an agent's stream (`recv`, `try_recv`); `recv`
/// gives `None` once the agent and every handle are dropped.
pub type AgentSubscriber = Subscriber<AgentEnvelope>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_stay_off_the_bus_and_events_serialise_tagged() {
        let d = AgentEvent::TextDelta {
            reply_id: "r".into(),
            delta: "x".into(),
        };
        assert!(d.summary_line().is_none());
        let events = AgentEvents::new(4);
        let mut sub = events.subscribe();
        events.publish(AgentEvent::StepPaused {
            next: "model turn".into(),
        });
        let Some(AgentReceived::Event(e)) = sub.try_recv() else {
            panic!("no event")
        };
        let v = serde_json::to_value(&*e).unwrap();
        assert_eq!(v["type"], "step_paused");
        assert_eq!(v["seq"], 1);
    }
}
