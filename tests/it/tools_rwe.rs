//! Read, Write and Edit driven through `Workspace::call_tool` on the local
//! backend (and on a wrapper that hides ranged reads or the host view, to
//! cover what remote backends lack). Cases: C26 (binary sniffing,
//! non-UTF-8), docs/contract.md §3.2–§3.4, §11 points 7 and 20.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::io::AsyncRead;
use tokio_util::sync::CancellationToken;

use wsbench::backend::local::LocalSandbox;
use wsbench::backend::{
    BackendKind, BackendResult, ByteRange, Capabilities, ExecOutcome, ExecRequest, FileStat,
    OutputSink, Process, Sandbox, SpawnRequest, Watch,
};
use wsbench::engine::message::{Block, DataSource};
use wsbench::engine::tools::textfile::SNIFF_BYTES;
use wsbench::engine::tools::{ToolLimits, ToolResult, ToolState};
use wsbench::engine::{EventBus, ToolCall, Workspace, WorkspaceConfig};

/// A local sandbox that can pretend to lack ranged reads or a host view,
/// and counts the bytes it hands out. It offers no checked append, so the
/// rewrite guard takes its unlocked path on it (`rewrite_guard.rs`).
pub(crate) struct Probe {
    pub(crate) inner: LocalSandbox,
    pub(crate) ranged: bool,
    pub(crate) host_view: bool,
    pub(crate) bytes_read: AtomicU64,
}

#[async_trait]
impl Sandbox for Probe {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_range: self.ranged,
            ..self.inner.capabilities()
        }
    }
    fn workdir(&self) -> &str {
        self.inner.workdir()
    }
    fn host_root(&self) -> Option<&Path> {
        if self.host_view {
            self.inner.host_root()
        } else {
            None
        }
    }
    fn host_path(&self, path: &str) -> Option<std::path::PathBuf> {
        if self.host_view {
            self.inner.host_path(path)
        } else {
            None
        }
    }
    async fn exec(&self, req: ExecRequest, sink: Option<OutputSink>) -> BackendResult<ExecOutcome> {
        self.inner.exec(req, sink).await
    }
    async fn spawn(&self, req: SpawnRequest) -> BackendResult<Process> {
        self.inner.spawn(req).await
    }
    async fn read(&self, path: &str, range: Option<ByteRange>) -> BackendResult<Vec<u8>> {
        assert!(
            range.is_none() || self.ranged,
            "ranged read on a backend without read_range"
        );
        let data = self.inner.read(path, range).await?;
        self.bytes_read
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(data)
    }
    async fn write(&self, path: &str, data: &[u8]) -> BackendResult<()> {
        self.inner.write(path, data).await
    }
    async fn write_stream(
        &self,
        path: &str,
        reader: Box<dyn AsyncRead + Send + Unpin>,
    ) -> BackendResult<u64> {
        self.inner.write_stream(path, reader).await
    }
    async fn append(&self, path: &str, data: &[u8]) -> BackendResult<u64> {
        self.inner.append(path, data).await
    }
    async fn create_new(&self, path: &str, data: &[u8]) -> BackendResult<bool> {
        self.inner.create_new(path, data).await
    }
    async fn list(&self, path: &str) -> BackendResult<Vec<FileStat>> {
        self.inner.list(path).await
    }
    async fn stat(&self, path: &str) -> BackendResult<FileStat> {
        self.inner.stat(path).await
    }
    async fn remove(&self, path: &str, recursive: bool) -> BackendResult<()> {
        self.inner.remove(path, recursive).await
    }
    async fn rename(&self, from: &str, to: &str) -> BackendResult<()> {
        self.inner.rename(from, to).await
    }
    async fn mkdir(&self, path: &str, parents: bool) -> BackendResult<()> {
        self.inner.mkdir(path, parents).await
    }
    async fn watch(&self, path: &str) -> BackendResult<Watch> {
        self.inner.watch(path).await
    }
}

struct Env {
    _dir: tempfile::TempDir,
    ws: Arc<Workspace>,
    /// Workdir (backend path = host path on local).
    wd: String,
    probe: Option<Arc<Probe>>,
}

