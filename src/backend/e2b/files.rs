//! Files in an E2B sandbox: envd's `/files` for reading and (multipart)
//! writing, `filesystem.Filesystem/ListDir` and `Stat` for listings and
//! metadata.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncRead;

use super::sandbox::E2bSandbox;
use crate::backend::cloud::{self, UPLOAD_TIMEOUT};
use crate::backend::http::{self, On404, Retry};
use crate::backend::{BackendError, BackendResult, ByteRange, FileKind, FileStat, path as bpath};

impl E2bSandbox {
    async fn stat_entry(&self, path: &str) -> BackendResult<EntryDto> {
        let v = self
            .unary(
                "/filesystem.Filesystem/Stat",
                json!({"path": path}),
                On404::Path(path.to_string()),
            )
            .await?;
        let entry = v.get("entry").cloned().unwrap_or(Value::Null);
        serde_json::from_value(entry).map_err(|e| {
            self.envd
                .bad_response(format!("Stat answer for {path}: {e}"))
        })
    }

    async fn upload_part(&self, path: &str, part: reqwest::multipart::Part) -> BackendResult<()> {
        let url = self.url("/files");
        let q = self.query_path(path);
        // A multipart body can be sent once only: no retries here.
        let form = reqwest::multipart::Form::new().part("file", part);
        let req = self.envd.raw().post(&url).query(&q).multipart(form);
        // A multipart stream cannot be re-sent, so it gets one generous try.
        let resp = self.envd.send_once(req, Some(UPLOAD_TIMEOUT)).await?;
        self.envd
            .check_with(resp, |status, body| {
                self.file_error(status, body, path, On404::SandboxGone)
            })
            .await
            .map(|_| ())
    }

    /// An error answer of `/files` about `path`: envd's 400 for a
    /// directory, else as [`E2bSandbox::connect_error`].
    fn file_error(&self, status: u16, body: &[u8], path: &str, on404: On404) -> BackendError {
        let (_, message) = http::parse_error_body(body);
        if status == 400 && message.contains("directory") {
            return BackendError::IsADirectory(path.to_string());
        }
        self.connect_error(status, body, on404)
    }

    /// The bytes of file `path` (`range` cut from the whole download).
    pub(super) async fn get_file(
        &self,
        path: &str,
        range: Option<ByteRange>,
    ) -> BackendResult<Vec<u8>> {
        let p = path.to_string();
        let url = self.url("/files");
        let q = self.query_path(&p);
        let resp = self
            .envd
            .send(Retry::Idempotent, false, |c| c.get(&url).query(&q))
            .await?;
        let resp = self
            .envd
            .check_with(resp, |status, body| {
                self.file_error(status, body, &p, On404::Path(p.clone()))
            })
            .await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.envd.transport_error(&e))?;
        Ok(cloud::slice_range(&bytes, range))
    }

    /// Writes file `path`.
    pub(super) async fn put_file(&self, path: &str, data: Bytes) -> BackendResult<()> {
        let part = reqwest::multipart::Part::bytes(Vec::from(data))
            .file_name(path.to_string())
            .mime_str("application/octet-stream")
            .expect("static mime");
        self.upload_part(path, part).await
    }

    /// Writes file `path` from a stream; returns the bytes sent.
    pub(super) async fn put_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        let p = path.to_string();
        let count = Arc::new(AtomicU64::new(0));
        let counted = CountingReader {
            inner: reader,
            count: count.clone(),
        };
        let body = reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::new(counted));
        let part = reqwest::multipart::Part::stream(body)
            .file_name(p.clone())
            .mime_str("application/octet-stream")
            .expect("static mime");
        self.upload_part(&p, part).await?;
        Ok(count.load(Ordering::Relaxed))
    }

    /// The entries of directory `path`.
    pub(super) async fn list_entries(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = path.to_string();
        let v = self
            .unary(
                "/filesystem.Filesystem/ListDir",
                json!({"path": p, "depth": 1}),
                On404::Path(p.clone()),
            )
            .await?;
        let entries: Vec<EntryDto> = serde_json::from_value(
            v.get("entries").cloned().unwrap_or(json!([])),
        )
        .map_err(|e| {
            self.envd
                .bad_response(format!("ListDir answer for {p}: {e}"))
        })?;
        Ok(entries.iter().map(EntryDto::stat).collect())
    }

    /// Metadata of `path`; a link's target is stat'ed for its kind and size.
    pub(super) async fn stat_file(&self, path: &str) -> BackendResult<FileStat> {
        let p = path.to_string();
        let entry = self.stat_entry(&p).await?;
        let mut st = entry.stat();
        if st.kind == FileKind::Symlink
            && let Some(t) = &entry.symlink_target
        {
            let target = bpath::join(&bpath::join(&p, ".."), t);
            if let Ok(te) = self.stat_entry(&target).await {
                let ts = te.stat();
                st.target_is_dir = ts.kind == FileKind::Dir;
                st.size = ts.size;
            }
        }
        Ok(st)
    }
}

/// One `EntryInfo` (proto3 JSON; `size` is an int64 string).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryDto {
    #[serde(default)]
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    path: String,
    #[serde(default)]
    size: Option<Value>,
    #[serde(default)]
    mode: Option<u32>,
    #[serde(default)]
    modified_time: Option<String>,
    #[serde(default)]
    symlink_target: Option<String>,
}

impl EntryDto {
    fn stat(&self) -> FileStat {
        let kind = match self.kind.as_deref() {
            Some("FILE_TYPE_FILE") => FileKind::File,
            Some("FILE_TYPE_DIRECTORY") => FileKind::Dir,
            Some("FILE_TYPE_SYMLINK") => FileKind::Symlink,
            _ => FileKind::Other,
        };
        let size = match &self.size {
            Some(Value::String(s)) => s.parse().unwrap_or(0),
            Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
            _ => 0,
        };
        let name = if self.name.is_empty() {
            self.path.rsplit('/').next().unwrap_or("").to_string()
        } else {
            self.name.clone()
        };
        FileStat {
            name,
            kind,
            size,
            modified: self.modified_time.as_deref().and_then(http::parse_time),
            link_target: self.symlink_target.clone(),
            target_is_dir: false,
            mode: self.mode.map(|m| m & 0o7777),
        }
    }
}

struct CountingReader {
    inner: Box<dyn AsyncRead + Send + Unpin>,
    count: Arc<AtomicU64>,
}

impl AsyncRead for CountingReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        r
    }
}
