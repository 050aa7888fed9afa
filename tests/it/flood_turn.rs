//! Issue 16, the event loop under a flood, driven one turn at a time
//! ([`LoopState::turn`], the code `wsbench`'s own loop runs) with a
//! `TestBackend` terminal and keys on their own channel:
//! * a key queued behind 100 MB of output is handled first and shows in
//!   the same turn's frame, whose output work is one slice;
//! * Ctrl-X + y and Ctrl-C under `yes` show their end line while the
//!   capped tool-result file cannot have been written yet (its claim is
//!   held by the sandbox until the test lets it go).
//!
//! No time is asserted: the guards only catch a hang.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::Event;
use tokio::io::AsyncRead;
use tokio::sync::{Semaphore, mpsc};

use wsbench::backend::local::LocalSandbox;
use wsbench::backend::{
    BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest, FileStat,
    OutputSink, Process, Sandbox, SpawnRequest, Watch,
};
use wsbench::engine::events::Subscriber;
use wsbench::engine::tools::ToolLimits;
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};
use wsbench::tui::action::AppMsg;
use wsbench::tui::app::{App, AppOptions};
use wsbench::tui::pane::Pane as _;
use wsbench::tui::panes::command::{self, CommandPane, PULL_SLICE};
use wsbench::tui::turn::{LoopState, TurnReport};

use crate::support::tui::{key, prompt_options, screen};

/// A hang guard (not a timing): long enough for a loaded CI machine.
const GUARD: Duration = Duration::from_secs(60);

/// The loop of `wsbench`, one turn at a time: the app, its input channel,
/// its bus subscription and a test terminal.
struct Loop {
    app: App,
    input_tx: mpsc::Sender<AppMsg>,
    input_rx: mpsc::Receiver<AppMsg>,
    sub: Subscriber,
    term: Terminal<TestBackend>,
    st: LoopState,
}

impl Loop {
    /// A 120×40 loop on `ws`; every turn may draw (no frame rate), and a
    /// frame parses output for at most `output_time`.
    fn new(ws: Arc<Workspace>, opts: AppOptions, output_time: Duration) -> Loop {
        let st = LoopState::new(1_000_000).with_output_time(output_time);
        Self::with_state(ws, opts, st)
    }

    fn with_state(ws: Arc<Workspace>, opts: AppOptions, st: LoopState) -> Loop {
        let sub = ws.events().subscribe();
        let (input_tx, input_rx) = mpsc::channel(256);
        Loop {
            app: App::new(ws, opts),
            input_tx,
            input_rx,
            sub,
            term: Terminal::new(TestBackend::new(120, 40)).unwrap(),
            st,
        }
    }

    /// Queues key-map keys (`"ctrl-x"`) on the input channel.
    fn keys(&self, keys: &str) {
        for k in keys.split_whitespace() {
            self.input_tx
                .try_send(AppMsg::Input(Event::Key(key(k))))
                .unwrap();
        }
    }

    /// Queues typed text on the input channel.
    fn text(&self, s: &str) {
        use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
        for c in s.chars() {
            let k = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
            self.input_tx
                .try_send(AppMsg::Input(Event::Key(k)))
                .unwrap();
        }
    }

    /// One turn, as after a wake-up.
    fn turn(&mut self) -> TurnReport {
        self.st.woke();
        self.st
            .turn(
                &mut self.app,
                &mut self.input_rx,
                &mut self.sub,
                &mut self.term,
            )
            .unwrap()
    }

    fn screen(&self) -> String {
        screen(self.term.backend())
    }

    /// Turns until `done` holds for the screen (a 10 ms pause between
    /// turns; `what` names it when the guard gives up).
    async fn until(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        self.until_with(what, |l| done(&l.screen())).await;
        self.screen()
    }

