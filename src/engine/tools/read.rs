//! The Read tool (docs/contract.md §3.2): numbered lines of a text file, an image
//! as a data block, or a clear report for binary files and PDFs.
//!
//! Behaviour, and where it differs from the reference on purpose:
//!
//! * `file_path` must be absolute; `..` and `.` segments are resolved
//!   lexically before use. Checks run in the reference's order: absolute,
//!   exists, not a directory. FIFOs, sockets and devices are refused (opening
//!   one would block), and a broken symbolic link or a link loop is an error,
//!   never a hang.
//! * Text output is the reference's: each line as a 6-wide right-aligned
//!   number, a TAB and the content, lines joined by `\n`; CRLF and CR count
//!   as line breaks; lines over `read_max_line_chars` characters are cut and
//!   end in `[truncated]`; an offset past the end gives an empty text. Unlike
//!   the reference (Python `splitlines`), only LF, CRLF and CR break lines, so
//!   numbers agree with Grep's and with `cat -n`.
//! * The file is never read whole when the backend has ranged reads: it is
//!   read in 1 MiB pieces until `offset + limit - 1` lines are complete
//!   (a 2 GB file costs only the pieces that hold the wanted lines; memory
//!   stays bounded by the piece size plus the kept lines, which are capped
//!   near `read_max_line_chars` each). Without ranged reads, files over
//!   `read_max_bytes` are refused with an error that shows a Bash command to
//!   pick lines instead (offset/limit would not help there: the whole file
//!   would still be transferred).
//! * Binary detection looks at the first [`SNIFF_BYTES`] bytes (see
//!   [`textfile::sniff`]): a NUL byte, or mostly invalid UTF-8 and control
//!   characters, is binary; a character cut by the sample's end is not
//!   (C26). **Binary files are an error result** (state `error`) whose text
//!   gives the size and a type guessed from magic bytes, with no file
//!   content; metadata `{file_path, binary: true, size, media_type}`. A
//!   file that only turns binary later (text, then NUL bytes) returns the
//!   wanted lines up to the first one holding a NUL byte, plus a note
//!   (metadata `binary_from_line`), instead of showing NULs.
//! * Text that is not valid UTF-8 (Latin-1, ...) is decoded lossily, each
//!   invalid sequence shown as U+FFFD, and the text ends with a note saying
//!   the file is not valid UTF-8 (metadata `valid_utf8: false`).
//! * Images by extension: PNG, JPEG, GIF and WebP become one base64
//!   [`DataBlock`] named by the file's base name (metadata `{file_path,
//!   media_type, size}`); the media type comes from the content's magic
//!   bytes, and a file whose content is not one of those images is an error
//!   (a model API would reject it). BMP, TIFF and ICO are an error listing
//!   the accepted types. Images over [`MAX_IMAGE_BYTES`] are refused.
//! * PDF: wsbench has no PDF library, so **a PDF is an error result** that
//!   reports it as a PDF document with its size and header version, says
//!   that text extraction is not supported and suggests `pdftotext`;
//!   `pages` is still checked (`"3"` or `"1-5"`, at most 20 pages). A `.pdf`
//!   file that does not start with `%PDF-` is read like any other file.
//! * `output_bytes` is the text length, or the base64 length for an image.
//! * There is no agent read cache in wsbench (the reference keeps one per
//!   agent state), so every call reads the backend.

use async_trait::async_trait;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

use super::textfile::{
    self, ACCEPTED_IMAGE_TYPES, READ_CHUNK_BYTES, SNIFF_BYTES, Sniff, UNKNOWN_BINARY, human_size,
};
use super::{Tool, ToolContext, ToolLimits, ToolResult, parse_args};
use crate::backend::{BackendError, ByteRange, Sandbox, path as bpath};
use crate::engine::message::{Block, DataBlock, DataSource, new_id, now_naive};

/// Largest image Read sends to a model (20 MiB, the largest any major model
/// API takes inline); larger images are refused with a hint to resize.
pub const MAX_IMAGE_BYTES: u64 = 20 << 20;

/// Most PDF pages one call may ask for (the reference's limit).
pub const MAX_PDF_PAGES_PER_CALL: u64 = 20;

/// The Read tool.
pub struct Read;

#[derive(Debug, Deserialize)]
struct Args {
    file_path: String,
    #[serde(default)]
    offset: Option<i64>,
    #[serde(default)]
    limit: Option<i64>,
    #[serde(default)]
    pages: Option<Value>,
}