impl Env {
    async fn local() -> Self {
        Self::with_limits(ToolLimits::default()).await
    }

    async fn with_limits(limits: ToolLimits) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let sb = Arc::new(LocalSandbox::open(dir.path()).unwrap());
        let wd = sb.workdir().to_string();
        let config = WorkspaceConfig {
            limits,
            ..Default::default()
        };
        let ws = Workspace::open(sb, config, EventBus::default())
            .await
            .unwrap();
        Env {
            _dir: dir,
            ws,
            wd,
            probe: None,
        }
    }

    async fn probe(ranged: bool, host_view: bool, limits: ToolLimits) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let inner = LocalSandbox::open(dir.path()).unwrap();
        let wd = inner.workdir().to_string();
        let probe = Arc::new(Probe {
            inner,
            ranged,
            host_view,
            bytes_read: AtomicU64::new(0),
        });
        let config = WorkspaceConfig {
            limits,
            ..Default::default()
        };
        let ws = Workspace::open(probe.clone(), config, EventBus::default())
            .await
            .unwrap();
        Env {
            _dir: dir,
            ws,
            wd,
            probe: Some(probe),
        }
    }

    fn p(&self, rel: &str) -> String {
        format!("{}/{rel}", self.wd)
    }

    fn put(&self, rel: &str, data: &[u8]) -> String {
        let p = self.p(rel);
        if let Some(parent) = Path::new(&p).parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, data).unwrap();
        p
    }

    fn get(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.p(rel)).unwrap()
    }

    async fn call(&self, tool: &str, args: Value) -> ToolResult {
        let call = ToolCall {
            tool: tool.into(),
            session: "s".into(),
            args,
            ..Default::default()
        };
        tokio::time::timeout(Duration::from_secs(30), self.ws.call_tool(call))
            .await
            .expect("tool call finished within 30 s")
    }

    async fn read(&self, args: Value) -> ToolResult {
        self.call("Read", args).await
    }
}

fn ok(r: &ToolResult) -> String {
    assert_eq!(
        r.state,
        ToolState::Success,
        "expected success, got: {}",
        r.text()
    );
    r.text()
}

fn err(r: &ToolResult) -> String {
    assert_eq!(
        r.state,
        ToolState::Error,
        "expected an error, got: {}",
        r.text()
    );
    r.text()
}

fn numbered(lines: &[&str]) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{:>6}\t{l}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------- C26

#[tokio::test]
async fn c26_cut_and_cjk_files_read_as_exact_text() {
    // Long enough lines must come back whole to compare exact content.
    let env = Env::with_limits(ToolLimits {
        read_max_line_chars: 20_000,
        ..Default::default()
    })
    .await;
    let s = SNIFF_BYTES;
    let mut cut = vec![b'a'; s - 1];
    cut.extend_from_slice("ç\nx\n".as_bytes());
    let cut_path = env.put("c26/cut.md", &cut);
    let mut cjk = vec![b'a'; s - 2];
    cjk.extend_from_slice("中\n".as_bytes());
    let cjk_path = env.put("c26/cjk.md", &cjk);

    let r = env.read(json!({"file_path": cut_path})).await;
    let line1 = format!("{}ç", "a".repeat(s - 1));
    assert_eq!(ok(&r), numbered(&[&line1, "x"]));
    assert_eq!(r.metadata["valid_utf8"], json!(true));

    let r = env.read(json!({"file_path": cjk_path})).await;
    let line1 = format!("{}中", "a".repeat(s - 2));
    assert_eq!(ok(&r), numbered(&[&line1]));
    assert_eq!(r.metadata["total_lines"], json!(1));
}

#[tokio::test]
async fn c26_with_default_limits_long_lines_are_truncated_but_still_text() {
    let env = Env::local().await;
    let mut cjk = vec![b'a'; SNIFF_BYTES - 2];
    cjk.extend_from_slice("中\n".as_bytes());
    let p = env.put("cjk.md", &cjk);
    let r = env.read(json!({"file_path": p})).await;
    assert_eq!(ok(&r), format!("     1\t{}[truncated]", "a".repeat(2000)));
}

