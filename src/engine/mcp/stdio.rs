//! stdio MCP servers: the process, started through the workspace backend
//! ([`Sandbox::spawn`], so in a sandbox it runs inside it), and the rmcp
//! transport over its pipes with a line filter in between.
//!
//! Why a filter of our own: servers print banners and log lines on stdout
//! (C03), some editors save a BOM, and a single reply can be tens of
//! megabytes (C04). The filter frames stdout by `\n` itself and
//!
//! * drops a leading UTF-8 BOM and every line that is not a JSON-RPC
//!   message, logging each as a warning with its text — never fatal;
//! * has no fixed line-length limit below the configured maximum frame
//!   size, so a 20 MB reply is one message;
//! * above that maximum, stops buffering (keeping only the first and last
//!   few KiB) and answers *that* request with a JSON-RPC error naming
//!   the size and the limit, so the session stays usable;
//! * decodes bytes per `encoding_error_handler` (strict lines with bad
//!   UTF-8 are skipped and logged, `replace` and `ignore` as in Python).
//!
//! The process side watches the child: its exit status is known the
//! moment it exits (C01), stdout is closed shortly after even when a
//! grandchild still holds it, and stderr is drained continuously into a
//! bounded [`Tail`] and the server's log.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, RequestId};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::decl::{EncodingErrorHandler, StdioConfig};
use super::health::{ServerLog, Tail};
use crate::backend::{
    BackendError, BackendResult, ExecRequest, ProcessControl, Sandbox, SpawnRequest,
};

/// Default maximum size of one message from a stdio server, in bytes
/// (64 MiB): far above real replies (C04's 20 MB works), low enough that
/// a runaway server cannot exhaust memory.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Bytes of a server's stderr kept for error reports.
pub const DEFAULT_STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How long stdout stays open after the server process exited, for its
/// last bytes to arrive; then the session ends even if a grandchild still
/// holds the pipe.
const EXIT_GRACE: Duration = Duration::from_millis(300);

/// Head and tail bytes kept of an oversized frame, to find its id.
const KEEP_EDGE: usize = 8 * 1024;

const READ_CHUNK: usize = 64 * 1024;

/// One frame cut from stdout.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A complete line, without its `\n` (and `\r`).
    Line(Vec<u8>),
    /// A line longer than the limit: its length and edges only.
    Oversized {
        /// Full length in bytes.
        len: usize,
        /// The first bytes.
        head: Vec<u8>,
        /// The last bytes.
        tail: Vec<u8>,
    },
}