const DESCRIPTION: &str = "Reads a file from the workspace and returns its content with line numbers.

Usage:
- file_path must be an absolute path, not a relative one.
- By default up to 2000 lines are returned, starting at the first line. Use offset (1-based line number) and limit to read another part of a long file; reading the whole file by giving neither is usually best.
- Output is in `cat -n` style: each line is its number right-aligned in 6 columns, a TAB, then the line exactly as in the file. When you copy text into Edit, take only what follows the TAB.
- Lines longer than 2000 characters are cut and end in [truncated]. Windows (CRLF) and old Mac (CR) line breaks are shown as plain line breaks.
- PNG, JPEG, GIF and WebP images are returned as images you can see. Other binary files (BMP/TIFF/ICO images, archives, executables, databases...) are reported with their size and detected type instead of their bytes; use Bash tools such as `file` or `xxd` for those.
- PDF files are reported with their size and version, but their text cannot be extracted here; use Bash with `pdftotext` if it is installed.
- Text that is not valid UTF-8 (for example Latin-1) is shown with each undecodable byte as \u{FFFD} and a note at the end; such files cannot be changed with Edit.
- Reading a file that does not exist, or a directory, returns an error.";

#[async_trait]
impl Tool for Read {
    fn name(&self) -> &'static str {
        "Read"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        let max = ToolLimits::default().read_max_lines;
        json!({
            "type": "object",
            "properties": {
                "file_path": {
                    "type": "string",
                    "description": "The absolute path to the file to read."
                },
                "offset": {
                    "type": "integer",
                    "description": "Optional 1-based line number to start reading from (default: 1)",
                    "default": 1,
                    "minimum": 1
                },
                "limit": {
                    "type": "integer",
                    "description": format!("Optional maximum number of lines to read (default: {max}, max: {max})"),
                    "default": max,
                    "minimum": 1,
                    "maximum": max
                },
                "pages": {
                    "type": ["string", "null"],
                    "description": "PDF files only: one page (\"3\") or a range (\"1-5\"), at most 20 pages. PDF text extraction is not available in this workspace; the file is reported instead."
                }
            },
            "required": ["file_path"]
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = match parse_args("Read", args) {
            Ok(a) => a,
            Err(r) => return r,
        };
        let path = match textfile::absolute_path(&args.file_path) {
            Ok(p) => p,
            Err(e) => return ToolResult::error(e),
        };
        let limits = ctx.env.limits;
        let offset = args.offset.unwrap_or(1);
        if offset < 1 {
            return ToolResult::error(format!(
                "Error: offset is a 1-based line number and must be 1 or more, got {offset}"
            ));
        }
        let max_lines = limits.read_max_lines.max(1) as i64;
        let limit = args.limit.unwrap_or(max_lines);
        if limit < 1 {
            return ToolResult::error(format!("Error: limit must be 1 or more, got {limit}"));
        }
        // Above the maximum the call still makes sense: return the most allowed.
        let limit = limit.min(max_lines);

        let sb = ctx.env.sandbox.as_ref();
        let stat = match sb.stat(&path).await {
            Ok(s) => s,
            Err(e) => return read_error(&path, e),
        };
        if let Err(e) = textfile::check_openable(sb, &path, &stat).await {
            return ToolResult::error(e.message(&path));
        }
        let ext = textfile::extension(&path);
        if ext.as_deref() == Some("pdf") {
            if let Some(r) = read_pdf(ctx, &path, stat.size, args.pages.as_ref()).await {
                return r;
            }
        } else if let Some(media) = ext.as_deref().and_then(textfile::image_media_type) {
            return read_image(ctx, &path, stat.size, media).await;
        }
        read_text(ctx, &path, stat.size, offset as u64, limit as u64).await
    }
}

/// Maps a backend error on `path` to the reference's messages.
fn read_error(path: &str, e: BackendError) -> ToolResult {
    match e {
        BackendError::NotFound(_) => {
            ToolResult::error(format!("Error: File does not exist: {path}"))
        }
        BackendError::IsADirectory(_) => {
            ToolResult::error(format!("Error: Path is a directory, not a file: {path}"))
        }
        e => ToolResult::error(format!("Error reading file: {e}")),
    }
}

fn interrupted() -> ToolResult {
    ToolResult::interrupted("Read was interrupted before it finished.")
}

fn with_metadata(mut r: ToolResult, meta: Map<String, Value>) -> ToolResult {
    r.metadata.extend(meta);
    r
}

/// Collects the wanted lines from a byte stream fed piece by piece.
///
/// Lines are split on raw bytes (LF, CRLF, CR): those bytes never occur
/// inside a UTF-8 multi-byte character, and in single-byte encodings they
/// are line breaks too, so only the kept lines need decoding. A CR at the
/// end of one piece and an LF at the start of the next form one break.
#[derive(Debug)]
struct LineCollector {
    /// First wanted line (1-based).
    first: u64,
    /// Last wanted line (inclusive).
    last: u64,
    /// Bytes kept per wanted line: enough for `max_chars + 1` characters,
    /// so a cut line is known to be over the limit.
    cap_bytes: usize,
    /// Number of the line being read.
    line_no: u64,
    /// Bytes of every kept line, back to back: one buffer for all lines
    /// instead of one allocation per line (2,000 lines of a 1 MiB file).
    buf: Vec<u8>,
    /// Where the current line starts in `buf`.
    cur_start: usize,
    /// The current line had more than `cap_bytes` bytes.
    overflow: bool,
    /// The current line has at least one byte.
    started: bool,
    /// The previous piece ended in CR (an LF next is part of that break).
    pending_cr: bool,
    /// Kept lines: number, byte range in `buf`, cut at `cap_bytes`.
    out: Vec<(u64, std::ops::Range<usize>, bool)>,
    /// Every wanted line is complete (or a wanted line holds binary data).
    done: bool,
    /// First wanted line found to hold a NUL byte: the file turns binary
    /// after the sniffed start, so reading stops before that line.
    binary_line: Option<u64>,
}

impl LineCollector {
    fn new(offset: u64, limit: u64, max_chars: usize) -> Self {
        LineCollector {
            first: offset,
            last: offset.saturating_add(limit - 1),
            cap_bytes: max_chars.saturating_add(1).saturating_mul(4),
            line_no: 1,
            buf: Vec::new(),
            cur_start: 0,
            overflow: false,
            started: false,
            pending_cr: false,
            out: Vec::new(),
            done: false,
            binary_line: None,
        }
    }