#[tokio::test]
async fn c26_latin1_reads_lossily_with_a_note() {
    let env = Env::local().await;
    let p = env.put("latin1.txt", b"caf\xe9 menu\n");
    let r = env.read(json!({"file_path": p})).await;
    let text = ok(&r);
    assert!(
        text.starts_with("     1\tcaf\u{FFFD} menu\n\n[Note: "),
        "{text:?}"
    );
    assert!(text.contains("is not valid UTF-8"), "{text}");
    assert_eq!(r.metadata["valid_utf8"], json!(false));
    // Edit refuses it rather than corrupting it.
    let r = env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "menu", "new_string": "carte"}),
        )
        .await;
    let e = err(&r);
    assert!(
        e.contains("not valid UTF-8") && e.contains("0xE9 at offset 3"),
        "{e}"
    );
    assert_eq!(env.get("latin1.txt"), b"caf\xe9 menu\n");
}

#[tokio::test]
async fn c26_png_is_an_image_block_and_nul_file_is_binary() {
    let env = Env::local().await;
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(&[0u8; 32]);
    let p = env.put("img.png", &png);
    let r = env.read(json!({"file_path": p})).await;
    assert_eq!(r.state, ToolState::Success);
    assert_eq!(r.content.len(), 1);
    let Block::Data(block) = &r.content[0] else {
        panic!("expected a data block, got {:?}", r.content)
    };
    assert_eq!(block.name.as_deref(), Some("img.png"));
    let DataSource::Base64 { data, media_type } = &block.source else {
        panic!("expected base64")
    };
    assert_eq!(media_type, "image/png");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
        png
    );
    assert_eq!(r.metadata["size"], json!(png.len()));
    assert_eq!(r.output_bytes, data.len() as u64);
    assert_eq!(r.text(), "", "no garbage text");

    let p = env.put("nul.txt", b"ab\0cd\n");
    let r = env.read(json!({"file_path": p})).await;
    let e = err(&r);
    assert!(e.contains("is a binary file (6 bytes"), "{e}");
    assert!(!e.contains('\0') && !e.contains("\tab"), "{e}");
    assert_eq!(r.metadata["binary"], json!(true));
    assert_eq!(r.metadata["size"], json!(6));
    assert_eq!(r.metadata["media_type"], json!("application/octet-stream"));

    // A known binary type is named.
    let p = env.put("prog", b"\x7fELF\x02\x01\x01\0\0\0\0\0");
    let e = err(&env.read(json!({"file_path": p})).await);
    assert!(e.contains("ELF executable"), "{e}");
}

// ---------------------------------------------------------------- Read

#[tokio::test]
async fn read_formats_lines_like_the_reference() {
    let env = Env::local().await;
    let p = env.put("f.txt", b"alpha\r\nbeta\rgamma\n\n\tdelta");
    let r = env.read(json!({"file_path": p})).await;
    assert_eq!(ok(&r), numbered(&["alpha", "beta", "gamma", "", "\tdelta"]));
    assert_eq!(r.output_bytes, r.text().len() as u64);

    let r = env
        .read(json!({"file_path": p, "offset": 2, "limit": 2}))
        .await;
    assert_eq!(ok(&r), "     2\tbeta\n     3\tgamma");
    // Past the end: empty text, no error.
    let r = env.read(json!({"file_path": p, "offset": 50})).await;
    assert_eq!(ok(&r), "");
    // An empty file is an empty text.
    let p = env.put("empty.txt", b"");
    assert_eq!(ok(&env.read(json!({"file_path": p})).await), "");
}

