//! TUI benchmarks (criterion):
//!
//! * `frame/100k_tree_1m_log`: one frame at 120×40 with a 100,000-entry
//!   expanded file tree and a 1,000,000-line log on screen (target ≤ 8 ms);
//! * `finder/rank_100k`: the file finder re-ranking 100,000 paths for one
//!   keystroke (a three-letter query; target ≤ 16 ms, one frame);
//! * `start/first_frame`: open a workspace on a fresh local directory,
//!   build the app, draw the first frame (target ≤ 150 ms);
//! * memory: resident set size before and after streaming 1,000,000 lines
//!   of command output through the Command pane (buffer 10,000 lines),
//!   printed before the criterion runs — it must stay flat.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Style;
use wsbench::backend::local::LocalSandbox;
use wsbench::backend::{FileKind, FileStat, StreamKind};
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};
use wsbench::tui::action::{Level, LogLine};
use wsbench::tui::app::{App, AppOptions};
use wsbench::tui::config::TuiConfig;
use wsbench::tui::panes::command::CommandPane;
use wsbench::tui::panes::files::FilesPane;
use wsbench::tui::panes::logs::LogsPane;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn workspace(dir: &std::path::Path) -> Arc<Workspace> {
    let sb = LocalSandbox::open(dir).unwrap();
    Workspace::open(
        Arc::new(sb),
        WorkspaceConfig::default(),
        EventBus::default(),
    )
    .await
    .unwrap()
}

fn stat(name: String, kind: FileKind) -> FileStat {
    FileStat {
        name,
        kind,
        size: 1234,
        modified: None,
        link_target: None,
        target_is_dir: false,
        mode: None,
    }
}

/// Resident set size in KiB, from /proc.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|pages| pages * 4)
        .unwrap_or(0)
}

fn memory_report() {
    let cfg = TuiConfig::default();
    let mut pane = CommandPane::new(&cfg);
    pane.begin_run("seq 1 1000000", Style::default());
    let chunk: Vec<u8> = (0..1000)
        .flat_map(|i| format!("output line {i:07} with some text\n").into_bytes())
        .collect();
    let before = rss_kib();
    let mut at_100k = 0;
    for i in 0..1000 {
        pane.feed(StreamKind::Stdout, &chunk, Style::default());
        if i == 99 {
            at_100k = rss_kib();
        }
    }
    let after = rss_kib();
    println!(
        "memory: command output, buffer {} lines: RSS {} KiB before, {} KiB after 100,000 lines, {} KiB after 1,000,000 lines (held {} lines)",
        cfg.output_buffer_lines,
        before,
        at_100k,
        after,
        pane.output().len()
    );
}

fn frame(c: &mut Criterion) {
    let rt = rt();
    let _g = rt.enter();
    let dir = tempfile::tempdir().unwrap();
    let ws = rt.block_on(workspace(dir.path()));
    let root = ws.layout().workdir().to_string();
    let cfg = TuiConfig {
        log_buffer_lines: 1_000_000,
        ..Default::default()
    };
    let mut opts = AppOptions::new(cfg);
    opts.watch = false;
    let mut app = App::new(ws, opts);
    rt.block_on(app.settle(Duration::from_secs(10)));
    // 1,000 directories of 99 files: 100,000 entries, all expanded.
    app.pane_call("files", |f: &mut FilesPane, cx| {
        let dirs: Vec<FileStat> = (0..1000)
            .map(|i| stat(format!("dir{i:04}"), FileKind::Dir))
            .collect();
        f.apply_listing(&root, dirs);
        for i in 0..1000 {
            let d = format!("{root}/dir{i:04}");
            let files = (0..99)
                .map(|j| stat(format!("file{j:03}.rs"), FileKind::File))
                .collect();
            f.apply_listing(&d, files);
            f.expand_path(&d, cx);
        }
        assert_eq!(f.visible().len(), 100_000);
    });
    app.pane_call("logs", |l: &mut LogsPane, _| {
        for i in 0..1_000_000u32 {
            let level = if i % 97 == 0 {
                Level::Warn
            } else {
                Level::Info
            };
            l.push(LogLine::now(
                level,
                "bench",
                format!("log line {i} with a message of moderate length"),
            ));
        }
        assert_eq!(l.len(), 1_000_000);
    });
    // Select a row in the middle of the tree.
    app.run_action("app.focus_files");
    for _ in 0..500 {
        app.run_action("files.page_down");
    }
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    term.draw(|f| app.render(f)).unwrap();
    c.bench_function("frame/100k_tree_1m_log", |b| {
        b.iter(|| {
            term.draw(|f| app.render(f)).unwrap();
        });
    });
}

/// One keystroke of the finder over 100,000 realistic paths: every path
/// scored by nucleo and the matches sorted (issue 19: ≤ 16 ms).
fn finder(c: &mut Criterion) {
    use wsbench::tui::panes::finder::rank::{haystacks, path_matcher, rank};
    let paths: Vec<String> = (0..100_000)
        .map(|i| {
            format!(
                "src/module_{}/sub_{}/component_{i}_{}.rs",
                i % 97,
                i % 13,
                if i % 3 == 0 { "client" } else { "server" }
            )
        })
        .collect();
    let hay = haystacks(&paths);
    let mut m = path_matcher();
    c.bench_function("finder/rank_100k", |b| {
        b.iter(|| rank(&mut m, "mcl", &hay).len());
    });
}

fn start(c: &mut Criterion) {
    let rt = rt();
    let mut g = c.benchmark_group("start");
    g.sample_size(20);
    g.bench_function("first_frame", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let dir = tempfile::tempdir().unwrap();
                let t0 = Instant::now();
                rt.block_on(async {
                    let ws = workspace(dir.path()).await;
                    let mut opts = AppOptions::new(TuiConfig::default());
                    opts.watch = true;
                    let mut app = App::new(ws, opts);
                    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
                    term.draw(|f| app.render(f)).unwrap();
                });
                total += t0.elapsed();
            }
            total
        });
    });
    g.finish();
}

criterion_group!(benches, frame, finder, start);

fn main() {
    memory_report();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
