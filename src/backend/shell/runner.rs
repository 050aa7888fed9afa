//! Running one file script: [`ScriptHost`], anything that can run a
//! command to completion (with stdin), and [`run`], which wraps a script
//! body in the link check, runs it from `/` and collects its output.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use super::confine::{Follow, op_script};
use crate::backend::host::fs::process_umask;
use crate::backend::{
    BackendError, BackendResult, ExecOutcome, ExecRequest, OutputChunk, OutputSink, Sandbox,
    StreamKind, path as bpath,
};

/// Limit for one file script unless the host says otherwise: they touch
/// a single path.
pub(crate) const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Where file scripts run: a container, a Pod, or any [`Sandbox`] (the
/// cloud backends, through their command API).
#[async_trait]
pub(crate) trait ScriptHost: Send + Sync {
    /// The workspace directory (absolute): relative paths resolve against
    /// it, and the link check confines to it.
    fn script_workdir(&self) -> String;

    /// Limit for one script ([`SCRIPT_TIMEOUT`] unless the host moves
    /// whole files through stdin, which may take longer).
    fn script_timeout(&self) -> Duration {
        SCRIPT_TIMEOUT
    }

    /// Runs `req` to completion, its output into `sink`.
    ///
    /// Errors: those of the host's exec.
    async fn run_script(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome>;
}

#[async_trait]
impl<S: Sandbox + ?Sized> ScriptHost for S {
    fn script_workdir(&self) -> String {
        bpath::normalize(self.workdir())
    }

    async fn run_script(
        &self,
        req: ExecRequest,
        sink: Option<OutputSink>,
    ) -> BackendResult<ExecOutcome> {
        self.exec(req, sink).await
    }
}

/// What a script left: its exit code, stdout, and stderr (trimmed text).
pub(crate) struct ScriptOutput {
    /// Exit code; -1 when the host reported none.
    pub code: i32,
    /// Everything it printed on stdout.
    pub stdout: Vec<u8>,
    /// Its stderr, lossily decoded and trimmed.
    pub stderr: String,
}

/// The request of one operation: `/bin/sh -c <op_script> wsbench <paths>
/// <args>`, from `/` (the workdir itself may not exist yet: creating it is
/// one of these scripts' jobs) with the workdir in `WSBENCH_WORKDIR`, under
/// wsbench's own umask ([`process_umask`]): a file a script creates gets
/// the mode it would get on the host, not the sandbox's default (022).
pub(crate) fn request<H: ScriptHost + ?Sized>(
    host: &H,
    paths: &[(&str, Follow)],
    body: &str,
    args: &[&str],
    stdin: Option<Bytes>,
) -> ExecRequest {
    let follows: Vec<Follow> = paths.iter().map(|(_, f)| *f).collect();
    let script = match process_umask() {
        Some(m) => format!("umask {:03o}\n{}", m & 0o777, op_script(&follows, body)),
        None => op_script(&follows, body),
    };
    let mut argv = vec!["/bin/sh".to_string(), "-c".into(), script, "wsbench".into()];
    argv.extend(paths.iter().map(|(p, _)| p.to_string()));
    argv.extend(args.iter().map(|a| a.to_string()));
    ExecRequest {
        argv,
        cwd: Some("/".into()),
        stdin,
        timeout: Some(host.script_timeout()),
        env: [("WSBENCH_WORKDIR".to_string(), host.script_workdir())].into(),
        ..Default::default()
    }
}

/// Runs [`op_script`]`(follows, body)` on `host` with the paths, then
/// `args`, feeding `stdin` (see [`request`]).
///
/// Errors: those of the host's exec; `Io` (`TimedOut`) when the script
/// ran out of time.
pub(crate) async fn run<H: ScriptHost + ?Sized>(
    host: &H,
    paths: &[(&str, Follow)],
    body: &str,
    args: &[&str],
    stdin: Option<Bytes>,
) -> BackendResult<ScriptOutput> {
    let req = request(host, paths, body, args, stdin);
    let (outcome, stdout, stderr) = capture(host, req).await?;
    if outcome.timed_out {
        return Err(BackendError::Io {
            context: format!("file operation on {}", paths.first().map_or("", |p| p.0)),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "helper script timed out"),
        });
    }
    Ok(ScriptOutput {
        code: outcome.exit_code.unwrap_or(-1),
        stdout,
        stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
    })
}

/// Runs `req` on `host` and collects stdout and stderr.
///
/// Errors: those of the host's exec.
pub(crate) async fn capture<H: ScriptHost + ?Sized>(
    host: &H,
    req: ExecRequest,
) -> BackendResult<(ExecOutcome, Vec<u8>, Vec<u8>)> {
    let (tx, mut rx) = mpsc::channel::<OutputChunk>(64);
    let collect = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => out.extend_from_slice(&c.data),
                StreamKind::Stderr => err.extend_from_slice(&c.data),
            }
        }
        (out, err)
    };
    let (res, (out, err)) = tokio::join!(host.run_script(req, Some(tx)), collect);
    Ok((res?, out, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nowhere;

    #[async_trait]
    impl ScriptHost for Nowhere {
        fn script_workdir(&self) -> String {
            "/workspace".into()
        }

        async fn run_script(
            &self,
            _req: ExecRequest,
            _sink: Option<OutputSink>,
        ) -> BackendResult<ExecOutcome> {
            unreachable!("only the request is built")
        }
    }

    #[test]
    fn scripts_run_under_wsbench_s_umask() {
        let m = process_umask().expect("/proc/self/status has Umask");
        let req = request(&Nowhere, &[("/workspace/f", Follow::No)], "true", &[], None);
        assert!(
            req.argv[2].starts_with(&format!("umask {:03o}\n", m & 0o777)),
            "{}",
            req.argv[2]
        );
        // The shell accepts it and applies it to what it creates.
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("new");
        let st = std::process::Command::new("sh")
            .args(["-c", &format!("umask 077\n: > '{}'", f.display())])
            .status()
            .unwrap();
        assert!(st.success());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