#[derive(Debug)]
struct Over {
    len: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Over {
    fn add(&mut self, data: &[u8]) {
        self.len += data.len();
        if self.head.len() < KEEP_EDGE {
            let n = (KEEP_EDGE - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
        }
        let data = if data.len() > KEEP_EDGE {
            &data[data.len() - KEEP_EDGE..]
        } else {
            data
        };
        self.tail.extend_from_slice(data);
        if self.tail.len() > 2 * KEEP_EDGE {
            let cut = self.tail.len() - KEEP_EDGE;
            self.tail.drain(..cut);
        }
    }

    fn finish(mut self) -> Frame {
        if self.tail.len() > KEEP_EDGE {
            let cut = self.tail.len() - KEEP_EDGE;
            self.tail.drain(..cut);
        }
        Frame::Oversized {
            len: self.len,
            head: self.head,
            tail: self.tail,
        }
    }
}

/// Splits a byte stream into `\n`-terminated frames of at most `max`
/// bytes; longer lines are measured, not kept.
#[derive(Debug)]
pub(crate) struct Framer {
    buf: Vec<u8>,
    max: usize,
    over: Option<Over>,
}

impl Framer {
    pub(crate) fn new(max: usize) -> Self {
        Framer {
            buf: Vec::new(),
            max: max.max(1),
            over: None,
        }
    }

    fn line(&mut self) -> Frame {
        let mut line = std::mem::take(&mut self.buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Frame::Line(line)
    }

    /// Feeds bytes; complete frames are appended to `out`.
    pub(crate) fn push(&mut self, mut data: &[u8], out: &mut Vec<Frame>) {
        while !data.is_empty() {
            let nl = data.iter().position(|&b| b == b'\n');
            let (part, rest) = match nl {
                Some(i) => (&data[..i], Some(&data[i + 1..])),
                None => (data, None),
            };
            if let Some(over) = &mut self.over {
                over.add(part);
            } else if self.buf.len() + part.len() > self.max {
                let mut over = Over {
                    len: 0,
                    head: Vec::new(),
                    tail: Vec::new(),
                };
                over.add(&self.buf);
                over.add(part);
                self.buf = Vec::new();
                self.over = Some(over);
            } else {
                self.buf.extend_from_slice(part);
            }
            match rest {
                Some(rest) => {
                    out.push(match self.over.take() {
                        Some(over) => over.finish(),
                        None => self.line(),
                    });
                    data = rest;
                }
                None => return,
            }
        }
    }

    /// End of stream: a last line without `\n` is still a frame.
    pub(crate) fn finish(&mut self, out: &mut Vec<Frame>) {
        if let Some(over) = self.over.take() {
            out.push(over.finish());
        } else if !self.buf.is_empty() {
            out.push(self.line());
        }
    }
}

/// What one stdout line turned out to be.
#[derive(Debug)]
pub(crate) enum Classified {
    /// A JSON-RPC message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    /// Not for rmcp; the warning to log.
    Skip(String),
    /// An empty line (ignored silently).
    Blank,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Classifies one line. The first value is a note to log when a BOM was
/// removed.
pub(crate) fn classify(line: &[u8], enc: EncodingErrorHandler) -> (Option<String>, Classified) {
    let mut note = None;
    let mut line = line;
    if let Some(rest) = line.strip_prefix(BOM) {
        note = Some("a UTF-8 byte order mark at the start of a stdout line was removed".into());
        line = rest;
    }
    let line = line.trim_ascii();
    if line.is_empty() {
        return (note, Classified::Blank);
    }
    let owned;
    let text: &str = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(_) => match enc {
            EncodingErrorHandler::Strict => {
                return (
                    note,
                    Classified::Skip(format!(
                        "stdout line is not valid UTF-8 (encoding_error_handler: strict), skipped: {}",
                        String::from_utf8_lossy(line)
                    )),
                );
            }
            EncodingErrorHandler::Replace => {
                owned = String::from_utf8_lossy(line).into_owned();
                &owned
            }
            EncodingErrorHandler::Ignore => {
                owned = line.utf8_chunks().map(|c| c.valid()).collect::<String>();
                &owned
            }
        },
    };
    if !text.starts_with('{') {
        return (
            note,
            Classified::Skip(format!("stdout line is not JSON-RPC, skipped: {text}")),
        );
    }
    match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(text) {
        Ok(m) => (note, Classified::Message(Box::new(m))),
        Err(err) => (note, not_understood(text, &err)),
    }
}

/// A `{...}` line rmcp cannot take: a reply we can still route as an
/// error (so its request fails now, not at its timeout), or a line to
/// skip.
fn not_understood(text: &str, err: &serde_json::Error) -> Classified {
    let Ok(serde_json::Value::Object(obj)) = serde_json::from_str::<serde_json::Value>(text) else {
        return Classified::Skip(format!("stdout line is not JSON-RPC, skipped: {text}"));
    };
    if obj.get("jsonrpc").and_then(|v| v.as_str()) != Some("2.0") {
        return Classified::Skip(format!(
            "stdout line is JSON but not JSON-RPC, skipped: {text}"
        ));
    }
    let id = obj
        .get("id")
        .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
    match id {
        Some(id) if obj.contains_key("result") || obj.contains_key("error") => {
            Classified::Message(Box::new(error_reply(
                id,
                format!("the server's reply could not be decoded: {err}"),
            )))
        }
        _ => Classified::Skip(format!(
            "JSON-RPC message from the server not understood ({err}), skipped: {text}"
        )),
    }
}

fn error_reply(id: RequestId, message: String) -> RxJsonRpcMessage<RoleClient> {
    JsonRpcMessage::Error(JsonRpcError::new(
        Some(id),
        ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None),
    ))
}

/// Finds the request id of an oversized reply from its edges: the
/// top-level `"id"` member when the head reaches it (key order
/// `jsonrpc, id, result`), else the last `"id": <in-flight id>` of the
/// tail (order `result, jsonrpc, id`), else the only request in flight.
pub(crate) fn oversized_id(
    head: &[u8],
    tail: &[u8],
    inflight: &HashSet<RequestId>,
) -> Option<RequestId> {
    if let Some(id) = head_id(head) {
        return Some(id);
    }
    let tail = String::from_utf8_lossy(tail);
    let mut found = None;
    let mut from = 0;
    while let Some(p) = tail[from..].find("\"id\"") {
        let at = from + p + 4;
        let rest = tail[at..].trim_start();
        if let Some(rest) = rest.strip_prefix(':')
            && let Some((id, _)) = scalar(rest.trim_start())
            && inflight.contains(&id)
        {
            found = Some(id);
        }
        from = at;
    }
    found.or_else(|| {
        (inflight.len() == 1)
            .then(|| inflight.iter().next().cloned())
            .flatten()
    })
}

/// Reads a number or string JSON scalar at the start of `s`.
fn scalar(s: &str) -> Option<(RequestId, usize)> {
    let end = if s.starts_with('"') {
        let mut esc = false;
        let mut end = None;
        for (i, c) in s.char_indices().skip(1) {
            match c {
                _ if esc => esc = false,
                '\\' => esc = true,
                '"' => {
                    end = Some(i + 1);
                    break;
                }
                _ => {}
            }
        }
        end?
    } else {
        s.find(|c: char| !(c.is_ascii_digit() || c == '-'))
            .unwrap_or(s.len())
    };
    let id = serde_json::from_str::<RequestId>(&s[..end]).ok()?;
    Some((id, end))
}

/// Walks the top-level members of a JSON object prefix to its `"id"`.
fn head_id(head: &[u8]) -> Option<RequestId> {
    let s = String::from_utf8_lossy(head);
    let s = s.trim_start_matches('\u{feff}').trim_start();
    let mut rest = s.strip_prefix('{')?;
    loop {
        rest = rest.trim_start();
        let (key, after) = match scalar(rest)? {
            (RequestId::String(k), n) => (k, &rest[n..]),
            _ => return None,
        };
        rest = after.trim_start().strip_prefix(':')?.trim_start();
        if &*key == "id" {
            return scalar(rest).map(|(id, _)| id);
        }
        rest = skip_value(rest)?.trim_start();
        rest = rest.strip_prefix(',')?;
    }
}

/// Skips one JSON value; `None` when the prefix ends inside it.
fn skip_value(s: &str) -> Option<&str> {
    let bytes = s.as_bytes();
    let mut depth = 0usize;
    let mut in_str = false;
    let mut esc = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_str {
            match b {
                _ if esc => esc = false,
                b'\\' => esc = true,
                b'"' => {
                    in_str = false;
                    if depth == 0 {
                        return Some(&s[i + 1..]);
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return Some(&s[i + 1..]);
                }
            }
            b',' | b'}' | b']' if depth == 0 => return Some(&s[i..]),
            _ => {}
        }
    }
    None
}

type InFlight = Arc<Mutex<HashSet<RequestId>>>;

/// The rmcp transport over a stdio server's pipes (client side).
pub struct StdioTransport {
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    stdin: Arc<tokio::sync::Mutex<Option<Box<dyn AsyncWrite + Send + Unpin>>>>,
    inflight: InFlight,
}

impl Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        let inflight = self.inflight.clone();
        async move {
            if let JsonRpcMessage::Request(r) = &item {
                inflight.lock().expect("inflight lock").insert(r.id.clone());
            }
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut guard = stdin.lock().await;
            let w = guard.as_mut().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "server stdin is closed")
            })?;
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.rx.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(mut w) = self.stdin.lock().await.take() {
            let _ = w.shutdown().await;
        }
        self.rx.close();
        Ok(())
    }
}

