use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::engine::timeline::{RowKind, Source, TimelineRow};

fn msg(v: serde_json::Value) -> Msg {
    serde_json::from_value(v).unwrap()
}

fn report() -> Report {
    let mut call = TimelineRow::new(RowKind::ToolCall, Source::Context);
    call.at = Some("2026-12-06T04:00:00.000001".into());
    call.tool = Some("Bash".into());
    call.state = Some("success".into());
    call.duration_ms = Some(1000);
    call.args = "command=echo a|b".into();
    let mut turn = TimelineRow::new(RowKind::Turn, Source::AgentLog);
    turn.tokens = Some(1200);
    let mut images = BTreeMap::new();
    images.insert(
        "workspace:///data/p.png".to_string(),
        Image {
            bytes: Ok(b"\x89PNG-bytes".to_vec()),
            media_type: "image/png".into(),
        },
    );
    images.insert(
        "workspace:///data/big.png".to_string(),
        Image {
            bytes: Err("3000000 bytes, over the limit".into()),
            media_type: "image/png".into(),
        },
    );
    Report {
        session: "s<1>".into(),
        workdir: "/w".into(),
        timeline: Timeline {
            session: "s<1>".into(),
            rows: vec![turn, call],
            tool_calls: 1,
            errors: 0,
            notes: vec![],
        },
        offloaded: ContextRead::default(),
        summary: Some("the summary".into()),
        live: vec![
            msg(json!({"name": "coder", "role": "assistant", "id": "m1",
            "created_at": "2026-12-06T04:00:00.000001",
            "content": [
                {"type": "text", "text": "Looking <b>now</b>."},
                {"type": "tool_call", "id": "c1", "name": "Bash", "input": "{\"command\":\"ls\"}"},
                {"type": "hint", "hint": [{"type": "text", "text": "see the picture"},
                    {"type": "data", "source": {"type": "url", "url": "workspace:///data/p.png", "media_type": "image/png"}}]}
            ]})),
            msg(json!({"name": "tools", "role": "user", "id": "m2",
            "created_at": "2026-12-06T04:00:01.000002",
            "content": [
                {"type": "tool_result", "id": "c1", "name": "Bash", "state": "success",
                 "output": "</pre><script>alert(1)</script>\n```\nline 3"},
                {"type": "data", "name": "p.png", "source": {"type": "url", "url": "workspace:///data/p.png", "media_type": "image/png"}},
                {"type": "data", "name": "big.png", "source": {"type": "url", "url": "workspace:///data/big.png", "media_type": "image/png"}},
                {"type": "text", "text": "x".repeat(TEXT_BYTES + 10)}
            ]})),
        ],
        images,
        notes: vec!["agent.jsonl: 5 bytes left unread".into()],
    }
}

#[test]
fn html_escapes_everything_the_workspace_wrote_and_embeds_images() {
    let h = render(&report(), Format::Html);
    assert!(h.starts_with("<!DOCTYPE html>"), "{h}");
    assert!(!h.contains("<script>"), "{h}");
    assert!(
        h.contains("&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{h}"
    );
    assert!(
        h.contains("<title>wsbench session s&lt;1&gt;</title>"),
        "{h}"
    );
    assert!(h.contains("Looking &lt;b&gt;now&lt;/b&gt;."), "{h}");
    // Folded result with its size; the image embedded; the big one linked.
    assert!(
        h.contains("<details><summary>Bash result · success · 3 lines, "),
        "{h}"
    );
    assert!(
        h.contains("src=\"data:image/png;base64,iVBORy1ieXRlcw==\""),
        "{h}"
    );
    assert!(
        h.contains("[big.png: workspace:///data/big.png] (3000000 bytes, over the limit)"),
        "{h}"
    );
    // Hint as text with its data link, not raw JSON.
    assert!(
        h.contains("hint: see the picture\n[workspace:///data/p.png]"),
        "{h}"
    );
    assert!(h.contains("10 more bytes not shown in this report"), "{h}");
    assert!(h.contains("<svg") && h.contains("~1200 tokens"), "{h}");
    assert!(h.contains("<blockquote>the summary</blockquote>"), "{h}");
    assert!(h.contains("agent.jsonl: 5 bytes left unread"), "{h}");
    assert_balanced(&h);
}

#[test]
fn markdown_fences_code_longer_than_its_backticks_and_escapes_cells() {
    let m = render(&report(), Format::Md);
    assert!(m.starts_with("# Session s&lt;1&gt;\n"), "{m}");
    assert!(m.contains("| command=echo a\\|b |"), "{m}");
    // The result holds a ``` run: its fence is longer, and inside a fence
    // Markdown shows HTML as text, so it is kept as written there only.
    assert!(
        m.contains("````text\n</pre><script>alert(1)</script>\n```\nline 3\n````"),
        "{m}"
    );
    assert_eq!(m.matches("<script>").count(), 1, "{m}");
    assert!(
        m.contains("![p.png](data:image/png;base64,iVBORy1ieXRlcw==)"),
        "{m}"
    );
    assert!(
        m.contains("Estimated request tokens per turn: █ (highest ~1200)"),
        "{m}"
    );
    assert!(m.contains("> the summary"), "{m}");
}

/// Every opened element of the page is closed in order (void ones
/// aside): the page is well-formed enough for any browser to agree.
pub(crate) fn assert_balanced(h: &str) {
    const VOID: &[&str] = &["meta", "img", "!doctype"];
    let mut stack: Vec<String> = Vec::new();
    let mut rest = h;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').expect("an unclosed tag");
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '>')
            .collect::<String>()
            .to_ascii_lowercase();
        if VOID.contains(&name.as_str()) || tag.ends_with('/') {
            continue;
        }
        if closing {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.as_str()),
                "closing {name}"
            );
        } else {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "left open: {stack:?}");
}