    fn wanted(&self) -> bool {
        self.line_no >= self.first && self.line_no <= self.last
    }

    fn feed(&mut self, chunk: &[u8]) {
        let mut i = 0;
        if self.pending_cr {
            self.pending_cr = false;
            if chunk.first() == Some(&b'\n') {
                i = 1;
            }
        }
        while i < chunk.len() && !self.done {
            let rest = &chunk[i..];
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.push(rest);
                    i = chunk.len();
                }
                Some(j) => {
                    self.push(&rest[..j]);
                    if self.done {
                        break;
                    }
                    self.end_line();
                    i += j + 1;
                    if rest[j] == b'\r' {
                        if i < chunk.len() {
                            if chunk[i] == b'\n' {
                                i += 1;
                            }
                        } else {
                            self.pending_cr = true;
                        }
                    }
                }
            }
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.started = true;
        if !self.wanted() || self.overflow {
            return;
        }
        let room = self.cap_bytes - (self.buf.len() - self.cur_start);
        if bytes[..bytes.len().min(room)].contains(&0) {
            self.binary_line = Some(self.line_no);
            self.done = true;
            return;
        }
        if bytes.len() > room {
            self.buf.extend_from_slice(&bytes[..room]);
            self.overflow = true;
            // The last wanted line is known to be cut: no need to read on
            // to its end (a 2 GB single-line file stops here).
            if self.line_no == self.last {
                self.end_line();
            }
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }

    fn end_line(&mut self) {
        if self.wanted() {
            self.out
                .push((self.line_no, self.cur_start..self.buf.len(), self.overflow));
        }
        self.cur_start = self.buf.len();
        self.overflow = false;
        self.started = false;
        if self.line_no >= self.last {
            self.done = true;
        }
        self.line_no += 1;
    }

    /// The kept lines: number, bytes, cut at `cap_bytes`.
    fn lines(&self) -> impl Iterator<Item = (u64, &[u8], bool)> {
        self.out
            .iter()
            .map(|(n, r, cut)| (*n, &self.buf[r.clone()], *cut))
    }

