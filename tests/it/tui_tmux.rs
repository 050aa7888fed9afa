//! Real-terminal tests: the built binary in tmux, driven with send-keys and
//! read with capture-pane. SKIPPED without tmux, failing under CI=true.
//!
//! * the issue's walk-through: run `echo hello` from the prompt, edit and
//!   save a file, quit, and find the terminal sane (`stty -a`);
//! * C22: a panic / an error inside the loop restores the terminal;
//! * C23: a bracketed multi-line paste lands in the prompt and runs once;
//! * C24: escapes in command output change neither the title nor the
//!   screen mode;
//! * the Agent pane runs the bugfix demo to its last message;
//! * Ctrl-C in the prompt clears the line or asks to kill, F1 opens help
//!   there, and neither strands the user;
//! * `!` opens a shell inside the workspace's sandbox (local says it is
//!   not sandboxed; bubblewrap and Docker are inside), and exiting it
//!   returns to an intact TUI;
//! * `wsbench --profile k8s` against the project's stub API server
//!   (`tests/it/support/k8s_stub.rs`): the TUI opens on a Pod workspace and runs
//!   `echo hello` in the Pod (needs `bwrap` for the stub's pods too).
//! * INT, QUIT and HUP sent with `kill` restore the terminal, kill the
//!   running command and exit 128 + signal.

use crate::support;
use crate::support::images;
use crate::support::k8s_stub;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_wsbench");

fn have_tmux() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "tmux is required under CI (apt-get install tmux)");
        eprintln!("SKIPPED: tmux not installed");
    }
    ok
}

struct Tmux {
    sock: String,
    dir: tempfile::TempDir,
}

