//! Health of one live MCP server: its state machine, its bounded log and
//! the tail of its stderr.
//!
//! States follow the issue's machine: `declared → starting → ready(tool
//! count) | failed(reason, exit status, stderr tail) → stopped`, plus
//! `reconnecting(reason)` while a lost server is brought back on its own
//! (an expired HTTP session re-initialized, a stdio server that exited
//! started again; issue 15 point 5), which ends `ready` or `failed`. Each
//! transition is published as [`Event::McpState`]; each log line as
//! [`Event::Log`] with source `mcp:<name>`, rate-limited so a server that
//! floods stderr (10 MB and more) cannot flood the bus.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use serde::Serialize;

use super::redact::Redactor;
use crate::engine::events::{Event, EventBus};

/// Lines kept in a server's own log ([`ServerLog::lines`]).
pub const LOG_LINES_KEPT: usize = 500;

/// Longest log line kept, in bytes; longer lines are cut (with a note of
/// the full length) so one 20 MB stray line cannot fill memory.
pub const LOG_LINE_MAX: usize = 4096;

/// Log events a server may publish per second before the rest are
/// counted and summarised (its own log keeps the newest lines anyway).
pub const LOG_EVENTS_PER_SEC: u32 = 200;

/// State of one server instance.
///
/// Serialises as one flat object with the same keys for every state, so
/// a JSON consumer never has to guess which are present: `state`
/// ([`McpState::name`]), `tool_count` (ready only), `reason` (failed
/// and reconnecting), `exit_status` and `stderr_tail` (failed only); a key that does not
/// apply to the state is `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpState {
    /// Declared for the pair; not started (lazy) or evicted.
    Declared,
    /// Being started / connected.
    Starting,
    /// Connected; `tool_count` is the number of tools offered (after
    /// `enable_tools` / `disable_tools`).
    Ready {
        /// Tool count.
        tool_count: usize,
    },
    /// Could not start, or died.
    Failed {
        /// What went wrong, one line.
        reason: String,
        /// Exit status of a stdio server process (`128 + signal` for a
        /// signal death) when it has exited.
        exit_status: Option<i32>,
        /// The last bytes the server wrote on stderr (stdio only).
        stderr_tail: String,
    },
    /// Closed on purpose (remove, purge, eviction, workspace close).
    Stopped,
    /// Lost on its own and being brought back: an HTTP session the
    /// server expired (404) is initialized again, a stdio server that
    /// exited is started again. Ends [`McpState::Ready`] or
    /// [`McpState::Failed`].
    Reconnecting {
        /// What was lost, one line (`the session expired (HTTP 404)`).
        reason: String,
    },
}

impl McpState {
    /// The state's name as in [`Event::McpState`] (`declared`, `starting`,
    /// `ready`, `failed`, `stopped`, `reconnecting`).
    pub fn name(&self) -> &'static str {
        match self {
            McpState::Declared => "declared",
            McpState::Starting => "starting",
            McpState::Ready { .. } => "ready",
            McpState::Failed { .. } => "failed",
            McpState::Stopped => "stopped",
            McpState::Reconnecting { .. } => "reconnecting",
        }
    }

    /// The event detail: tool count, or the failure's
    /// [`McpState::summary`] (without the `failed: ` prefix) followed by
    /// `\nstderr tail:\n` and the tail when there is one — the only
    /// multi-line text; callers showing one line use
    /// [`McpState::summary`].
    pub fn detail(&self) -> Option<String> {
        match self {
            McpState::Ready { tool_count: tools } => Some(tools_word(*tools)),
            McpState::Failed {
                reason,
                exit_status,
                stderr_tail,
            } => {
                let mut d = failure_line(reason, *exit_status);
                let tail = stderr_tail.trim_end();
                if !tail.is_empty() && !reason.contains(tail.trim()) {
                    d.push_str("\nstderr tail:\n");
                    d.push_str(tail);
                }
                Some(d)
            }
            McpState::Reconnecting { reason } => Some(reason.clone()),
            _ => None,
        }
    }

    /// The state on one line, as the CLI and the TUI show it:
    /// `declared`, `starting`, `ready (3 tools)`, `failed: <reason>
    /// (exit status 3)`, `stopped`, `reconnecting: <reason>`. The exit status is added only when
    /// the reason does not already give it, and the stderr tail is left
    /// out (see [`McpState::detail`]).
    pub fn summary(&self) -> String {
        match self {
            McpState::Ready { tool_count } => format!("ready ({})", tools_word(*tool_count)),
            McpState::Failed {
                reason,
                exit_status,
                ..
            } => format!("failed: {}", failure_line(reason, *exit_status)),
            McpState::Reconnecting { reason } => format!("reconnecting: {reason}"),
            other => other.name().to_string(),
        }
    }

    /// True for [`McpState::Ready`].
    pub fn is_ready(&self) -> bool {
        matches!(self, McpState::Ready { .. })
    }
}

