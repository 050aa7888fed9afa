//! The real `wsbench` binary on the cloud backends, against the fake E2B,
//! Daytona and OpenSandbox services on 127.0.0.1 (commands run in
//! bubblewrap boxes): a profile from the config file, the API key from
//! the environment variable the README names, then `workspaces create`,
//! `exec`, `tool Bash`, `workspaces list`, `close` (the sandbox paused or
//! stopped on the service, still listed), `open` from another process
//! (the same sandbox resumed, its files kept), `destroy`; a wrong key (401)
//! and a sandbox that vanished behind wsbench's back (404).

use crate::support::cli;
use crate::support::cloud;
use crate::support::fake_daytona;
use crate::support::fake_e2b;
use crate::support::fake_opensandbox;
use crate::support::fake_sandbox;
use crate::support::leak;

use std::process::{Output, Stdio};
use std::sync::Arc;

use fake_sandbox::{FakeBox, Faults};
use serde_json::Value;

/// What the walk needs of one fake service.
trait Service {
    /// Profile name and backend kind.
    const NAME: &'static str;
    /// The API key variable the README names.
    const KEY_VAR: &'static str;
    /// The key the fake accepts.
    const KEY: &'static str;
    /// The service's state of a running sandbox.
    const RUNNING: &'static str;
    /// Its state after `workspaces close`.
    const SUSPENDED: &'static str;

    /// `[profiles.<name>.options]` pointing the base URL(s) at the fake.
    fn options(&self) -> String;
    /// Every sandbox as `(sandbox id, state, workspace id label)`.
    fn sandboxes(&self) -> Vec<(String, &'static str, String)>;
    /// Removes a sandbox without telling wsbench.
    fn vanish(&self, id: &str);
    /// The fake's fault switches.
    fn faults(&self) -> &Faults;
    /// The box a sandbox runs in.
    fn boxed(&self, id: &str) -> Arc<FakeBox>;
    /// The URL path of one sandbox on the control plane.
    fn sandbox_path(id: &str) -> String;
}

/// Implements [`Service`] for one fake: what differs is its names, the
/// state words of its API, the map its workspace label lives in, its
/// options and the control-plane path of one sandbox.
macro_rules! service {
    (
        $fake:ty,name: $name:literal,key_var: $var:literal,key: $key:expr,
        running: $running:literal,suspended: $suspended:literal,labels: $labels:ident,
        path: $path:literal,options: | $f:ident | $options:expr
    ) => {
        impl Service for $fake {
            const NAME: &'static str = $name;
            const KEY_VAR: &'static str = $var;
            const KEY: &'static str = $key;
            const RUNNING: &'static str = $running;
            const SUSPENDED: &'static str = $suspended;

            fn options(&self) -> String {
                let $f = self;
                $options
            }

            fn sandboxes(&self) -> Vec<(String, &'static str, String)> {
                let all = self.state.sandboxes.lock().unwrap();
                let label = |m: &std::collections::BTreeMap<String, String>| {
                    let key = wsbench::backend::labels::WORKSPACE_ID;
                    m.get(key).cloned().unwrap_or_default()
                };
                all.iter()
                    .map(|(id, s)| (id.clone(), s.state, label(&s.$labels)))
                    .collect()
            }

            fn vanish(&self, id: &str) {
                if let Some(sb) = self.state.sandboxes.lock().unwrap().remove(id) {
                    sb.boxed.kill_all();
                }
            }

            fn faults(&self) -> &Faults {
                &self.state.faults
            }

            fn boxed(&self, id: &str) -> Arc<FakeBox> {
                self.state.sandboxes.lock().unwrap()[id].boxed.clone()
            }

            fn sandbox_path(id: &str) -> String {
                format!($path, id = id)
            }
        }
    };
}

service!(
    fake_e2b::FakeE2b,
    name: "e2b",
    key_var: "E2B_API_KEY",
    key: fake_e2b::KEY,
    running: "running",
    suspended: "paused",
    labels: metadata,
    path: "/sandboxes/{id}",
    options: |f| format!("api_url = \"{0}\"\nenvd_url = \"{0}\"\n", f.url())
);

service!(
    fake_daytona::FakeDaytona,
    name: "daytona",
    key_var: "DAYTONA_API_KEY",
    key: fake_daytona::KEY,
    running: "started",
    suspended: "stopped",
    labels: labels,
    path: "/api/sandbox/{id}",
    options: |f| format!("api_url = \"{}\"\nstate_timeout_secs = 20\n", f.api_url())
);

service!(
    fake_opensandbox::FakeOpenSandbox,
    name: "opensandbox",
    key_var: "OPEN_SANDBOX_API_KEY",
    key: fake_opensandbox::KEY,
    running: "Running",
    suspended: "Paused",
    labels: metadata,
    path: "/v1/sandboxes/{id}",
    options: |f| format!("api_url = \"{}\"\n", f.api_url())
);

/// A user's home for the binary: config and data under a temp dir, the
/// profile written to the default config file.
struct Home {
    dir: tempfile::TempDir,
    profile: &'static str,
    key_var: &'static str,
    /// Everything the runs printed, to check that no key was.
    printed: std::sync::Mutex<Vec<u8>>,
}

impl Home {
    fn new<S: Service>(s: &S) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("config/wsbench");
        std::fs::create_dir_all(&conf).unwrap();
        // Short request limits and few retries: the faults below answer
        // at once, and a test must not sit through a production back-off.
        let text = format!(
            "[profiles.{0}]\nbackend = \"{0}\"\n\n[profiles.{0}.options]\n{1}request_timeout_secs = 20\nmax_retries = 1\n",
            S::NAME,
            s.options()
        );
        assert!(!text.contains(S::KEY));
        std::fs::write(conf.join("config.toml"), text).unwrap();
        Home {
            dir,
            profile: S::NAME,
            key_var: S::KEY_VAR,
            printed: Default::default(),
        }
    }

