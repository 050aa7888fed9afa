//! Helpers shared by the Read, Write and Edit tools (docs/contract.md §3.2–§3.4):
//! path checks, binary sniffing, type guessing from magic bytes, lossy
//! UTF-8 decoding, newline handling and unified diffs.
//!
//! Everything here is pure or goes through the [`Sandbox`] trait, so the
//! tools behave the same on every backend.

use std::borrow::Cow;
use std::time::Duration;

use similar::{Algorithm, TextDiff};

use crate::backend::{FileKind, FileStat, Sandbox, path as bpath};

/// Bytes at the start of a file examined to decide whether it is binary.
///
/// C26: a character cut by this boundary must not make a valid UTF-8 file
/// look binary; see [`sniff`].
pub const SNIFF_BYTES: usize = 8192;

/// Size of one ranged read when a file is read piece by piece (1 MiB).
pub const READ_CHUNK_BYTES: u64 = 1 << 20;

/// Largest previous content Write reads to build its diff (8 MiB); above
/// it the diff is built against an empty old side and marked as such.
pub const DIFF_MAX_BYTES: u64 = 8 << 20;

/// Wall-clock budget of one diff; past it `similar` falls back to a
/// coarser (still correct) diff instead of spending quadratic time.
pub const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

/// Checks that `file_path` is absolute (docs/contract.md §3.2–§3.4) and returns it
/// lexically normalised (`//`, `.` and `..` resolved without touching the
/// file system).
///
/// Errors: the reference's text, `Error: file_path must be an absolute
/// path, got: <path>`.
pub fn absolute_path(file_path: &str) -> Result<String, String> {
    if !bpath::is_absolute(file_path) {
        return Err(format!(
            "Error: file_path must be an absolute path, got: {file_path}"
        ));
    }
    Ok(bpath::normalize(file_path))
}

/// Lower-cased extension of the last path segment, without the dot
/// (`None` for no extension or a dot-file such as `.bashrc`).
pub fn extension(path: &str) -> Option<String> {
    let name = bpath::file_name(path);
    let dot = name.rfind('.')?;
    if dot == 0 || dot + 1 == name.len() {
        return None;
    }
    Some(name[dot + 1..].to_ascii_lowercase())
}

/// Why a path cannot be opened as a regular file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// A directory (or a link to one).
    Directory,
    /// A FIFO, socket or device (opening a FIFO would block forever).
    NotRegular,
    /// A symbolic link whose target does not exist (the link text).
    Dangling(String),
    /// The link cannot be resolved (a link loop, a permission error...).
    Unresolvable(String),
}

impl OpenError {
    /// The tool error text for `path`.
    pub fn message(&self, path: &str) -> String {
        match self {
            OpenError::Directory => format!("Error: Path is a directory, not a file: {path}"),
            OpenError::NotRegular => format!(
                "Error: {path} is not a regular file (it is a FIFO, socket or device, which the file tools do not open)"
            ),
            OpenError::Dangling(target) => format!(
                "Error: File does not exist: {path} (it is a symbolic link to {target}, which does not exist)"
            ),
            OpenError::Unresolvable(reason) => format!("Error: Cannot open {path}: {reason}"),
        }
    }
}

/// Checks that a stat'ed path is something the file tools may open as a
/// regular file: not a directory, not a FIFO/socket/device, and, for
/// symbolic links on backends with a host view, a link that resolves (a
/// dangling link or a link loop is reported here, never followed forever).
/// Backends without a host view report such links when the file is read.
pub async fn check_openable(
    sandbox: &dyn Sandbox,
    path: &str,
    stat: &FileStat,
) -> Result<(), OpenError> {
    if stat.is_dir_like() {
        return Err(OpenError::Directory);
    }
    match stat.kind {
        FileKind::Other => Err(OpenError::NotRegular),
        FileKind::Symlink => {
            let Some(host) = sandbox.host_path(path) else {
                return Ok(());
            };
            match tokio::fs::metadata(&host).await {
                Ok(m) if m.is_file() => Ok(()),
                Ok(m) if m.is_dir() => Err(OpenError::Directory),
                Ok(_) => Err(OpenError::NotRegular),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(OpenError::Dangling(
                    stat.link_target
                        .clone()
                        .unwrap_or_else(|| "a missing target".into()),
                )),
                Err(e) => Err(OpenError::Unresolvable(e.to_string())),
            }
        }
        _ => Ok(()),
    }
}