/// One step of a scene ([`Tmux::scene`]): the tests read as keys and
/// what the screen must then show.
#[derive(Clone, Copy)]
enum Step<'a> {
    /// A named key (`Enter`, `Escape`, `C-s`), with a pause after.
    Key(&'a str),
    /// Text typed as is.
    Text(&'a str),
    /// Wait up to `.1` seconds for the text on screen.
    Wait(&'a str, u64),
    /// Let the app work for this many milliseconds.
    Pause(u64),
}

use Step::{Key, Pause, Text, Wait};

/// Leaving the TUI from where the keyboard is: Esc, `q`, exit status 0.
const QUIT: [Step<'static>; 3] = [Key("Escape"), Key("q"), Wait("EXIT=0", 10)];

impl Tmux {
    fn start(name: &str) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let sock = format!("wsbench-{name}-{}", std::process::id());
        let shell = format!(
            "env -u TMUX -u RUST_BACKTRACE XDG_CONFIG_HOME={c} XDG_DATA_HOME={d} HOME={h} PS1='$ ' sh",
            c = dir.path().join("config").display(),
            d = dir.path().join("data").display(),
            h = dir.path().display(),
        );
        let t = Tmux { sock, dir };
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
            &shell,
        ]);
        t.tmux(&["set", "-g", "escape-time", "0"]);
        t.wait_for("$", Duration::from_secs(10));
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.sock)
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn workspace(&self) -> PathBuf {
        let ws = self.dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        ws
    }

    fn literal(&self, s: &str) {
        self.tmux(&["send-keys", "-t", "t", "-l", s]);
        std::thread::sleep(Duration::from_millis(100));
    }

    /// A named key (`Enter`, `Escape`, `C-s`); a pause after each so an
    /// Escape is never read together with the next key as Alt-key.
    fn key(&self, k: &str) {
        self.tmux(&["send-keys", "-t", "t", k]);
        std::thread::sleep(Duration::from_millis(250));
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "t"])
    }

    fn display(&self, fmt: &str) -> String {
        self.tmux(&["display-message", "-p", "-t", "t", fmt])
            .trim()
            .to_string()
    }

    /// Plays `steps` in order; returns the screen of the last `Wait` (or
    /// the screen at the end when there is none).
    fn scene(&self, steps: &[Step<'_>]) -> String {
        let mut last = None;
        for step in steps {
            match *step {
                Key(k) => self.key(k),
                Text(s) => self.literal(s),
                Wait(want, secs) => last = Some(self.wait_for(want, Duration::from_secs(secs))),
                Pause(ms) => std::thread::sleep(Duration::from_millis(ms)),
            }
        }
        last.unwrap_or_else(|| self.screen())
    }

    /// A session with a new workspace and the TUI started on it, the
    /// keyboard in the Command prompt ([`Tmux::launch`]).
    fn with_tui(name: &str) -> (Tmux, PathBuf) {
        let t = Tmux::start(name);
        let ws = t.workspace();
        t.launch(&ws, "");
        (t, ws)
    }

    /// [`QUIT`], then the shell's terminal is sane.
    fn quit_sane(&self) {
        self.scene(&QUIT);
        self.assert_sane();
    }

    fn wait_for(&self, needle: &str, timeout: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(needle) {
                return s;
            }
            assert!(
                t0.elapsed() < timeout,
                "timed out waiting for {needle:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts the TUI on `ws` and puts the keyboard in the Command prompt
    /// with `i` (it starts on the Files list, issue 22): the tests here
    /// type a command first.
    fn launch(&self, ws: &Path, env: &str) {
        self.launch_on_files(ws, env);
        self.key("i");
    }

    /// Starts the TUI on `ws`, the focus where it starts (Files).
    fn launch_on_files(&self, ws: &Path, env: &str) {
        self.run_bin(&format!("{env} {BIN} --workdir {}", ws.display()));
        // Let the first loads land.
        self.scene(&[Wait("wsbench │", 20), Pause(500)]);
    }

    /// Types `cmd` (wsbench with its arguments) at the shell, the screen
    /// cleared first and `EXIT=<status>` printed after, and presses Enter.
    fn run_bin(&self, cmd: &str) {
        self.literal(&format!("clear; {cmd}; echo EXIT=$?"));
        self.key("Enter");
    }

    /// Asserts the shell's terminal is in cooked mode with echo.
    fn assert_sane(&self) {
        self.literal("clear; stty -a; printf 'X\\n'");
        self.key("Enter");
        let s = self.wait_for("\nX", Duration::from_secs(10));
        let tokens: Vec<&str> = s.split(|c: char| c.is_whitespace() || c == ';').collect();
        assert!(tokens.contains(&"echo"), "stty shows no echo:\n{s}");
        assert!(tokens.contains(&"icanon"), "stty shows no icanon:\n{s}");
        assert!(
            !tokens.contains(&"-echo") && !tokens.contains(&"-icanon"),
            "{s}"
        );
        assert_eq!(
            self.display("#{alternate_on}"),
            "0",
            "still on the alternate screen"
        );
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.sock, "kill-server"])
            .output();
    }
}

#[test]
fn run_edit_save_quit_and_the_terminal_is_sane() {
    if !have_tmux() {
        return;
    }
    let t = Tmux::start("walk");
    let ws = t.workspace();
    std::fs::write(ws.join("note.txt"), "hello note\n").unwrap();
    t.launch(&ws, "");
    // `launch` pressed `i`: the prompt has the keyboard.
    let s = t.scene(&[Text("echo hello"), Key("Enter"), Wait("✓ exit 0", 20)]);
    assert!(
        s.lines()
            .any(|l| l.contains("┃hello ") || l.contains("│hello ")),
        "{s}"
    );
    // Files: filter to the note, edit it, save.
    t.scene(&[
        Key("Escape"),
        Key("2"),
        Key("/"),
        Text("note"),
        Key("Enter"),
        Key("e"),
        Wait("Edit note.txt", 10),
        Key("End"),
        Text(" edited"),
        Key("C-s"),
        Wait("saved", 10),
    ]);
    assert_eq!(
        std::fs::read_to_string(ws.join("note.txt")).unwrap(),
        "hello note edited\n"
    );
    let s = t.scene(&QUIT);
    assert!(!s.contains("wsbench │"), "the TUI is still on screen:\n{s}");
    t.assert_sane();
}

