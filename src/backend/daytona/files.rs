//! Files in a Daytona sandbox: the toolbox's `/files/download`,
//! `/files/upload-v2`, `/files` (listing) and `/files/info`, and its
//! `FileInfo` answers.

use bytes::Bytes;
use serde_json::Value;

use super::sandbox::DaytonaSandbox;
use crate::backend::cloud::{self, UPLOAD_TIMEOUT};
use crate::backend::http::{self, Retry};
use crate::backend::{BackendResult, ByteRange, FileKind, FileStat};

impl DaytonaSandbox {
    /// `GET <toolbox>/<endpoint>?path=`, its error status mapped onto a
    /// file error.
    async fn get_file(&self, endpoint: &str, path: &str) -> BackendResult<reqwest::Response> {
        let url = self.url(endpoint);
        let resp = self
            .tb
            .send(Retry::Idempotent, false, |c| {
                c.get(&url).query(&[("path", path)])
            })
            .await?;
        self.tb
            .check_with(resp, |status, body| self.file_error(status, body, path))
            .await
    }

    /// The bytes of file `path` (`range` cut from the whole download).
    pub(super) async fn download_file(
        &self,
        path: &str,
        range: Option<ByteRange>,
    ) -> BackendResult<Vec<u8>> {
        let resp = self.get_file("/files/download", path).await?;
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.tb.transport_error(&e))?;
        Ok(cloud::slice_range(&bytes, range))
    }

    /// Writes file `path` (multipart; retried, the body can be rebuilt).
    pub(super) async fn upload_file(&self, path: &str, data: Bytes) -> BackendResult<()> {
        let url = self.url("/files/upload-v2");
        let len = data.len() as u64;
        let resp = self
            .tb
            .send(Retry::Idempotent, true, |c| {
                let part = reqwest::multipart::Part::stream_with_length(
                    reqwest::Body::from(data.clone()),
                    len,
                )
                .file_name(path.to_string())
                .mime_str("application/octet-stream")
                .expect("static mime");
                c.post(&url)
                    .query(&[("path", path)])
                    .multipart(reqwest::multipart::Form::new().part("file", part))
                    .timeout(UPLOAD_TIMEOUT)
            })
            .await?;
        self.tb
            .check_with(resp, |status, body| self.file_error(status, body, path))
            .await
            .map(|_| ())
    }

    /// The entries of directory `path`.
    pub(super) async fn list_entries(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        let resp = self.get_file("/files", path).await?;
        let items: Vec<Value> = self.tb.decode(resp).await?;
        Ok(items.iter().map(file_stat).collect())
    }

    /// Metadata of `path`.
    pub(super) async fn stat_file(&self, path: &str) -> BackendResult<FileStat> {
        let resp = self.get_file("/files/info", path).await?;
        let v: Value = self.tb.decode(resp).await?;
        Ok(file_stat(&v))
    }
}

/// Parses a `FileInfo` (`isDir`, `size`, `permissions` like `0644` or
/// `mode` like `-rw-r--r--`, `modifiedAt`).
fn file_stat(v: &Value) -> FileStat {
    let is_dir = v.get("isDir").and_then(Value::as_bool).unwrap_or(false);
    let mode_text = v.get("mode").and_then(Value::as_str).unwrap_or("");
    let symlink = mode_text.starts_with('L') || mode_text.starts_with('l');
    let mode = v
        .get("permissions")
        .and_then(Value::as_str)
        .and_then(|p| u32::from_str_radix(p.trim_start_matches("0o"), 8).ok())
        .or_else(|| rwx_bits(mode_text));
    let name = v
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_default();
    FileStat {
        name,
        kind: if is_dir {
            FileKind::Dir
        } else if symlink {
            FileKind::Symlink
        } else {
            FileKind::File
        },
        size: v.get("size").and_then(Value::as_u64).unwrap_or(0),
        modified: v
            .get("modifiedAt")
            .and_then(Value::as_str)
            .and_then(http::parse_time),
        link_target: None,
        target_is_dir: false,
        mode: mode.map(|m| m & 0o7777),
    }
}

/// `-rw-r--r--` → `0o644` (the last nine characters).
fn rwx_bits(s: &str) -> Option<u32> {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() < 9 {
        return None;
    }
    let tail = &chars[chars.len() - 9..];
    let mut m = 0u32;
    for (i, c) in tail.iter().enumerate() {
        let bit = 1 << (8 - i);
        match c {
            '-' => {}
            'r' | 'w' | 'x' | 's' | 't' => m |= bit,
            'S' | 'T' => {}
            _ => return None,
        }
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_info_modes() {
        assert_eq!(rwx_bits("-rw-r--r--"), Some(0o644));
        assert_eq!(rwx_bits("drwxr-xr-x"), Some(0o755));
        let st = file_stat(
            &json!({"name": "a", "isDir": false, "size": 3, "mode": "-rw-------", "permissions": "0600", "modifiedAt": "2026-01-01T00:00:00Z"}),
        );
        assert_eq!(
            (st.kind, st.size, st.mode),
            (FileKind::File, 3, Some(0o600))
        );
        assert!(st.modified.is_some());
    }
}