/// What the first bytes of a file say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniff {
    /// Text. `valid_utf8` is false when the sample held byte sequences that
    /// are not UTF-8 (Latin-1 text, for instance); they are shown as
    /// U+FFFD.
    Text {
        /// The sample is valid UTF-8 (a character cut at the end of an
        /// incomplete sample does not count against it).
        valid_utf8: bool,
    },
    /// Binary: a NUL byte, or more than 30 % of the sample is invalid
    /// UTF-8 or control characters.
    Binary,
}

/// Classifies `sample`, the first bytes of a file.
///
/// `complete` tells whether `sample` is the whole file. When it is not, an
/// invalid sequence that only lacks bytes at the very end of the sample
/// (`Utf8Error::error_len() == None`) is a character cut by the sample
/// boundary and is ignored (C26: `cut.md`, `cjk.md`). A NUL byte means
/// binary; otherwise invalid UTF-8 alone does not (Latin-1 text reads as
/// text with a note), only a high share of invalid sequences and control
/// characters does.
pub fn sniff(sample: &[u8], complete: bool) -> Sniff {
    if sample.contains(&0) {
        return Sniff::Binary;
    }
    let mut suspicious = sample
        .iter()
        .filter(|&&b| {
            (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1b | 0x08))
                || b == 0x7f
        })
        .count();
    let mut valid_utf8 = true;
    let mut rest = sample;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(_) => break,
            Err(e) => match e.error_len() {
                Some(n) => {
                    valid_utf8 = false;
                    suspicious += n;
                    rest = &rest[e.valid_up_to() + n..];
                }
                None => {
                    if complete {
                        valid_utf8 = false;
                        suspicious += rest.len() - e.valid_up_to();
                    }
                    break;
                }
            },
        }
    }
    if suspicious * 10 > sample.len() * 3 {
        Sniff::Binary
    } else {
        Sniff::Text { valid_utf8 }
    }
}

/// Decodes `bytes` as UTF-8, replacing each invalid sequence with U+FFFD.
/// Returns the text and whether anything was replaced.
///
/// `cut` says the bytes were cut from a longer run on purpose (a line
/// capped at a byte budget): an incomplete character at the very end is
/// then dropped silently instead of counting as invalid.
pub fn decode_lossy(bytes: &[u8], cut: bool) -> (String, bool) {
    let mut out = String::with_capacity(bytes.len());
    let mut invalid = false;
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).expect("valid prefix"));
                match e.error_len() {
                    Some(n) => {
                        out.push('\u{FFFD}');
                        invalid = true;
                        rest = &bad[n..];
                    }
                    None => {
                        if !cut {
                            out.push('\u{FFFD}');
                            invalid = true;
                        }
                        break;
                    }
                }
            }
        }
    }
    (out, invalid)
}

/// CRLF and lone CR become LF (the reference's `_normalize_newlines`).
pub fn normalize_newlines(text: &str) -> Cow<'_, str> {
    if !text.contains('\r') {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// Number of lines as Read numbers them: line breaks are LF, CRLF or CR;
/// a last line without a break still counts; `""` has 0 lines.
pub fn count_lines(text: &str) -> usize {
    let text = normalize_newlines(text);
    let breaks = text.bytes().filter(|&b| b == b'\n').count();
    if text.is_empty() || text.ends_with('\n') {
        breaks
    } else {
        breaks + 1
    }
}

/// A unified diff of `old` → `new` with 3 lines of context and the given
/// header names (docs/contract.md §3.3/§3.4; the reference uses `difflib`, whose
/// hunk headers `similar` reproduces). Empty when nothing changed. A last
/// line without a newline is marked `\ No newline at end of file`, so the
/// diff stays a valid patch.
pub fn unified_diff(old: &str, new: &str, from: &str, to: &str) -> String {
    TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(from, to)
        .to_string()
}

/// A file type guessed from magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileType {
    /// MIME type (`image/png`, `application/zip`, ...).
    pub media_type: &'static str,
    /// Human-readable label (`PNG image`, `ZIP archive`, ...).
    pub label: &'static str,
}