    /// Runs `wsbench --profile P --user alice --agent coder ARGS` with the
    /// API key `key` in the service's variable.
    async fn run_with(&self, key: &str, extra_env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut cmd = cli::wsbench_tokio_cmd(self.dir.path());
        cmd.args([
            "--profile",
            self.profile,
            "--user",
            "alice",
            "--agent",
            "coder",
        ])
        .args(args)
        .stdin(Stdio::null());
        cmd.env(self.key_var, key);
        // A variable only wsbench has: never readable inside (issue 14).
        cmd.env(leak::VAR, leak::VALUE);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
            .await
            .unwrap_or_else(|_| panic!("wsbench {args:?} did not finish in 120 s"))
            .unwrap();
        let mut p = self.printed.lock().unwrap();
        p.extend_from_slice(&out.stdout);
        p.extend_from_slice(&out.stderr);
        out
    }

    async fn run(&self, key: &str, args: &[&str]) -> Output {
        self.run_with(key, &[], args).await
    }
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        out(o),
        err(o)
    );
    out(o)
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", out(o), err(o)))
}

/// The listed workspace `id`, if any.
fn listed(list: &Value, id: &str) -> Option<Value> {
    list["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == id)
        .cloned()
}

/// The one error line of a failed run.
#[track_caller]
fn one_line_error(o: &Output) -> String {
    assert_ne!(o.status.code(), Some(0), "succeeded: {}", out(o));
    let e = err(o);
    let lines: Vec<&str> = e.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "not one line: {e}");
    // Shown with --nocapture, to read what a user reads.
    eprintln!("{}", lines[0]);
    lines[0].to_string()
}