#[tokio::test]
async fn read_truncates_long_lines_and_caps_limit() {
    let env = Env::local().await;
    let long = "é".repeat(2500);
    let p = env.put("long.txt", format!("{long}\nshort\n").as_bytes());
    let r = env.read(json!({"file_path": p})).await;
    let text = ok(&r);
    assert_eq!(
        text,
        format!("     1\t{}[truncated]\n     2\tshort", "é".repeat(2000))
    );

    let body: String = (1..=3000).map(|i| format!("{i}\n")).collect();
    let p = env.put("many.txt", body.as_bytes());
    let r = env.read(json!({"file_path": p})).await;
    assert_eq!(ok(&r).lines().count(), 2000);
    // A limit above the maximum is capped, not refused.
    let r = env
        .read(json!({"file_path": p, "offset": 2500, "limit": 5000}))
        .await;
    let text = ok(&r);
    assert_eq!(text.lines().count(), 501);
    assert!(text.starts_with("  2500\t2500\n"));
    assert!(text.ends_with("  3000\t3000"));
    assert_eq!(r.metadata["total_lines"], json!(3000));
}

#[tokio::test]
async fn read_errors() {
    let env = Env::local().await;
    let e = err(&env.read(json!({"file_path": "rel/a.txt"})).await);
    assert_eq!(
        e,
        "Error: file_path must be an absolute path, got: rel/a.txt"
    );
    let missing = env.p("nope.txt");
    let e = err(&env.read(json!({"file_path": missing})).await);
    assert_eq!(e, format!("Error: File does not exist: {missing}"));
    std::fs::create_dir_all(env.p("dir")).unwrap();
    let e = err(&env.read(json!({"file_path": env.p("dir")})).await);
    assert_eq!(
        e,
        format!("Error: Path is a directory, not a file: {}", env.p("dir"))
    );
    let p = env.put("a.txt", b"x\n");
    let e = err(&env.read(json!({"file_path": p, "offset": 0})).await);
    assert!(e.contains("offset"), "{e}");
    let e = err(&env.read(json!({"file_path": p, "limit": 0})).await);
    assert!(e.contains("limit"), "{e}");
    let e = err(&env.read(json!({"path": p})).await);
    assert!(e.starts_with("Invalid arguments for Read"), "{e}");
}

#[tokio::test]
async fn read_normalises_dot_dot_segments() {
    let env = Env::local().await;
    env.put("a.txt", b"hello\n");
    std::fs::create_dir_all(env.p("sub")).unwrap();
    let r = env
        .read(json!({"file_path": format!("{}/sub/../a.txt", env.wd)}))
        .await;
    assert_eq!(ok(&r), "     1\thello");
    assert_eq!(r.metadata["file_path"], json!(env.p("a.txt")));
    // `..` resolves lexically even when the directory does not exist.
    let r = env
        .read(json!({"file_path": format!("{}/ghost/.././a.txt", env.wd)}))
        .await;
    assert_eq!(ok(&r), "     1\thello");
}

#[tokio::test]
async fn sparse_2gb_file_reads_quickly_with_offset_and_limit() {
    let env = Env::probe(true, true, ToolLimits::default()).await;
    let p = env.p("huge.log");
    {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&p).unwrap();
        let text: String = (1..=100_000).map(|i| format!("line {i}\n")).collect();
        f.write_all(text.as_bytes()).unwrap();
        f.set_len(2 << 30).unwrap();
    }
    let t0 = Instant::now();
    let r = env
        .read(json!({"file_path": p, "offset": 50_000, "limit": 3}))
        .await;
    assert_eq!(
        ok(&r),
        " 50000\tline 50000\n 50001\tline 50001\n 50002\tline 50002"
    );
    let r = env.read(json!({"file_path": p})).await;
    assert_eq!(ok(&r).lines().count(), 2000);
    // Past the text, the file is NUL bytes: the read stops there with a note.
    let r = env
        .read(json!({"file_path": p, "offset": 100_000, "limit": 10}))
        .await;
    let text = ok(&r);
    assert!(
        text.starts_with("100000\tline 100000\n\n[Note: line 100001 of "),
        "{text}"
    );
    assert!(!text.contains('\0'));
    assert_eq!(r.metadata["binary_from_line"], json!(100_001));
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    let read = env
        .probe
        .as_ref()
        .unwrap()
        .bytes_read
        .load(Ordering::Relaxed);
    assert!(read <= 6 << 20, "read {read} bytes of a 2 GiB file");
    assert!(r.metadata.get("total_lines").is_none());
}

