//! Commands in the Pod over the exec websocket (`v5.channel.k8s.io`,
//! falling back to `v4.channel.k8s.io`).
//!
//! kube's `AttachedProcess` is not used: its stdout/stderr readers never
//! see EOF when the connection drops (its loop only closes them on a
//! clean exit), and its stdin needs `shutdown()` rather than a drop
//! (`docs/k8s-testing.md` §5). This module runs its own loop
//! over the websocket kube's [`Client::connect`] opens, so:
//!
//! * stdout (channel 1) and stderr (channel 2) are streamed as they
//!   arrive; the exit code comes from the status (channel 3) only — a
//!   connection that ends without one is an error, never exit 0;
//! * stdin ends with the v5 close frame `[255, 0]`; a v4 server has no
//!   such signal (the client can only close the whole socket and lose the
//!   status), so on v4 the command is run behind `head -c <len>`, which
//!   ends its stdin after exactly the bytes sent;
//! * a reset connection ends the call with [`BackendError::Unavailable`];
//! * every command runs under a small `sh` wrapper that sets the working
//!   directory, the environment and a `WSBENCH_EXEC_ID` marker; a timeout
//!   or cancel opens a second exec that kills every process carrying
//!   the marker (SIGTERM, a grace, SIGKILL: `shell::marker`), so the
//!   whole tree dies in the Pod (docs/contract.md §11 point 17).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::AttachParams;
use kube::core::{Request, Resource};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tungstenite::Message;
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;

use super::api::kube_error;
use super::channel::{CLOSE, Ended, STDIN, read_until_status};
use super::events::{K8sEvent, emit};
use crate::backend::shell::marker::{MARKER_VAR, kill_argv, new_marker};
use crate::backend::{
    BackendError, BackendResult, ExecOutcome, ExecRequest, OutputChunk, OutputSink, Process,
    ProcessControl, SpawnRequest, StreamKind,
};

/// Bytes per stdin frame.
const STDIN_CHUNK: usize = 32 * 1024;

/// How long a killed command's status is still awaited.
const AFTER_KILL: Duration = Duration::from_secs(10);

/// Limit for the kill exec itself.
const KILL_TIMEOUT: Duration = Duration::from_secs(30);

/// Pipe buffer of a long-lived process's stdout/stderr.
const PIPE_BUFFER: usize = 1 << 20;

/// Sets the directory, the environment and the marker, then runs the
/// command: `$1` cwd, `$2` marker, `$3` stdin length or `-`, `$4` `r`
/// (relay) or `x` (exec), then `K=V`... up to `--`, then argv. A missing
/// directory is exit 1 with the shell's message, a missing program exit
/// 127.
///
/// Relay mode is for commands run to completion. The exec stream (and so
/// its status) only ends when every holder of the stream's stdout and
/// stderr has closed them, and a background job (`sleep 60 &`) holds them
/// as long as it runs: the kubelet waits for the copy to finish before it
/// reports the exit. So the command writes into two FIFOs relayed by
/// `cat`; once it exits, the relays get 300 ms (the drain bubblewrap and
/// Docker allow too) to pass on what is left, then are killed, and the status follows at once.
/// The job keeps running (with the marker, so a timeout still finds it)
/// and its later output is dropped, as on the other backends. Without a
/// writable temp dir or `mkfifo` the command runs directly.
const WRAPPER: &str = r#"cd -- "$1" || exit 1
export WSBENCH_EXEC_ID="$2"
n=$3 m=$4
shift 4
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do export "$1"; shift; done
shift
if [ "$m" = r ] && f=$(mktemp -d 2>/dev/null); then
  if mkfifo "$f/o" "$f/e" 2>/dev/null; then
    cat "$f/o" & o=$!
    cat "$f/e" >&2 & e=$!
    if [ "$n" = - ]; then "$@" >"$f/o" 2>"$f/e"
    else head -c "$n" | "$@" >"$f/o" 2>"$f/e"; fi
    rc=$?
    rm -rf -- "$f"
    (sleep 0.3 2>/dev/null || sleep 1; kill $o $e) >/dev/null 2>&1 &
    k=$!
    wait $o $e 2>/dev/null
    kill $k 2>/dev/null
    exit $rc
  fi
  rm -rf -- "$f"
fi
if [ "$n" = - ]; then exec "$@"; fi
head -c "$n" | "$@""#;

