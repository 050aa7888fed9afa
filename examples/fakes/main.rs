//! The test suite's stand-ins for a Kubernetes API server and the E2B,
//! Daytona and OpenSandbox services, run by hand so a user can try the
//! Kubernetes and cloud backends (and their healing, issue 15) on this
//! machine with no cluster and no account:
//!
//! ```text
//! cargo run --example fakes -- k8s        # or e2b, daytona, opensandbox
//! ```
//!
//! It serves on `127.0.0.1` (a free port), prints the profile to put in
//! `config.toml` and the API key to export, then reads commands on stdin
//! that change things behind wsbench's back: `list`, `delete ID`, `pause
//! ID` (cloud), `stop ID` / `archive ID` (Daytona), `fail POD` (Kubernetes: the Pod
//! turns `Failed`, as after an eviction); `kubectl --kubeconfig …
//! delete pod …` works against the stub too. Ctrl-D or Ctrl-C stops it.
//!
//! The fakes are the suite's own (`tests/it/support/`), included here by
//! path rather than copied, so what a user tries is what the tests pin.
//! Their sandboxes run commands for real under bubblewrap (`bwrap` must
//! be installed). Limits: state lives in memory and a temp dir, gone when
//! the program ends.

#[allow(dead_code, unused_imports)]
mod support;

use std::io::Write as _;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};

use support::behind::{Behind, archive_behind};
use support::fake_daytona::{self, FakeDaytona};
use support::fake_e2b::{self, FakeE2b};
use support::fake_opensandbox::{self, FakeOpenSandbox};
use support::k8s_stub::Stub;

/// The namespace the printed Kubernetes profile uses.
const NS: &str = "wsbench";

/// One running fake and what can be done to it behind wsbench's back.
enum Fake {
    K8s(Stub, tempfile::TempDir),
    E2b(FakeE2b),
    Daytona(FakeDaytona),
    OpenSandbox(FakeOpenSandbox),
}

impl Fake {
    async fn start(kind: &str) -> anyhow::Result<Fake> {
        Ok(match kind {
            "k8s" | "kubernetes" => {
                let dir = tempfile::tempdir().context("a temp dir for the kubeconfig")?;
                Fake::K8s(Stub::start().await, dir)
            }
            "e2b" => Fake::E2b(FakeE2b::start().await),
            "daytona" => Fake::Daytona(FakeDaytona::start().await),
            "opensandbox" => Fake::OpenSandbox(FakeOpenSandbox::start().await),
            other => bail!("unknown fake `{other}`: k8s, e2b, daytona or opensandbox"),
        })
    }

    /// What to put in the config and the environment.
    fn instructions(&self) -> String {
        let (profile, body, key) = match self {
            Fake::K8s(stub, dir) => {
                let kc = stub.kubeconfig(dir.path(), NS);
                let body = format!(
                    "kubeconfig = \"{}\"\nnamespace = \"{NS}\"\nimage = \"stub/image:1\"\n",
                    kc.display()
                );
                let note = format!(
                    "# kubectl works against it: kubectl --kubeconfig {} get pods",
                    kc.display()
                );
                (("kubernetes", note), body, None)
            }
            Fake::E2b(f) => (
                ("e2b", String::new()),
                format!("api_url = \"{0}\"\nenvd_url = \"{0}\"\n", f.url()),
                Some(("E2B_API_KEY", fake_e2b::KEY)),
            ),
            Fake::Daytona(f) => (
                ("daytona", String::new()),
                format!("api_url = \"{}\"\n", f.api_url()),
                Some(("DAYTONA_API_KEY", fake_daytona::KEY)),
            ),
            Fake::OpenSandbox(f) => (
                ("opensandbox", String::new()),
                format!("api_url = \"{}\"\n", f.api_url()),
                Some(("OPEN_SANDBOX_API_KEY", fake_opensandbox::KEY)),
            ),
        };
        let ((name, note), key) = (profile, key);
        let mut out = format!(
            "# in config.toml:\n[profiles.fake-{name}]\nbackend = \"{name}\"\n\n[profiles.fake-{name}.options]\n{body}"
        );
        if let Some((var, value)) = key {
            out.push_str(&format!("\n# in the shell:\nexport {var}={value}\n"));
        }
        if !note.is_empty() {
            out.push_str(&format!("\n{note}\n"));
        }
        out.push_str(
            "\ncommands: list · delete ID · pause ID · stop ID, archive ID (daytona) · fail POD (k8s) · quit\n",
        );
        out
    }

