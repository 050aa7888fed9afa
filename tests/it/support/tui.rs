//! Helpers for the TUI tests: a fixture workspace with fixed times, an app
//! with a fixed clock, key and paste input, and screen text from ratatui's
//! TestBackend.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event, KeyEvent, KeyEventKind, KeyEventState};
use unicode_width::UnicodeWidthStr;
use wsbench::backend::local::LocalSandbox;
use wsbench::engine::events::Subscriber;
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};
use wsbench::tui::app::{App, AppOptions};
use wsbench::tui::config::TuiConfig;
use wsbench::tui::keymap::KeyChord;
use wsbench::tui::theme::Theme;

/// The fixed "now" of snapshot tests: 2021-01-01 00:00:00 UTC, an hour
/// after the fixture's files are stamped. In the past, so files a test
/// writes for real always show an age of 0 s whatever the date.
pub const NOW: u64 = 1_609_459_200;

/// The fixture's files are stamped with this time.
pub const STAMP: u64 = NOW - 3600;

/// Workspace id used in tests.
pub const WS_ID: &str = "0123456789abcdef0123456789abcdef";

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// Sets every file's and directory's mtime under `dir` to [`STAMP`].
pub fn stamp(dir: &Path) {
    let t = UNIX_EPOCH + Duration::from_secs(STAMP);
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            stamp(&e.path());
        } else {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(e.path())
                .unwrap();
            f.set_modified(t).unwrap();
        }
    }
}

/// A writable copy of the reference workspace with fixed times; `extra`
/// may add files first.
pub async fn fixture(extra: impl FnOnce(&Path)) -> (tempfile::TempDir, Arc<Workspace>) {
    let src = super::fixtures().join("reference-workspace");
    assert!(src.is_dir(), "fixture missing: {}", src.display());
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&src, dir.path());
    extra(dir.path());
    let ws = open(dir.path()).await;
    // Opening equips partitions (new files): stamp after that, too.
    ws.skills().list("").await.unwrap();
    stamp(dir.path());
    (dir, ws)
}

/// Opens a local workspace with the fixed id.
pub async fn open(dir: &Path) -> Arc<Workspace> {
    let sb = LocalSandbox::open(dir).unwrap();
    let cfg = WorkspaceConfig {
        workspace_id: Some(WS_ID.into()),
        ..Default::default()
    };
    Workspace::open(Arc::new(sb), cfg, EventBus::default())
        .await
        .unwrap()
}

/// Options with a fixed clock, user and session, no file watch.
pub fn options() -> AppOptions {
    let mut o = AppOptions::new(TuiConfig::default());
    o.clock = Arc::new(|| UNIX_EPOCH + Duration::from_secs(NOW));
    o.user = "tester".into();
    o.session = "s-001".into();
    o.theme = Theme::default();
    o.watch = false;
    o
}

/// [`options`] with `[tui] start_in_prompt = true`: the keyboard starts
/// in the Command prompt (the behaviour before issue 22, kept as a
/// setting).
pub fn prompt_options() -> AppOptions {
    let mut o = options();
    o.config.start_in_prompt = true;
    o
}

/// The app plus a subscription to its workspace's bus.
pub struct Harness {
    pub app: App,
    pub sub: Subscriber,
    pub term: Terminal<TestBackend>,
}

impl Harness {
    pub async fn new(ws: Arc<Workspace>, opts: AppOptions, w: u16, h: u16) -> Harness {
        let sub = ws.events().subscribe();
        let app = App::new(ws, opts);
        let term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let mut hs = Harness { app, sub, term };
        hs.settle().await;
        hs
    }

    /// Runs tasks and engine events until nothing is pending.
    pub async fn settle(&mut self) {
        for _ in 0..50 {
            self.app.settle(Duration::from_secs(20)).await;
            let mut any = false;
            while let Some(r) = self.sub.try_recv() {
                self.app.on_engine(r);
                any = true;
            }
            if !any && self.app.cx.inflight() == 0 {
                break;
            }
        }
    }

    /// Draws, settles what drawing started (sniffing rows), draws again.
    pub async fn draw(&mut self) -> String {
        self.term.draw(|f| self.app.render(f)).unwrap();
        self.settle().await;
        self.term.draw(|f| self.app.render(f)).unwrap();
        screen(self.term.backend())
    }

    /// The pane `id`, as its own type `P` (panics when it is missing or
    /// of another type: a test's mistake).
    pub fn pane<P: 'static>(&mut self, id: &str) -> &mut P {
        self.app
            .pane_mut(id)
            .unwrap_or_else(|| panic!("no pane {id}"))
            .as_any_mut()
            .downcast_mut::<P>()
            .unwrap_or_else(|| panic!("pane {id} is of another type"))
    }

    pub fn resize(&mut self, w: u16, h: u16) {
        self.term.backend_mut().resize(w, h);
        self.term
            .resize(ratatui::layout::Rect::new(0, 0, w, h))
            .unwrap();
    }

    /// Presses keys given as key-map names separated by spaces
    /// (`"2 j j enter"`, `"ctrl-s"`).
    pub async fn keys(&mut self, keys: &str) {
        for k in keys.split_whitespace() {
            self.app.on_input(Event::Key(key(k)));
            self.settle().await;
        }
    }

    /// Types text character by character.
    pub async fn type_text(&mut self, s: &str) {
        for c in s.chars() {
            let ev = KeyEvent {
                code: ratatui::crossterm::event::KeyCode::Char(c),
                modifiers: ratatui::crossterm::event::KeyModifiers::NONE,
                kind: KeyEventKind::Press,
                state: KeyEventState::NONE,
            };
            self.app.on_input(Event::Key(ev));
        }
        self.settle().await;
    }

    pub async fn paste(&mut self, s: &str) {
        self.app.on_input(Event::Paste(s.to_string()));
        self.settle().await;
    }
}

pub fn key(spec: &str) -> KeyEvent {
    let c = KeyChord::parse(spec).unwrap();
    let mut mods = c.mods;
    if let ratatui::crossterm::event::KeyCode::Char(ch) = c.code
        && ch.is_ascii_uppercase()
    {
        mods |= ratatui::crossterm::event::KeyModifiers::SHIFT;
    }
    KeyEvent {
        code: c.code,
        modifiers: mods,
        kind: KeyEventKind::Press,
        state: KeyEventState::NONE,
    }
}

/// The screen as text, one line per row (wide characters once).
pub fn screen(b: &TestBackend) -> String {
    let buf = b.buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut x = 0;
        let mut line = String::new();
        while x < buf.area.width {
            let s = buf[(x, y)].symbol();
            line.push_str(s);
            x += UnicodeWidthStr::width(s).max(1) as u16;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Insta settings that hide what changes from run to run: temp paths,
/// clock times, durations, dates of the journal.
pub fn settings(tmp: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("snapshots");
    s.set_prepend_module_to_snapshot(false);
    let p = regex_escape(&tmp.display().to_string());
    s.add_filter(&p, "[WS]");
    s.add_filter(r"/tmp/\.tmp[A-Za-z0-9]+", "[WS]");
    s.add_filter(r"\b\d\d:\d\d:\d\d\b", "[TIME]");
    s.add_filter(r"\b\d\d-\d\d \d\d:\d\d\b", "[DATE]");
    // Durations vary in width too: swallow the padding after them.
    s.add_filter(r"\b\d+(\.\d+)?(ms|s)\b *", "[DUR]");
    s.add_filter(r"\b\d+m\d\ds\b *", "[DUR]");
    s.add_filter(r"tui_[0-9a-f]{12}", "tui_[ID]");
    s
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
