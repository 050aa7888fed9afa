//! What the cloud backends share above HTTP: [`RemoteSandbox`], from
//! which a service's sandbox gets the whole [`Sandbox`] trait; turning an
//! argv into the one shell line the services take (C18: a user's line
//! reaches a real shell unchanged); the file operations that are done with
//! small shell scripts run through [`Sandbox::exec`] (remove, rename,
//! mkdir, exclusive create), so each service needs only exec + read +
//! write + list + stat natively (`MINIMAL-SURFACE.md`, introduction); and
//! the provisioner glue every service needs the same way (which sandbox
//! holds which workspace, picking the newest, listing, deleting).
//!
//! **Links out of the workspace are refused** ([`BackendError::Escapes`])
//! by every file operation, as bubblewrap, Docker and Kubernetes refuse
//! them, here in one place: the blanket [`Sandbox`] impl. The services'
//! file APIs follow links anywhere in the sandbox, so a path under the
//! workdir is first resolved and checked inside the sandbox by the shared
//! link check of module `confine` (one exec: the extra round trip Docker
//! pays too), and the API is called with the path it resolved. Read,
//! write, list and mkdir follow the last component; stat, remove, rename
//! and exclusive create act on a link itself. The shell-script operations
//! start with the same check. A stat or listing tells nothing of what a
//! link out of the workspace points to (size 0, not a directory). Paths
//! outside the workdir are not judged. As with the other backends, the
//! check and the operation are separate steps: a process in the sandbox
//! that swaps a directory for a link in between could redirect one
//! operation.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;

use super::ServiceClient;
use crate::backend::shell::{Follow, marker, ops, runner, scripts};
use crate::backend::{
    BackendError, BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest,
    FileKind, FileStat, OutputSink, Process, ProvisionSpec, Sandbox, SandboxInfo, SpawnRequest,
    Watch, labels, path as bpath,
};

/// Limit for one upload, whatever the unary request limit is.
pub const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// How long to wait for a command's stream to end after it was killed or
/// interrupted.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// What a cloud service does natively in one live sandbox; every
/// implementor is a [`Sandbox`] through the impl below, which adds path
/// resolution against the workdir, sorted listings, the shell-script file
/// operations, and the `Unsupported` answers (append, watch; stdin when
/// [`Capabilities::exec_stdin`] is off). So a backend module holds only
/// what is specific to its service.
///
/// `capabilities`, `workdir`, `exec` and `spawn` are those of [`Sandbox`];
/// the file methods take absolute paths, already resolved against the
/// workdir and, under it, with their links resolved and checked inside the
/// sandbox (module doc), so they may follow links as the services do.
#[async_trait]
pub trait RemoteSandbox: Send + Sync {
    /// Backend kind.
    const KIND: BackendKind;

    /// [`Sandbox::capabilities`].
    fn capabilities(&self) -> Capabilities;

    /// [`Sandbox::workdir`]: relative paths resolve against it.
    fn workdir(&self) -> &str;

    /// [`Sandbox::exec`]; stdin is refused before this is called when
    /// [`Capabilities::exec_stdin`] is off.
    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome>;

    /// [`Sandbox::spawn`]; by default `Unsupported` (services whose
    /// commands take no stdin cannot host a long-lived process).
    async fn spawn(&self, _req: SpawnRequest) -> BackendResult<Process> {
        Err(BackendError::Unsupported {
            backend: Self::KIND,
            what: "long-lived processes",
        })
    }

    /// The bytes of file `path`, or `range` of them.
    async fn download(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>>;

    /// Writes file `path`, creating its parents.
    async fn upload(&self, path: &str, data: Bytes) -> BackendResult<()>;

    /// Writes file `path` from a stream; returns the bytes written. By
    /// default the stream is read whole first (for services whose upload
    /// must know its length).
    async fn upload_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let data = read_all(reader, path).await?;
        let n = data.len() as u64;
        self.upload(path, data).await?;
        Ok(n)
    }

