//! `.mcp` declarations on a copy of the reference workspace (contract
//! §2.1, §5.2; case C07), through `LocalSandbox` + `Workspace::open`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wsbench::backend::Sandbox;
use wsbench::backend::local::LocalSandbox;
use wsbench::engine::events::{Event, Received};
use wsbench::engine::mcp::{
    McpConfig, McpDecl, McpStore, McpStoreError, McpTransport, Severity, StrMap,
};
use wsbench::engine::{EventBus, Workspace, WorkspaceConfig};

/// The vendored reference workspace (`tests/fixtures/`).
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/reference-workspace"
);

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            // Plain write: the fixture is read-only, the copy must not be.
            std::fs::write(&target, std::fs::read(entry.path()).unwrap()).unwrap();
        }
    }
}

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    ws: Arc<Workspace>,
    bus: EventBus,
}

impl Fixture {
    /// A temp copy of the reference workspace, optionally with `.mcp`
    /// replaced by `mcp` (`Some(None)` removes it).
    async fn new(mcp: Option<Option<&[u8]>>) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ws");
        copy_dir(Path::new(FIXTURE), &dir);
        match mcp {
            None => {}
            Some(None) => std::fs::remove_file(dir.join(".mcp")).unwrap(),
            Some(Some(bytes)) => std::fs::write(dir.join(".mcp"), bytes).unwrap(),
        }
        let sandbox: Arc<dyn Sandbox> = Arc::new(LocalSandbox::open(&dir).unwrap());
        let bus = EventBus::default();
        let ws = Workspace::open(sandbox, WorkspaceConfig::default(), bus.clone())
            .await
            .unwrap();
        Fixture {
            _tmp: tmp,
            dir,
            ws,
            bus,
        }
    }

    fn mcp_bytes(&self) -> Vec<u8> {
        std::fs::read(self.dir.join(".mcp")).unwrap()
    }

    fn mcp_sha(&self) -> String {
        hex::encode(Sha256::digest(self.mcp_bytes()))
    }

    async fn load(&self) -> McpStore {
        self.ws.mcp().load_store().await.unwrap()
    }

    async fn save(&self, store: &mut McpStore) -> Result<(), McpStoreError> {
        store
            .save(self.ws.sandbox().as_ref(), self.ws.layout())
            .await
    }

    fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("tmp"))
            .collect()
    }
}

fn names(decls: &[McpDecl]) -> Vec<&str> {
    decls.iter().map(|d| d.name.as_str()).collect()
}

fn errors(store: &McpStore) -> Vec<&wsbench::engine::mcp::McpIssue> {
    store
        .issues()
        .iter()
        .filter(|i| i.severity == Severity::Error)
        .collect()
}

#[tokio::test]
async fn fixture_loads_every_declaration() {
    let fx = Fixture::new(None).await;
    let store = fx.load().await;
    assert!(store.issues().is_empty(), "{:?}", store.issues());
    assert_eq!(
        store.pairs(),
        vec![
            ("coder".to_string(), "s-001".to_string()),
            ("coder".to_string(), "s-002".to_string())
        ]
    );
    let s1 = store.declared("coder", "s-001", &[]);
    assert_eq!(names(&s1), ["docs", "everything"]);
    assert_eq!(s1[0].transport(), McpTransport::StreamableHttp);
    assert!(!s1[0].is_stateful);
    let McpConfig::Http(http) = &s1[0].mcp_config else {
        panic!("docs is http")
    };
    assert_eq!(http.url, "http://127.0.0.1:8931/mcp");
    assert_eq!(
        http.headers.as_ref().and_then(|h| h.get("X-Team")),
        Some("demo")
    );
    assert_eq!(http.timeout, Some(30.0));
    let McpConfig::Stdio(stdio) = &s1[1].mcp_config else {
        panic!("everything is stdio")
    };
    assert_eq!(stdio.command, "mcp-server-everything");
    assert_eq!(stdio.args.as_deref(), Some(&["stdio".to_string()][..]));
    assert_eq!(
        stdio.env.as_ref().and_then(|e| e.get("LOG_LEVEL")),
        Some("warn")
    );
    assert_eq!(names(&store.declared("coder", "s-002", &[])), ["search"]);
    // A pair of its own never falls back to the defaults...
    let default = McpDecl::http("dflt", "http://127.0.0.1:1/mcp", false);
    assert_eq!(
        names(&store.declared("coder", "s-002", std::slice::from_ref(&default))),
        ["search"]
    );
    // ...and a pair without one always does.
    assert_eq!(
        names(&store.declared("reviewer", "s-001", &[default])),
        ["dflt"]
    );
}