/// `reason`, plus ` (exit status N)` unless the reason already names
/// that status (`exited with status 3`, `exit status 3`, `exit code 3`):
/// saying it twice reads like two failures.
fn failure_line(reason: &str, exit_status: Option<i32>) -> String {
    let reason = reason.trim_end();
    match exit_status {
        Some(code) if !names_status(reason, code) => format!("{reason} (exit status {code})"),
        _ => reason.to_string(),
    }
}

fn names_status(reason: &str, code: i32) -> bool {
    ["status ", "exit code ", "exit "].iter().any(|p| {
        let needle = format!("{p}{code}");
        reason.match_indices(&needle).any(|(i, _)| {
            // `status 3` must not match `status 31`.
            !reason[i + needle.len()..].starts_with(|c: char| c.is_ascii_digit())
        })
    })
}

impl Serialize for McpState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (tool_count, reason, exit_status, stderr_tail) = match self {
            McpState::Ready { tool_count } => (Some(*tool_count), None, None, None),
            McpState::Failed {
                reason,
                exit_status,
                stderr_tail,
            } => (
                None,
                Some(reason.as_str()),
                *exit_status,
                Some(stderr_tail.as_str()),
            ),
            McpState::Reconnecting { reason } => (None, Some(reason.as_str()), None, None),
            _ => (None, None, None, None),
        };
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("state", self.name())?;
        m.serialize_entry("tool_count", &tool_count)?;
        m.serialize_entry("reason", &reason)?;
        m.serialize_entry("exit_status", &exit_status)?;
        m.serialize_entry("stderr_tail", &stderr_tail)?;
        m.end()
    }
}

/// One line of a server's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// When it was logged.
    #[serde(serialize_with = "ser_time")]
    pub at: SystemTime,
    /// `error`, `warn`, `info`.
    pub level: String,
    /// The text (cut at [`LOG_LINE_MAX`] bytes).
    pub message: String,
}

fn ser_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let dt: chrono::DateTime<chrono::Utc> = (*t).into();
    s.serialize_str(&dt.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

struct Limiter {
    window: Instant,
    sent: u32,
    suppressed: u64,
}

/// The log of one server instance: a bounded ring of lines plus
/// rate-limited [`Event::Log`] publication.
pub struct ServerLog {
    bus: EventBus,
    workspace: String,
    source: String,
    lines: Mutex<VecDeque<LogLine>>,
    limiter: Mutex<Limiter>,
    /// Applied to every line before it is kept or published.
    redact: Redactor,
}

impl std::fmt::Debug for ServerLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerLog")
            .field("source", &self.source)
            .finish()
    }
}

impl ServerLog {
    /// A log publishing on `bus` for workspace `workspace` with source
    /// `mcp:<server>`.
    pub fn new(bus: EventBus, workspace: &str, server: &str) -> Self {
        ServerLog {
            bus,
            workspace: workspace.to_string(),
            source: format!("mcp:{server}"),
            lines: Mutex::new(VecDeque::new()),
            limiter: Mutex::new(Limiter {
                window: Instant::now(),
                sent: 0,
                suppressed: 0,
            }),
            redact: Redactor::default(),
        }
    }