#[test]
fn c22_panic_and_error_restore_the_terminal() {
    if !have_tmux() {
        return;
    }
    for (fault, needle) in [
        ("panic", "panicked"),
        ("error", "error: WSBENCH_TUI_FAULT=error"),
    ] {
        let t = Tmux::start(&format!("c22{fault}"));
        let ws = t.workspace();
        t.run_bin(&format!(
            "WSBENCH_TUI_FAULT={fault} {BIN} --workdir {}",
            ws.display()
        ));
        let s = t.scene(&[Wait("EXIT=", 20)]);
        assert!(!s.contains("EXIT=0"), "a {fault} exited 0:\n{s}");
        // The message is readable: its line starts at column 0.
        assert!(
            s.lines()
                .any(|l| l.starts_with(needle) || l.starts_with("thread '")),
            "{s}"
        );
        t.assert_sane();
        // Mouse capture and bracketed paste are off: a paste arrives as
        // plain text at the shell, with no escape garbage around it.
        t.tmux(&["set-buffer", "-b", "p", "pasted"]);
        t.tmux(&["paste-buffer", "-p", "-b", "p", "-t", "t"]);
        std::thread::sleep(Duration::from_millis(200));
        let s = t.screen();
        assert!(s.contains("pasted") && !s.contains("[200~"), "{s}");
    }
}

#[test]
fn c23_bracketed_paste_fills_the_prompt_and_runs_once() {
    if !have_tmux() {
        return;
    }
    let (t, ws) = Tmux::with_tui("c23");
    t.tmux(&["set-buffer", "-b", "p", "first line\nq\n:quit\nlast line"]);
    t.tmux(&["paste-buffer", "-p", "-b", "p", "-t", "t"]);
    std::thread::sleep(Duration::from_millis(500));
    let s = t.screen();
    assert!(s.contains("wsbench │"), "the paste quit the app:\n{s}");
    // Four prompt lines, one per pasted line.
    for l in ["┃first line ", "┃q ", "┃:quit ", "┃last line "] {
        assert!(s.contains(l), "{l} not a prompt line:\n{s}");
    }
    assert!(!s.contains("$ first line"), "the paste ran a command:\n{s}");
    t.scene(&[Key("Enter"), Wait("exit ", 20)]);
    let journal = std::fs::read_to_string(ws.join("sessions/default/journal.jsonl")).unwrap();
    let bash: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["tool"] == "Bash")
        .collect();
    assert_eq!(bash.len(), 1, "{journal}");
    assert_eq!(
        bash[0]["args"]["command"],
        "first line\nq\n:quit\nlast line"
    );
    // ESC in a paste shows as text.
    t.tmux(&["set-buffer", "-b", "e", "echo \x1b[31mX"]);
    t.tmux(&["paste-buffer", "-p", "-b", "e", "-t", "t"]);
    t.scene(&[Wait("echo ␛[31mX", 5), Key("C-c")]);
    t.scene(&QUIT);
}

#[test]
fn c24_output_escapes_do_not_reach_the_terminal() {
    if !have_tmux() {
        return;
    }
    let t = Tmux::start("c24");
    let ws = t.workspace();
    let title_before = t.display("#{pane_title}");
    t.launch(&ws, "");
    let s = t.scene(&[
        Text(r"printf 'before\n\033[2J\033[H\033[31mred\033[0m\n\033]0;pwned\007\033]52;c;aGk=\007\033[10;10Hmoved\n\033[?1049lafter\n'"),
        Key("Enter"),
        Wait("✓ exit 0", 20),
    ]);
    let pos = |w: &str| {
        s.find(&format!("┃{w} "))
            .unwrap_or_else(|| panic!("{w} missing:\n{s}"))
    };
    assert!(
        pos("before") < pos("red") && pos("red") < pos("moved") && pos("moved") < pos("after"),
        "{s}"
    );
    assert_ne!(t.display("#{pane_title}"), "pwned");
    assert_eq!(t.display("#{pane_title}"), title_before);
    assert_eq!(
        t.display("#{alternate_on}"),
        "1",
        "the app left the alternate screen"
    );
    assert!(s.contains("wsbench │"), "{s}");
    t.quit_sane();
}

