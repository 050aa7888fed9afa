//! Expanding a skill archive (zip, tar, tar.gz) into a staging directory
//! in the sandbox (docs/contract.md §4.3, weak point 33).
//!
//! The archive is read in-process with the `zip`, `tar` and `flate2` crates
//! on a blocking thread; every member is checked before anything is written
//! and file data is streamed into the sandbox through
//! [`Sandbox::write_stream`], so this works on every backend and never
//! writes outside the staging directory:
//!
//! * a member name that is absolute, holds `..`, a backslash or NUL, or is
//!   not UTF-8 refuses the archive;
//! * the sum of member sizes may not pass the limit: declared sizes are
//!   summed before a member is written (all of them up front for zip), and
//!   the bytes actually read are counted too, so a member that lies about
//!   its size is cut off;
//! * no link is ever created: a symlink or hard link whose target stays
//!   inside the archive becomes a copy of the file it names, one that points
//!   outside (or at a directory) refuses the archive, and so does a member
//!   whose path passes through a link;
//! * devices, FIFOs and other special members refuse the archive.
//!
//! The caller owns the staging directory and deletes it afterwards.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Seek};
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::backend::Sandbox;

/// The reference's default cap on the bytes an archive may expand to
/// (`DEFAULT_MAX_EXTRACTED_BYTES`, 500 MiB, docs/contract.md §10).
pub const DEFAULT_MAX_EXTRACTED_BYTES: u64 = 500 * 1024 * 1024;

/// Most members an archive may hold; more is treated as a bomb of tiny
/// files.
pub const MAX_ARCHIVE_MEMBERS: usize = 100_000;

/// Links followed when a link names another link, at most.
const MAX_LINK_HOPS: usize = 40;

/// Size of the chunks file data is streamed in.
const CHUNK: usize = 64 * 1024;

/// Archive formats a skill can be uploaded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArchiveFormat {
    /// A zip file.
    Zip,
    /// An uncompressed tar file.
    Tar,
    /// A gzip-compressed tar file.
    #[serde(rename = "tar.gz", alias = "tgz")]
    TarGz,
}

impl ArchiveFormat {
    /// Every format.
    pub const ALL: [ArchiveFormat; 3] =
        [ArchiveFormat::Zip, ArchiveFormat::Tar, ArchiveFormat::TarGz];

    /// The name used in the reference's `fmt` argument and in file
    /// extensions: `zip`, `tar`, `tar.gz`.
    pub fn as_str(self) -> &'static str {
        match self {
            ArchiveFormat::Zip => "zip",
            ArchiveFormat::Tar => "tar",
            ArchiveFormat::TarGz => "tar.gz",
        }
    }

    /// Guesses the format from a file name (`.zip`, `.tar`, `.tar.gz`,
    /// `.tgz`, any case).
    pub fn from_file_name(name: &str) -> Option<Self> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".tar.gz") || lower.ends_with(".tgz") {
            Some(ArchiveFormat::TarGz)
        } else if lower.ends_with(".tar") {
            Some(ArchiveFormat::Tar)
        } else if lower.ends_with(".zip") {
            Some(ArchiveFormat::Zip)
        } else {
            None
        }
    }
}

impl std::fmt::Display for ArchiveFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ArchiveFormat {
    type Err = String;

    /// Parses `zip`, `tar`, `tar.gz` or `tgz` (any case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "zip" => Ok(ArchiveFormat::Zip),
            "tar" => Ok(ArchiveFormat::Tar),
            "tar.gz" | "tgz" => Ok(ArchiveFormat::TarGz),
            other => Err(format!(
                "unknown archive format `{other}`: use zip, tar or tar.gz"
            )),
        }
    }
}

/// Where the archive bytes come from.
pub(crate) enum ArchiveSource {
    /// A host file.
    Path(PathBuf),
    /// Any reader (zip is spooled to a host temp file first, it needs to
    /// seek).
    Reader(Box<dyn Read + Send>),
}