    /// This log with `redact` applied to every line (the server's sent
    /// header or environment values, secret shapes; issue 14 point 4).
    pub fn with_redactor(mut self, redact: Redactor) -> Self {
        self.redact = redact;
        self
    }

    /// Logs a line at `level`.
    pub fn log(&self, level: &str, message: &str) {
        let message = cut(&self.redact.apply(message));
        {
            let mut lines = self.lines.lock().expect("log lock");
            if lines.len() == LOG_LINES_KEPT {
                lines.pop_front();
            }
            lines.push_back(LogLine {
                at: SystemTime::now(),
                level: level.to_string(),
                message: message.clone(),
            });
        }
        let suppressed = {
            let mut l = self.limiter.lock().expect("limiter lock");
            if l.window.elapsed().as_secs() >= 1 {
                l.window = Instant::now();
                l.sent = 0;
            }
            if l.sent >= LOG_EVENTS_PER_SEC {
                l.suppressed += 1;
                return;
            }
            l.sent += 1;
            std::mem::take(&mut l.suppressed)
        };
        if suppressed > 0 {
            self.publish("warn", suppressed_note(suppressed));
        }
        self.publish(level, message);
    }

    /// Publishes how many lines the rate limit held back since the last
    /// published line, if any; true when it did. Called when the server
    /// has been quiet for [`SUPPRESSED_FLUSH_AFTER`] and at the end of its
    /// stderr ([`read_flushing`]), so a flood that stops is counted at
    /// once, not only when the server next logs a line.
    pub fn flush_suppressed(&self) -> bool {
        let n = std::mem::take(&mut self.limiter.lock().expect("limiter lock").suppressed);
        if n > 0 {
            self.publish("warn", suppressed_note(n));
        }
        n > 0
    }

    /// Logs a warning.
    pub fn warn(&self, message: &str) {
        self.log("warn", message);
    }

    /// Logs an informational line.
    pub fn info(&self, message: &str) {
        self.log("info", message);
    }

    fn publish(&self, level: &str, message: String) {
        self.bus.publish(
            &self.workspace,
            Event::Log {
                level: level.to_string(),
                source: self.source.clone(),
                message,
            },
        );
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<LogLine> {
        self.lines
            .lock()
            .expect("log lock")
            .iter()
            .cloned()
            .collect()
    }
}

fn suppressed_note(n: u64) -> String {
    format!("{n} log lines of this server were not published (rate limit)")
}

/// Quiet time after which the count of held-back lines is published
/// ([`ServerLog::flush_suppressed`]).
pub const SUPPRESSED_FLUSH_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads `r` into `buf` as `AsyncReadExt::read` does (same result);
/// meanwhile `log`'s held-back count is published once the stream has
/// been quiet for [`SUPPRESSED_FLUSH_AFTER`], and again at its end
/// (`Ok(0)`) or error. The read itself is never cut short.
pub(crate) async fn read_flushing(
    log: &ServerLog,
    r: &mut (dyn tokio::io::AsyncRead + Send + Unpin),
    buf: &mut [u8],
) -> std::io::Result<usize> {
    use tokio::io::AsyncReadExt as _;
    let read = r.read(buf);
    tokio::pin!(read);
    let got = match tokio::time::timeout(SUPPRESSED_FLUSH_AFTER, &mut read).await {
        Ok(got) => got,
        Err(_) => {
            log.flush_suppressed();
            read.await
        }
    };
    if matches!(got, Ok(0) | Err(_)) {
        log.flush_suppressed();
    }
    got
}

fn cut(message: &str) -> String {
    if message.len() <= LOG_LINE_MAX {
        return message.to_string();
    }
    let head = crate::backend::text::head_bytes(message, LOG_LINE_MAX);
    format!("{head}… [{} bytes in all]", message.len())
}

/// The last `cap` bytes written to a stream (a server's stderr).
#[derive(Debug)]
pub struct Tail {
    cap: usize,
    buf: VecDeque<u8>,
    total: u64,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Tail {
            cap: cap.max(1),
            buf: VecDeque::new(),
            total: 0,
        }
    }