    /// The entries of directory `path`, in any order.
    async fn list_dir(&self, path: &str) -> BackendResult<Vec<FileStat>>;

    /// Metadata of `path`; the name may be left empty.
    async fn stat_path(&self, path: &str) -> BackendResult<FileStat>;
}

#[async_trait]
impl<T: RemoteSandbox> Sandbox for T {
    fn kind(&self) -> BackendKind {
        T::KIND
    }

    fn capabilities(&self) -> Capabilities {
        RemoteSandbox::capabilities(self)
    }

    fn workdir(&self) -> &str {
        RemoteSandbox::workdir(self)
    }

    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        if !RemoteSandbox::capabilities(self).exec_stdin
            && req.stdin.as_ref().is_some_and(|s| !s.is_empty())
        {
            return Err(BackendError::Unsupported {
                backend: T::KIND,
                what: "stdin for commands",
            });
        }
        RemoteSandbox::exec(self, req, sink).await
    }

    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        RemoteSandbox::spawn(self, req).await
    }

    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        let p = ops::resolve(self, &resolve(self, path), Follow::Yes, scripts::RESOLVE).await?;
        self.download(&p.path, range).await
    }

    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        let p = ops::resolve(self, &resolve(self, path), Follow::Yes, scripts::RESOLVE).await?;
        self.upload(&p.path, Bytes::copy_from_slice(data)).await
    }

    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let p = ops::resolve(self, &resolve(self, path), Follow::Yes, scripts::RESOLVE).await?;
        self.upload_stream(&p.path, reader).await
    }

    async fn append(&self, _path: &str, _data: &[u8]) -> BackendResult<()> {
        Err(BackendError::Unsupported {
            backend: T::KIND,
            what: "append",
        })
    }

    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        ops::create_new_uploaded(self, &resolve(self, path), data).await
    }

    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = ops::resolve(
            self,
            &resolve(self, path),
            Follow::Yes,
            scripts::RESOLVE_LIST,
        )
        .await?;
        let mut out = self.list_dir(&p.path).await?;
        for st in &mut out {
            if st.kind == FileKind::Symlink && p.links_out.contains(&st.name) {
                hide_target(st);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        let abs = resolve(self, path);
        let p = ops::resolve(self, &abs, Follow::No, scripts::RESOLVE_STAT).await?;
        let mut st = self.stat_path(&p.path).await?;
        if st.kind == FileKind::Symlink && !p.links_out.is_empty() {
            hide_target(&mut st);
        }
        if st.name.is_empty() {
            st.name = abs.rsplit('/').next().unwrap_or("/").to_string();
        }
        Ok(st)
    }

    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        ops::remove(self, &resolve(self, path), recursive).await
    }

    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        ops::rename(self, &resolve(self, from), &resolve(self, to)).await
    }

    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        ops::mkdir(self, &resolve(self, path), parents).await
    }

    async fn watch(&self, _path: &str) -> BackendResult<Watch> {
        Err(BackendError::Unsupported {
            backend: T::KIND,
            what: "watch",
        })
    }
}

/// `path` against the sandbox's workdir.
fn resolve<T: RemoteSandbox>(sb: &T, path: &str) -> String {
    bpath::join(RemoteSandbox::workdir(sb), path)
}

/// Forgets what a link's stat says of its target (size, directory or
/// not), for a link out of the workspace: as with bubblewrap, nothing
/// about what lies outside is told.
fn hide_target(st: &mut FileStat) {
    st.size = 0;
    st.target_is_dir = false;
}

/// `range` of a whole download (a service that cannot send a part).
pub fn slice_range(bytes: &[u8], range: Option<ByteRange>) -> Vec<u8> {
    match range {
        None => bytes.to_vec(),
        Some(r) => {
            let start = (r.offset as usize).min(bytes.len());
            let end = start.saturating_add(r.len as usize).min(bytes.len());
            bytes[start..end].to_vec()
        }
    }
}

