//! Offloading and sessions on a copy of the reference workspace: what the
//! reference wrote is listed, what wsbench writes reads back the same way.

use crate::support;

use std::sync::Arc;

use base64::Engine as _;
use sha2::Digest;
use support::{fixture_copy, open};
use wsbench::engine::WorkspaceConfig;
use wsbench::engine::events::OffloadKind;
use wsbench::engine::message::{Block, DataBlock, DataSource, Msg, ToolOutput, ToolResultBlock};

const PNG_SHA: &str = "917aad4aef88aecc230e317ee79eb894a1d10029b849705f0b9fbd028a8e4f91";

#[tokio::test]
async fn fixture_sessions_and_offloads_are_listed() {
    let dir = fixture_copy();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let ids = ws.sessions().ids().await.unwrap();
    assert_eq!(ids, ["s-001", "s-002"]);
    let s1 = ws.sessions().summary("s-001").await.unwrap();
    assert_eq!(s1.offloads, 3);
    let detail = ws.sessions().detail("s-001").await.unwrap();
    let kinds: Vec<_> = detail
        .offloads
        .iter()
        .map(|o| (o.kind, o.path.rsplit('/').next().unwrap().to_string()))
        .collect();
    assert!(kinds.contains(&(OffloadKind::Context, "context.jsonl".into())));
    assert!(kinds.contains(&(
        OffloadKind::ToolResult,
        "tool_result-call_grep_1.txt".into()
    )));
    assert!(kinds.contains(&(
        OffloadKind::ToolResult,
        "tool_result-call_grep_1(1).txt".into()
    )));
    assert!(
        kinds.contains(&(OffloadKind::Data, format!("{PNG_SHA}.png"))),
        "{kinds:?}"
    );
    let s2 = ws.sessions().detail("s-002").await.unwrap();
    assert!(
        s2.offloads.iter().any(|o| o.kind == OffloadKind::Data),
        "s-002 refers to the PNG"
    );
    let ctx = ws.sessions().read_context("s-001").await.unwrap();
    assert_eq!(ctx.messages.len(), 4);
    assert!(ctx.bad_lines.is_empty());
    assert_eq!(
        ctx.messages[0].text_content(),
        "List the Rust files and count the TODOs."
    );
}

#[tokio::test]
async fn offloaded_png_lands_under_the_reference_name() {
    let dir = fixture_copy();
    let png = std::fs::read(dir.path().join(format!("data/{PNG_SHA}.png"))).unwrap();
    std::fs::remove_dir_all(dir.path().join("data")).unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
    let mut msg = Msg::text("user", "user", "Here is a screenshot.");
    msg.content.push(Block::Data(DataBlock {
        id: "d1".into(),
        source: DataSource::Base64 {
            data: b64,
            media_type: "image/png".into(),
        },
        name: Some("shot.png".into()),
        created_at: None,
        finished_at: None,
        extra: Default::default(),
    }));
    let path = ws
        .offload()
        .context("s-003", &[msg.clone(), msg])
        .await
        .unwrap();
    assert!(path.ends_with("sessions/s-003/context.jsonl"));
    let written = std::fs::read(dir.path().join(format!("data/{PNG_SHA}.png"))).unwrap();
    assert_eq!(written, png);
    let ctx = ws.sessions().read_context("s-003").await.unwrap();
    assert_eq!(ctx.messages.len(), 2);
    match &ctx.messages[0].content[1] {
        Block::Data(d) => match &d.source {
            DataSource::Url { url, media_type } => {
                assert_eq!(url, &format!("workspace:///data/{PNG_SHA}.png"));
                assert_eq!(media_type, "image/png");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // Same record shape as the reference's lines: same keys in the same order.
    let ours: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let theirs: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("sessions/s-001/context.jsonl"))
            .unwrap()
            .lines()
            .nth(2)
            .unwrap(),
    )
    .unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&ours), keys(&theirs));
    assert_eq!(keys(&ours["content"][1]), keys(&theirs["content"][1]));
}

#[tokio::test]
async fn tool_result_names_clash_into_numbered_files() {
    let dir = fixture_copy();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let block = ToolResultBlock {
        id: "call_grep_1".into(),
        name: "Grep".into(),
        output: ToolOutput::Text("again".into()),
        state: "success".into(),
        metadata: serde_json::Value::Null,
        extra: Default::default(),
    };
    let p = ws.offload().tool_result("s-001", &block).await.unwrap();
    assert!(p.ends_with("tool_result-call_grep_1(2).txt"), "{p}");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "again");
}