    /// Adds bytes, dropping the oldest beyond the cap.
    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let data = if data.len() > self.cap {
            &data[data.len() - self.cap..]
        } else {
            data
        };
        let overflow = (self.buf.len() + data.len()).saturating_sub(self.cap);
        self.buf.drain(..overflow);
        self.buf.extend(data);
    }

    /// Bytes seen in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept bytes as text (lossy), starting at a line boundary when
    /// older bytes were dropped, so the tail does not open mid-line.
    pub fn text(&self) -> String {
        let bytes: Vec<u8> = self.buf.iter().copied().collect();
        let start = if self.total > self.buf.len() as u64 {
            bytes
                .iter()
                .position(|&b| b == b'\n')
                .map(|p| p + 1)
                .filter(|&p| p < bytes.len())
                .unwrap_or(0)
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

/// `1 tool`, `0 tools`, `3 tools` (issue 22's plurals; the engine cannot
/// use `root::words::count`, which sits above it).
fn tools_word(n: usize) -> String {
    if n == 1 {
        "1 tool".to_string()
    } else {
        format!("{n} tools")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_tool_is_singular() {
        let one = McpState::Ready { tool_count: 1 };
        assert_eq!(one.summary(), "ready (1 tool)");
        assert_eq!(one.detail().as_deref(), Some("1 tool"));
        let two = McpState::Ready { tool_count: 2 };
        assert_eq!(two.summary(), "ready (2 tools)");
    }

    use super::*;
    use crate::engine::events::Received;

    #[test]
    fn tail_keeps_the_last_bytes_from_a_line_start() {
        let mut t = Tail::new(16);
        t.push(b"first line\nsecond line\nthird\n");
        assert_eq!(t.total(), 29);
        assert_eq!(t.text(), "third\n");
        let mut t = Tail::new(100);
        t.push(b"FATAL: key\n");
        assert_eq!(t.text(), "FATAL: key\n");
        let mut t = Tail::new(4);
        t.push(&[b'x'; 100]);
        assert_eq!(t.text(), "xxxx");
    }

    #[test]
    fn failed_detail_names_status_and_tail() {
        let s = McpState::Failed {
            reason: "server exited before answering initialize".into(),
            exit_status: Some(1),
            stderr_tail: "FATAL: SEARCH_API_KEY is not set\n".into(),
        };
        let d = s.detail().unwrap();
        assert!(d.contains("exit status 1"), "{d}");
        assert!(d.contains("SEARCH_API_KEY is not set"), "{d}");
        assert_eq!(s.name(), "failed");
        assert_eq!(
            McpState::Ready { tool_count: 3 }.detail().unwrap(),
            "3 tools"
        );
    }

    #[test]
    fn exit_status_is_named_once() {
        let s = McpState::Failed {
            reason: "the server process exited with status 3".into(),
            exit_status: Some(3),
            stderr_tail: "boom\n".into(),
        };
        assert_eq!(
            s.summary(),
            "failed: the server process exited with status 3"
        );
        assert_eq!(
            s.detail().unwrap(),
            "the server process exited with status 3\nstderr tail:\nboom"
        );
        // A status the reason does not name is added, once.
        let s = McpState::Failed {
            reason: "initialize failed: connection closed".into(),
            exit_status: Some(31),
            stderr_tail: String::new(),
        };
        assert_eq!(
            s.summary(),
            "failed: initialize failed: connection closed (exit status 31)"
        );
        let s = McpState::Failed {
            reason: "exited with status 3".into(),
            exit_status: Some(31),
            stderr_tail: String::new(),
        };
        assert_eq!(s.summary(), "failed: exited with status 3 (exit status 31)");
        assert_eq!(
            McpState::Ready { tool_count: 2 }.summary(),
            "ready (2 tools)"
        );
        assert_eq!(McpState::Starting.summary(), "starting");
        let s = McpState::Reconnecting {
            reason: "the session expired (HTTP 404)".into(),
        };
        assert_eq!(s.summary(), "reconnecting: the session expired (HTTP 404)");
        assert_eq!(
            s.detail().as_deref(),
            Some("the session expired (HTTP 404)")
        );
    }

    #[test]
    fn every_state_serialises_with_the_same_keys() {
        let states = [
            McpState::Declared,
            McpState::Starting,
            McpState::Ready { tool_count: 4 },
            McpState::Failed {
                reason: "r".into(),
                exit_status: Some(1),
                stderr_tail: "t".into(),
            },
            McpState::Stopped,
            McpState::Reconnecting { reason: "r".into() },
        ];
        for st in &states {
            let v = serde_json::to_value(st).unwrap();
            let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
            assert_eq!(
                keys,
                [
                    "state",
                    "tool_count",
                    "reason",
                    "exit_status",
                    "stderr_tail"
                ],
                "{v}"
            );
            assert_eq!(v["state"], st.name());
        }
        let v = serde_json::to_value(&states[2]).unwrap();
        assert_eq!(v["tool_count"], 4);
        assert!(v["reason"].is_null() && v["stderr_tail"].is_null());
        let v = serde_json::to_value(&states[3]).unwrap();
        assert!(v["tool_count"].is_null());
        assert_eq!(v["reason"], "r");
        assert_eq!(v["exit_status"], 1);
    }

    #[test]
    fn log_is_bounded_and_rate_limited() {
        let bus = EventBus::new(100_000);
        let mut sub = bus.subscribe();
        let log = ServerLog::new(bus, "w", "srv");
        for i in 0..(LOG_LINES_KEPT + 300) {
            log.info(&format!("line {i}"));
        }
        log.warn(&"y".repeat(LOG_LINE_MAX * 2));
        let lines = log.lines();
        assert_eq!(lines.len(), LOG_LINES_KEPT);
        assert!(lines.last().unwrap().message.contains("bytes in all"));
        let mut n = 0;
        while let Some(Received::Event(e)) = sub.try_recv() {
            if let Event::Log { source, .. } = &e.event {
                assert_eq!(source, "mcp:srv");
            }
            n += 1;
        }
        assert_eq!(n, LOG_EVENTS_PER_SEC as usize);
    }

    /// Issue 16: a stderr flood that stops has its held-back count
    /// published when the server goes quiet, without another line.
    #[tokio::test]
    async fn the_held_back_count_is_published_when_a_flood_stops() {
        let bus = EventBus::new(100_000);
        let mut sub = bus.subscribe();
        let log = ServerLog::new(bus, "w", "srv");
        for i in 0..(LOG_EVENTS_PER_SEC + 50) {
            log.info(&format!("line {i}"));
        }
        let notes = |sub: &mut crate::engine::events::Subscriber| {
            let mut found = Vec::new();
            while let Some(Received::Event(e)) = sub.try_recv() {
                if let Event::Log { message, .. } = &e.event
                    && message.contains("not published")
                {
                    found.push(message.clone());
                }
            }
            found
        };
        assert!(notes(&mut sub).is_empty(), "nothing said yet");
        // A stream that stays open and quiet: the quiet spell publishes.
        let (mut quiet, _keep_open) = tokio::io::duplex(64);
        let mut buf = [0u8; 16];
        let read = read_flushing(&log, &mut quiet, &mut buf);
        assert!(
            tokio::time::timeout(SUPPRESSED_FLUSH_AFTER * 2, read)
                .await
                .is_err()
        );
        assert_eq!(
            notes(&mut sub),
            ["50 log lines of this server were not published (rate limit)"]
        );
        // At the end of the stream too (a new log: a fresh window).
        let log = ServerLog::new(log.bus.clone(), "w", "srv");
        for i in 0..(LOG_EVENTS_PER_SEC + 7) {
            log.info(&format!("line {i}"));
        }
        let mut eof = tokio::io::empty();
        assert_eq!(read_flushing(&log, &mut eof, &mut buf).await.unwrap(), 0);
        assert_eq!(
            notes(&mut sub),
            ["7 log lines of this server were not published (rate limit)"]
        );
        assert!(!log.flush_suppressed(), "published once");
    }
}