/// Options of the stdio filter.
#[derive(Debug, Clone, Copy)]
pub struct StdioOptions {
    /// Largest message accepted from the server, in bytes.
    pub max_frame_bytes: usize,
    /// Bytes of stderr kept.
    pub stderr_tail_bytes: usize,
}

impl Default for StdioOptions {
    fn default() -> Self {
        StdioOptions {
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            stderr_tail_bytes: DEFAULT_STDERR_TAIL_BYTES,
        }
    }
}

/// The running server process: exit status, stderr tail, kill.
pub struct StdioProcess {
    control: Arc<dyn ProcessControl>,
    exit: watch::Receiver<Option<Option<i32>>>,
    stderr: Arc<Mutex<Tail>>,
    stderr_done: watch::Receiver<bool>,
}

impl std::fmt::Debug for StdioProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioProcess")
            .field("id", &self.control.id())
            .finish()
    }
}

impl StdioProcess {
    /// Backend id of the process (`pid 123`).
    pub fn id(&self) -> String {
        self.control.id()
    }

    /// `Some(status)` once the process has exited (`status` is `None`
    /// when the backend could not learn it).
    pub fn exited(&self) -> Option<Option<i32>> {
        *self.exit.borrow()
    }

    /// Waits until the process exits; its status.
    pub async fn wait_for_exit(&self) -> Option<i32> {
        let mut rx = self.exit.clone();
        let _ = rx.wait_for(|s| s.is_some()).await;
        rx.borrow().flatten()
    }

