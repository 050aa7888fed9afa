//! Issue 16: a command stopped under a flood says so before its capped
//! tool-result file is written. The write is held (a sink or a sandbox
//! that waits for the test to let it go), so the order is asserted, never
//! a time: the end must come while the file cannot exist yet. A
//! regression (the end sent after the write) hangs on the held write and
//! fails on the guard, which only catches a hang.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::io::AsyncRead;
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use wsbench::backend::OUTPUT_CHANNEL_CHUNKS;
use wsbench::engine::error::WsResult;
use wsbench::engine::shell_session::InputMsg;
use wsbench::engine::tools::{
    BashOptions, OffloadSink, ProcessEnded, ToolContext, ToolLimits, ToolState, bash,
};
use wsbench::engine::{Workspace, WorkspaceConfig};

use crate::support;

/// A hang guard (not a timing): long enough for a loaded CI machine.
const GUARD: Duration = Duration::from_secs(60);

/// A tool-result sink that holds each write until [`Held::release`]:
/// the tool's offload waits there, so what it reports before cannot race
/// the file.
struct Held {
    ws: Arc<Workspace>,
    entered: AtomicBool,
    entered_note: Notify,
    gate: Semaphore,
}

impl Held {
    fn new(ws: Arc<Workspace>) -> Held {
        Held {
            ws,
            entered: AtomicBool::new(false),
            entered_note: Notify::new(),
            gate: Semaphore::new(0),
        }
    }

    fn release(&self) {
        self.gate.add_permits(1);
    }
}