    /// End of file: a last line without a line break still counts.
    fn finish(&mut self) {
        if !self.done && self.started {
            self.end_line();
        }
    }
}

/// Cuts `line` to `max` characters plus `[truncated]` when it is longer
/// (or was already cut at the byte cap).
fn truncate_line(line: String, max: usize, cut: bool) -> String {
    match line.char_indices().nth(max) {
        Some((end, _)) => format!("{}[truncated]", &line[..end]),
        None if cut => format!("{line}[truncated]"),
        None => line,
    }
}

/// Appends one kept line to `out`, cut to `max` characters plus
/// `[truncated]` when it is longer (or was already cut at the byte cap);
/// returns whether it held bytes that are not UTF-8.
///
/// The common line (valid UTF-8, not longer in bytes than `max`, so not
/// longer in characters either) is copied as is: no decoding into a
/// String of its own and no count of its characters.
fn push_line(out: &mut String, bytes: &[u8], max: usize, cut: bool) -> bool {
    if !cut
        && bytes.len() <= max
        && let Ok(s) = std::str::from_utf8(bytes)
    {
        out.push_str(s);
        return false;
    }
    let (text, bad) = textfile::decode_lossy(bytes, cut);
    out.push_str(&truncate_line(text, max, cut));
    bad
}

async fn read_text(
    ctx: &ToolContext<'_>,
    path: &str,
    size: u64,
    offset: u64,
    limit: u64,
) -> ToolResult {
    let sb = ctx.env.sandbox.as_ref();
    let limits = ctx.env.limits;
    let ranged = sb.capabilities().read_range;
    if !ranged && size > limits.read_max_bytes {
        return too_large(sb, path, size, limits.read_max_bytes);
    }
    let mut lines = LineCollector::new(offset, limit, limits.read_max_line_chars);
    let mut pos: u64 = 0;
    let mut sniff_invalid = None;
    let mut reached_eof = false;
    loop {
        if ctx.cancel.is_cancelled() {
            return interrupted();
        }
        let range = ranged.then_some(ByteRange {
            offset: pos,
            len: READ_CHUNK_BYTES,
        });
        let chunk = match sb.read(path, range).await {
            Ok(c) => c,
            Err(e) => return read_error(path, e),
        };
        let len = chunk.len() as u64;
        // Up to the size seen by `stat`: a file of exactly N chunks needs no
        // extra empty read to find its end.
        let eof = !ranged || len == 0 || pos + len >= size;
        if sniff_invalid.is_none() {
            let n = chunk.len().min(SNIFF_BYTES);
            let sample = &chunk[..n];
            match textfile::sniff(sample, eof && n == chunk.len()) {
                Sniff::Binary => return binary_result(path, size.max(len), sample),
                Sniff::Text { valid_utf8 } => sniff_invalid = Some(!valid_utf8),
            }
        }
        pos += len;
        lines.feed(&chunk);
        if lines.done {
            break;
        }
        if eof {
            reached_eof = true;
            break;
        }
    }
    lines.finish();

    let max_chars = limits.read_max_line_chars;
    let mut invalid = sniff_invalid.unwrap_or(false);
    // One output buffer sized for the kept bytes plus the `{no:>6}\t` and
    // `\n` around each line; lines are written straight into it.
    let returned = lines.out.len();
    let mut text = String::with_capacity(lines.buf.len() + returned * 8 + 256);
    for (i, (no, bytes, cut)) in lines.lines().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let _ = write!(text, "{no:>6}\t");
        invalid |= push_line(&mut text, bytes, max_chars, cut);
    }
    let mut notes = Vec::new();
    if let Some(n) = lines.binary_line {
        notes.push(format!(
            "[Note: line {n} of {path} holds binary data (NUL bytes); reading stopped before it. \
             Inspect that part with Bash, e.g. `sed -n '{n}p' {} | xxd | head`.]",
            bpath::shell_quote(path)
        ));
    }
    if invalid {
        notes.push(format!(
            "[Note: {path} is not valid UTF-8 text (perhaps Latin-1 or another legacy encoding); \
             bytes that are not UTF-8 are shown as \u{FFFD}. Edit will not change this file; convert it \
             first (e.g. `iconv -f latin1 -t utf-8`) or replace it whole with Write.]"
        ));
    }
    for (i, n) in notes.iter().enumerate() {
        // A blank line keeps notes apart from the numbered lines.
        if i == 0 && returned > 0 {
            text.push_str("\n\n");
        } else if i > 0 {
            text.push('\n');
        }
        text.push_str(n);
    }
    let mut meta = Map::new();
    meta.insert("file_path".into(), json!(path));
    meta.insert("offset".into(), json!(offset));
    meta.insert("lines".into(), json!(returned));
    if reached_eof {
        // The whole file was scanned, so its line count is known.
        meta.insert("total_lines".into(), json!(lines.line_no - 1));
    }
    meta.insert("valid_utf8".into(), json!(!invalid));
    if let Some(n) = lines.binary_line {
        meta.insert("binary_from_line".into(), json!(n));
    }
    with_metadata(ToolResult::ok(text), meta)
}