/// What was extracted.
#[derive(Debug, Default)]
pub(crate) struct Extracted {
    /// Regular files written (link copies included).
    pub files: usize,
    /// Bytes written.
    pub bytes: u64,
    /// Files (relative paths) with an executable bit, with their mode.
    pub executables: Vec<(String, u32)>,
}

/// One step of the extraction, sent from the reading thread to the writer.
enum Member {
    Dir(String),
    File {
        rel: String,
        mode: Option<u32>,
        data: mpsc::Receiver<io::Result<Bytes>>,
    },
    /// Copy of an already written member (a link resolved inside the
    /// archive).
    Copy {
        rel: String,
        from: String,
    },
}

/// Expands `source` into `staging` (a sandbox directory that exists and is
/// empty). Returns a reason when the archive is refused or unreadable.
pub(crate) async fn extract(
    sandbox: &Arc<dyn Sandbox>,
    source: ArchiveSource,
    fmt: ArchiveFormat,
    staging: &str,
    max_bytes: u64,
) -> Result<Extracted, String> {
    let (tx, mut rx) = mpsc::channel::<Member>(16);
    let reader = tokio::task::spawn_blocking(move || read_archive(source, fmt, max_bytes, &tx));

    let mut out = Extracted::default();
    let mut modes: HashMap<String, u32> = HashMap::new();
    let mut write_error: Option<String> = None;
    while let Some(member) = rx.recv().await {
        let res = match member {
            Member::Dir(rel) => sandbox
                .mkdir(&format!("{staging}/{rel}"), true)
                .await
                .map_err(|e| e.to_string()),
            Member::File { rel, mode, data } => {
                let stream = Box::pin(futures::stream::unfold(data, |mut rx| async move {
                    rx.recv().await.map(|c| (c, rx))
                }));
                let reader = tokio_util::io::StreamReader::new(stream);
                match sandbox
                    .write_stream(&format!("{staging}/{rel}"), Box::new(reader))
                    .await
                {
                    Ok(n) => {
                        out.files += 1;
                        out.bytes += n;
                        if let Some(m) = mode {
                            modes.insert(rel, m);
                        }
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            Member::Copy { rel, from } => {
                match sandbox.read(&format!("{staging}/{from}"), None).await {
                    Ok(data) => match sandbox.write(&format!("{staging}/{rel}"), &data).await {
                        Ok(()) => {
                            out.files += 1;
                            out.bytes += data.len() as u64;
                            if let Some(&m) = modes.get(&from) {
                                modes.insert(rel, m);
                            }
                            Ok(())
                        }
                        Err(e) => Err(e.to_string()),
                    },
                    Err(e) => Err(e.to_string()),
                }
            }
        };
        if let Err(e) = res {
            write_error = Some(e);
            break;
        }
    }
    // Dropping the receiver makes the reading thread stop at its next send.
    drop(rx);
    let read_result = reader
        .await
        .map_err(|e| format!("the archive reader failed: {e}"))?;
    // A refusal by the reader explains a write error it caused (a member cut
    // off at the size limit), so it wins.
    read_result?;
    if let Some(e) = write_error {
        return Err(format!("cannot write the extracted files: {e}"));
    }
    out.executables = modes.into_iter().filter(|(_, m)| m & 0o111 != 0).collect();
    out.executables.sort();
    Ok(out)
}

/// Checks a member name and returns it as a clean relative path; `None`
/// for the archive root itself (`./`).
fn member_path(raw: &[u8]) -> Result<Option<String>, String> {
    let name = std::str::from_utf8(raw).map_err(|_| {
        format!(
            "member name {:?} is not UTF-8",
            String::from_utf8_lossy(raw)
        )
    })?;
    if name.contains('\0') {
        return Err(format!("member name {name:?} holds a NUL byte"));
    }
    if name.contains('\\') {
        return Err(format!("member name {name:?} holds a backslash"));
    }
    if name.starts_with('/') {
        return Err(format!("member {name:?} has an absolute path"));
    }
    let mut parts = Vec::new();
    for seg in name.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(format!("member {name:?} points outside the archive (`..`)")),
            s => parts.push(s),
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

/// Lexically resolves a link target against the archive root; `None` when
/// it leaves the root or is absolute. Also the first check of a link in a
/// host skill folder (`host_walk`): one rule for both.
pub(super) fn resolve_inside(base_dir: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = base_dir.split('/').filter(|s| !s.is_empty()).collect();
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

pub(super) fn parent_of(rel: &str) -> &str {
    rel.rsplit_once('/').map(|(p, _)| p).unwrap_or("")
}

/// State of the reading thread.
struct Walk<'a> {
    tx: &'a mpsc::Sender<Member>,
    max_bytes: u64,
    declared: u64,
    actual: u64,
    members: usize,
    /// Regular files written so far.
    files: HashSet<String>,
    /// Link path → link target (already resolved inside the archive).
    links: HashMap<String, String>,
    /// Links, in archive order, to materialise at the end.
    link_order: Vec<String>,
}

impl<'a> Walk<'a> {
    fn new(tx: &'a mpsc::Sender<Member>, max_bytes: u64) -> Self {
        Walk {
            tx,
            max_bytes,
            declared: 0,
            actual: 0,
            members: 0,
            files: HashSet::new(),
            links: HashMap::new(),
            link_order: Vec::new(),
        }
    }

    fn limit_error(&self) -> String {
        format!(
            "the archive expands to more than the {} byte limit",
            self.max_bytes
        )
    }

    /// Counts a member and refuses paths through a link.
    fn admit(&mut self, rel: &str) -> Result<(), String> {
        self.members += 1;
        if self.members > MAX_ARCHIVE_MEMBERS {
            return Err(format!(
                "the archive holds more than {MAX_ARCHIVE_MEMBERS} members"
            ));
        }
        let mut prefix = rel;
        while let Some((p, _)) = prefix.rsplit_once('/') {
            if self.links.contains_key(p) {
                return Err(format!("member {rel:?} passes through the link {p:?}"));
            }
            prefix = p;
        }
        Ok(())
    }

    fn send(&self, m: Member) -> Result<(), String> {
        self.tx
            .blocking_send(m)
            .map_err(|_| "extraction stopped: writing into the sandbox failed".to_string())
    }

    fn dir(&mut self, rel: String) -> Result<(), String> {
        self.admit(&rel)?;
        self.send(Member::Dir(rel))
    }

    /// Streams one file's data, counting real bytes against the limit.
    fn file(
        &mut self,
        rel: String,
        declared: u64,
        mode: Option<u32>,
        data: &mut dyn Read,
    ) -> Result<(), String> {
        self.admit(&rel)?;
        if self.links.contains_key(&rel) {
            return Err(format!("member {rel:?} replaces a link"));
        }
        self.declared = self.declared.saturating_add(declared);
        if self.declared > self.max_bytes {
            return Err(self.limit_error());
        }
        let (ctx, crx) = mpsc::channel::<io::Result<Bytes>>(4);
        self.send(Member::File {
            rel: rel.clone(),
            mode,
            data: crx,
        })?;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match data.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let msg = format!("cannot read member {rel:?}: {e}");
                    let _ = ctx.blocking_send(Err(io::Error::other(msg.clone())));
                    return Err(msg);
                }
            };
            self.actual += n as u64;
            if self.actual > self.max_bytes {
                let msg = self.limit_error();
                let _ = ctx.blocking_send(Err(io::Error::other(msg.clone())));
                return Err(msg);
            }
            ctx.blocking_send(Ok(Bytes::copy_from_slice(&buf[..n])))
                .map_err(|_| "extraction stopped: writing into the sandbox failed".to_string())?;
        }
        self.files.insert(rel);
        Ok(())
    }

    /// Records a link; `target` is already resolved relative to the root.
    fn link(
        &mut self,
        rel: String,
        raw_target: &str,
        target: Option<String>,
    ) -> Result<(), String> {
        self.admit(&rel)?;
        let Some(target) = target else {
            return Err(format!(
                "link {rel:?} points outside the archive ({raw_target:?})"
            ));
        };
        if self.files.contains(&rel) || self.links.contains_key(&rel) {
            return Err(format!("link {rel:?} replaces another member"));
        }
        self.links.insert(rel.clone(), target);
        self.link_order.push(rel);
        Ok(())
    }

    /// Turns every link into a copy of the file it names.
    fn finish_links(&mut self) -> Result<(), String> {
        for rel in std::mem::take(&mut self.link_order) {
            let mut target = self.links[&rel].clone();
            let mut hops = 0;
            while let Some(next) = self.links.get(&target) {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(format!("link {rel:?} is part of a loop"));
                }
                target = next.clone();
            }
            if !self.files.contains(&target) {
                return Err(format!(
                    "link {rel:?} points at {target:?}, which is not a file in the archive"
                ));
            }
            self.send(Member::Copy {
                rel: rel.clone(),
                from: target,
            })?;
        }
        Ok(())
    }
}