/// Protocol learnt from the first connection: 0 unknown, 4 or 5.
#[derive(Debug, Default)]
struct Protocol(AtomicU8);

/// Where execs go: one container of one Pod.
#[derive(Clone)]
pub(crate) struct ExecTarget {
    pub client: Client,
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub workdir: String,
    pub env: BTreeMap<String, String>,
    pub events: Option<super::EventSink>,
    protocol: Arc<Protocol>,
}

impl std::fmt::Debug for ExecTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecTarget")
            .field("namespace", &self.namespace)
            .field("pod", &self.pod)
            .finish()
    }
}

impl ExecTarget {
    pub(crate) fn new(
        client: Client,
        namespace: String,
        pod: String,
        workdir: String,
        env: BTreeMap<String, String>,
        events: Option<super::EventSink>,
    ) -> Self {
        ExecTarget {
            client,
            namespace,
            pod,
            container: super::CONTAINER.into(),
            workdir,
            env,
            events,
            protocol: Arc::default(),
        }
    }

    /// True when the server speaks v5 (stdin can be closed on its own).
    /// Learnt from the first connection; before that, a no-op exec asks.
    pub(crate) async fn supports_stdin_close(&self) -> BackendResult<bool> {
        match self.protocol.0.load(Ordering::Relaxed) {
            5 => Ok(true),
            4 => Ok(false),
            _ => {
                let ws = self.connect(vec!["true".into()], false).await?;
                drop(ws);
                Ok(self.protocol.0.load(Ordering::Relaxed) == 5)
            }
        }
    }