fn too_large(sb: &dyn Sandbox, path: &str, size: u64, max: u64) -> ToolResult {
    let q = bpath::shell_quote(path);
    ToolResult::error(format!(
        "Error: {path} is too large to read here ({}): the {} backend cannot read part of a file, \
         and files over {} are not read whole, even with offset/limit. Use the Bash tool to pick \
         the lines you need, e.g. `sed -n '1,2000p' {q}` or `tail -n 100 {q}`.",
        human_size(size),
        sb.kind(),
        human_size(max),
    ))
    .with_meta("file_path", path)
    .with_meta("size", size)
}

fn binary_result(path: &str, size: u64, head: &[u8]) -> ToolResult {
    let ty = textfile::guess_type(head).unwrap_or(UNKNOWN_BINARY);
    let q = bpath::shell_quote(path);
    ToolResult::error(format!(
        "Error: {path} is a binary file ({}; detected type: {}, {}). Read only shows text files and \
         PNG, JPEG, GIF or WebP images. Inspect binary files with Bash, e.g. `file {q}`, \
         `xxd {q} | head` or `strings {q} | head`.",
        human_size(size),
        ty.label,
        ty.media_type,
    ))
    .with_meta("file_path", path)
    .with_meta("binary", true)
    .with_meta("size", size)
    .with_meta("media_type", ty.media_type)
}

/// Reads at most `n` bytes from the start of the file; `None` when the
/// backend can only read whole files and this one is over the limit.
async fn read_head(
    ctx: &ToolContext<'_>,
    path: &str,
    size: u64,
    n: u64,
) -> Result<Option<Vec<u8>>, BackendError> {
    let sb = ctx.env.sandbox.as_ref();
    if sb.capabilities().read_range {
        return sb
            .read(path, Some(ByteRange { offset: 0, len: n }))
            .await
            .map(Some);
    }
    if size > ctx.env.limits.read_max_bytes {
        return Ok(None);
    }
    let mut data = sb.read(path, None).await?;
    data.truncate(n as usize);
    Ok(Some(data))
}

async fn read_image(ctx: &ToolContext<'_>, path: &str, size: u64, ext_media: &str) -> ToolResult {
    let accepted = ACCEPTED_IMAGE_TYPES.join(", ");
    if !ACCEPTED_IMAGE_TYPES.contains(&ext_media) {
        return ToolResult::error(format!(
            "Error: Image type {ext_media} is not supported: {path}. Accepted image types: {accepted}."
        ))
        .with_meta("file_path", path)
        .with_meta("media_type", ext_media)
        .with_meta("size", size);
    }
    let too_big = |n: u64| {
        ToolResult::error(format!(
            "Error: Image {path} is {}, more than the {} Read sends to a model. Make a smaller copy \
             with Bash (for example ImageMagick: `convert in.png -resize 50% out.png`) and read that.",
            human_size(n),
            human_size(MAX_IMAGE_BYTES),
        ))
        .with_meta("file_path", path)
        .with_meta("size", n)
    };
    if size > MAX_IMAGE_BYTES {
        return too_big(size);
    }
    // One byte over the cap tells a file that grew since stat from one that fits.
    let data = match read_head(ctx, path, size, MAX_IMAGE_BYTES + 1).await {
        Ok(Some(d)) => d,
        Ok(None) => return too_big(size),
        Err(e) => return read_error(path, e),
    };
    if data.len() as u64 > MAX_IMAGE_BYTES {
        return too_big(data.len() as u64);
    }
    let detected = textfile::guess_type(&data);
    let media_type = match detected {
        Some(t) if ACCEPTED_IMAGE_TYPES.contains(&t.media_type) => t.media_type,
        other => {
            let looks = other.map_or_else(
                || match textfile::sniff(
                    &data[..data.len().min(SNIFF_BYTES)],
                    data.len() <= SNIFF_BYTES,
                ) {
                    Sniff::Text { .. } if data.is_empty() => "an empty file",
                    Sniff::Text { .. } => "text",
                    Sniff::Binary => UNKNOWN_BINARY.label,
                },
                |t| t.label,
            );
            return ToolResult::error(format!(
                "Error: {path} has an image file name but its content is not a PNG, JPEG, GIF or WebP \
                 image ({}, looks like {looks}). Accepted image types: {accepted}.",
                human_size(data.len() as u64),
            ))
            .with_meta("file_path", path)
            .with_meta("size", data.len() as u64);
        }
    };
    let b64 = base64::engine::general_purpose::STANDARD.encode(&data);
    let output_bytes = b64.len() as u64;
    let block = DataBlock {
        id: new_id(),
        source: DataSource::Base64 {
            data: b64,
            media_type: media_type.to_string(),
        },
        name: Some(bpath::file_name(path).to_string()),
        created_at: Some(now_naive()),
        finished_at: None,
        extra: Map::new(),
    };
    ToolResult {
        content: vec![Block::Data(block)],
        output_bytes,
        ..ToolResult::ok("")
    }
    .with_meta("file_path", path)
    .with_meta("media_type", media_type)
    .with_meta("size", data.len() as u64)
}