    /// Waits up to `within` for the process to exit.
    pub async fn wait_exit(&self, within: Duration) -> Option<Option<i32>> {
        let mut rx = self.exit.clone();
        let _ = tokio::time::timeout(within, rx.wait_for(|s| s.is_some())).await;
        *rx.borrow()
    }

    /// The stderr tail; waits up to `within` for stderr to reach its end
    /// first (a dying server's last words arrive just after it exits).
    pub async fn stderr_tail(&self, within: Duration) -> String {
        let mut rx = self.stderr_done.clone();
        let _ = tokio::time::timeout(within, rx.wait_for(|d| *d)).await;
        self.stderr.lock().expect("tail lock").text()
    }

    /// The stderr tail as it is now.
    pub fn stderr_now(&self) -> String {
        self.stderr.lock().expect("tail lock").text()
    }

    /// Kills the process tree and reaps it.
    pub async fn kill(&self) {
        let _ = self.control.kill().await;
    }
}

/// Looks for the program `cfg` would start, without starting it: the
/// backend must run long-lived processes, the working directory must
/// exist, and the command must name an executable file — directly when
/// it holds a `/`, else found on `PATH` (as `execvp` searches it, with
/// `cfg`'s environment laid over the backend's). One `sh` run through
/// [`Sandbox::exec`], from `cfg.cwd`.
///
/// Errors: the one-line reason (`` `/no/such/bin` does not exist``,
/// `` `srv` is not found on PATH``, …). When the check itself cannot run
/// (no `sh`, a backend error, a time-out) it says nothing — the start
/// will report what is wrong — so a quirky backend never blocks a valid
/// declaration.
pub async fn check_command(sandbox: &dyn Sandbox, cfg: &StdioConfig) -> Result<(), String> {
    if !sandbox.capabilities().processes {
        return Err(BackendError::Unsupported {
            backend: sandbox.kind(),
            what: "long-lived processes",
        }
        .to_string());
    }
    // $1 command, $2 working directory (may be empty). Exit 0 found,
    // 2 missing, 3 a directory, 4 not executable, 5 no such cwd.
    const SCRIPT: &str = r#"if [ -n "$2" ]; then cd -- "$2" 2>/dev/null || exit 5; fi
case $1 in
*/*) [ -e "$1" ] || exit 2; [ -d "$1" ] && exit 3; [ -x "$1" ] || exit 4; exit 0;;
esac
set -f; IFS=:
for d in $PATH; do
  p="${d:-.}/$1"
  if [ -f "$p" ] && [ -x "$p" ]; then exit 0; fi
done
exit 2"#;
    let env: BTreeMap<String, String> = cfg
        .env
        .as_ref()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let mut req = ExecRequest::new([
        "/bin/sh".to_string(),
        "-c".into(),
        SCRIPT.into(),
        "sh".into(),
        cfg.command.clone(),
        cfg.cwd.clone().unwrap_or_default(),
    ]);
    req.env = env;
    req.timeout = Some(Duration::from_secs(10));
    let Ok(outcome) = sandbox.exec(req, None).await else {
        return Ok(());
    };
    let cmd = &cfg.command;
    match outcome.exit_code {
        _ if outcome.timed_out || outcome.cancelled => Ok(()),
        Some(2) if cmd.contains('/') => Err(format!("`{cmd}` does not exist")),
        Some(2) => Err(format!("`{cmd}` is not found on PATH")),
        Some(3) => Err(format!("`{cmd}` is a directory")),
        Some(4) => Err(format!("`{cmd}` is not executable")),
        Some(5) => Err(format!(
            "the working directory `{}` does not exist",
            cfg.cwd.as_deref().unwrap_or_default()
        )),
        _ => Ok(()),
    }
}

/// Starts `cfg`'s command through `sandbox` and wires the filtered
/// transport to it. `env` is the resolved environment (secrets filled
/// in). Every skipped line and every stderr line goes to `log`.
///
/// Errors: the backend's spawn error ([`crate::backend::BackendError::Spawn`]
/// names the program and the OS error).
pub async fn start(
    sandbox: &dyn Sandbox,
    cfg: &StdioConfig,
    opts: StdioOptions,
    log: Arc<ServerLog>,
) -> BackendResult<(StdioTransport, StdioProcess)> {
    let mut argv = vec![cfg.command.clone()];
    argv.extend(cfg.args.clone().unwrap_or_default());
    let env: BTreeMap<String, String> = cfg
        .env
        .as_ref()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let process = sandbox
        .spawn(SpawnRequest {
            argv,
            cwd: cfg.cwd.clone(),
            env,
        })
        .await?;
    let (exit_tx, exit_rx) = watch::channel(None);
    let (done_tx, done_rx) = watch::channel(false);
    let stop = CancellationToken::new();
    let tail = Arc::new(Mutex::new(Tail::new(opts.stderr_tail_bytes)));
    let inflight: InFlight = Default::default();
    let (tx, rx) = mpsc::channel(256);

    let control = process.control.clone();
    let stop_on_exit = stop.clone();
    tokio::spawn(async move {
        let status = control.wait().await.ok().flatten();
        let _ = exit_tx.send(Some(status));
        tokio::time::sleep(EXIT_GRACE).await;
        stop_on_exit.cancel();
    });
    tokio::spawn(drain_stderr(
        process.stderr,
        tail.clone(),
        log.clone(),
        done_tx,
    ));
    tokio::spawn(read_stdout(
        process.stdout,
        tx,
        stop,
        inflight.clone(),
        opts.max_frame_bytes,
        cfg.encoding_error_handler,
        log,
    ));
    Ok((
        StdioTransport {
            rx,
            stdin: Arc::new(tokio::sync::Mutex::new(Some(process.stdin))),
            inflight,
        },
        StdioProcess {
            control: process.control,
            exit: exit_rx,
            stderr: tail,
            stderr_done: done_rx,
        },
    ))
}

async fn read_stdout(
    mut stdout: Box<dyn AsyncRead + Send + Unpin>,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    stop: CancellationToken,
    inflight: InFlight,
    max: usize,
    enc: EncodingErrorHandler,
    log: Arc<ServerLog>,
) {
    let mut framer = Framer::new(max);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut frames = Vec::new();
    let mut eof = false;
    while !eof {
        let n = tokio::select! {
            r = stdout.read(&mut buf) => r,
            _ = stop.cancelled() => break,
        };
        match n {
            Ok(0) | Err(_) => {
                eof = true;
                framer.finish(&mut frames);
            }
            Ok(n) => framer.push(&buf[..n], &mut frames),
        }
        for frame in frames.drain(..) {
            let Some(msg) = deliverable(frame, &inflight, max, enc, &log) else {
                continue;
            };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
    }
}

fn deliverable(
    frame: Frame,
    inflight: &InFlight,
    max: usize,
    enc: EncodingErrorHandler,
    log: &ServerLog,
) -> Option<RxJsonRpcMessage<RoleClient>> {
    let msg = match frame {
        Frame::Line(line) => {
            let (note, c) = classify(&line, enc);
            if let Some(note) = note {
                log.warn(&note);
            }
            match c {
                Classified::Message(m) => *m,
                Classified::Skip(warning) => {
                    log.warn(&warning);
                    return None;
                }
                Classified::Blank => return None,
            }
        }
        Frame::Oversized { len, head, tail } => {
            let id = oversized_id(&head, &tail, &inflight.lock().expect("inflight lock"));
            let what = format!(
                "a message of {len} bytes from the server exceeds the maximum frame size of {max} bytes"
            );
            match id {
                Some(id) => {
                    log.warn(&format!("{what}; request {id} fails"));
                    error_reply(id, what)
                }
                None => {
                    log.warn(&format!("{what}; it was dropped (no request id found)"));
                    return None;
                }
            }
        }
    };
    let answered = match &msg {
        JsonRpcMessage::Response(r) => Some(&r.id),
        JsonRpcMessage::Error(e) => e.id.as_ref(),
        _ => None,
    };
    if let Some(id) = answered {
        inflight.lock().expect("inflight lock").remove(id);
    }
    Some(msg)
}

async fn drain_stderr(
    mut stderr: Box<dyn AsyncRead + Send + Unpin>,
    tail: Arc<Mutex<Tail>>,
    log: Arc<ServerLog>,
    done: watch::Sender<bool>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut partial: Vec<u8> = Vec::new();
    let emit = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end();
        if !text.is_empty() {
            log.info(&format!("stderr: {text}"));
        }
    };
    loop {
        let n = match super::health::read_flushing(&log, &mut *stderr, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let data = &buf[..n];
        tail.lock().expect("tail lock").push(data);
        let mut rest = data;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            if partial.is_empty() {
                emit(&rest[..i]);
            } else {
                partial.extend_from_slice(&rest[..i]);
                emit(&partial);
                partial.clear();
            }
            rest = &rest[i + 1..];
        }
        // A line without end is logged in pieces rather than held whole.
        partial.extend_from_slice(rest);
        if partial.len() > super::health::LOG_LINE_MAX {
            emit(&partial);
            partial.clear();
        }
    }
    if !partial.is_empty() {
        emit(&partial);
    }
    let _ = done.send(true);
}

#[cfg(test)]
mod tests;