#[tokio::test]
async fn fixture_round_trips_byte_for_byte() {
    let fx = Fixture::new(None).await;
    let original = fx.mcp_bytes();
    let mut store = fx.load().await;
    assert_eq!(store.to_json().as_bytes(), &original[..]);
    let a: Value = serde_json::from_slice(&original).unwrap();
    let b: Value = serde_json::from_str(&store.to_json()).unwrap();
    assert_eq!(a, b);
    // A real rewrite (the file is removed first, so the save cannot skip
    // an unchanged write) gives the same bytes.
    std::fs::remove_file(fx.dir.join(".mcp")).unwrap();
    let mut fresh = McpStore::parse(store.path().to_string(), None);
    for (agent, session) in store.pairs() {
        for decl in store.specs(&agent, &session).unwrap() {
            fresh.add(&agent, &session, decl, &[]).unwrap();
        }
    }
    fx.save(&mut fresh).await.unwrap();
    assert_eq!(fx.mcp_bytes(), original);
    // The file was replaced by identical bytes: the loaded store still
    // recognises it, and saving it changes nothing.
    fx.save(&mut store).await.unwrap();
    assert_eq!(fx.mcp_bytes(), original);
    assert!(fx.leftovers().is_empty(), "{:?}", fx.leftovers());
}

#[tokio::test]
async fn absent_file_is_empty_and_is_not_created_by_reading() {
    let fx = Fixture::new(Some(None)).await;
    let store = fx.load().await;
    assert!(store.pairs().is_empty() && store.issues().is_empty());
    assert!(!fx.dir.join(".mcp").exists());
}

#[tokio::test]
async fn version_one_list_loads_under_empty_ids_and_saves_as_version_two() {
    let list = json!([{
        "name": "legacy", "is_stateful": true,
        "mcp_config": {"type": "stdio_mcp", "command": "srv"}
    }]);
    let fx = Fixture::new(Some(Some(list.to_string().as_bytes()))).await;
    let before = fx.mcp_sha();
    let mut store = fx.load().await;
    assert!(!store.has_errors(), "{:?}", store.issues());
    assert_eq!(store.pairs(), vec![(String::new(), String::new())]);
    assert_eq!(names(&store.declared("", "", &[])), ["legacy"]);
    assert_eq!(fx.mcp_sha(), before, "reading never rewrites");
    fx.save(&mut store).await.unwrap();
    let saved: Value = serde_json::from_slice(&fx.mcp_bytes()).unwrap();
    assert_eq!(saved["version"], 2);
    assert_eq!(saved["mcps"][""][""][0]["name"], "legacy");
    assert_eq!(
        saved["mcps"][""][""][0]["mcp_config"]["encoding_error_handler"],
        "strict"
    );
}

#[tokio::test]
async fn leading_bom_is_accepted() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(Path::new(FIXTURE).join(".mcp")).unwrap());
    let fx = Fixture::new(Some(Some(&bytes))).await;
    let store = fx.load().await;
    assert!(store.issues().is_empty(), "{:?}", store.issues());
    assert_eq!(
        names(&store.declared("coder", "s-001", &[])),
        ["docs", "everything"]
    );
    assert_eq!(fx.mcp_bytes(), bytes);
}