/// Checks a `pages` value: one page `"N"` or a range `"N-M"`, 1-based,
/// `N <= M`, at most [`MAX_PDF_PAGES_PER_CALL`] pages. Returns (first, last).
pub fn parse_pages(pages: &str) -> Result<(u64, u64), String> {
    let bad = || {
        format!(
            "Error: Invalid pages value \"{pages}\": give one page like \"3\" or a range like \"1-5\" \
             (1-based, at most {MAX_PDF_PAGES_PER_CALL} pages per call)."
        )
    };
    let num = |s: &str| s.trim().parse::<u64>().ok().filter(|&n| n >= 1);
    let (first, last) = match pages.split_once('-') {
        Some((a, b)) => (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?),
        None => {
            let n = num(pages).ok_or_else(bad)?;
            (n, n)
        }
    };
    if first > last || last - first + 1 > MAX_PDF_PAGES_PER_CALL {
        return Err(bad());
    }
    Ok((first, last))
}

/// The PDF branch; `None` when the file does not start like a PDF, so the
/// caller reads it as an ordinary file.
async fn read_pdf(
    ctx: &ToolContext<'_>,
    path: &str,
    size: u64,
    pages: Option<&Value>,
) -> Option<ToolResult> {
    let pages = match pages {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => {
            return Some(ToolResult::error(format!(
                "Error: pages must be a string such as \"3\" or \"1-5\", got {other}"
            )));
        }
    };
    if let Some(p) = &pages
        && let Err(e) = parse_pages(p)
    {
        return Some(ToolResult::error(e));
    }
    let head = match read_head(ctx, path, size, 1024).await {
        Ok(h) => h,
        Err(e) => return Some(read_error(path, e)),
    };
    let version = match &head {
        Some(h) if !h.starts_with(b"%PDF-") => return None,
        Some(h) => {
            let v: String = h[5..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'.')
                .map(|&b| b as char)
                .collect();
            (!v.is_empty()).then_some(v)
        }
        None => None,
    };
    let version_text = version
        .as_deref()
        .map_or_else(|| "version unknown".to_string(), |v| format!("PDF {v}"));
    let pages_text = pages
        .as_deref()
        .map_or_else(String::new, |p| format!(" (pages {p} were asked for)"));
    let (f, l) = pages
        .as_deref()
        .and_then(|p| parse_pages(p).ok())
        .unwrap_or((1, 5));
    let q = bpath::shell_quote(path);
    let mut r = ToolResult::error(format!(
        "Error: {path} is a PDF document ({}, {version_text}). Reading text from PDF files is not \
         supported in this workspace (wsbench has no PDF library), so no pages were read{pages_text}. \
         If the sandbox has poppler-utils, extract the text with Bash: `pdftotext -layout -f {f} -l {l} {q} -`.",
        human_size(size),
    ))
    .with_meta("file_path", path)
    .with_meta("binary", true)
    .with_meta("size", size)
    .with_meta("media_type", "application/pdf");
    if let Some(v) = version {
        r = r.with_meta("pdf_version", v);
    }
    if let Some(p) = pages {
        r = r.with_meta("pages", p);
    }
    Some(r)
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