    /// The argv sent to the API: the wrapper, then the command.
    pub(super) fn wrapped(
        &self,
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        marker: &str,
        stdin_len: Option<usize>,
        relay: bool,
    ) -> BackendResult<Vec<String>> {
        if argv.is_empty() {
            return Err(BackendError::Spawn {
                program: String::new(),
                reason: "empty argv".into(),
            });
        }
        let cwd = cwd
            .map(|c| crate::backend::path::join(&self.workdir, c))
            .unwrap_or_else(|| self.workdir.clone());
        let mut out = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            WRAPPER.into(),
            "wsbench".into(),
            cwd,
            marker.to_string(),
            stdin_len
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            if relay { "r" } else { "x" }.into(),
        ];
        let mut all = self.env.clone();
        all.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        for (k, v) in &all {
            let valid = !k.is_empty()
                && !k.as_bytes()[0].is_ascii_digit()
                && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid || k == MARKER_VAR {
                return Err(BackendError::Spawn {
                    program: argv[0].clone(),
                    reason: format!("invalid environment variable name `{k}`"),
                });
            }
            out.push(format!("{k}={v}"));
        }
        out.push("--".into());
        out.extend(argv.iter().cloned());
        Ok(out)
    }

    /// Opens the exec websocket for `command` (already wrapped), stdout
    /// and stderr attached, stdin when `stdin`.
    async fn connect(
        &self,
        command: Vec<String>,
        stdin: bool,
    ) -> BackendResult<
        impl futures::Stream<Item = Result<Message, tungstenite::Error>>
        + futures::Sink<Message, Error = tungstenite::Error>
        + Send
        + Unpin
        + 'static,
    > {
        let params = AttachParams::default()
            .container(self.container.clone())
            .stdin(stdin)
            .stdout(true)
            .stderr(true);
        self.connect_with(command, params).await
    }

    /// Opens the exec websocket for `command` (already wrapped) with
    /// `params` (its container is set here); records the protocol agreed.
    pub(super) async fn connect_with(
        &self,
        command: Vec<String>,
        params: AttachParams,
    ) -> BackendResult<
        impl futures::Stream<Item = Result<Message, tungstenite::Error>>
        + futures::Sink<Message, Error = tungstenite::Error>
        + Send
        + Unpin
        + 'static,
    > {
        let params = params.container(self.container.clone());
        let req = Request::new(Pod::url_path(&(), Some(&self.namespace)))
            .exec(&self.pod, command, &params)
            .map_err(|e| BackendError::Remote {
                service: "kubernetes",
                status: None,
                code: None,
                message: format!("building the exec request: {e}"),
            })?;
        let conn = self.client.connect(req).await.map_err(|e| {
            match kube_error(&format!("exec in pod {}", self.pod), e) {
                // 404: the Pod is gone; 400: its container does not run
                // (a Pod that Failed, Succeeded or was evicted never runs
                // again): both need a new Pod, so both are gone (the PVC,
                // when kept, comes back with it).
                BackendError::Remote {
                    status: Some(404 | 400),
                    message,
                    ..
                } => BackendError::gone(message),
                other => other,
            }
        })?;
        let v = if conn.supports_stream_close() { 5 } else { 4 };
        self.protocol.0.store(v, Ordering::Relaxed);
        Ok(conn.into_stream())
    }

    /// Runs one command to completion (see the module docs).
    pub(crate) async fn exec(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        let started = Instant::now();
        let marker = new_marker();
        let stdin = req.stdin.clone();
        let v5 = if stdin.is_some() {
            self.supports_stdin_close().await?
        } else {
            true
        };
        let stdin_len = match (&stdin, v5) {
            (Some(d), false) => Some(d.len()),
            _ => None,
        };
        let command = self.wrapped(
            &req.argv,
            req.cwd.as_deref(),
            &req.env,
            &marker,
            stdin_len,
            true,
        )?;
        let ws = self.connect(command, stdin.is_some()).await?;
        emit(
            &self.events,
            K8sEvent::ExecStarted {
                pod: self.pod.clone(),
                argv: req.argv.clone(),
            },
        );
        let (mut tx, mut rx) = ws.split();
        // stdin: frames, then the v5 close; on v4 the socket stays open
        // (closing it would lose the status) and `head -c` ends the input.
        let writer = tokio::spawn(async move {
            if let Some(data) = stdin {
                for chunk in data.chunks(STDIN_CHUNK) {
                    let mut frame = Vec::with_capacity(chunk.len() + 1);
                    frame.push(STDIN);
                    frame.extend_from_slice(chunk);
                    if tx.send(Message::binary(frame)).await.is_err() {
                        return tx;
                    }
                }
                if v5 {
                    let _ = tx.send(Message::binary(vec![CLOSE, STDIN])).await;
                }
            }
            tx
        });
        let deadline = req.timeout.map(|t| started + t);
        let cancel = req.cancel.clone();
        let read = read_until_status(&mut rx, sink.as_ref());
        tokio::pin!(read);
        let mut timed_out = false;
        let mut cancelled = false;
        let ended = tokio::select! {
            e = &mut read => Some(e),
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            } => { timed_out = true; None }
            _ = async {
                match &cancel {
                    Some(c) => c.cancelled().await,
                    None => std::future::pending().await,
                }
            } => { cancelled = true; None }
        };
        let ended = match ended {
            Some(e) => e,
            None => {
                self.kill_marked(&marker).await;
                tokio::time::timeout(AFTER_KILL, &mut read)
                    .await
                    .unwrap_or(Ended::NoStatus)
            }
        };
        if let Ok(mut tx) = tokio::time::timeout(Duration::from_secs(1), writer)
            .await
            .map_err(|_| ())
            .and_then(|r| r.map_err(|_| ()))
        {
            let _ = tx
                .send(Message::Close(Some(CloseFrame {
                    code: CloseCode::Normal,
                    reason: "".into(),
                })))
                .await;
        }
        let duration = started.elapsed();
        let exit_code = match ended {
            Ended::Exit(c) => Some(c),
            _ if timed_out || cancelled => None,
            Ended::Failure(m) => {
                return Err(BackendError::Spawn {
                    program: req.argv[0].clone(),
                    reason: m,
                });
            }
            Ended::NoStatus => {
                return Err(BackendError::Remote {
                    service: "kubernetes",
                    status: None,
                    code: Some("NoExitStatus".into()),
                    message: format!(
                        "exec in pod {} ended without an exit status; the command's result is unknown",
                        self.pod
                    ),
                });
            }
            Ended::Dropped(m) => {
                return Err(BackendError::unreachable(format!(
                    "exec connection to pod {} dropped: {m}",
                    self.pod
                )));
            }
        };
        emit(
            &self.events,
            K8sEvent::ExecExited {
                pod: self.pod.clone(),
                exit_code,
                duration_ms: duration.as_millis() as u64,
            },
        );
        let signal = exit_code
            .filter(|c| (129..=192).contains(c) && (timed_out || cancelled))
            .map(|c| c - 128);
        Ok(ExecOutcome {
            exit_code,
            signal,
            timed_out,
            cancelled,
            duration,
        })
    }

    /// [`Self::kill_marked`] on a task of the current runtime, for a
    /// `Drop` that cannot wait (a process or terminal dropped while its
    /// program runs takes the program along). Outside a runtime nothing
    /// can be sent, and nothing is done.
    pub(crate) fn kill_marked_detached(&self, marker: &str) {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let target = self.clone();
            let marker = marker.to_string();
            rt.spawn(async move { target.kill_marked(&marker).await });
        }
    }

    /// Kills every process in the Pod carrying `marker` (SIGTERM, a
    /// grace, SIGKILL: [`kill_argv`]).
    pub(crate) async fn kill_marked(&self, marker: &str) {
        let own = new_marker();
        let argv = kill_argv(marker);
        let command = match self.wrapped(&argv, Some("/"), &BTreeMap::new(), &own, None, false) {
            Ok(c) => c,
            Err(_) => return,
        };
        let run = async {
            let ws = self.connect(command, false).await?;
            let (_tx, mut rx) = ws.split();
            Ok::<_, BackendError>(read_until_status(&mut rx, None).await)
        };
        match tokio::time::timeout(KILL_TIMEOUT, run).await {
            Ok(Ok(Ended::Exit(0))) => {}
            other => {
                tracing::warn!(pod = %self.pod, ?other, "killing a command's processes did not finish cleanly")
            }
        }
    }

    /// Starts a long-lived process with its stdin attached.
    pub(crate) async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        let marker = new_marker();
        let v5 = self.supports_stdin_close().await?;
        let command = self.wrapped(
            &req.argv,
            req.cwd.as_deref(),
            &req.env,
            &marker,
            None,
            false,
        )?;
        let ws = self.connect(command, true).await?;
        emit(
            &self.events,
            K8sEvent::ExecStarted {
                pod: self.pod.clone(),
                argv: req.argv.clone(),
            },
        );
        let (mut tx, mut rx) = ws.split();
        let (stdin_w, mut stdin_r) = tokio::io::duplex(PIPE_BUFFER);
        let (mut out_w, out_r) = tokio::io::duplex(PIPE_BUFFER);
        let (mut err_w, err_r) = tokio::io::duplex(PIPE_BUFFER);
        let (status_tx, status_rx) = watch::channel(None::<Ended>);
        // stdin pump: EOF on our pipe becomes the v5 close frame (or, on
        // v4, closing the socket — the only EOF v4 has).
        let writer = tokio::spawn(async move {
            let mut buf = vec![0u8; STDIN_CHUNK];
            let mut ping = tokio::time::interval(Duration::from_secs(30));
            ping.reset();
            loop {
                tokio::select! {
                    n = stdin_r.read(&mut buf) => match n {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let mut frame = Vec::with_capacity(n + 1);
                            frame.push(STDIN);
                            frame.extend_from_slice(&buf[..n]);
                            if tx.send(Message::binary(frame)).await.is_err() {
                                return;
                            }
                        }
                    },
                    _ = ping.tick() => {
                        if tx.send(Message::Ping(Bytes::new())).await.is_err() {
                            return;
                        }
                    }
                }
            }
            if v5 {
                let _ = tx.send(Message::binary(vec![CLOSE, STDIN])).await;
                // Keep the sink (and pings) alive until the process ends.
                loop {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    if tx.send(Message::Ping(Bytes::new())).await.is_err() {
                        return;
                    }
                }
            } else {
                let _ = tx.close().await;
            }
        });
        let events = self.events.clone();
        let pod = self.pod.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            let (out_sink, mut out_rx) = mpsc::channel::<OutputChunk>(64);
            let pump = async {
                while let Some(c) = out_rx.recv().await {
                    let w = match c.stream {
                        StreamKind::Stdout => &mut out_w,
                        StreamKind::Stderr => &mut err_w,
                    };
                    // A reader that went away only loses its own output.
                    let _ = w.write_all(&c.data).await;
                }
                let _ = out_w.shutdown().await;
                let _ = err_w.shutdown().await;
            };
            let read = async {
                let e = read_until_status(&mut rx, Some(&out_sink)).await;
                drop(out_sink);
                e
            };
            let (ended, ()) = tokio::join!(read, pump);
            writer.abort();
            let code = match &ended {
                Ended::Exit(c) => Some(*c),
                _ => None,
            };
            emit(
                &events,
                K8sEvent::ExecExited {
                    pod,
                    exit_code: code,
                    duration_ms: started.elapsed().as_millis() as u64,
                },
            );
            let _ = status_tx.send(Some(ended));
        });
        let control = Arc::new(K8sProcess {
            target: self.clone(),
            marker,
            status: status_rx,
            killed: Mutex::new(false),
        });
        Ok(Process {
            stdin: Box::new(stdin_w),
            stdout: Box::new(out_r),
            stderr: Box::new(err_r),
            control,
        })
    }
}