#[tokio::test]
async fn broken_json_is_reported_with_position_and_never_clobbered() {
    let mut text = std::fs::read_to_string(Path::new(FIXTURE).join(".mcp")).unwrap();
    // A hand edit with a typo: a missing comma after `"version": 2`.
    text = text.replacen("\"version\": 2,", "\"version\": 2", 1);
    let fx = Fixture::new(Some(Some(text.as_bytes()))).await;
    let before = fx.mcp_sha();
    let mut events = fx.bus.subscribe();
    let mut store = fx.load().await;
    let errs = errors(&store);
    assert_eq!(errs.len(), 1, "{:?}", store.issues());
    assert_eq!((errs[0].line, errs[0].column), (Some(3), Some(3)));
    let shown = errs[0].to_string();
    assert!(
        shown.contains(".mcp") && shown.contains("line 3 column 3"),
        "{shown}"
    );
    assert!(store.pairs().is_empty());
    // The error went out on the bus too.
    match events.try_recv() {
        Some(Received::Event(env)) => match env.event {
            Event::Log {
                level,
                source,
                message,
            } => {
                assert_eq!((level.as_str(), source.as_str()), ("error", "mcp"));
                assert!(message.contains("line 3 column 3"), "{message}");
            }
            other => panic!("unexpected event {other:?}"),
        },
        other => panic!("no log event: {other:?}"),
    }
    // Changing memory is allowed; writing is not.
    store
        .add(
            "coder",
            "s-009",
            McpDecl::http("new", "https://x/mcp", false),
            &[],
        )
        .unwrap();
    let err = fx.save(&mut store).await.unwrap_err();
    assert!(matches!(err, McpStoreError::SaveBlocked { .. }), "{err}");
    assert!(err.to_string().contains("fix the file"), "{err}");
    assert_eq!(fx.mcp_sha(), before);
    assert_eq!(fx.mcp_bytes(), text.as_bytes());
}

#[tokio::test]
async fn unknown_version_is_named_loaded_where_it_fits_and_not_rewritten() {
    let text = std::fs::read_to_string(Path::new(FIXTURE).join(".mcp"))
        .unwrap()
        .replacen("\"version\": 2", "\"version\": 7", 1);
    let fx = Fixture::new(Some(Some(text.as_bytes()))).await;
    let before = fx.mcp_sha();
    let mut store = fx.load().await;
    let errs = errors(&store);
    assert_eq!(errs.len(), 1, "{:?}", store.issues());
    assert!(
        errs[0].message.contains("unsupported version 7"),
        "{}",
        errs[0]
    );
    assert_eq!(names(&store.declared("coder", "s-002", &[])), ["search"]);
    assert!(store.save_blocked().is_some());
    assert!(matches!(
        fx.save(&mut store).await,
        Err(McpStoreError::SaveBlocked { .. })
    ));
    assert_eq!(fx.mcp_sha(), before);
}