    /// Turns until `done` holds for the loop.
    async fn until_with(&mut self, what: &str, done: impl Fn(&mut Loop) -> bool) {
        let t0 = Instant::now();
        loop {
            self.turn();
            if done(self) {
                return;
            }
            let s = self.screen();
            assert!(t0.elapsed() < GUARD, "gave up waiting for {what}:\n{s}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn command<R>(&mut self, f: impl FnOnce(&mut CommandPane) -> R) -> R {
        self.app
            .pane_call::<CommandPane, _>(command::ID, |p, _| f(p))
            .unwrap()
    }
}

fn config() -> WorkspaceConfig {
    WorkspaceConfig {
        limits: ToolLimits {
            // Small: a stopped flood writes little.
            tool_result_max_bytes: 1 << 20,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Waits (a hang guard) until `f` holds.
async fn wait(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < GUARD, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A key queued while 100 MB of output is pending is taken before any of
/// it: the turn handles the key first, draws its effect (the kill dialog)
/// in the same frame, and parses one slice of output in that frame (the
/// loop's output time is zero here), leaving the rest in front of newer
/// output for the next frames. What the merge could not hold is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_goes_before_a_hundred_megabytes_of_pending_output() {
    let dir = tempfile::tempdir().unwrap();
    let ws = crate::support::open(dir.path(), config()).await;
    let opts = prompt_options();
    let cap = opts.config.output_frame_bytes;
    let mut l = Loop::new(ws, opts, Duration::ZERO);
    l.turn();
    let done = dir.path().join("flood-done");
    l.text("yes | head -c 100000000; touch flood-done; sleep 600");
    l.keys("enter");
    l.turn();
    assert!(l.command(|p| p.busy().is_some()), "the command runs");

    // No turn while the flood runs: its 100 MB pile up behind the pane
    // (the merge keeps the newest `output_frame_bytes` and counts the
    // rest), as when the UI falls behind.
    wait("the flood to be printed", || done.exists()).await;
    wait("the merge to hold a frame's output", || {
        l.command(|p| p.waiting_output()) == cap
    })
    .await;
    let parsed = l.command(|p| p.parsed_bytes());

    l.keys("ctrl-x");
    let rep = l.turn();
    assert_eq!(rep.inputs_first, 1, "the key came first: {rep:?}");
    assert!(rep.drew, "{rep:?}");
    let s = l.screen();
    assert!(
        s.contains("Kill `yes | head -c 100000000"),
        "the key's effect is in this turn's frame:\n{s}"
    );
    assert_eq!(
        l.command(|p| p.parsed_bytes()) - parsed,
        PULL_SLICE as u64,
        "the frame parsed one slice"
    );
    assert!(l.command(|p| p.has_deferred_output()));
    assert!(l.app.needs_frame(), "the rest asks for the next frame");
    assert!(
        l.command(|p| p.waiting_output()) >= cap - PULL_SLICE,
        "the rest waits, not dropped"
    );
    let skipped = l.command(|p| p.skipped());
    assert!(
        skipped > 95_000_000,
        "what the merge could not hold is counted: {skipped}"
    );
    assert!(s.contains("skipped"), "and named in the title:\n{s}");

    // The next turns go on one slice at a time; y kills the tree.
    l.keys("y");
    l.until("the kill", |s| s.contains("✗ killed")).await;
}

/// A key does not wait out the frame budget output frames keep: with a
/// budget of one second, a turn with only a message 300 ms after a frame
/// does not draw, and a turn with a key does (a quarter of the budget has
/// passed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_drawn_before_the_frame_budget_is_over() {
    use wsbench::tui::action::Level;
    let dir = tempfile::tempdir().unwrap();
    let ws = crate::support::open(dir.path(), config()).await;
    let mut l = Loop::with_state(ws, crate::support::tui::options(), LoopState::new(1));
    assert!(l.turn().drew, "the first turn draws");
    tokio::time::sleep(Duration::from_millis(300)).await;
    l.app
        .cx
        .tx
        .try_send(AppMsg::Toast(Level::Info, "not a key".into()))
        .unwrap();
    let rep = l.turn();
    // The toast and whatever the panes' first loads reported.
    assert!(rep.messages >= 1 && rep.inputs == 0, "{rep:?}");
    assert!(
        !rep.drew,
        "output and messages keep the frame rate: {rep:?}"
    );
    let before = l.app.focus();
    l.keys("tab");
    let rep = l.turn();
    assert!(rep.drew, "a key's frame comes at once: {rep:?}");
    assert_ne!(l.app.focus(), before, "the key moved the focus");

    // Right after a frame, a key's own frame is owed after a quarter of
    // the budget: the loop's deadline says so, and a turn then draws
    // with no further input.
    l.keys("tab");
    let rep = l.turn();
    assert!(!rep.drew, "too soon after the last frame: {rep:?}");
    let due = l.st.deadline(&l.app);
    assert!(
        due < Instant::now() + Duration::from_millis(500),
        "the key's frame is owed in a quarter of the budget, not a whole one"
    );
    tokio::time::sleep_until(due.into()).await;
    let rep =
        l.st.turn(&mut l.app, &mut l.input_rx, &mut l.sub, &mut l.term)
            .unwrap();
    assert!(rep.drew && rep.inputs == 0, "{rep:?}");
}

/// A local sandbox that holds the claim of every tool-result file (the
/// first thing the offload does) until [`HeldWrites::release`].
struct HeldWrites {
    inner: LocalSandbox,
    gate: Semaphore,
}

impl HeldWrites {
    fn release(&self) {
        self.gate.add_permits(1);
    }
}

#[async_trait]
impl Sandbox for HeldWrites {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn workdir(&self) -> &str {
        self.inner.workdir()
    }
    fn host_root(&self) -> Option<&Path> {
        self.inner.host_root()
    }
    fn host_path(&self, path: &str) -> Option<std::path::PathBuf> {
        self.inner.host_path(path)
    }
    fn lock_identity(&self) -> Option<String> {
        self.inner.lock_identity()
    }
    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.inner.exec(req, sink).await
    }
    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.inner.spawn(req).await
    }
    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        self.inner.read(path, range).await
    }
    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        self.inner.write(path, data).await
    }
    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        self.inner.write_stream(path, reader).await
    }
    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        self.inner.append(path, data).await
    }
    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        if path.contains("/tool_result-") {
            let _permit = self.gate.acquire().await.expect("gate open");
        }
        self.inner.create_new(path, data).await
    }
    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        self.inner.list(path).await
    }
    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        self.inner.stat(path).await
    }
    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        self.inner.remove(path, recursive).await
    }
    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        self.inner.rename(from, to).await
    }
    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        self.inner.mkdir(path, parents).await
    }
    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        self.inner.watch(path).await
    }
}

