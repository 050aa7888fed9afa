//! Issue 16's benchmarks: floods in a real terminal (tmux) and through
//! `wsbench exec`. A small harness, not criterion: each figure needs a
//! real process and a real terminal.
//!
//! * key-to-screen latency while `yes` floods the Command pane, then
//!   while 1 MiB lines without newlines do (`awk`): Tab / Shift-Tab moves
//!   the focus; the time until `capture-pane` shows the new focused
//!   border, p50 and p99 over `FLOOD_KEYS` presses (100) each;
//! * TUI RSS idle, after 1 GB of `yes`, and after 10 × 50 MB without
//!   newlines (run over run);
//! * ctrl-c to `✗ exit 130` (SIGINT) and ctrl-x + `y` to `✗ killed`
//!   under each flood: to the first line (the processes are gone) and to
//!   the final one (the tool-result file written, the call's duration);
//! * `wsbench exec` of 1 GB to a pipe against `cat` of the same bytes,
//!   with the peak RSS of `wsbench`.
//!
//! `cargo bench --bench flood` (release); `WSBENCH_BIN` picks another
//! binary, `FLOOD_MB` scales the 1 GB runs down, `FLOOD_EXEC_ONLY=1`
//! stops after the `exec` figures, `FLOOD_KEYS_ONLY=1` runs only the key
//! and kill figures (no `exec`, no RSS runs). Needs tmux; prints
//! `SKIPPED` without it. Latency is measured by polling `capture-pane`
//! through one tmux control-mode client (`tmux -C`), so a poll costs no
//! process start: through a new `tmux` process each, a poll took 4 ms at
//! the median and 20 ms at p90 on the loaded 2-core VM, and the figures
//! carried that; through the control client, 0.1 ms at the median. Polls
//! are 1 ms apart.

use std::io::{BufRead as _, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn bin() -> String {
    std::env::var("WSBENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_wsbench").to_string())
}