/// Sleeps until `when`; never returns for `None` (a limit not set, or
/// not started yet), so it can stand in a `select!` either way.
pub async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// Returns when `token` is cancelled; never without a token.
pub async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(c) => c.cancelled().await,
        None => std::future::pending().await,
    }
}

/// Which sandbox holds which workspace, as far as this process has seen:
/// spares a listing for the calls that need only the sandbox id.
#[derive(Debug, Default)]
pub struct Known(Mutex<HashMap<String, String>>);

impl Known {
    /// The sandbox id remembered for `workspace_id`.
    pub fn get(&self, workspace_id: &str) -> Option<String> {
        self.lock().get(workspace_id).cloned()
    }

    /// Remembers `sandbox_id` for `workspace_id` (an empty workspace id,
    /// a sandbox of no workspace, is not remembered).
    pub fn remember(&self, workspace_id: &str, sandbox_id: &str) {
        if !workspace_id.is_empty() {
            self.lock()
                .insert(workspace_id.to_string(), sandbox_id.to_string());
        }
    }

    /// Forgets `workspace_id`; returns the sandbox id it had.
    pub fn forget(&self, workspace_id: &str) -> Option<String> {
        self.lock().remove(workspace_id)
    }

    /// Passes `r` through, forgetting `workspace_id` when it says the
    /// sandbox is gone ([`BackendError::Unavailable`]).
    pub fn forget_on_gone<T>(&self, workspace_id: &str, r: BackendResult<T>) -> BackendResult<T> {
        if matches!(r, Err(BackendError::Unavailable(_))) {
            self.forget(workspace_id);
        }
        r
    }

    /// The sandbox id of `workspace_id`: the remembered one, else the one
    /// `find` reports (awaited only then).
    ///
    /// Errors: those of `find`; [`BackendError::Unavailable`] ("no
    /// `<service>` sandbox for workspace ...") when there is none.
    pub async fn sandbox_id(
        &self,
        service: &str,
        workspace_id: &str,
        find: impl Future<Output = BackendResult<Option<SandboxInfo>>>,
    ) -> BackendResult<String> {
        if let Some(id) = self.get(workspace_id) {
            return Ok(id);
        }
        match find.await? {
            Some(i) => Ok(i.backend_id),
            None => Err(BackendError::Unavailable(format!(
                "no {service} sandbox for workspace {workspace_id}"
            ))),
        }
    }

    /// The ids of every sandbox of `workspace_id`: those in `listed` that
    /// carry its id, and the one remembered for it (forgotten now), each
    /// once.
    pub fn all_ids(
        &self,
        workspace_id: &str,
        listed: impl IntoIterator<Item = SandboxInfo>,
    ) -> Vec<String> {
        let mut ids: Vec<String> = listed
            .into_iter()
            .filter(|i| i.workspace_id == workspace_id)
            .map(|i| i.backend_id)
            .collect();
        if let Some(id) = self.forget(workspace_id)
            && !ids.contains(&id)
        {
            ids.push(id);
        }
        ids
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().expect("known sandboxes lock")
    }
}

/// The labels (metadata) of a new sandbox: the profile's `extra`, then
/// the spec's, then the workspace id, last, so nothing a user passes can
/// retarget the reattach key (contract §11 point 27).
pub fn labels_for(
    extra: &BTreeMap<String, String>,
    spec: &ProvisionSpec,
) -> BTreeMap<String, String> {
    let mut out = extra.clone();
    out.extend(spec.labels.clone());
    out.insert(labels::WORKSPACE_ID.into(), spec.workspace_id.clone());
    out
}

/// The sandboxes in `listed` that belong to a workspace (those without
/// the workspace-id label are someone else's), sorted by workspace id.
pub fn workspaces(listed: impl IntoIterator<Item = SandboxInfo>) -> Vec<SandboxInfo> {
    let mut out: Vec<SandboxInfo> = listed
        .into_iter()
        .filter(|i| i.labels.contains_key(labels::WORKSPACE_ID))
        .collect();
    out.sort_by(|a, b| a.workspace_id.cmp(&b.workspace_id));
    out
}