/// The type of unrecognised binary data.
pub const UNKNOWN_BINARY: FileType = FileType {
    media_type: "application/octet-stream",
    label: "unknown binary data",
};

/// One magic-byte rule of [`guess_type`]: the head matches when it is at
/// least `min_len` bytes long and one of `any` matches, an alternative
/// being a list of `(offset, bytes)` that must all be present.
struct Magic {
    any: &'static [&'static [(usize, &'static [u8])]],
    min_len: usize,
    ty: FileType,
}

const fn m(
    any: &'static [&'static [(usize, &'static [u8])]],
    media_type: &'static str,
    label: &'static str,
) -> Magic {
    Magic {
        any,
        min_len: 0,
        ty: FileType { media_type, label },
    }
}

/// The signatures, tried in order; the first match wins. One row a line,
/// so rustfmt is told to leave the table alone.
#[rustfmt::skip]
const MAGIC: &[Magic] = &[
    m(&[&[(0, b"\x89PNG\r\n\x1a\n")]], "image/png", "PNG image"),
    m(&[&[(0, b"\xff\xd8\xff")]], "image/jpeg", "JPEG image"),
    m(&[&[(0, b"GIF87a")], &[(0, b"GIF89a")]], "image/gif", "GIF image"),
    m(&[&[(0, b"RIFF"), (8, b"WEBP")]], "image/webp", "WebP image"),
    m(&[&[(0, b"RIFF"), (8, b"WAVE")]], "audio/wav", "WAV audio"),
    m(&[&[(0, b"RIFF"), (8, b"AVI ")]], "video/x-msvideo", "AVI video"),
    m(&[&[(0, b"II*\0")], &[(0, b"MM\0*")]], "image/tiff", "TIFF image"),
    m(&[&[(0, b"\0\0\x01\0")]], "image/vnd.microsoft.icon", "ICO icon"),
    Magic { min_len: 14, ..m(&[&[(0, b"BM")]], "image/bmp", "BMP image") },
    m(&[&[(0, b"%PDF-")]], "application/pdf", "PDF document"),
    m(&[&[(0, b"PK\x03\x04")], &[(0, b"PK\x05\x06")]], "application/zip", "ZIP archive (also docx/xlsx/jar/wheel)"),
    m(&[&[(0, b"\x1f\x8b")]], "application/gzip", "gzip-compressed data"),
    m(&[&[(0, b"BZh")]], "application/x-bzip2", "bzip2-compressed data"),
    m(&[&[(0, b"\xfd7zXZ\0")]], "application/x-xz", "xz-compressed data"),
    m(&[&[(0, b"\x28\xb5\x2f\xfd")]], "application/zstd", "zstd-compressed data"),
    m(&[&[(0, b"7z\xbc\xaf\x27\x1c")]], "application/x-7z-compressed", "7-Zip archive"),
    m(&[&[(257, b"ustar")]], "application/x-tar", "tar archive"),
    m(&[&[(0, b"\x7fELF")]], "application/x-elf", "ELF executable or library"),
    m(&[&[(0, b"\xcf\xfa\xed\xfe")], &[(0, b"\xce\xfa\xed\xfe")], &[(0, b"\xfe\xed\xfa\xcf")]], "application/x-mach-binary", "Mach-O executable"),
    m(&[&[(0, b"\xca\xfe\xba\xbe")]], "application/java-vm", "Java class file or Mach-O universal binary"),
    m(&[&[(0, b"MZ")]], "application/vnd.microsoft.portable-executable", "Windows executable"),
    m(&[&[(0, b"\0asm")]], "application/wasm", "WebAssembly module"),
    m(&[&[(0, b"SQLite format 3\0")]], "application/vnd.sqlite3", "SQLite database"),
    m(&[&[(0, b"ID3")], &[(0, b"\xff\xfb")], &[(0, b"\xff\xf3")]], "audio/mpeg", "MP3 audio"),
    m(&[&[(0, b"OggS")]], "audio/ogg", "Ogg media"),
    m(&[&[(0, b"fLaC")]], "audio/flac", "FLAC audio"),
    m(&[&[(4, b"ftyp")]], "video/mp4", "MP4/QuickTime media"),
    m(&[&[(0, b"\x1a\x45\xdf\xa3")]], "video/webm", "Matroska/WebM media"),
    m(&[&[(0, b"wOFF")]], "font/woff", "WOFF font"),
    m(&[&[(0, b"wOF2")]], "font/woff2", "WOFF2 font"),
    m(&[&[(0, b"\0\x01\0\0\0")]], "font/ttf", "TrueType font"),
    m(&[&[(0, b"OTTO")]], "font/otf", "OpenType font"),
    m(&[&[(0, b"\x93NUMPY")]], "application/x-npy", "NumPy array"),
    m(&[&[(0, b"PAR1")]], "application/vnd.apache.parquet", "Parquet file"),
    m(&[&[(0, b"\xff\xfe")], &[(0, b"\xfe\xff")]], "text/plain; charset=utf-16", "UTF-16 text (only UTF-8 is read as text)"),
];

/// Guesses a file type from its first bytes; `None` when no signature
/// matches.
pub fn guess_type(head: &[u8]) -> Option<FileType> {
    let at = |&(off, sig): &(usize, &[u8])| head.get(off..off + sig.len()) == Some(sig);
    MAGIC
        .iter()
        .find(|rule| head.len() >= rule.min_len && rule.any.iter().any(|all| all.iter().all(at)))
        .map(|rule| rule.ty)
}

/// Media type of an image file name, by extension (the reference's list:
/// `.png .jpg .jpeg .gif .webp .bmp .tiff .tif .ico`); `None` when the
/// extension is not an image one.
pub fn image_media_type(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "tiff" | "tif" => "image/tiff",
        "ico" => "image/vnd.microsoft.icon",
        _ => return None,
    })
}

/// Image media types a model accepts as input (the reference's default
/// `model_input_types`).
pub const ACCEPTED_IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Human-readable byte count (`1.5 MiB (1572864 bytes)`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut v = bytes as f64;
    let mut unit = "";
    for u in UNITS {
        v /= 1024.0;
        unit = u;
        if v < 1024.0 {
            break;
        }
    }
    format!("{v:.1} {unit} ({bytes} bytes)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_be_absolute_and_are_normalised() {
        assert_eq!(absolute_path("/a/b/../c/./d").unwrap(), "/a/c/d");
        assert_eq!(absolute_path("/../x").unwrap(), "/x");
        let e = absolute_path("rel/x.txt").unwrap_err();
        assert_eq!(
            e,
            "Error: file_path must be an absolute path, got: rel/x.txt"
        );
        assert!(absolute_path("").is_err());
    }

    #[test]
    fn extensions() {
        assert_eq!(extension("/a/B.PNG").as_deref(), Some("png"));
        assert_eq!(extension("/a/.bashrc"), None);
        assert_eq!(extension("/a.d/file"), None);
        assert_eq!(extension("/a/x."), None);
        assert_eq!(extension("/a/x.tar.gz").as_deref(), Some("gz"));
    }

    #[test]
    fn sniff_ignores_a_character_cut_by_the_sample_boundary() {
        // C26 cut.md: (S-1) x 'a' + 'ç' + "\nx\n", sample = first S bytes.
        let mut cut = vec![b'a'; SNIFF_BYTES - 1];
        cut.extend_from_slice("ç\nx\n".as_bytes());
        assert_eq!(
            sniff(&cut[..SNIFF_BYTES], false),
            Sniff::Text { valid_utf8: true }
        );
        // C26 cjk.md: (S-2) x 'a' + '中' + "\n".
        let mut cjk = vec![b'a'; SNIFF_BYTES - 2];
        cjk.extend_from_slice("中\n".as_bytes());
        assert_eq!(
            sniff(&cjk[..SNIFF_BYTES], false),
            Sniff::Text { valid_utf8: true }
        );
        // The same cut in a complete sample is a truncated file: invalid.
        assert_eq!(
            sniff(&cjk[..SNIFF_BYTES], true),
            Sniff::Text { valid_utf8: false }
        );
    }

    #[test]
    fn sniff_latin1_is_text_nul_and_noise_are_binary() {
        assert_eq!(
            sniff(b"caf\xe9 menu\n", true),
            Sniff::Text { valid_utf8: false }
        );
        assert_eq!(sniff(b"ab\0cd\n", true), Sniff::Binary);
        assert_eq!(sniff(b"\xff\xfe\xfd\xfc\x01\x02abc", true), Sniff::Binary);
        assert_eq!(sniff(b"", true), Sniff::Text { valid_utf8: true });
        assert_eq!(
            sniff("plain ✓ text\r\n\tx".as_bytes(), true),
            Sniff::Text { valid_utf8: true }
        );
    }

    #[test]
    fn lossy_decoding() {
        assert_eq!(
            decode_lossy(b"caf\xe9 menu", false),
            ("caf\u{FFFD} menu".to_string(), true)
        );
        assert_eq!(
            decode_lossy("ok é".as_bytes(), false),
            ("ok é".to_string(), false)
        );
        // A character cut on purpose is dropped, not flagged.
        assert_eq!(decode_lossy(b"ab\xc3", true), ("ab".to_string(), false));
        assert_eq!(
            decode_lossy(b"ab\xc3", false),
            ("ab\u{FFFD}".to_string(), true)
        );
    }

    #[test]
    fn newline_helpers() {
        assert_eq!(normalize_newlines("a\r\nb\rc\n"), "a\nb\nc\n");
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines("a\r\nb"), 2);
        assert_eq!(count_lines("a\rb\r"), 2);
        assert_eq!(count_lines("\n\n"), 2);
    }

    #[test]
    fn diffs_like_difflib() {
        let d = unified_diff("", "a\nb\n", "/dev/null", "b//w/x");
        assert_eq!(d, "--- /dev/null\n+++ b//w/x\n@@ -0,0 +1,2 @@\n+a\n+b\n");
        let d = unified_diff("1\n2\n3\n4\n5\n", "1\n2\nX\n4\n5\n", "a/f", "b/f");
        assert_eq!(
            d,
            "--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n 1\n 2\n-3\n+X\n 4\n 5\n"
        );
        assert_eq!(unified_diff("same\n", "same\n", "a", "b"), "");
    }

    #[test]
    fn guesses_types() {
        assert_eq!(
            guess_type(b"\x89PNG\r\n\x1a\n\0\0").unwrap().media_type,
            "image/png"
        );
        assert_eq!(
            guess_type(b"%PDF-1.7\n").unwrap().media_type,
            "application/pdf"
        );
        assert_eq!(
            guess_type(b"\x7fELF\x02\x01").unwrap().media_type,
            "application/x-elf"
        );
        assert_eq!(
            guess_type(b"RIFF\0\0\0\0WEBPVP8 ").unwrap().media_type,
            "image/webp"
        );
        assert_eq!(guess_type(b"ab\0cd\n"), None);
        assert_eq!(image_media_type("jpg"), Some("image/jpeg"));
        assert_eq!(image_media_type("txt"), None);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(6), "6 bytes");
        assert_eq!(human_size(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(human_size(2 << 30), "2.0 GiB (2147483648 bytes)");
    }
}
