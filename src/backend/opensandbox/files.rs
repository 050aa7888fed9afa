//! Files in an OpenSandbox sandbox: execd's `/files/download` (with
//! byte ranges), `/files/upload` (multipart with metadata),
//! `/files/search` and `/files/info`, and its `FileInfo` answers.

use bytes::Bytes;
use reqwest::header::RANGE;
use serde_json::{Value, json};

use super::sandbox::OpenSandboxSandbox;
use crate::backend::cloud::{self, UPLOAD_TIMEOUT};
use crate::backend::http::{self, On404, Retry};
use crate::backend::{BackendError, BackendResult, ByteRange, FileKind, FileStat, path as bpath};

impl OpenSandboxSandbox {
    /// Passes a 2xx answer about `path` through; maps any other with
    /// [`OpenSandboxSandbox::file_error`].
    async fn check_file(
        &self,
        resp: reqwest::Response,
        path: &str,
    ) -> BackendResult<reqwest::Response> {
        self.execd
            .check_with(resp, |status, body| self.file_error(status, body, path))
            .await
    }

    fn file_error(&self, status: u16, body: &[u8], path: &str) -> BackendError {
        let (code, message) = http::parse_error_body(body);
        match (status, code.as_deref()) {
            (_, Some(c)) if c.contains("SANDBOX_NOT_FOUND") => BackendError::gone(format!(
                "opensandbox sandbox {} is gone ({c}: {message})",
                self.id
            )),
            (_, Some(c)) if c.contains("SANDBOX_NOT_RUNNING") => BackendError::stopped(format!(
                "opensandbox sandbox {} is not running ({c}: {message})",
                self.id
            )),
            (404, _) | (_, Some("FILE_NOT_FOUND")) => BackendError::NotFound(path.to_string()),
            _ if message.contains("is a directory") => BackendError::IsADirectory(path.into()),
            _ if message.contains("not a directory") => BackendError::NotADirectory(path.into()),
            _ if message.contains("ermission denied") => {
                BackendError::PermissionDenied(path.into())
            }
            _ => self.execd.status_error(
                reqwest::StatusCode::from_u16(status)
                    .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
                body,
                On404::Remote,
            ),
        }
    }

    async fn info(&self, path: &str) -> BackendResult<Value> {
        let url = self.url("/files/info");
        let resp = self
            .execd
            .send(Retry::Idempotent, false, |c| {
                c.get(&url).query(&[("path", path)])
            })
            .await?;
        let resp = self.check_file(resp, path).await?;
        let v: Value = self.execd.decode(resp).await?;
        v.get(path)
            .cloned()
            .or_else(|| v.as_object().and_then(|m| m.values().next().cloned()))
            .ok_or_else(|| BackendError::NotFound(path.to_string()))
    }

    /// The bytes of file `path`, or `range` of them.
    pub(super) async fn download_file(
        &self,
        path: &str,
        range: Option<ByteRange>,
    ) -> BackendResult<Vec<u8>> {
        let p = path.to_string();
        if let Some(r) = range
            && r.len == 0
        {
            // A zero-length Range header is invalid; check existence only.
            self.info(&p).await?;
            return Ok(Vec::new());
        }
        let url = self.url("/files/download");
        let resp = self
            .execd
            .send(Retry::Idempotent, false, |c| {
                let mut b = c.get(&url).query(&[("path", &p)]);
                if let Some(r) = range {
                    b = b.header(
                        RANGE,
                        format!("bytes={}-{}", r.offset, r.offset + r.len - 1),
                    );
                }
                b
            })
            .await?;
        let status = resp.status().as_u16();
        if status == 416 {
            return Ok(Vec::new());
        }
        let resp = self.check_file(resp, &p).await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.execd.transport_error(&e))?;
        // 200 means the server ignored the range: cut it here.
        Ok(cloud::slice_range(&bytes, range.filter(|_| status == 200)))
    }

    /// Writes file `path` (mode 644).
    pub(super) async fn upload_file(&self, path: &str, data: Bytes) -> BackendResult<()> {
        let url = self.url("/files/upload");
        // execd reads `mode` as octal digits: 644 means 0o644
        // (MINIMAL-SURFACE.md §3.4; the reference sent 420 = 0o644).
        let meta = serde_json::to_vec(&json!({"path": path, "mode": 644})).expect("json");
        let len = data.len();
        let build = |c: &reqwest::Client| {
            // Both parts must be *file* parts (with a filename), or execd
            // answers "metadata file is missing".
            let form = reqwest::multipart::Form::new()
                .part(
                    "metadata",
                    reqwest::multipart::Part::bytes(meta.clone())
                        .file_name("metadata")
                        .mime_str("application/json")
                        .expect("static mime"),
                )
                .part(
                    "file",
                    reqwest::multipart::Part::stream_with_length(
                        reqwest::Body::from(data.clone()),
                        len as u64,
                    )
                    .file_name(path.to_string())
                    .mime_str("application/octet-stream")
                    .expect("static mime"),
                );
            c.post(&url).multipart(form).timeout(UPLOAD_TIMEOUT)
        };
        let resp = self.execd.send(Retry::Idempotent, true, build).await?;
        self.check_file(resp, path).await.map(|_| ())
    }

    /// The entries of directory `path`.
    pub(super) async fn list_entries(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let p = path.to_string();
        let url = self.url("/directories/list");
        let resp = self
            .execd
            .send(Retry::Idempotent, false, |c| {
                c.get(&url).query(&[("path", p.as_str()), ("depth", "1")])
            })
            .await?;
        let resp = self.check_file(resp, &p).await?;
        let items: Vec<Value> = self.execd.decode(resp).await?;
        let me = bpath::normalize(&p);
        Ok(items
            .iter()
            .filter(|v| {
                let ep = v.get("path").and_then(Value::as_str).unwrap_or("");
                bpath::normalize(ep) != me
            })
            .map(file_stat)
            .collect())
    }

    /// Metadata of `path`.
    pub(super) async fn stat_file(&self, path: &str) -> BackendResult<FileStat> {
        Ok(file_stat(&self.info(path).await?))
    }
}

/// `FileInfo.mode` is written in octal digits (`755` means `0o755`).
fn octal_digits(mode: &Value) -> Option<u32> {
    let digits = match mode {
        Value::Number(n) => n.as_u64()?.to_string(),
        Value::String(s) => s.clone(),
        _ => return None,
    };
    u32::from_str_radix(&digits, 8).ok()
}

fn file_stat(v: &Value) -> FileStat {
    let path = v.get("path").and_then(Value::as_str).unwrap_or("");
    let kind = match v.get("type").and_then(Value::as_str) {
        Some("file") => FileKind::File,
        Some("directory") | Some("dir") => FileKind::Dir,
        Some("symlink") => FileKind::Symlink,
        Some(_) => FileKind::Other,
        // Older execd versions have no `type`.
        None => FileKind::File,
    };
    FileStat {
        name: path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string(),
        kind,
        size: v.get("size").and_then(Value::as_u64).unwrap_or(0),
        modified: v
            .get("modified_at")
            .and_then(Value::as_str)
            .and_then(http::parse_time),
        link_target: None,
        target_is_dir: false,
        mode: v.get("mode").and_then(octal_digits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_digits() {
        assert_eq!(octal_digits(&json!(644)), Some(0o644));
        assert_eq!(octal_digits(&json!(755)), Some(0o755));
        assert_eq!(octal_digits(&json!(9)), None);
    }
}