fn mb() -> u64 {
    std::env::var("FLOOD_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

struct Tmux {
    sock: String,
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    /// Set once the session runs (`Tmux::start`).
    control: Option<std::cell::RefCell<Control>>,
}

/// A tmux control-mode client (`tmux -C attach -f no-output`): commands
/// go over its stdin and their output comes back as `%begin` … `%end`
/// blocks, read by a thread, so a screen poll starts no process. It does
/// not change the window's size, and pane output is not streamed to it.
struct Control {
    child: Child,
    stdin: ChildStdin,
    blocks: mpsc::Receiver<Vec<String>>,
}

impl Control {
    fn attach(sock: &str) -> Control {
        let mut child = Command::new("tmux")
            .args(["-L", sock, "-C", "attach", "-f", "no-output", "-t", "t"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, blocks) = mpsc::channel();
        std::thread::spawn(move || {
            let mut block: Option<Vec<String>> = None;
            for line in out.lines() {
                let Ok(line) = line else { break };
                if line.starts_with("%begin") {
                    block = Some(Vec::new());
                } else if line.starts_with("%end") || line.starts_with("%error") {
                    if let Some(b) = block.take()
                        && tx.send(b).is_err()
                    {
                        break;
                    }
                } else if let Some(b) = &mut block {
                    b.push(line);
                }
                // Other lines are notifications (`%session-changed`, …).
            }
        });
        let mut c = Control {
            child,
            stdin,
            blocks,
        };
        // The attach answers with a block of its own: read up to a
        // marker so each later command gets its own answer.
        writeln!(c.stdin, "display-message -p ctl-ready").unwrap();
        c.stdin.flush().unwrap();
        while !c
            .blocks
            .recv_timeout(Duration::from_secs(30))
            .expect("tmux control client")
            .iter()
            .any(|l| l == "ctl-ready")
        {}
        c
    }

    /// Runs one tmux command; returns its output lines.
    fn cmd(&mut self, cmd: &str) -> Vec<String> {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        self.blocks
            .recv_timeout(Duration::from_secs(30))
            .expect("tmux control client answers")
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Tmux {
    fn start() -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let sock = format!("wsbench-flood-{}", std::process::id());
        let cmd = format!(
            "env -u TMUX XDG_CONFIG_HOME={c}/config XDG_DATA_HOME={c}/data HOME={c} {b} --workdir {w}",
            c = dir.path().display(),
            b = bin(),
            w = ws.display()
        );
        let mut t = Tmux {
            sock,
            _dir: dir,
            ws,
            control: None,
        };
        t.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "40",
            &cmd,
        ]);
        t.tmux(&["set", "-g", "escape-time", "0"]);
        t.control = Some(std::cell::RefCell::new(Control::attach(&t.sock)));
        t.wait("wsbench │", Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(500));
        // The TUI starts on Files (issue 22): `i` puts the keyboard in the
        // Command prompt, where it stays between runs.
        t.send("i");
        std::thread::sleep(Duration::from_millis(200));
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.sock)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        match &self.control {
            Some(c) => c.borrow_mut().cmd("capture-pane -p -t t").join("\n"),
            None => self.tmux(&["capture-pane", "-p", "-t", "t"]),
        }
    }

    fn send(&self, k: &str) {
        self.tmux(&["send-keys", "-t", "t", k]);
    }

    /// Sends a key through the control client (no process start, so the
    /// clock starts right before the key goes out).
    fn send_fast(&self, k: &str) {
        match &self.control {
            Some(c) => {
                c.borrow_mut().cmd(&format!("send-keys -t t {k}"));
            }
            None => self.send(k),
        }
    }

    fn wait(&self, needle: &str, limit: Duration) -> Duration {
        self.wait_for(needle, limit, |s| s.contains(needle))
    }

    /// Polls the screen until `done` holds (`what` names it on failure).
    fn wait_for(&self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) -> Duration {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if done(&s) {
                return t0.elapsed();
            }
            assert!(t0.elapsed() < limit, "no {what:?} after {limit:?}:\n{s}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn pid(&self) -> u32 {
        self.tmux(&["display-message", "-p", "-t", "t", "#{pane_pid}"])
            .trim()
            .parse()
            .unwrap()
    }

    fn run(&self, cmd: &str) {
        self.tmux(&["send-keys", "-t", "t", "-l", cmd]);
        self.send("Enter");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.control = None;
        let _ = Command::new("tmux")
            .args(["-L", &self.sock, "kill-server"])
            .output();
    }
}

fn rss_mib(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// `CLOCK_MONOTONIC` in seconds: the clock `perf record -k
/// CLOCK_MONOTONIC` stamps kernel events with, so a kill's steps (the
/// signals, the processes' exits) can be lined up with the keys sent
/// and the lines seen here.
fn mono() -> f64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime fills the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn tui_figures() {
    let t = Tmux::start();
    let pid = t.pid();
    let idle = rss_mib(pid);
    println!("tui idle RSS: {idle:.1} MiB");
    if std::env::var_os("FLOOD_KEYS_ONLY").is_none() {
        rss_figures(&t, pid);
    }
    key_figures(&t);
}

/// RSS after 1 GB of `yes` and after 10 runs without newlines.
fn rss_figures(t: &Tmux, pid: u32) {
    // 1 GB of `yes`, then RSS.
    t.run(&format!("yes | head -c {}M", mb()));
    t.wait("✓ exit 0", Duration::from_secs(600));
    println!("tui RSS after {} MB of yes: {:.1} MiB", mb(), rss_mib(pid));
    for i in 1..=10 {
        // The output names the run (`done-3`); the command line does not.
        t.run(&format!(
            "head -c {}M /dev/zero | tr '\\0' x; printf '\\ndo%sne-%s\\n' '' {i}",
            mb() / 20
        ));
        t.wait(&format!("done-{i}"), Duration::from_secs(600));
        // The status line (and the end of the run) follows the output.
        std::thread::sleep(Duration::from_secs(1));
        if i == 1 || i == 10 {
            println!(
                "tui RSS after {i} × {} MB without newlines: {:.1} MiB",
                mb() / 20,
                rss_mib(pid)
            );
        }
    }
}

/// The floods the key and kill figures run under: `yes`, and 1 MiB
/// lines without newlines at full speed (one `awk`, no process per line).
const KEY_FLOODS: [(&str, &str); 2] = [
    ("yes", "yes"),
    (
        "1 MiB lines",
        "awk 'BEGIN { s = \"x\"; while (length(s) < 1048576) s = s s; for (;;) print s }'",
    ),
];

/// Key-to-screen latency, then Ctrl-C and Ctrl-X + `y`, under each of
/// [`KEY_FLOODS`].
fn key_figures(t: &Tmux) {
    for (label, cmd) in KEY_FLOODS {
        keys_under(t, label, cmd);
    }
    let offloaded: u64 = walk_bytes(&t.ws);
    println!("workspace bytes after the runs: {offloaded}");
}

/// Whether a line of `screen` starts with `mark` followed by ` · ` and a
/// duration (the final status line, not the early one).
fn final_line(screen: &str, mark: &str) -> bool {
    screen.lines().any(|l| {
        l.split(mark).nth(1).is_some_and(|rest| {
            rest.strip_prefix(" · ")
                .is_some_and(|d| d.starts_with(|c: char| c.is_ascii_digit()))
        })
    })
}

/// The key and kill figures under `cmd` (the keyboard in the prompt).
fn keys_under(t: &Tmux, label: &str, cmd: &str) {
    t.run(cmd);
    t.wait("running", Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(2));
    t.send("Escape");
    std::thread::sleep(Duration::from_millis(200));
    let n: usize = std::env::var("FLOOD_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let mut lat = Vec::new();
    for i in 0..n {
        let (key, border) = if i % 2 == 0 {
            ("Tab", "┏ Logs")
        } else {
            ("BTab", "┏ Command")
        };
        let t0 = Instant::now();
        t.send_fast(key);
        t.wait(border, Duration::from_secs(30));
        lat.push(t0.elapsed());
    }
    let mean = lat.iter().sum::<Duration>() / n.max(1) as u32;
    println!(
        "key-to-screen under {label}, {n} keys: p50 {:?} p99 {:?} max {:?} mean {mean:?}",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99),
        pct(&mut lat, 1.0),
    );
    if n % 2 == 1 {
        t.send("BTab");
        t.wait("┏ Command", Duration::from_secs(30));
    }
    // Ctrl-C interrupts (SIGINT, issue 17); Ctrl-X + `y` kills the tree.
    let (t0, m0) = (Instant::now(), mono());
    t.send_fast("C-c");
    t.wait("✗ exit 130", Duration::from_secs(60));
    let (first, m1) = (t0.elapsed(), mono());
    t.wait_for("the final line", Duration::from_secs(60), |s| {
        final_line(s, "✗ exit 130 (SIGINT)")
    });
    println!(
        "ctrl-c to ✗ exit 130 (SIGINT) under {label}: {first:?} (final line {:?}; monotonic {m0:.6} → {m1:.6} → {:.6})",
        t0.elapsed(),
        mono()
    );
    // The keys above left the prompt (Escape): back into it.
    t.send("i");
    t.run(cmd);
    t.wait("running", Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(2));
    t.send("C-x");
    t.wait("kill", Duration::from_secs(10));
    let (t0, m0) = (Instant::now(), mono());
    t.send_fast("y");
    t.wait("✗ killed", Duration::from_secs(60));
    let (first, m1) = (t0.elapsed(), mono());
    t.wait_for("the final line", Duration::from_secs(60), |s| {
        final_line(s, "✗ killed")
    });
    println!(
        "ctrl-x + y to ✗ killed under {label}: {first:?} (final line {:?}; monotonic {m0:.6} → {m1:.6} → {:.6})",
        t0.elapsed(),
        mono()
    );
    // The keyboard is still in the prompt for the next flood.
    std::thread::sleep(Duration::from_millis(200));
}

fn walk_bytes(dir: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            walk_bytes(&e.path())
        } else {
            m.len()
        };
    }
    n
}

/// Runs `sh -c cmd`, stdout to a pipe drained here; returns the time and
/// the peak RSS (MiB) of the children waited so far.
fn timed(cmd: &str) -> (Duration, f64) {
    let t0 = Instant::now();
    let mut c = Command::new("sh")
        .args(["-c", cmd])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = c.stdout.take().unwrap();
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    c.wait().unwrap();
    let took = t0.elapsed();
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    (took, ru.ru_maxrss as f64 / 1024.0)
}

/// `wsbench exec` against `cat` of the same bytes, alternating, three
/// times each (`FLOOD_RUNS`), for zeros and for `yes` lines: on a shared
/// machine only the ratio within one run means anything.
fn exec_figures() {
    let dir = tempfile::tempdir().unwrap();
    let runs: usize = std::env::var("FLOOD_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for src in [
        format!("head -c {}M /dev/zero", mb()),
        format!("yes | head -c {}M", mb()),
    ] {
        let (mut cats, mut execs, mut peak) = (Vec::new(), Vec::new(), 0f64);
        for _ in 0..runs {
            cats.push(timed(&format!("{src} | cat")).0);
            let (ex, rss) = timed(&format!(
                "cd {d} && XDG_DATA_HOME={d}/data XDG_CONFIG_HOME={d}/config {b} --workdir {d} exec '{src}'",
                d = dir.path().display(),
                b = bin()
            ));
            execs.push(ex);
            peak = peak.max(rss);
        }
        let (cat, ex) = (pct(&mut cats, 0.5), pct(&mut execs, 0.5));
        println!(
            "exec `{src}` to a pipe, median of {runs}: {ex:?} vs cat {cat:?} ({:.2}× cat); peak RSS of the children so far {peak:.1} MiB",
            cat.as_secs_f64() / ex.as_secs_f64()
        );
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing
    // useful either: both run everything.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    if std::env::var_os("FLOOD_KEYS_ONLY").is_none() {
        exec_figures();
    }
    if std::env::var_os("FLOOD_EXEC_ONLY").is_some() {
        return;
    }
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("SKIPPED: tmux not installed (TUI figures)");
        return;
    }
    tui_figures();
}