#[tokio::test]
async fn without_ranged_reads_big_files_are_refused_small_ones_read() {
    let limits = ToolLimits {
        read_max_bytes: 1000,
        ..Default::default()
    };
    let env = Env::probe(false, true, limits).await;
    let big = env.put("big.txt", "x\n".repeat(1000).as_bytes());
    let e = err(&env
        .read(json!({"file_path": big, "offset": 1, "limit": 1}))
        .await);
    assert!(e.contains("too large") && e.contains("sed -n"), "{e}");
    assert_eq!(
        env.probe
            .as_ref()
            .unwrap()
            .bytes_read
            .load(Ordering::Relaxed),
        0
    );
    let small = env.put("small.txt", b"one\ntwo\n");
    assert_eq!(
        ok(&env.read(json!({"file_path": small, "offset": 2})).await),
        "     2\ttwo"
    );
    let e = err(&env
        .read(json!({"file_path": env.put("n.bin", b"a\0b")}))
        .await);
    assert!(e.contains("binary"), "{e}");
}

#[tokio::test]
async fn symlink_loops_fifos_and_dangling_links_error_without_hanging() {
    let env = Env::local().await;
    let l1 = env.p("loop1");
    let l2 = env.p("loop2");
    std::os::unix::fs::symlink(&l2, &l1).unwrap();
    std::os::unix::fs::symlink(&l1, &l2).unwrap();
    let e = err(&env.read(json!({"file_path": l1})).await);
    assert!(e.contains("loop1"), "{e}");
    err(&env
        .call(
            "Edit",
            json!({"file_path": l1, "old_string": "a", "new_string": "b"}),
        )
        .await);
    err(&env
        .call("Write", json!({"file_path": l1, "content": "x"}))
        .await);

    // A loop through a directory component.
    let e = err(&env.read(json!({"file_path": format!("{l1}/x.txt")})).await);
    assert!(!e.is_empty());

    // A directory link to itself resolves normally.
    env.put("d/a.txt", b"deep\n");
    std::os::unix::fs::symlink(".", env.p("d/self")).unwrap();
    let r = env
        .read(json!({"file_path": env.p("d/self/self/self/a.txt")}))
        .await;
    assert_eq!(ok(&r), "     1\tdeep");

    std::os::unix::fs::symlink(env.p("nowhere"), env.p("dangling")).unwrap();
    let e = err(&env.read(json!({"file_path": env.p("dangling")})).await);
    assert!(e.starts_with("Error: File does not exist"), "{e}");

    let fifo = env.p("pipe");
    nix::unistd::mkfifo(
        Path::new(&fifo),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let e = err(&env.read(json!({"file_path": fifo})).await);
    assert!(e.contains("not a regular file"), "{e}");
    let e = err(&env
        .call("Write", json!({"file_path": fifo, "content": "x"}))
        .await);
    assert!(e.contains("not a regular file"), "{e}");
}

#[tokio::test]
async fn symlink_loop_without_a_host_view_is_an_error_too() {
    let env = Env::probe(true, false, ToolLimits::default()).await;
    let l1 = env.p("loop1");
    std::os::unix::fs::symlink(env.p("loop2"), &l1).unwrap();
    std::os::unix::fs::symlink(&l1, env.p("loop2")).unwrap();
    let e = err(&env.read(json!({"file_path": l1})).await);
    assert!(e.starts_with("Error reading file"), "{e}");
}

#[tokio::test]
async fn images_other_than_the_accepted_types_are_refused() {
    let env = Env::local().await;
    let p = env.put("pic.bmp", b"BM\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
    let e = err(&env.read(json!({"file_path": p})).await);
    assert!(
        e.contains("image/bmp") && e.contains("image/png, image/jpeg, image/gif, image/webp"),
        "{e}"
    );
    // An image name with other content is refused, not sent as an image.
    let p = env.put("fake.png", b"just text\n");
    let e = err(&env.read(json!({"file_path": p})).await);
    assert!(
        e.contains("not a PNG, JPEG, GIF or WebP image") && e.contains("looks like text"),
        "{e}"
    );
    // Bytes decide the media type: a PNG named .jpg is sent as PNG.
    let p = env.put("real.jpg", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    let r = env.read(json!({"file_path": p})).await;
    assert_eq!(r.metadata["media_type"], json!("image/png"));
    // Oversized images are refused before being read.
    let p = env.p("big.gif");
    std::fs::File::create(&p)
        .unwrap()
        .set_len(21 << 20)
        .unwrap();
    let e = err(&env.read(json!({"file_path": p})).await);
    assert!(e.contains("more than the 20.0 MiB"), "{e}");
}

#[tokio::test]
async fn pdfs_are_reported_not_extracted() {
    let env = Env::local().await;
    let pdf: &[u8] = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n";
    let p = env.put("doc.pdf", pdf);
    let r = env.read(json!({"file_path": p})).await;
    let e = err(&r);
    assert!(
        e.contains("is a PDF document") && e.contains("PDF 1.7") && e.contains("not supported"),
        "{e}"
    );
    assert_eq!(r.metadata["media_type"], json!("application/pdf"));
    assert_eq!(r.metadata["pdf_version"], json!("1.7"));
    assert_eq!(r.metadata["size"], json!(pdf.len()));
    let e = err(&env.read(json!({"file_path": p, "pages": "2-4"})).await);
    assert!(e.contains("pages 2-4") && e.contains("-f 2 -l 4"), "{e}");
    let e = err(&env.read(json!({"file_path": p, "pages": "9-1"})).await);
    assert!(e.starts_with("Error: Invalid pages value"), "{e}");
    // A .pdf that is not a PDF is read as a file.
    let p = env.put("notes.pdf", b"plain notes\n");
    assert_eq!(
        ok(&env.read(json!({"file_path": p})).await),
        "     1\tplain notes"
    );
}

#[tokio::test]
async fn cancelled_read_is_interrupted() {
    let env = Env::local().await;
    let p = env.put("a.txt", b"x\n");
    let cancel = CancellationToken::new();
    cancel.cancel();
    let call = ToolCall {
        tool: "Read".into(),
        session: "s".into(),
        args: json!({"file_path": p}),
        cancel: Some(cancel),
        ..Default::default()
    };
    assert_eq!(env.ws.call_tool(call).await.state, ToolState::Interrupted);
}

// ---------------------------------------------------------------- Write

#[tokio::test]
async fn write_then_read_round_trip_with_diff() {
    let env = Env::local().await;
    let p = env.p("new/deep/file.txt");
    let content = "héllo\r\nworld\n中文";
    let r = env
        .call("Write", json!({"file_path": p, "content": content}))
        .await;
    assert_eq!(
        ok(&r),
        format!("The file {p} has been written successfully (3 lines).")
    );
    assert_eq!(
        env.get("new/deep/file.txt"),
        content.as_bytes(),
        "bytes unchanged"
    );
    assert_eq!(r.metadata["file_path"], json!(p));
    assert_eq!(r.metadata["occurrences"], json!(1));
    let diff = r.metadata["diff"].as_str().unwrap();
    assert!(
        diff.starts_with(&format!(
            "--- /dev/null\n+++ b/{p}\n@@ -0,0 +1,3 @@\n+héllo"
        )),
        "{diff}"
    );

    let r = env.read(json!({"file_path": p})).await;
    assert_eq!(ok(&r), numbered(&["héllo", "world", "中文"]));

    let r = env
        .call(
            "Write",
            json!({"file_path": p, "content": "héllo\r\nthere\n"}),
        )
        .await;
    assert_eq!(
        ok(&r),
        format!("The file {p} has been written successfully (2 lines).")
    );
    let diff = r.metadata["diff"].as_str().unwrap();
    assert!(
        diff.starts_with(&format!("--- a/{p}\n+++ b/{p}\n")),
        "{diff}"
    );
    assert!(
        diff.contains("\n héllo\r\n-world\n-中文\n\\ No newline at end of file\n+there\n"),
        "{diff}"
    );
}

#[tokio::test]
async fn write_errors_and_dot_dot() {
    let env = Env::local().await;
    let e = err(&env
        .call("Write", json!({"file_path": "x.txt", "content": "a"}))
        .await);
    assert_eq!(e, "Error: file_path must be an absolute path, got: x.txt");
    std::fs::create_dir_all(env.p("adir")).unwrap();
    let e = err(&env
        .call("Write", json!({"file_path": env.p("adir"), "content": "a"}))
        .await);
    assert_eq!(
        e,
        format!("Error: Path is a directory, not a file: {}", env.p("adir"))
    );
    assert!(Path::new(&env.p("adir")).is_dir());
    let e = err(&env
        .call("Write", json!({"file_path": env.p("y.txt")}))
        .await);
    assert!(e.starts_with("Invalid arguments for Write"), "{e}");

    let r = env
        .call(
            "Write",
            json!({"file_path": format!("{}/adir/../y.txt", env.wd), "content": ""}),
        )
        .await;
    assert_eq!(
        ok(&r),
        format!(
            "The file {} has been written successfully (0 lines).",
            env.p("y.txt")
        )
    );
    assert_eq!(env.get("y.txt"), b"");
}

#[tokio::test]
async fn write_keeps_a_symlink_and_writes_its_target() {
    let env = Env::local().await;
    env.put("real.txt", b"old\n");
    std::os::unix::fs::symlink(env.p("real.txt"), env.p("link.txt")).unwrap();
    let r = env
        .call(
            "Write",
            json!({"file_path": env.p("link.txt"), "content": "new\n"}),
        )
        .await;
    ok(&r);
    assert_eq!(env.get("real.txt"), b"new\n");
    assert!(
        std::fs::symlink_metadata(env.p("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        r.metadata["diff"]
            .as_str()
            .unwrap()
            .contains("-old\n+new\n")
    );
}

// ---------------------------------------------------------------- Edit

#[tokio::test]
async fn edit_keeps_crlf_files_crlf() {
    let env = Env::local().await;
    let p = env.put("win.txt", b"one\r\ntwo\r\nthree\r\n");
    let r = env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "two\nthree", "new_string": "2\n2.5\n3"}),
        )
        .await;
    assert_eq!(ok(&r), format!("Successfully replaced 1 occurrence in {p}"));
    assert_eq!(env.get("win.txt"), b"one\r\n2\r\n2.5\r\n3\r\n");
    assert_eq!(r.metadata["occurrences"], json!(1));
    assert_eq!(r.metadata["file_path"], json!(p));
    let diff = r.metadata["diff"].as_str().unwrap();
    assert_eq!(
        diff,
        format!("--- a/{p}\n+++ b/{p}\n@@ -1,3 +1,4 @@\n one\n-two\n-three\n+2\n+2.5\n+3\n")
    );
}

#[tokio::test]
async fn edit_keeps_mixed_endings_outside_the_edit() {
    let env = Env::local().await;
    let p = env.put("mixed.txt", b"a\nb\r\nc\rd\ne");
    let r = env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "c", "new_string": "c1\nc2"}),
        )
        .await;
    ok(&r);
    assert_eq!(env.get("mixed.txt"), b"a\nb\r\nc1\rc2\rd\ne");
    let r = env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "a\nb", "new_string": "AB"}),
        )
        .await;
    ok(&r);
    assert_eq!(env.get("mixed.txt"), b"AB\r\nc1\rc2\rd\ne");
}