#[tokio::test]
async fn tool_result_with_data_blocks_names_the_url() {
    let dir = fixture_copy();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let png = std::fs::read(dir.path().join(format!("data/{PNG_SHA}.png"))).unwrap();
    let block = ToolResultBlock {
        id: "call_bash_8".into(),
        name: "Bash".into(),
        output: ToolOutput::Blocks(vec![
            Block::Text(wsbench::engine::message::TextBlock::new(
                "exit code 0\nhello\n",
            )),
            Block::Data(DataBlock {
                id: "d".into(),
                source: DataSource::Base64 {
                    data: base64::engine::general_purpose::STANDARD.encode(&png),
                    media_type: "image/png".into(),
                },
                name: Some("shot.png".into()),
                created_at: None,
                finished_at: None,
                extra: Default::default(),
            }),
        ]),
        state: "success".into(),
        metadata: serde_json::Value::Null,
        extra: Default::default(),
    };
    let p = ws.offload().tool_result("s-002", &block).await.unwrap();
    let ours = std::fs::read_to_string(&p).unwrap();
    let theirs = std::fs::read_to_string(
        dir.path()
            .join("sessions/s-002/tool_result-call_bash_7.txt"),
    )
    .unwrap();
    assert_eq!(ours, theirs, "same text format as the reference");
}

#[tokio::test]
async fn fifty_sessions_offloading_at_once_lose_and_interleave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let mut tasks = Vec::new();
    for i in 0..50 {
        let ws = Arc::clone(&ws);
        tasks.push(tokio::spawn(async move {
            let big = "x".repeat(100_000 + i);
            for round in 0..4 {
                let msgs = vec![Msg::text("u", "user", format!("{i}-{round}-{big}")); 3];
                // All sessions share one file here on purpose, to race appends.
                ws.offload().context("shared", &msgs).await.unwrap();
                ws.offload()
                    .context(&format!("s{i}"), &msgs[..1])
                    .await
                    .unwrap();
            }
            let block = ToolResultBlock {
                id: "same".into(),
                name: "Bash".into(),
                output: ToolOutput::Text(format!("result {i}")),
                state: "success".into(),
                metadata: serde_json::Value::Null,
                extra: Default::default(),
            };
            ws.offload().tool_result("shared", &block).await.unwrap()
        }));
    }
    let mut paths = std::collections::HashSet::new();
    for t in tasks {
        assert!(paths.insert(t.await.unwrap()), "two writers got one name");
    }
    assert_eq!(paths.len(), 50);
    let ctx = ws.sessions().read_context("shared").await.unwrap();
    assert!(
        ctx.bad_lines.is_empty(),
        "interleaved lines: {:?}",
        &ctx.bad_lines[..1]
    );
    assert_eq!(ctx.messages.len(), 50 * 4 * 3);
    for i in 0..50 {
        assert_eq!(
            ws.sessions()
                .read_context(&format!("s{i}"))
                .await
                .unwrap()
                .messages
                .len(),
            4
        );
    }
    // Each path's content is its own writer's.
    let mut contents: Vec<String> = paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    contents.sort();
    contents.dedup();
    assert_eq!(contents.len(), 50);
}

#[tokio::test]
async fn data_blobs_are_deduplicated() {
    let dir = tempfile::tempdir().unwrap();
    let ws = open(dir.path(), WorkspaceConfig::default()).await;
    let block = DataBlock {
        id: "a".into(),
        source: DataSource::Base64 {
            data: "aGVsbG8=".into(),
            media_type: "text/plain".into(),
        },
        name: None,
        created_at: None,
        finished_at: None,
        extra: Default::default(),
    };
    let a = ws.offload().data(&block).await.unwrap();
    let b = ws.offload().data(&block).await.unwrap();
    assert_eq!(a.source, b.source);
    let sha = hex::encode(sha2::Sha256::digest(b"aGVsbG8="));
    assert_eq!(
        std::fs::read(dir.path().join(format!("data/{sha}.txt"))).unwrap(),
        b"hello"
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("data")).unwrap().count(),
        1
    );
    let bad = DataBlock {
        source: DataSource::Base64 {
            data: "!!!".into(),
            media_type: "image/png".into(),
        },
        ..block
    };
    assert!(
        ws.offload()
            .data(&bad)
            .await
            .unwrap_err()
            .to_string()
            .contains("invalid base64")
    );
}