#[async_trait]
impl OffloadSink for Held {
    async fn tool_result_stream(
        &self,
        session: &str,
        result_id: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> WsResult<String> {
        self.entered.store(true, Ordering::SeqCst);
        self.entered_note.notify_one();
        let _permit = self.gate.acquire().await.expect("gate open");
        self.ws
            .offload()
            .tool_result_stream(session, result_id, reader)
            .await
    }
}

/// The `tool_result-*.txt` files of `session` on disk.
fn tool_results(ws: &Workspace, session: &str) -> Vec<String> {
    let dir = ws.layout().session_dir(session).unwrap();
    match std::fs::read_dir(Path::new(&dir)) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("tool_result-"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// How the test stops the flood.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// Ctrl-X + confirm: the call is cancelled, the tree killed.
    Kill,
    /// Ctrl-C: SIGINT through the command's input.
    Interrupt,
}

/// Runs `yes` through the Bash tool, stops it after 4 MiB of output, and
/// checks that `ended` comes while the tool-result write is held, then
/// that the call returns with the file once the write is let go.
async fn stopped_flood_ends_before_its_file(stop: Stop) {
    let dir = tempfile::tempdir().unwrap();
    let config = WorkspaceConfig {
        limits: ToolLimits {
            // Small, so the test writes little; `yes` passes it at once.
            tool_result_max_bytes: 1 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    let ws = support::open(dir.path(), config).await;
    let held = Held::new(ws.clone());
    let mut env = ws.tool_env();
    env.offload = &held;
    let cancel = CancellationToken::new();
    let (otx, mut orx) = mpsc::channel(OUTPUT_CHANNEL_CHUNKS);
    let (etx, mut erx) = oneshot::channel::<ProcessEnded>();
    let (itx, irx) = mpsc::channel::<InputMsg>(8);
    let session = "s-001";
    let ctx = ToolContext {
        env,
        agent: "",
        session,
        call_id: "call_flood",
        cancel: cancel.clone(),
        output: Some(otx),
        bash: BashOptions::new(Some(false), Some(irx)).with_ended(Some(etx)),
    };
    let call = bash::run(&ctx, "yes", Duration::from_secs(600));
    tokio::pin!(call);

    // The flood runs; the user stops it once 4 MiB came through.
    let t0 = Instant::now();
    let (mut seen, mut stopped) = (0usize, false);
    let end = loop {
        assert!(
            t0.elapsed() < GUARD,
            "{stop:?}: no end while the write is held"
        );
        tokio::select! {
            _ = &mut call => panic!("{stop:?}: the call returned before its end was sent"),
            end = &mut erx => break end.expect("ended sent"),
            c = orx.recv() => {
                if let Some(c) = c {
                    seen += c.data.len();
                }
                if seen >= 4 << 20 && !stopped {
                    stopped = true;
                    match stop {
                        Stop::Kill => cancel.cancel(),
                        Stop::Interrupt => itx.send(InputMsg::Interrupt).await.unwrap(),
                    }
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    };
    assert!(stopped, "{stop:?}: ended before it was stopped: {end:?}");
    match stop {
        Stop::Kill => assert!(end.cancelled, "{end:?}"),
        Stop::Interrupt => {
            assert!(!end.cancelled, "{end:?}");
            assert_eq!(end.exit_code, Some(130), "SIGINT: {end:?}");
        }
    }
    assert!(
        tool_results(&ws, session).is_empty(),
        "{stop:?}: a tool-result file exists before the write was let go"
    );

    // The call goes on to the offload and waits there: it is the write
    // that is held, not the end.
    loop {
        assert!(t0.elapsed() < GUARD, "{stop:?}: the offload never started");
        if held.entered.load(Ordering::SeqCst) {
            break;
        }
        tokio::select! {
            _ = &mut call => panic!("{stop:?}: the call returned without writing its tool result"),
            _ = held.entered_note.notified() => {}
            _ = orx.recv() => {}
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
    assert!(tool_results(&ws, session).is_empty());
    held.release();
    let r = tokio::time::timeout(GUARD, &mut call)
        .await
        .expect("the call returns once the write is let go");
    let path = r.offload_path.clone().expect("capped output offloaded");
    assert!(Path::new(&path).is_file(), "{path}");
    assert_eq!(tool_results(&ws, session).len(), 1);
    assert!(r.text().contains(&path), "the model's text names the file");
    match stop {
        Stop::Kill => assert_eq!(r.state, ToolState::Interrupted),
        Stop::Interrupt => assert_eq!(r.exit_code, Some(130)),
    }
}

/// Ctrl-X + confirm under `yes`: the kill is reported (`ProcessEnded`,
/// cancelled) before the capped tool-result file is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_flood_ends_before_its_tool_result_is_written() {
    stopped_flood_ends_before_its_file(Stop::Kill).await;
}

/// Ctrl-C under `yes`: exit 130 is reported before the capped
/// tool-result file is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_flood_ends_before_its_tool_result_is_written() {
    stopped_flood_ends_before_its_file(Stop::Interrupt).await;
}

/// A sink that notes whether the call's end had reached its receiver
/// (a task of its own) when the tool-result write began.
struct SeenAtWrite {
    ws: Arc<Workspace>,
    seen: Arc<AtomicBool>,
    seen_at_write: std::sync::Mutex<Option<bool>>,
}

#[async_trait]
impl OffloadSink for SeenAtWrite {
    async fn tool_result_stream(
        &self,
        session: &str,
        result_id: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> WsResult<String> {
        *self.seen_at_write.lock().unwrap() = Some(self.seen.load(Ordering::SeqCst));
        self.ws
            .offload()
            .tool_result_stream(session, result_id, reader)
            .await
    }
}

/// The receiver of `ProcessEnded` runs before the tool goes on to its
/// tool-result file, even on one thread: the tool yields after sending
/// it. (Woken from the tool's task, the receiver otherwise waited in the
/// worker's LIFO slot behind the text and file work: 160–280 ms under a
/// flood on the loaded VM.) One thread makes the order deterministic.
#[tokio::test(flavor = "current_thread")]
async fn the_end_reaches_its_receiver_before_the_tool_result_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let config = WorkspaceConfig {
        limits: ToolLimits {
            tool_result_max_bytes: 1 << 20,
            ..Default::default()
        },
        ..Default::default()
    };
    let ws = support::open(dir.path(), config).await;
    let seen = Arc::new(AtomicBool::new(false));
    let sink = SeenAtWrite {
        ws: ws.clone(),
        seen: seen.clone(),
        seen_at_write: std::sync::Mutex::new(None),
    };
    let mut env = ws.tool_env();
    env.offload = &sink;
    let (etx, erx) = oneshot::channel::<ProcessEnded>();
    let receiver = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let end = erx.await.expect("ended sent");
            seen.store(true, Ordering::SeqCst);
            end
        })
    };
    let cancel = CancellationToken::new();
    let (otx, mut orx) = mpsc::channel(OUTPUT_CHANNEL_CHUNKS);
    let ctx = ToolContext {
        env,
        agent: "",
        session: "s-001",
        call_id: "call_yield",
        cancel: cancel.clone(),
        output: Some(otx),
        bash: BashOptions::new(Some(false), None).with_ended(Some(etx)),
    };
    let call = bash::run(&ctx, "yes", Duration::from_secs(600));
    tokio::pin!(call);
    let t0 = Instant::now();
    let mut got = 0usize;
    let r = loop {
        assert!(t0.elapsed() < GUARD, "the call never returned");
        tokio::select! {
            r = &mut call => break r,
            c = orx.recv() => {
                got += c.map_or(0, |c| c.data.len());
                if got >= 2 << 20 {
                    cancel.cancel();
                }
            }
        }
    };
    assert!(receiver.await.unwrap().cancelled);
    assert!(r.offload_path.is_some(), "capped output offloaded");
    assert_eq!(
        *sink.seen_at_write.lock().unwrap(),
        Some(true),
        "the end had reached its receiver when the write began"
    );
}