/// Control of a long-lived exec.
struct K8sProcess {
    target: ExecTarget,
    marker: String,
    status: watch::Receiver<Option<Ended>>,
    killed: Mutex<bool>,
}

#[async_trait]
impl ProcessControl for K8sProcess {
    fn id(&self) -> String {
        format!("{}:{}", self.target.pod, &self.marker[..8])
    }

    async fn wait(&self) -> BackendResult<Option<i32>> {
        let mut rx = self.status.clone();
        let ended = loop {
            if let Some(e) = rx.borrow().clone() {
                break e;
            }
            if rx.changed().await.is_err() {
                break Ended::NoStatus;
            }
        };
        match ended {
            Ended::Exit(c) => Ok(Some(c)),
            _ if *self.killed.lock().expect("killed lock") => Ok(None),
            Ended::Failure(m) => Err(BackendError::Spawn {
                program: String::new(),
                reason: m,
            }),
            Ended::NoStatus => Ok(None),
            Ended::Dropped(m) => Err(BackendError::unreachable(format!(
                "exec connection to pod {} dropped: {m}",
                self.target.pod
            ))),
        }
    }

    fn try_status(&self) -> Option<Option<i32>> {
        match self.status.borrow().as_ref()? {
            Ended::Exit(c) => Some(Some(*c)),
            _ => Some(None),
        }
    }

