//! Issue 16: the TUI's memory under floods, measured in-process and
//! headless. A small harness, not criterion: it builds the real app on a
//! local workspace (no terminal; a 120×40 `TestBackend`), runs real
//! commands in the Command pane through the engine (session shell, Bash
//! tool, spool, event bus) and, like the render loop, drains what is
//! pending and draws a frame every 16 ms. It prints this process's
//! `VmRSS` and `VmHWM` (from `/proc/self/status`):
//!
//! * idle, after the first frames;
//! * after `FLOOD_MB` MB of `yes` (default 1024);
//! * after each of 10 runs of `FLOOD_MB / 20` MB without a newline, so
//!   growth run over run shows.
//!
//! `cargo bench --bench flood_rss`; `FLOOD_MB=200` for a shorter run.
//! Target (issue 16): at most 64 MiB above idle, and not growing run
//! over run. The terminal-level figures (tmux, a real binary) are in
//! `benches/flood.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use wsbench::backend::local::LocalSandbox;
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};
use wsbench::tui::app::{App, AppOptions};
use wsbench::tui::config::TuiConfig;
use wsbench::tui::panes::command::CommandPane;

/// `(VmRSS, VmHWM)` of this process in MiB.
fn mem_mib() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .unwrap_or(0.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn flood_mb() -> u64 {
    std::env::var("FLOOD_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

struct Headless {
    app: App,
    sub: wsbench::engine::events::Subscriber,
    term: Terminal<TestBackend>,
}

impl Headless {
    /// One turn of the render loop: tasks, engine events, a frame.
    fn frame(&mut self) {
        self.app.drain();
        while let Some(r) = self.sub.try_recv() {
            self.app.on_engine(r);
        }
        self.app.tick();
        self.term.draw(|f| self.app.render(f)).expect("draw");
    }

    fn running(&mut self) -> bool {
        self.app
            .pane_call("command", |c: &mut CommandPane, _| c.is_running())
            .unwrap_or(false)
    }

    /// Runs `cmd` in the Command pane and turns frames until it ends
    /// (at most 30 minutes: a guard, not a figure). Returns its time.
    async fn run(&mut self, cmd: &str) -> Duration {
        let t0 = Instant::now();
        let cmd = cmd.to_string();
        self.app
            .pane_call("command", |c: &mut CommandPane, cx| c.run(cmd, cx));
        self.frame();
        while self.running() {
            assert!(t0.elapsed() < Duration::from_secs(1800), "the run hung");
            tokio::time::sleep(Duration::from_millis(16)).await;
            self.frame();
        }
        // The exit and the offload's events.
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(16)).await;
            self.frame();
        }
        t0.elapsed()
    }
}

fn main() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let _g = rt.enter();
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = rt.block_on(async {
        let sb = LocalSandbox::open(dir.path()).expect("local sandbox");
        Workspace::open(
            Arc::new(sb),
            WorkspaceConfig::default(),
            EventBus::default(),
        )
        .await
        .expect("workspace")
    });
    let sub = ws.events().subscribe();
    let mut opts = AppOptions::new(TuiConfig::default());
    opts.watch = false;
    let app = App::new(ws, opts);
    let term = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    let mut h = Headless { app, sub, term };
    rt.block_on(async {
        h.app.settle(Duration::from_secs(10)).await;
        for _ in 0..10 {
            h.frame();
        }
        let idle = mem_mib();
        println!("idle: RSS {:.1} MiB (peak {:.1})", idle.0, idle.1);
        let mb = flood_mb();
        let took = h.run(&format!("yes | head -c {mb}M")).await;
        let (rss, hwm) = mem_mib();
        println!(
            "after {mb} MB of yes ({took:.1?}): RSS {rss:.1} MiB ({:+.1} over idle), peak {hwm:.1} MiB",
            rss - idle.0
        );
        for i in 1..=10 {
            let took = h
                .run(&format!("head -c {}M /dev/zero | tr '\\0' x", mb / 20))
                .await;
            let (rss, hwm) = mem_mib();
            println!(
                "after run {i} of {} MB without newlines ({took:.1?}): RSS {rss:.1} MiB ({:+.1} over idle), peak {hwm:.1} MiB",
                mb / 20,
                rss - idle.0
            );
        }
    });
}