/// The sandbox of `workspace_id` with the greatest `key` among `found`
/// (the service filtered by label already; checked again, in case a
/// server ignores the filter). Several are a leftover of a crash between
/// create and record: logged, and the newest wins.
pub fn newest<K: Ord>(
    service: &str,
    workspace_id: &str,
    found: impl IntoIterator<Item = (K, SandboxInfo)>,
) -> Option<SandboxInfo> {
    let mut found: Vec<(K, SandboxInfo)> = found
        .into_iter()
        .filter(|(_, i)| i.workspace_id == workspace_id)
        .collect();
    if found.len() > 1 {
        tracing::warn!(
            workspace_id,
            count = found.len(),
            "several {service} sandboxes carry this workspace id; using the newest"
        );
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found.pop().map(|(_, i)| i)
}

/// Deletes each sandbox `url(id)` names; one already gone counts as
/// deleted.
///
/// Errors: the first deletion the service refuses.
pub async fn delete_each(
    api: &ServiceClient,
    ids: Vec<String>,
    url: impl Fn(&str) -> String,
) -> BackendResult<()> {
    for id in ids {
        api.delete(&url(&id)).await?;
    }
    Ok(())
}

/// Where a sandbox stands while [`wait_for_state`] polls it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateCheck {
    /// The wanted state.
    Reached,
    /// A state it cannot leave for the wanted one; the text names it (and
    /// the service's reason).
    Failed(String),
    /// Still on the way; the text names the state.
    Waiting(String),
}