    /// Runs one stdin command; the line to print.
    fn command(&self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        match (self, words.as_slice()) {
            (_, []) => String::new(),
            (Fake::K8s(stub, _), ["list"]) => {
                let names: Vec<String> = stub
                    .execs()
                    .into_iter()
                    .map(|e| e.pod)
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                format!("pods that ran commands: {}", names.join(", "))
            }
            (Fake::K8s(stub, _), ["fail", pod]) if stub.has_pod(NS, pod) => {
                stub.fail_pod(NS, pod);
                format!("pod {pod} is Failed now")
            }
            (Fake::E2b(f), ["list"]) => ids(f.ids(), |id| f.sandbox_state(id)),
            (Fake::E2b(f), ["delete", id]) if f.sandbox_state(id).is_some() => {
                f.delete_behind(id);
                format!("sandbox {id} deleted by the service")
            }
            (Fake::E2b(f), ["pause", id]) if f.sandbox_state(id).is_some() => {
                f.pause_behind(id);
                format!("sandbox {id} paused by the service")
            }
            (Fake::Daytona(f), ["list"]) => ids(f.ids(), |id| f.sandbox_state(id)),
            (Fake::Daytona(f), ["delete", id]) if f.sandbox_state(id).is_some() => {
                f.delete_behind(id);
                format!("sandbox {id} deleted by the service")
            }
            (Fake::Daytona(f), ["stop" | "pause", id]) if f.sandbox_state(id).is_some() => {
                f.stop_behind(id);
                format!("sandbox {id} stopped by the service (auto-stop)")
            }
            (Fake::Daytona(f), ["archive", id]) if f.sandbox_state(id).is_some() => {
                archive_behind(f, id);
                format!("sandbox {id} archived by the service")
            }
            (Fake::OpenSandbox(f), ["list"]) => ids(f.ids(), |id| f.sandbox_state(id)),
            (Fake::OpenSandbox(f), ["delete", id]) if f.sandbox_state(id).is_some() => {
                f.delete_behind(id);
                format!("sandbox {id} deleted by the service")
            }
            (Fake::OpenSandbox(f), ["pause" | "stop", id]) if f.sandbox_state(id).is_some() => {
                f.stop_behind(id);
                format!("sandbox {id} paused by the service")
            }
            (_, [verb, ..]) => format!("`{verb}`: no such command or no such id here (try list)"),
        }
    }
}

fn ids(ids: Vec<String>, state: impl Fn(&str) -> Option<&'static str>) -> String {
    if ids.is_empty() {
        return "no sandboxes".into();
    }
    ids.iter()
        .map(|id| format!("{id}  {}", state(id).unwrap_or("gone")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let kind = std::env::args()
        .nth(1)
        .context("usage: cargo run --example fakes -- k8s|e2b|daytona|opensandbox")?;
    let fake = Fake::start(&kind).await?;
    print!("{}", fake.instructions());
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        let line = tokio::select! {
            l = lines.next_line() => l?,
            _ = tokio::signal::ctrl_c() => None,
        };
        let Some(line) = line else { break };
        if line.trim() == "quit" {
            break;
        }
        let out = fake.command(&line);
        if !out.is_empty() {
            println!("{out}");
        }
    }
    Ok(())
}