#[tokio::test]
async fn edit_replace_all_and_errors() {
    let env = Env::local().await;
    let p = env.put("code.rs", b"let x = 1;\nlet y = x + x;\n");
    let e = err(&env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "x", "new_string": "z"}),
        )
        .await);
    assert_eq!(
        e,
        format!(
            "Error: old_string appears 3 times in {p}. Set replace_all=true to replace all occurrences, or make old_string more specific."
        )
    );
    assert_eq!(
        env.get("code.rs"),
        b"let x = 1;\nlet y = x + x;\n",
        "unchanged"
    );
    let r = env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "x", "new_string": "z", "replace_all": true}),
        )
        .await;
    assert_eq!(
        ok(&r),
        format!("Successfully replaced all 3 occurrences in {p}")
    );
    assert_eq!(r.metadata["occurrences"], json!(3));
    assert_eq!(env.get("code.rs"), b"let z = 1;\nlet y = z + z;\n");

    let e = err(&env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "", "new_string": "z"}),
        )
        .await);
    assert!(e.starts_with("Error: old_string must not be empty"), "{e}");
    let e = err(&env
        .call(
            "Edit",
            json!({"file_path": "code.rs", "old_string": "z", "new_string": "q"}),
        )
        .await);
    assert_eq!(e, "Error: file_path must be an absolute path, got: code.rs");
    let missing = env.p("missing.rs");
    let e = err(&env
        .call(
            "Edit",
            json!({"file_path": missing, "old_string": "z", "new_string": "q"}),
        )
        .await);
    assert_eq!(e, format!("Error: File not found: {missing}"));
    let e = err(&env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "z", "new_string": "z"}),
        )
        .await);
    assert_eq!(
        e,
        "Error: old_string and new_string are identical. No changes to make."
    );
    let e = err(&env
        .call(
            "Edit",
            json!({"file_path": p, "old_string": "nothing", "new_string": "q"}),
        )
        .await);
    assert_eq!(e, format!("Error: old_string not found in {p}"));
    std::fs::create_dir_all(env.p("dir")).unwrap();
    let e = err(&env
        .call(
            "Edit",
            json!({"file_path": env.p("dir"), "old_string": "a", "new_string": "b"}),
        )
        .await);
    assert!(e.starts_with("Error: Path is a directory"), "{e}");
    let e = err(&env
        .call("Edit", json!({"file_path": p, "old_string": "z"}))
        .await);
    assert!(e.starts_with("Invalid arguments for Edit"), "{e}");
    assert_eq!(env.get("code.rs"), b"let z = 1;\nlet y = z + z;\n");
}