/// C07: one bad entry must not stop the others, nor the workspace.
#[tokio::test]
async fn c07_one_bad_entry_is_reported_alone() {
    let mcp = json!({"version": 2, "mcps": {"coder": {"s-001": [
        {"name": "no-command", "is_stateful": true,
         "mcp_config": {"type": "stdio_mcp", "args": ["x"]}},
        {"name": "missing-binary", "is_stateful": true,
         "mcp_config": {"type": "stdio_mcp", "command": "/nonexistent/bin/server"}},
        {"name": "everything", "is_stateful": true,
         "mcp_config": {"type": "stdio_mcp", "command": "mcp-server-everything",
                        "args": ["stdio"]}}
    ]}}});
    let bytes = serde_json::to_vec_pretty(&mcp).unwrap();
    let before = hex::encode(Sha256::digest(&bytes));
    let fx = Fixture::new(Some(Some(&bytes))).await;
    assert!(
        fx.ws.is_alive(),
        "the workspace opens despite the bad entry"
    );
    let mut store = fx.load().await;
    let errs = errors(&store);
    assert_eq!(errs.len(), 1, "{:?}", store.issues());
    let e = errs[0];
    assert_eq!(e.agent.as_deref(), Some("coder"));
    assert_eq!(e.session.as_deref(), Some("s-001"));
    assert_eq!(e.index, Some(0));
    assert_eq!(e.name.as_deref(), Some("no-command"));
    assert_eq!(e.field.as_deref(), Some("mcp_config.command"));
    let shown = e.to_string();
    assert!(
        shown.contains("missing field `command`") && shown.contains("no-command"),
        "{shown}"
    );
    assert_eq!(
        names(&store.declared("coder", "s-001", &[])),
        ["missing-binary", "everything"]
    );
    assert_eq!(fx.mcp_sha(), before, "loading leaves .mcp untouched");

    // Changing another pair and saving keeps the bad entry in the file,
    // verbatim and where it was; the good ones are written in full form
    // (defaults filled in), as the reference writes them.
    store
        .add(
            "coder",
            "s-002",
            McpDecl::http("docs", "http://127.0.0.1:8931/mcp", false),
            &[],
        )
        .unwrap();
    fx.save(&mut store).await.unwrap();
    let saved: Value = serde_json::from_slice(&fx.mcp_bytes()).unwrap();
    let s1 = &saved["mcps"]["coder"]["s-001"];
    assert_eq!(s1[0], mcp["mcps"]["coder"]["s-001"][0]);
    assert_eq!(s1[1]["name"], "missing-binary");
    assert_eq!(s1[1]["mcp_config"]["encoding_error_handler"], "strict");
    assert_eq!(s1[2]["name"], "everything");
    assert_eq!(saved["mcps"]["coder"]["s-002"][0]["name"], "docs");
}

#[tokio::test]
async fn add_remove_purge_persist_atomically_and_reload() {
    let fx = Fixture::new(None).await;
    let defaults = vec![McpDecl::http("dflt", "http://127.0.0.1:1/sse", false)];
    assert_eq!(defaults[0].transport(), McpTransport::Sse);

    let mut store = fx.load().await;
    let mut decl = McpDecl::stdio("files", "mcp-server-filesystem", vec!["/tmp".into()]);
    decl.enable_tools = Some(vec!["read_file".into()]);
    store.add("reviewer", "s-003", decl, &defaults).unwrap();
    fx.save(&mut store).await.unwrap();
    let reloaded = fx.load().await;
    assert!(reloaded.issues().is_empty(), "{:?}", reloaded.issues());
    assert_eq!(
        names(&reloaded.declared("reviewer", "s-003", &defaults)),
        ["dflt", "files"]
    );
    assert_eq!(
        reloaded.declared("reviewer", "s-003", &defaults)[1].enable_tools,
        Some(vec!["read_file".to_string()])
    );
    assert_eq!(reloaded.pairs().len(), 3);

    // Removing the last one leaves an explicit empty list on disk.
    assert!(store.remove("coder", "s-002", "search", &defaults));
    assert!(!store.remove("coder", "s-002", "search", &defaults));
    fx.save(&mut store).await.unwrap();
    let saved: Value = serde_json::from_slice(&fx.mcp_bytes()).unwrap();
    assert_eq!(saved["mcps"]["coder"]["s-002"], json!([]));
    let reloaded = fx.load().await;
    assert!(reloaded.declared("coder", "s-002", &defaults).is_empty());

    // Purge forgets the pair: it inherits the defaults again.
    assert!(store.purge_session("coder", "s-001"));
    fx.save(&mut store).await.unwrap();
    let reloaded = fx.load().await;
    assert_eq!(
        names(&reloaded.declared("coder", "s-001", &defaults)),
        ["dflt"]
    );
    assert_eq!(
        reloaded.pairs(),
        vec![
            ("coder".to_string(), "s-002".to_string()),
            ("reviewer".to_string(), "s-003".to_string())
        ]
    );
    assert!(fx.leftovers().is_empty(), "{:?}", fx.leftovers());
}