/// create → exec / tool Bash → list → close → list → open (another
/// process) → exec → close → exec (resumes by itself) → destroy.
async fn lifecycle<S: Service>(s: &S) {
    let home = Home::new(s);
    let key = S::KEY;

    let v = json(&home.run(key, &["workspaces", "create", "--json"]).await);
    assert_eq!(v["created"], true, "{v}");
    assert_eq!(v["backend"], S::NAME);
    let id = v["id"].as_str().unwrap().to_string();
    let sbs = s.sandboxes();
    assert_eq!(sbs.len(), 1, "{sbs:?}");
    let (sid, state, ws) = sbs[0].clone();
    assert_eq!((state, ws.as_str()), (S::RUNNING, id.as_str()));
    // The same user and agent: the same workspace, found again.
    let v = json(&home.run(key, &["workspaces", "create", "--json"]).await);
    assert_eq!(
        (v["id"].as_str(), &v["created"]),
        (Some(id.as_str()), &Value::Bool(false))
    );
    assert_eq!(s.sandboxes().len(), 1);

    // exec: separate streams, the exit code passed through, a shell line
    // (C18) intact.
    let o = home
        .run(
            key,
            &[
                "exec",
                "--",
                "echo hello > note.txt && echo out; echo err >&2; exit 3",
            ],
        )
        .await;
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert_eq!(out(&o), "out\n");
    assert!(err(&o).contains("err\n"), "{}", err(&o));
    // Neither the API key nor anything else of wsbench's environment
    // reaches the sandbox (env, /proc/*/environ, files).
    let o = home.run(key, &["exec", "--", &leak::script(true)]).await;
    leak::assert_clean(S::NAME, &o);
    assert!(!out(&o).contains(key), "{}", out(&o));
    let o = home
        .run(key, &["tool", "Bash", r#"{"command": "cat note.txt"}"#])
        .await;
    assert!(ok(&o).contains("hello"), "{}", out(&o));

    // list: the workspace with its state, and the provider's id.
    let list = json(&home.run(key, &["workspaces", "list", "--json"]).await);
    let w = listed(&list, &id).unwrap_or_else(|| panic!("{id} not listed: {list}"));
    assert_eq!(w["state"], "running", "{w}");
    assert_eq!(w["backend"], S::NAME);
    assert_eq!(w["location"], sid.as_str());
    assert_eq!(w["user"], "alice");

    // close: suspended on the service, still listed.
    assert!(ok(&home.run(key, &["workspaces", "close", &id]).await).contains(&id));
    assert_eq!(s.sandboxes()[0].1, S::SUSPENDED);
    // Every library's logging on: the key must not show up there either.
    let o = home
        .run_with(key, &[("WSBENCH_LOG", "trace")], &["workspaces", "list"])
        .await;
    let table = ok(&o);
    assert!(err(&o).contains("TRACE"), "no trace logs: {}", err(&o));
    let row = table
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("{id} not in the table: {table}"));
    assert!(row.contains("suspended") && row.contains(S::NAME), "{row}");

    // open, from another process: the same sandbox resumed, files kept.
    let o = ok(&home.run(key, &["workspaces", "open", &id]).await);
    assert!(o.contains(&id), "{o}");
    assert_eq!(s.sandboxes().len(), 1);
    assert_eq!(s.sandboxes()[0].0, sid);
    assert_eq!(s.sandboxes()[0].1, S::RUNNING);
    assert_eq!(
        ok(&home.run(key, &["exec", "--", "cat note.txt"]).await),
        "hello\n"
    );
    // A command on a closed workspace resumes it by itself.
    ok(&home.run(key, &["workspaces", "close", &id]).await);
    assert_eq!(s.sandboxes()[0].1, S::SUSPENDED);
    assert_eq!(
        ok(&home.run(key, &["exec", "--", "cat note.txt"]).await),
        "hello\n"
    );
    assert_eq!(s.sandboxes()[0].1, S::RUNNING);

    // No key in the files wsbench wrote, on the host or in the sandbox.
    let boxed = s.boxed(&sid);
    for m in fake_sandbox::MOUNTS {
        let hits = leak::files_holding(&boxed.host(m).unwrap(), key.as_bytes());
        assert!(hits.is_empty(), "key written to {hits:?}");
    }
    let hits = leak::files_holding(home.dir.path(), key.as_bytes());
    assert!(hits.is_empty(), "key written to {hits:?}");

    // destroy: refused without a terminal unless --yes; then gone.
    let o = home.run(key, &["workspaces", "destroy", &id]).await;
    assert!(one_line_error(&o).contains("--yes"));
    assert_eq!(s.sandboxes().len(), 1);
    let o = ok(&home
        .run(key, &["workspaces", "destroy", "--yes", &id])
        .await);
    assert!(o.contains(&id), "{o}");
    assert!(s.sandboxes().is_empty(), "{:?}", s.sandboxes());
    let list = json(&home.run(key, &["workspaces", "list", "--json"]).await);
    assert!(listed(&list, &id).is_none(), "{list}");
    let o = ok(&home.run(key, &["workspaces", "list"]).await);
    assert!(o.starts_with("no workspaces in"), "{o}");
    let o = home.run(key, &["workspaces", "open", &id]).await;
    assert!(one_line_error(&o).contains("no workspace"), "{}", err(&o));

    let printed = home.printed.lock().unwrap();
    assert!(
        !printed.windows(key.len()).any(|w| w == key.as_bytes()),
        "the API key was printed"
    );
}

/// A wrong key (401), a sandbox deleted behind wsbench's back (re-made on
/// the next use), and one the service lists but answers 404 for.
async fn failures<S: Service>(s: &S) {
    let home = Home::new(s);
    let key = S::KEY;

    // 401: one line naming the service and the status; the key not shown.
    let bad = "wrong-key-0123456789";
    for args in [&["workspaces", "list"][..], &["exec", "--", "true"][..]] {
        let o = home.run(bad, args).await;
        let line = one_line_error(&o);
        assert!(
            line.contains(S::NAME) && line.contains("401") && line.contains(S::KEY_VAR),
            "{line}"
        );
        assert!(!line.contains(bad), "{line}");
    }
    assert!(s.sandboxes().is_empty());
    // No key at all: says which variable to set.
    let o = home.run("", &["workspaces", "list"]).await;
    let line = one_line_error(&o);
    assert!(line.contains(S::KEY_VAR), "{line}");

    // A sandbox deleted behind wsbench's back: `open` says there is no
    // such workspace; the next command makes a new one (manager rule).
    ok(&home.run(key, &["exec", "--", "echo kept > note.txt"]).await);
    let (sid, _, id) = s.sandboxes()[0].clone();
    s.vanish(&sid);
    let o = home.run(key, &["workspaces", "open", &id]).await;
    let line = one_line_error(&o);
    assert!(
        line.contains("no workspace") && line.contains(&id),
        "{line}"
    );
    let o = home
        .run(
            key,
            &["exec", "--", "cat note.txt 2>/dev/null || echo fresh"],
        )
        .await;
    assert_eq!(ok(&o), "fresh\n");
    // ... and says so: the old sandbox and its files are gone.
    let e = err(&o);
    assert!(
        e.contains(&format!("sandbox of workspace {id}")) && e.contains("is gone from the service"),
        "{e}"
    );
    let sbs = s.sandboxes();
    assert_eq!(sbs.len(), 1);
    assert_ne!(sbs[0].0, sid);
    assert_eq!(sbs[0].2, id);

    // Listed, but every call about it answers 404: a clear line naming
    // the workspace, the service and the 404; nothing new is made.
    let sid = sbs[0].0.clone();
    *s.faults().gone_after.lock().unwrap() = Some((S::sandbox_path(&sid), 0));
    let o = home.run(key, &["workspaces", "open", &id]).await;
    let line = one_line_error(&o);
    assert!(
        line.contains(&id) && line.contains(S::NAME) && line.contains("404"),
        "{line}"
    );
    assert!(line.contains("gone"), "{line}");
    assert_eq!(s.sandboxes().len(), 1);
    *s.faults().gone_after.lock().unwrap() = None;
    ok(&home
        .run(key, &["workspaces", "destroy", "--yes", &id])
        .await);
    assert!(s.sandboxes().is_empty());
    // Destroyed by wsbench: the next workspace is a first use, no notice.
    let o = home.run(key, &["exec", "--", "true"]).await;
    ok(&o);
    assert!(!err(&o).contains("is gone"), "{}", err(&o));
    let sbs = s.sandboxes();
    ok(&home
        .run(key, &["workspaces", "destroy", "--yes", &sbs[0].2])
        .await);

    let printed = home.printed.lock().unwrap();
    assert!(!printed.windows(key.len()).any(|w| w == key.as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_lifecycle() {
    if cloud::fakes_ready() {
        lifecycle(&fake_e2b::FakeE2b::start().await).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_failures() {
    if cloud::fakes_ready() {
        failures(&fake_e2b::FakeE2b::start().await).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daytona_lifecycle() {
    if cloud::fakes_ready() {
        lifecycle(&fake_daytona::FakeDaytona::start().await).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daytona_failures() {
    if cloud::fakes_ready() {
        failures(&fake_daytona::FakeDaytona::start().await).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensandbox_lifecycle() {
    if cloud::fakes_ready() {
        lifecycle(&fake_opensandbox::FakeOpenSandbox::start().await).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensandbox_failures() {
    if cloud::fakes_ready() {
        failures(&fake_opensandbox::FakeOpenSandbox::start().await).await;
    }
}

/// `wsbench shell -- CMD` on a cloud service (issue 17): on E2B and
/// Daytona the command runs on the service's terminal, on OpenSandbox
/// (no PTY) as one line of a bash session, announced as LINE MODE in the
/// banner's first line; the exit code is the command's.
async fn shell_command<S: Service>(s: &S) {
    let home = Home::new(s);
    let o = home
        .run(
            S::KEY,
            &["shell", "--", "sh", "-c", "echo hi-$((6*7)); exit 5"],
        )
        .await;
    assert_eq!(o.status.code(), Some(5), "{}", err(&o));
    assert!(out(&o).contains("hi-42"), "{}", out(&o));
    let first = err(&o).lines().next().unwrap_or("").to_string();
    assert_eq!(
        first.contains("LINE MODE"),
        S::NAME == "opensandbox",
        "the first line: {first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_command_on_every_cloud_service() {
    if cloud::fakes_ready() {
        shell_command(&fake_e2b::FakeE2b::start().await).await;
        shell_command(&fake_daytona::FakeDaytona::start().await).await;
        shell_command(&fake_opensandbox::FakeOpenSandbox::start().await).await;
    }
}

/// The line-mode shell of an OpenSandbox workspace, typed at from stdin:
/// `cd` and `export` carry from line to line, `exit` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensandbox_shell_is_a_labelled_line_mode_session() {
    if !cloud::fakes_ready() {
        return;
    }
    let s = fake_opensandbox::FakeOpenSandbox::start().await;
    let home = Home::new(&s);
    let mut cmd = cli::wsbench_tokio_cmd(home.dir.path());
    cmd.args(["--profile", "opensandbox", "--user", "alice", "shell"])
        .env("OPEN_SANDBOX_API_KEY", fake_opensandbox::KEY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    use tokio::io::AsyncWriteExt;
    stdin
        .write_all(b"cd /tmp\nexport A=1\npwd; echo a=$A\nexit\n")
        .await
        .unwrap();
    drop(stdin);
    let o = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        child.wait_with_output(),
    )
    .await
    .expect("the shell returns")
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let first = err(&o).lines().next().unwrap_or("").to_string();
    assert!(first.contains("LINE MODE"), "first line: {first}");
    assert!(first.contains("no full-screen programs"), "{first}");
    let text = out(&o);
    assert!(text.contains("[line mode] $ "), "{text}");
    assert!(text.contains("/tmp\na=1\n"), "{text}");
}

/// per_session (issue 15): a session whose sandbox the service lost gets
/// a new workspace id (found by labels, nothing left to find), and the
/// one-shot says so, once, as per_agent does for a re-made id; a session
/// whose workspace wsbench destroyed starts afresh without a notice.
async fn per_session_loss_is_said<S: Service>(s: &S) {
    let home = Home::new(s);
    let conf = home.dir.path().join("config/wsbench/config.toml");
    let text = std::fs::read_to_string(&conf).unwrap().replacen(
        "\n\n[profiles.",
        "\nisolation = \"per_session\"\n\n[profiles.",
        1,
    );
    std::fs::write(&conf, text).unwrap();
    let key = S::KEY;
    let exec = |line: &'static str| {
        let home = &home;
        async move {
            home.run(key, &["--session", "s1", "exec", "--", line])
                .await
        }
    };
    ok(&exec("echo kept > note.txt").await);
    let o = exec("cat note.txt").await;
    assert_eq!(ok(&o), "kept\n");
    assert!(!err(&o).contains("notice"), "{}", err(&o));
    let (sid, _, old) = s.sandboxes()[0].clone();
    s.vanish(&sid);

    let o = exec("cat note.txt 2>/dev/null || echo fresh").await;
    assert_eq!(ok(&o), "fresh\n");
    let e = err(&o);
    let new = s.sandboxes()[0].2.clone();
    assert_ne!(new, old);
    assert!(
        e.contains("session `s1`")
            && e.contains(&format!("workspace {old}"))
            && e.contains(&format!("new, empty workspace {new}"))
            && e.contains("files from the old one are lost"),
        "{e}"
    );
    // Said once.
    let o = exec("true").await;
    ok(&o);
    assert!(!err(&o).contains("notice"), "{}", err(&o));
    // Destroyed by wsbench: a new workspace, no notice.
    ok(&home
        .run(key, &["workspaces", "destroy", "--yes", &new])
        .await);
    let o = exec("true").await;
    ok(&o);
    assert!(!err(&o).contains("notice"), "{}", err(&o));
    for (_, _, id) in s.sandboxes() {
        ok(&home
            .run(key, &["workspaces", "destroy", "--yes", &id])
            .await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_per_session_loss_is_said() {
    if cloud::fakes_ready() {
        per_session_loss_is_said(&fake_e2b::FakeE2b::start().await).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensandbox_per_session_loss_is_said() {
    if cloud::fakes_ready() {
        per_session_loss_is_said(&fake_opensandbox::FakeOpenSandbox::start().await).await;
    }
}

/// `workspaces gc` (issue 15 point 4) on a cloud profile with a 1 s TTL:
/// a sandbox a one-shot left running is idle past the TTL by this host's
/// last use (E2B reports no activity of its own); the dry run says it
/// would close it and changes nothing; `--yes` pauses it; a record whose
/// sandbox the service lost is reported as an orphan, never removed.
async fn gc_closes_the_idle_and_reports_orphans<S: Service>(s: &S) {
    let home = Home::new(s);
    let conf = home.dir.path().join("config/wsbench/config.toml");
    let text = std::fs::read_to_string(&conf).unwrap().replacen(
        "\n\n[profiles.",
        "\nttl = \"1s\"\n\n[profiles.",
        1,
    );
    std::fs::write(&conf, text).unwrap();
    let key = S::KEY;
    ok(&home.run(key, &["exec", "--", "true"]).await);
    let (sid, _, id) = s.sandboxes()[0].clone();
    // Another workspace, whose sandbox the service then loses.
    ok(&home.run(key, &["workspaces", "create", "--new"]).await);
    let lost = s.sandboxes().into_iter().find(|x| x.0 != sid).unwrap();
    s.vanish(&lost.0);
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;

    let o = home.run(key, &["workspaces", "gc"]).await;
    let text = ok(&o);
    assert!(text.contains(&format!("would close  {id} ")), "{text}");
    assert!(text.contains("past the TTL of 1 s"), "{text}");
    assert!(
        text.contains(&format!("orphan record  {} ", lost.2)),
        "{text}"
    );
    assert!(text.contains("dry run: 1 to close"), "{text}");
    assert_eq!(s.sandboxes()[0].1, S::RUNNING, "a dry run changes nothing");

    let o = home.run(key, &["workspaces", "gc", "--yes"]).await;
    let text = ok(&o);
    assert!(text.contains(&format!("closed  {id} ")), "{text}");
    assert_eq!(s.sandboxes()[0].1, S::SUSPENDED);

    let o = home
        .run(key, &["--json", "workspaces", "gc", "--yes"])
        .await;
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(v["acted"], true, "{v}");
    assert!(v["findings"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(v["orphan_records"][0]["workspace"], lost.2.as_str(), "{v}");
    assert_eq!(v["omitted"], 0, "{v}");
    ok(&home
        .run(key, &["workspaces", "destroy", "--yes", &id])
        .await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2b_gc_closes_the_idle_and_reports_orphans() {
    if cloud::fakes_ready() {
        gc_closes_the_idle_and_reports_orphans(&fake_e2b::FakeE2b::start().await).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensandbox_gc_closes_the_idle_and_reports_orphans() {
    if cloud::fakes_ready() {
        gc_closes_the_idle_and_reports_orphans(&fake_opensandbox::FakeOpenSandbox::start().await)
            .await;
    }
}