fn read_archive(
    source: ArchiveSource,
    fmt: ArchiveFormat,
    max_bytes: u64,
    tx: &mpsc::Sender<Member>,
) -> Result<(), String> {
    let mut walk = Walk::new(tx, max_bytes);
    match fmt {
        ArchiveFormat::Zip => {
            let file = match source {
                ArchiveSource::Path(p) => std::fs::File::open(&p)
                    .map_err(|e| format!("cannot open {}: {e}", p.display()))?,
                ArchiveSource::Reader(r) => spool(r, max_bytes)?,
            };
            read_zip(io::BufReader::new(file), &mut walk)?;
        }
        ArchiveFormat::Tar | ArchiveFormat::TarGz => {
            let raw: Box<dyn Read> = match source {
                ArchiveSource::Path(p) => Box::new(io::BufReader::new(
                    std::fs::File::open(&p)
                        .map_err(|e| format!("cannot open {}: {e}", p.display()))?,
                )),
                ArchiveSource::Reader(r) => Box::new(io::BufReader::new(r)),
            };
            let raw: Box<dyn Read> = if fmt == ArchiveFormat::TarGz {
                Box::new(flate2::read::GzDecoder::new(raw))
            } else {
                raw
            };
            read_tar(raw, &mut walk)?;
        }
    }
    walk.finish_links()
}