#[tokio::test]
async fn duplicate_name_is_refused_and_nothing_is_written() {
    let fx = Fixture::new(None).await;
    let before = fx.mcp_sha();
    let mut store = fx.load().await;
    let err = store
        .add(
            "coder",
            "s-001",
            McpDecl::http("docs", "http://127.0.0.1:2/mcp", false),
            &[],
        )
        .unwrap_err();
    assert!(matches!(err, McpStoreError::Duplicate { .. }), "{err}");
    assert!(err.to_string().contains("`docs`"), "{err}");
    assert_eq!(
        names(&store.declared("coder", "s-001", &[])),
        ["docs", "everything"]
    );
    fx.save(&mut store).await.unwrap();
    assert_eq!(fx.mcp_sha(), before);
}

#[tokio::test]
async fn concurrent_hand_edit_is_not_overwritten() {
    let fx = Fixture::new(None).await;
    let mut store = fx.load().await;
    store.purge_session("coder", "s-002");
    let edited = String::from_utf8(fx.mcp_bytes())
        .unwrap()
        .replace("\"X-Team\": \"demo\"", "\"X-Team\": \"edited\"");
    std::fs::write(fx.dir.join(".mcp"), &edited).unwrap();
    let err = fx.save(&mut store).await.unwrap_err();
    assert!(matches!(err, McpStoreError::ChangedOnDisk { .. }), "{err}");
    assert_eq!(fx.mcp_bytes(), edited.as_bytes());
}

#[tokio::test]
async fn secrets_stay_as_references_in_the_file() {
    let fx = Fixture::new(None).await;
    let mut store = fx.load().await;
    let mut decl = McpDecl::http("api", "https://127.0.0.1:9/mcp", false);
    if let McpConfig::Http(c) = &mut decl.mcp_config {
        c.headers = Some(StrMap::from_iter([
            ("Authorization", "Bearer ${WSBENCH_TEST_SURELY_UNSET_TOKEN}"),
            ("X-Path", "${PATH}"),
            ("X-Price", "$$5"),
        ]));
    }
    store.add("coder", "s-001", decl, &[]).unwrap();
    fx.save(&mut store).await.unwrap();
    let text = String::from_utf8(fx.mcp_bytes()).unwrap();
    assert!(
        text.contains("\"Bearer ${WSBENCH_TEST_SURELY_UNSET_TOKEN}\""),
        "{text}"
    );

    let reloaded = fx.load().await;
    let api = reloaded
        .declared("coder", "s-001", &[])
        .into_iter()
        .find(|d| d.name == "api")
        .unwrap();
    assert_eq!(
        api.referenced_vars(),
        vec!["WSBENCH_TEST_SURELY_UNSET_TOKEN", "PATH"]
    );
    let err = api.resolved().unwrap_err();
    assert_eq!(
        err.field.as_deref(),
        Some("mcp_config.headers.Authorization")
    );
    assert!(
        err.message.contains("WSBENCH_TEST_SURELY_UNSET_TOKEN"),
        "{err}"
    );
    let ok = api
        .resolved_with(|k| match k {
            "PATH" => Some("/bin".to_string()),
            _ => Some("t0k".to_string()),
        })
        .unwrap();
    let McpConfig::Http(c) = &ok.mcp_config else {
        panic!("api is http")
    };
    let headers = c.headers.as_ref().unwrap();
    assert_eq!(headers.get("Authorization"), Some("Bearer t0k"));
    assert_eq!(headers.get("X-Path"), Some("/bin"));
    assert_eq!(headers.get("X-Price"), Some("$5"));
    // With the real environment, a set variable expands.
    let mut path_only = api.clone();
    if let McpConfig::Http(c) = &mut path_only.mcp_config {
        c.headers = Some(StrMap::from_iter([("X-Path", "${PATH}")]));
    }
    let resolved = path_only.resolved().unwrap();
    let McpConfig::Http(c) = &resolved.mcp_config else {
        panic!()
    };
    assert_eq!(
        c.headers.as_ref().unwrap().get("X-Path"),
        std::env::var("PATH").ok().as_deref()
    );
}