/// `!` attaches the terminal to a shell inside the workspace's sandbox
/// (issue 17 point 2), never on the host: `config` is the profile table
/// (empty: the `--workdir` local workspace), `check` runs in the shell and
/// must print `want`; after `exit` the TUI is back and still runs
/// commands, and the terminal is sane after quitting.
fn bang_shell(name: &str, config: Option<String>, banner: &str, check: &str, want: &str) {
    let t = Tmux::start(name);
    match config {
        None => {
            let ws = t.workspace();
            t.launch(&ws, "");
        }
        Some(toml) => {
            let file = t.dir.path().join("wsbench.toml");
            std::fs::write(&file, toml).unwrap();
            t.run_bin(&format!(
                "{BIN} --config {} --profile {name}",
                file.display()
            ));
            t.scene(&[Wait("wsbench │", 90), Pause(500)]);
        }
    }
    let s = t.scene(&[
        Key("Escape"),
        Key("!"),
        Wait(banner, 30),
        Text(check),
        Key("Enter"),
        Wait(want, 30),
        Text("exit"),
        Key("Enter"),
        Wait("back from the", 30),
    ]);
    assert!(s.contains("wsbench │"), "the TUI is not back:\n{s}");
    assert_eq!(
        t.display("#{alternate_on}"),
        "1",
        "not on the alternate screen"
    );
    // Still works: the prompt runs a command.
    t.scene(&[
        Key("5"),
        Key("i"),
        Text("echo again"),
        Key("Enter"),
        Wait("✓ exit 0", 30),
        Key("Escape"),
        Key("q"),
        Wait("EXIT=0", 30),
    ]);
    t.assert_sane();
}

#[test]
fn bang_shell_local_says_it_is_not_sandboxed() {
    if !have_tmux() {
        return;
    }
    bang_shell(
        "bangl",
        None,
        "NOT sandboxed",
        "echo T=$(tty | cut -c1-8)",
        "T=/dev/pts",
    );
}