/// The `tool_result-*.txt` files of session `s-001` on disk.
fn tool_results(ws: &Workspace) -> Vec<String> {
    let dir = ws.layout().session_dir("s-001").unwrap();
    std::fs::read_dir(Path::new(&dir))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("tool_result-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Under `yes`, `stop` (Ctrl-X + y, or Ctrl-C) shows `first` (`✗ killed`
/// or `✗ exit 130 (SIGINT)`) with "the processes are gone; saving the
/// output…" while no tool-result file exists (its claim is held), and
/// the final line with the call's duration only once it is written.
async fn the_end_line_comes_before_the_file(stop: &str, first: &str) {
    let dir = tempfile::tempdir().unwrap();
    let sb = Arc::new(HeldWrites {
        inner: LocalSandbox::open(dir.path()).unwrap(),
        gate: Semaphore::new(0),
    });
    let ws = Workspace::open(sb.clone(), config(), EventBus::default())
        .await
        .unwrap();
    let mut l = Loop::new(ws.clone(), prompt_options(), Duration::from_millis(4));
    l.turn();
    l.text("yes");
    l.keys("enter");
    l.until_with("the flood on screen", |l| {
        l.command(|p| p.output().iter().filter(|o| o.line.text == "y").count()) > 5
    })
    .await;
    l.keys(stop);
    if stop == "ctrl-x" {
        l.until("the kill dialog", |s| s.contains("Kill `yes`"))
            .await;
        l.keys("y");
    }
    let saving = format!("{first} · the processes are gone; saving the output…");
    let s = l.until(&saving, |s| s.contains(&saving)).await;
    assert!(
        tool_results(&ws).is_empty(),
        "{stop}: a tool-result file exists before its write was let go"
    );
    let last = format!("{first} · ");
    let final_line = |s: &str| {
        s.lines()
            .any(|l| l.contains(&last) && !l.contains("processes are gone"))
    };
    assert!(!final_line(&s), "{stop}: the final line came first:\n{s}");
    assert!(l.command(|p| p.busy().is_some()), "still saving");

    sb.release();
    let s = l.until("the final line", final_line).await;
    assert_eq!(tool_results(&ws).len(), 1, "{stop}:\n{s}");
    assert!(l.command(|p| p.busy().is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_flood_shows_killed_before_its_tool_result_is_written() {
    the_end_line_comes_before_the_file("ctrl-x", "✗ killed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_flood_shows_its_exit_before_its_tool_result_is_written() {
    the_end_line_comes_before_the_file("ctrl-c", "✗ exit 130 (SIGINT)").await;
}