/// Copies a reader into a host temp file (zip needs to seek). The
/// compressed archive may not be much larger than the expansion limit.
fn spool(mut r: Box<dyn Read + Send>, max_bytes: u64) -> Result<std::fs::File, String> {
    let cap = max_bytes.saturating_add(16 * 1024 * 1024);
    let mut file = tempfile::tempfile().map_err(|e| format!("cannot spool the archive: {e}"))?;
    let n = io::copy(&mut (&mut r).take(cap + 1), &mut file)
        .map_err(|e| format!("cannot read the archive: {e}"))?;
    if n > cap {
        return Err(format!("the archive is larger than {cap} bytes"));
    }
    file.rewind()
        .map_err(|e| format!("cannot spool the archive: {e}"))?;
    Ok(file)
}

fn read_zip<R: Read + Seek>(reader: R, walk: &mut Walk<'_>) -> Result<(), String> {
    let mut zip =
        zip::ZipArchive::new(reader).map_err(|e| format!("not a valid zip archive: {e}"))?;
    if zip.len() > MAX_ARCHIVE_MEMBERS {
        return Err(format!(
            "the archive holds more than {MAX_ARCHIVE_MEMBERS} members"
        ));
    }
    // The central directory gives every declared size before anything is
    // written.
    let mut declared: u64 = 0;
    for i in 0..zip.len() {
        let f = zip
            .by_index_raw(i)
            .map_err(|e| format!("cannot read zip member {i}: {e}"))?;
        declared = declared.saturating_add(f.size());
    }
    if declared > walk.max_bytes {
        return Err(walk.limit_error());
    }
    for i in 0..zip.len() {
        let mut f = zip
            .by_index(i)
            .map_err(|e| format!("cannot read zip member {i}: {e}"))?;
        let name = f.name().to_string();
        let Some(rel) = member_path(name.as_bytes())? else {
            continue;
        };
        if f.is_symlink() {
            let mut target = String::new();
            (&mut f)
                .take(4096)
                .read_to_string(&mut target)
                .map_err(|e| format!("cannot read link member {rel:?}: {e}"))?;
            let resolved = resolve_inside(parent_of(&rel), &target);
            walk.link(rel, &target, resolved)?;
        } else if f.is_dir() {
            walk.dir(rel)?;
        } else {
            let size = f.size();
            let mode = f.unix_mode().map(|m| m & 0o7777);
            walk.file(rel, size, mode, &mut f)?;
        }
    }
    Ok(())
}