#[test]
fn bang_shell_bubblewrap_runs_in_the_sandbox() {
    if !have_tmux() {
        return;
    }
    if !support::have("bwrap") {
        support::skip_or_fail("bwrap is not installed");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let config = format!(
        "[profiles.bangb]\nbackend = \"bubblewrap\"\n\n[profiles.bangb.options]\nbase_dir = \"{}\"\n",
        base.path().display()
    );
    // Inside: the workspace is /workspace, the host's files are not there.
    bang_shell(
        "bangb",
        Some(config),
        "inside the bubblewrap sandbox",
        "echo W=$PWD; test -e /work || echo NOHOST=yes",
        "NOHOST=yes",
    );
}

#[test]
fn bang_shell_docker_runs_in_the_container() {
    if !have_tmux() {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Err(why) = rt.block_on(images::docker_ready(images::DEBIAN_IMAGE)) {
        support::skip_or_fail(&why);
        return;
    }
    let name = format!("bangd{}", std::process::id());
    let base = tempfile::tempdir().unwrap();
    let _cleanup = RemoveContainers(name.clone());
    let config = format!(
        "[profiles.{name}]\nbackend = \"docker\"\n\n[profiles.{name}.options]\n\
         image = \"{}\"\npull = \"never\"\nnetwork = \"none\"\nbase_dir = \"{}\"\n",
        images::DEBIAN_IMAGE,
        base.path().display()
    );
    // The container's hostname is its short id, never this host's.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let check = format!(
        "test \"$(hostname)\" != {} && test -f /.dockerenv && echo IN=container",
        host.trim()
    );
    bang_shell(
        &name,
        Some(config),
        "inside the docker sandbox",
        &check,
        "IN=container",
    );
}

#[test]
fn bang_shell_kubernetes_runs_in_the_pod() {
    if !have_tmux() {
        return;
    }
    if !support::have("bwrap") {
        support::skip_or_fail("bwrap is not installed (the k8s stub's pods run commands with it)");
        return;
    }
    // The stub serves from this runtime's threads while the test drives
    // tmux from its own.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stub = rt.block_on(k8s_stub::Stub::start());
    let dir = tempfile::tempdir().unwrap();
    let ns = "wsbench-bang";
    let config = format!(
        "[profiles.bangk]\nbackend = \"kubernetes\"\n\n[profiles.bangk.options]\n\
         kubeconfig = \"{}\"\nnamespace = \"{ns}\"\nimage = \"stub/image:1\"\n\
         ready_timeout_secs = 30\n",
        stub.kubeconfig(dir.path(), ns).display()
    );
    // A terminal (stdin is a tty) in the Pod's /workspace; the expected
    // text is not in the typed line, so only the shell's output matches.
    bang_shell(
        "bangk",
        Some(config),
        "inside the kubernetes sandbox",
        "test -t 0 && echo \"TTY=$(pwd)\"",
        "TTY=/workspace",
    );
    assert!(
        stub.execs().iter().any(|e| e.tty),
        "the shell was a tty exec in the Pod"
    );
}

/// Removes the containers of a test profile when the test ends.
struct RemoveContainers(String);

impl Drop for RemoveContainers {
    fn drop(&mut self) {
        let ids = Command::new("docker")
            .args(["ps", "-aq", "--filter"])
            .arg(format!("label=wsbench.profile={}", self.0))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for id in ids.split_whitespace() {
            let _ = Command::new("docker").args(["rm", "-f", "-v", id]).output();
        }
    }
}

#[test]
fn k8s_profile_opens_the_tui_on_a_pod_and_runs_a_command_there() {
    if !have_tmux() {
        return;
    }
    if !support::have("bwrap") {
        support::skip_or_fail("bwrap is not installed (the k8s stub's pods run commands with it)");
        return;
    }
    // The stub serves from this runtime's threads while the test drives
    // tmux from its own.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stub = rt.block_on(k8s_stub::Stub::start());
    let ns = "wsbench-tui";
    let t = Tmux::start("k8s");
    let kubeconfig = stub.kubeconfig(t.dir.path(), ns);
    let config = t.dir.path().join("wsbench.toml");
    std::fs::write(
        &config,
        format!(
            "[profiles.k8s]\nbackend = \"kubernetes\"\n\n[profiles.k8s.options]\n\
             kubeconfig = \"{}\"\nnamespace = \"{ns}\"\nimage = \"stub/image:1\"\n\
             ready_timeout_secs = 30\n",
            kubeconfig.display()
        ),
    )
    .unwrap();
    t.run_bin(&format!(
        "{BIN} --config {} --profile k8s",
        config.display()
    ));
    let s = t.scene(&[Wait("wsbench │", 60)]);
    assert!(
        s.contains("k8s"),
        "the header does not name the profile:\n{s}"
    );
    let s = t.scene(&[
        Pause(500),
        Key("i"),
        Text("echo hello"),
        Key("Enter"),
        Wait("✓ exit 0", 30),
    ]);
    assert!(
        s.lines()
            .any(|l| l.contains("┃hello ") || l.contains("│hello ")),
        "{s}"
    );
    // It ran in the Pod: through the stub's exec, on the Pod's PVC. The
    // Command pane runs commands in the session shell (a long-lived
    // `/bin/sh` exec'd in the Pod that reads them on its stdin), or as an
    // exec of their own when that is off.
    let execs = stub.execs();
    let ran = execs
        .iter()
        .find(|x| {
            x.command.iter().any(|c| c == "echo hello")
                || x.command.last().is_some_and(|c| c == "/bin/sh")
        })
        .unwrap_or_else(|| panic!("no exec of `echo hello` in a pod: {execs:#?}"));
    assert!(stub.has_pod(ns, &ran.pod), "{}", ran.pod);
    let s = t.scene(&[Key("Escape"), Key("q"), Wait("EXIT=0", 20)]);
    assert!(!s.contains("wsbench │"), "the TUI is still on screen:\n{s}");
    t.assert_sane();
}

#[test]
fn agent_pane_runs_the_bugfix_demo_to_the_end() {
    if !have_tmux() {
        return;
    }
    let (t, ws) = Tmux::with_tui("agent");
    // The footer names the key, and A opens the pane full screen.
    let s = t.scene(&[Key("Escape"), Key("1"), Wait("A Agent pane", 10)]);
    assert!(s.contains("wsbench │"), "{s}");
    // bugfix is the smallest shipped demo: pick it and run it.
    let s = t.scene(&[
        Key("A"),
        Wait("┏ Agent", 10),
        Key("j"),
        Wait("Fix a small bug", 10),
        Key("Enter"),
        Wait("demo bugfix: completed", 60),
    ]);
    assert!(s.contains("All three"), "the final message:\n{s}");
    assert!(s.contains("reply completed"), "{s}");
    assert!(
        std::fs::read_to_string(ws.join("bugfix-demo/stats.sh"))
            .unwrap()
            .contains("total / $#))"),
        "the demo's edit is on disk"
    );
    t.quit_sane();
}

#[test]
fn ctrl_c_and_f1_in_the_prompt_never_strand_the_user() {
    if !have_tmux() {
        return;
    }
    let (t, _ws) = Tmux::with_tui("ctrlc");
    // Ctrl-C with nothing running clears the line and keeps the app.
    let s = t.scene(&[Text("echo never-run"), Key("C-c"), Pause(300)]);
    assert!(s.contains("wsbench │"), "Ctrl-C quit the app:\n{s}");
    assert!(!s.contains("never-run"), "the line was not cleared:\n{s}");
    t.scene(&[
        // With a command running Ctrl-C interrupts it, as a shell does.
        Text("sleep 30"),
        Key("Enter"),
        Wait("running", 10),
        Key("C-c"),
        Wait("SIGINT", 10),
        // Killing the tree is Ctrl-X; it asks first; yes kills it.
        Text("sleep 30"),
        Key("Enter"),
        Wait("running", 10),
        Key("C-x"),
        Wait("Kill `sleep 30`", 10),
        Key("y"),
        Wait("✗ killed", 10),
    ]);
    // F1 opens help from the prompt; F1 closes it; the footer says how
    // to leave the prompt.
    let s = t.scene(&[
        Key("F1"),
        Wait("Command prompt (typing)", 10),
        Key("F1"),
        Wait("esc leave prompt", 10),
    ]);
    assert!(!s.contains("Command prompt (typing)"), "{s}");
    t.quit_sane();
}

/// Issue 14, point 10: INT, QUIT and HUP sent to the TUI with `kill` while
/// a command runs restore the terminal (cooked mode, main screen, mouse
/// reporting off, cursor shown), kill the command's tree and exit with
/// `128 + signal`.
#[test]
fn int_quit_and_hup_restore_the_terminal_and_kill_the_command() {
    if !have_tmux() {
        return;
    }
    for (sig, code) in [("INT", 130), ("QUIT", 131), ("HUP", 129)] {
        let (t, ws) = Tmux::with_tui(&format!("sig{sig}"));
        let tag = format!("wsbench-sig-{sig}-{}", std::process::id());
        let line = format!("bash -c 'while :; do sleep 1; done' {tag}");
        t.scene(&[Text(&line), Key("Enter")]);
        support::procs::wait_for_tag(&tag, Duration::from_secs(20), sig);
        // The TUI: the wsbench whose command line names this workspace.
        let ws_arg = ws.display().to_string();
        let tui: Vec<i32> = support::procs::with_tag(&ws_arg)
            .into_iter()
            .filter(|p| {
                std::fs::read_link(format!("/proc/{p}/exe"))
                    .is_ok_and(|e| e.to_string_lossy().contains("wsbench"))
            })
            .collect();
        assert_eq!(tui.len(), 1, "{sig}: the TUI process: {tui:?}");
        let st = Command::new("kill")
            .args(["-s", sig, &tui[0].to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let s = t.scene(&[Wait("EXIT=", 20)]);
        assert!(s.contains(&format!("EXIT={code}")), "{sig}:\n{s}");
        support::procs::assert_gone(&tag, Duration::from_secs(10), sig);
        assert_eq!(t.display("#{mouse_any_flag}"), "0", "{sig}: mouse still on");
        assert_eq!(t.display("#{cursor_flag}"), "1", "{sig}: cursor hidden");
        t.assert_sane();
    }
}

/// Issue 16: while `yes` floods the Command pane, a focus key changes the
/// screen at once and ctrl-c + y kills it. The guards are generous (they
/// catch a freeze, not a number: before the fix a key took 18–33 s).
#[test]
fn a_flood_never_freezes_the_keys() {
    if !have_tmux() {
        return;
    }
    let (t, _ws) = Tmux::with_tui("flood");
    t.scene(&[
        Text("yes"),
        Key("Enter"),
        Wait("running", 20),
        Pause(2000),
        // Leave the prompt, then tab to the next pane (Logs): its border
        // becomes the focused one.
        Key("Escape"),
        Key("Tab"),
        Wait("┏ Logs", 5),
        Key("BTab"),
        Wait("┏ Command", 5),
        // Ctrl-X asks to kill the tree (Ctrl-C would only interrupt it).
        Key("C-x"),
        Wait("kill", 5),
        Key("y"),
        Wait("✗ killed", 20),
        Key("C-q"),
        Wait("EXIT=", 20),
    ]);
    t.assert_sane();
}

/// Issue 22: the TUI starts on the Files list (keys meant to move never
/// run as commands), `i` reaches the prompt, and Esc followed at once by
/// `2` (one write: crossterm reads it as Alt-2 on a terminal without the
/// kitty protocol, as tmux is) leaves the prompt and focuses Files.
#[test]
fn starts_on_files_and_esc_then_a_digit_is_two_keys() {
    if !have_tmux() {
        return;
    }
    let t = Tmux::start("escdigit");
    let ws = t.workspace();
    t.launch_on_files(&ws, "");
    let s = t.scene(&[Wait("┏ Files", 10), Text("jjkg"), Pause(300)]);
    assert!(!s.contains("not found"), "a key ran as a command:\n{s}");
    t.scene(&[Key("i"), Wait("┏ Command", 10), Text("echo typed")]);
    // Both keys in one send-keys: the bytes ESC 2 arrive together.
    t.tmux(&["send-keys", "-t", "t", "Escape", "2"]);
    let s = t.scene(&[Wait("┏ Files", 10)]);
    assert!(s.contains("echo typed"), "the prompt lost its text:\n{s}");
    assert!(!s.contains("echo typed2"), "the 2 was typed:\n{s}");
    t.scene(&[Key("q"), Wait("EXIT=0", 10)]);
    t.assert_sane();
}

/// Issue 22: a `[tui.keys]` mistake stops `wsbench` before the TUI opens,
/// with file and line, exit 2, the terminal untouched.
#[test]
fn a_bad_keymap_exits_2_before_the_tui_opens() {
    if !have_tmux() {
        return;
    }
    let t = Tmux::start("badkeys");
    let ws = t.workspace();
    let file = t.dir.path().join("wsbench.toml");
    std::fs::write(&file, "[tui.keys]\n\"app.quit\" = \"j\"\n").unwrap();
    t.run_bin(&format!(
        "{BIN} --config {} --workdir {}",
        file.display(),
        ws.display()
    ));
    let s = t.scene(&[Wait("EXIT=", 20)]);
    assert!(s.contains("EXIT=2"), "{s}");
    let want = format!(
        "error: {}:2:1: [tui.keys]: `j` is bound to both",
        file.display()
    );
    assert!(s.replace('\n', "").contains(&want), "no {want:?} in:\n{s}");
    assert!(!s.contains("wsbench │"), "the TUI opened:\n{s}");
    t.assert_sane();
}