    async fn kill(&self) -> BackendResult<()> {
        if self.try_status().is_some() {
            return Ok(());
        }
        *self.killed.lock().expect("killed lock") = true;
        self.target.kill_marked(&self.marker).await;
        let _ = tokio::time::timeout(AFTER_KILL, self.wait()).await;
        Ok(())
    }
}

impl Drop for K8sProcess {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            self.target.kill_marked_detached(&self.marker);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_is_valid_shell() {
        let ok = std::process::Command::new("sh")
            .args(["-n", "-c", WRAPPER])
            .status()
            .map(|s| s.success())
            .unwrap_or(true);
        assert!(ok);
    }

    #[test]
    fn the_wrapper_sets_cwd_env_marker_and_limits_stdin() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        for mode in ["x", "r"] {
            let mut child = std::process::Command::new("sh")
                .args([
                    "-c",
                    WRAPPER,
                    "wsbench",
                    d.path().to_str().unwrap(),
                    "m1",
                    "3",
                    mode,
                    "A=x y",
                    "--",
                    "sh",
                    "-c",
                    "pwd; echo \"$A\" \"$WSBENCH_EXEC_ID\"; cat; echo",
                ])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // More bytes than announced, and stdin left open: `head -c`
            // ends it.
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"abcdef").unwrap();
            let out = child.wait_with_output().unwrap();
            drop(stdin);
            let text = String::from_utf8(out.stdout).unwrap();
            let want = format!(
                "{}\nx y m1\nabc\n",
                d.path().canonicalize().unwrap().display()
            );
            assert_eq!(text, want, "mode {mode}");
        }
    }

    #[test]
    fn relay_mode_ends_when_the_command_does_not_when_its_background_job_does() {
        let d = tempfile::tempdir().unwrap();
        let marker = format!("relay-test-{}", std::process::id());
        let t0 = Instant::now();
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                WRAPPER,
                "wsbench",
                d.path().to_str().unwrap(),
                &marker,
                "-",
                "r",
                "--",
                "sh",
                "-c",
                "sleep 30 & printf 'out\\000'; echo err >&2; exit 3",
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let took = t0.elapsed();
        // The job still runs and carries the marker, which a timeout's
        // kill relies on; end it by pid.
        let want = format!("WSBENCH_EXEC_ID={marker}");
        let mut marked = 0;
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
            if env.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
                marked += 1;
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        assert!(marked >= 1, "the background job lost its marker");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\0");
        assert_eq!(out.stderr, b"err\n");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
}