/// Polls `get` (back-off from 100 ms to 2 s) until `check` says the
/// sandbox reached `want`; returns the last answer.
///
/// Errors: those of `get`; [`BackendError::Unavailable`] on a failed
/// state; [`BackendError::Remote`] `state_timeout` after `limit`.
pub async fn wait_for_state<T, F>(
    service: &'static str,
    id: &str,
    want: &str,
    limit: Duration,
    get: impl Fn() -> F,
    check: impl Fn(&T) -> StateCheck,
) -> BackendResult<T>
where
    F: Future<Output = BackendResult<T>>,
{
    let deadline = Instant::now() + limit;
    let mut delay = Duration::from_millis(100);
    loop {
        let dto = get().await?;
        let state = match check(&dto) {
            StateCheck::Reached => return Ok(dto),
            StateCheck::Failed(s) => {
                return Err(BackendError::Unavailable(format!(
                    "{service} sandbox {id} is {s} while waiting for {want}"
                )));
            }
            StateCheck::Waiting(s) => s,
        };
        if Instant::now() >= deadline {
            return Err(BackendError::Remote {
                service,
                status: None,
                code: Some("state_timeout".into()),
                message: format!(
                    "sandbox {id} still {state} after {}s (waiting for {want})",
                    limit.as_secs()
                ),
            });
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

/// Quotes `s` for a POSIX shell (single quotes; `'` becomes `'\''`).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `argv` as one shell line. `["sh"|"/bin/sh", "-c", line]` gives `line`
/// itself, verbatim; anything else is quoted word by word so the shell
/// runs exactly that argv.
///
/// Errors: an empty argv.
pub fn command_line(argv: &[String]) -> BackendResult<String> {
    if argv.is_empty() {
        return Err(BackendError::Spawn {
            program: String::new(),
            reason: "empty argv".into(),
        });
    }
    if let Some(line) = plain_shell_line(argv) {
        return Ok(line.to_string());
    }
    Ok(argv
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" "))
}

/// The line of an argv of exactly `sh -c <line>` (or `/bin/sh -c`).
pub fn plain_shell_line(argv: &[String]) -> Option<&str> {
    match argv {
        [sh, c, line] if (sh == "sh" || sh == "/bin/sh") && c == "-c" => Some(line),
        _ => None,
    }
}

/// `export K='v'; ` for each variable, for services whose command call has
/// no environment field.
///
/// Errors: a name that is not a valid shell variable name.
pub fn env_prefix<'a>(
    env: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> BackendResult<String> {
    let mut out = String::new();
    for (k, v) in env {
        let valid = !k.is_empty()
            && !k.as_bytes()[0].is_ascii_digit()
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(BackendError::Spawn {
                program: String::new(),
                reason: format!("invalid environment variable name `{k}`"),
            });
        }
        out.push_str(&format!("export {k}={}; ", shell_quote(v)));
    }
    Ok(out)
}

/// Runs `argv` in the workdir and collects its output.
///
/// Errors: those of [`Sandbox::exec`].
pub async fn exec_capture(
    sb: &dyn Sandbox,
    argv: Vec<String>,
    timeout: Duration,
) -> BackendResult<(ExecOutcome, Vec<u8>, Vec<u8>)> {
    let req = ExecRequest {
        argv,
        timeout: Some(timeout),
        ..Default::default()
    };
    exec_request_capture(sb, req).await
}

/// Runs `req` and collects its output.
///
/// Errors: those of [`Sandbox::exec`].
pub async fn exec_request_capture(
    sb: &dyn Sandbox,
    req: ExecRequest,
) -> BackendResult<(ExecOutcome, Vec<u8>, Vec<u8>)> {
    runner::capture(sb, req).await
}

pub use crate::backend::shell::marker::{MARKER_VAR, kill_line as kill_marked_line, new_marker};

/// Runs [`kill_line`](crate::backend::shell::marker::kill_line) in the
/// sandbox; failures are only logged (the service's own kill has already
/// been sent).
pub async fn kill_marked(sb: &dyn Sandbox, marker: &str) {
    let req = ExecRequest {
        argv: marker::kill_argv(marker),
        cwd: Some("/".into()),
        timeout: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    if let Err(e) = sb.exec(req, None).await {
        tracing::warn!(error = %e, "killing a stopped command's processes failed");
    }
}

/// Creates a directory (and its parents when `parents`): the shared
/// script ([`ops::mkdir`]), for the provisioners' workdir.
///
/// Errors: those of [`ops::mkdir`].
pub async fn shell_mkdir(sb: &dyn Sandbox, path: &str, parents: bool) -> BackendResult<()> {
    ops::mkdir(sb, path, parents).await
}

/// Reads an async reader to the end (for services whose upload needs the
/// whole body, or whose multipart part must know its length).
///
/// Errors: the reader fails.
pub async fn read_all(
    mut reader: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    path: &str,
) -> BackendResult<Bytes> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    reader
        .read_to_end(&mut buf)
        .await
        .map_err(|e| BackendError::from_io(e, path))?;
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_shell_line_passes_verbatim() {
        let line = "sh -c 'sleep 0.2; echo one > one.txt' & echo two && cat <<'EOF'\nx\nEOF";
        assert_eq!(command_line(&v(&["/bin/sh", "-c", line])).unwrap(), line);
        assert_eq!(command_line(&v(&["sh", "-c", line])).unwrap(), line);
    }

    #[test]
    fn argv_words_are_quoted() {
        assert_eq!(
            command_line(&v(&["rg", "--files", "a b", "it's", ""])).unwrap(),
            r#"rg --files 'a b' 'it'\''s' ''"#
        );
        // bash -c keeps bash: it is quoted, not unwrapped into sh.
        assert_eq!(
            command_line(&v(&["bash", "-c", "echo $0"])).unwrap(),
            "bash -c 'echo $0'"
        );
        assert!(command_line(&[]).is_err());
    }

    fn info(ws: Option<&str>, id: &str) -> SandboxInfo {
        let mut labels = std::collections::BTreeMap::new();
        if let Some(w) = ws {
            labels.insert(
                crate::backend::labels::WORKSPACE_ID.to_string(),
                w.to_string(),
            );
        }
        SandboxInfo {
            workspace_id: ws.unwrap_or_default().to_string(),
            backend_id: id.to_string(),
            state: crate::backend::SandboxState::Running,
            labels,
            created_at: None,
            last_active: None,
        }
    }

    #[test]
    fn ranges_of_whole_downloads() {
        let r = |offset, len| Some(ByteRange { offset, len });
        assert_eq!(slice_range(b"abcdef", None), b"abcdef");
        assert_eq!(slice_range(b"abcdef", r(1, 3)), b"bcd");
        assert_eq!(slice_range(b"abcdef", r(4, 10)), b"ef");
        assert_eq!(slice_range(b"abcdef", r(9, 1)), b"");
    }

    #[test]
    fn known_sandboxes_and_listings() {
        let k = Known::default();
        k.remember("w1", "s1");
        k.remember("", "s0");
        assert_eq!(k.get("w1").as_deref(), Some("s1"));
        assert_eq!(k.get(""), None);
        let kept: BackendResult<()> = Err(BackendError::NotFound("p".into()));
        assert!(k.forget_on_gone("w1", kept).is_err());
        assert!(k.get("w1").is_some());
        let gone: BackendResult<()> = Err(BackendError::Unavailable("gone".into()));
        assert!(k.forget_on_gone("w1", gone).is_err());
        assert_eq!(k.get("w1"), None);
        // Listed ids of the workspace plus the remembered one, once each.
        k.remember("w1", "s2");
        let listed = vec![
            info(Some("w1"), "s2"),
            info(Some("w2"), "s3"),
            info(Some("w1"), "s4"),
        ];
        assert_eq!(k.all_ids("w1", listed.clone()), ["s2", "s4"]);
        assert_eq!(k.get("w1"), None);
        // Someone else's sandbox is no workspace; the rest sorted by id.
        let mut all = listed;
        all.insert(0, info(None, "x"));
        let ws: Vec<String> = workspaces(all.clone())
            .into_iter()
            .map(|i| i.backend_id)
            .collect();
        assert_eq!(ws, ["s2", "s4", "s3"]);
        assert_eq!(
            newest("X", "w1", all.into_iter().enumerate())
                .unwrap()
                .backend_id,
            "s4"
        );
        assert!(newest("X", "w9", [(1, info(Some("w1"), "s"))]).is_none());
    }

    #[tokio::test]
    async fn state_polls_until_reached_or_failed() {
        let calls = std::sync::atomic::AtomicU32::new(0);
        let get = || async {
            Ok::<u32, BackendError>(calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
        };
        let check = |n: &u32| match n {
            0 | 1 => StateCheck::Waiting(format!("step {n}")),
            _ => StateCheck::Reached,
        };
        let n = wait_for_state("svc", "i", "done", Duration::from_secs(10), get, check)
            .await
            .unwrap();
        assert_eq!(n, 2);
        let e = wait_for_state(
            "svc",
            "i",
            "done",
            Duration::from_secs(10),
            || async { Ok::<u32, BackendError>(0) },
            |_| StateCheck::Failed("error (disk)".into()),
        )
        .await
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "sandbox unavailable: svc sandbox i is error (disk) while waiting for done"
        );
        let e = wait_for_state(
            "svc",
            "i",
            "done",
            Duration::ZERO,
            || async { Ok::<u32, BackendError>(0) },
            |_| StateCheck::Waiting("starting".into()),
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("still starting after 0s"), "{e}");
    }

    #[test]
    fn env_prefix_quotes_values_and_rejects_bad_names() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("A_1".to_string(), "x y'z".to_string());
        assert_eq!(env_prefix(&m).unwrap(), r#"export A_1='x y'\''z'; "#);
        m.insert("1A".to_string(), "x".to_string());
        assert!(env_prefix(&m).is_err());
    }
}