fn read_tar(reader: Box<dyn Read>, walk: &mut Walk<'_>) -> Result<(), String> {
    use tar::EntryType as T;
    let mut archive = tar::Archive::new(reader);
    let entries = archive
        .entries()
        .map_err(|e| format!("not a valid tar archive: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("not a valid tar archive: {e}"))?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            T::XGlobalHeader | T::XHeader | T::GNULongName | T::GNULongLink
        ) {
            continue;
        }
        let raw = entry.path_bytes().into_owned();
        let Some(rel) = member_path(&raw)? else {
            continue;
        };
        match kind {
            T::Directory => walk.dir(rel)?,
            T::Regular | T::Continuous | T::GNUSparse => {
                let size = entry.size();
                let mode = entry.header().mode().ok().map(|m| m & 0o7777);
                walk.file(rel, size, mode, &mut entry)?;
            }
            T::Symlink | T::Link => {
                let target_bytes = entry
                    .link_name_bytes()
                    .map(|b| b.into_owned())
                    .ok_or_else(|| format!("link member {rel:?} has no target"))?;
                let target = std::str::from_utf8(&target_bytes)
                    .map_err(|_| format!("link member {rel:?} has a target that is not UTF-8"))?
                    .to_string();
                // A symlink is relative to its own directory, a hard link to
                // the archive root.
                let base = if kind == T::Symlink {
                    parent_of(&rel).to_string()
                } else {
                    String::new()
                };
                let resolved = resolve_inside(&base, &target);
                walk.link(rel, &target, resolved)?;
            }
            other => {
                return Err(format!(
                    "member {rel:?} is a special file ({other:?}), which a skill cannot hold"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_paths() {
        assert_eq!(member_path(b"a/./b/").unwrap().as_deref(), Some("a/b"));
        assert_eq!(member_path(b"./").unwrap(), None);
        assert!(member_path(b"../evil").unwrap_err().contains("outside"));
        assert!(member_path(b"a/../../evil").is_err());
        assert!(member_path(b"a/../b").is_err(), "any `..` is refused");
        assert!(
            member_path(b"/etc/passwd")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(member_path(b"a\\..\\b").is_err());
        assert!(member_path(&[0x66, 0xff]).is_err());
    }

    #[test]
    fn link_targets() {
        assert_eq!(resolve_inside("a/b", "../c").as_deref(), Some("a/c"));
        assert_eq!(resolve_inside("a", "../../c"), None);
        assert_eq!(resolve_inside("", "/etc/passwd"), None);
        assert_eq!(resolve_inside("", "x/./y").as_deref(), Some("x/y"));
    }

    #[test]
    fn formats() {
        assert_eq!(
            "TGZ".parse::<ArchiveFormat>().unwrap(),
            ArchiveFormat::TarGz
        );
        assert_eq!(
            ArchiveFormat::from_file_name("s.Tar.Gz"),
            Some(ArchiveFormat::TarGz)
        );
        assert_eq!(
            ArchiveFormat::from_file_name("s.zip"),
            Some(ArchiveFormat::Zip)
        );
        assert_eq!(ArchiveFormat::from_file_name("s.rar"), None);
        assert!("rar".parse::<ArchiveFormat>().is_err());
        assert_eq!(ArchiveFormat::TarGz.to_string(), "tar.gz");
    }
}