#[tokio::test]
async fn edit_through_dot_dot_and_then_read_back() {
    let env = Env::local().await;
    env.put("src/lib.rs", b"fn a() {}\r\n");
    let p = format!("{}/src/../src/./lib.rs", env.wd);
    let r = env
        .call("Edit", json!({"file_path": p, "old_string": "fn a() {}", "new_string": "fn a() {}\nfn b() {}"}))
        .await;
    assert_eq!(
        ok(&r),
        format!(
            "Successfully replaced 1 occurrence in {}",
            env.p("src/lib.rs")
        )
    );
    assert_eq!(env.get("src/lib.rs"), b"fn a() {}\r\nfn b() {}\r\n");
    let r = env.read(json!({"file_path": env.p("src/lib.rs")})).await;
    assert_eq!(ok(&r), numbered(&["fn a() {}", "fn b() {}"]));
}

#[tokio::test]
async fn tool_specs_have_schemas_and_flags() {
    let env = Env::local().await;
    let specs = env.ws.list_tools();
    let find = |n: &str| specs.iter().find(|s| s.name == n).unwrap().clone();
    let read = find("Read");
    assert!(read.read_only);
    assert_eq!(read.input_schema["required"], json!(["file_path"]));
    assert_eq!(
        read.input_schema["properties"]["limit"]["maximum"],
        json!(2000)
    );
    assert_eq!(
        read.input_schema["properties"]["offset"]["minimum"],
        json!(1)
    );
    let write = find("Write");
    assert!(!write.read_only);
    assert_eq!(
        write.input_schema["required"],
        json!(["file_path", "content"])
    );
    let edit = find("Edit");
    assert!(!edit.read_only);
    assert_eq!(
        edit.input_schema["properties"]["old_string"]["minLength"],
        json!(1)
    );
    assert_eq!(
        edit.input_schema["properties"]["replace_all"]["default"],
        json!(false)
    );
    for s in [read, write, edit] {
        assert!(
            s.description.len() > 200,
            "{} has a real description",
            s.name
        );
    }
}
