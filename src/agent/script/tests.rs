use super::*;

#[test]
fn every_shipped_demo_parses() {
    for (name, _) in DEMOS {
        let t = Transcript::demo(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.name, *name);
        assert!(!t.replies().is_empty());
    }
    assert!(
        Transcript::demo("nope")
            .unwrap_err()
            .message
            .contains("explore")
    );
}

#[test]
fn yaml_errors_name_the_line() {
    let e = Transcript::from_yaml("name: x\nsteps:\n  - user: hi\n    bogus: 1\n", "t.yaml")
        .unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.message.contains("bogus"), "{e}");
    let e = Transcript::from_yaml("name: x\nsteps:\n  - assistant: hi\n", "t.yaml").unwrap_err();
    assert!(e.message.contains("before any user message"), "{e}");
}

#[test]
fn jsonl_transcripts_parse_with_line_numbers() {
    let text = r#"{"meta": {"description": "d"}}
{"user": "hello"}
{"assistant": {"text": "look", "tool_calls": [{"name": "Glob", "args": {"pattern": "*"}}]}}
{"assistant": "done"}
"#;
    let t = Transcript::from_jsonl(text, "x.jsonl", "x").unwrap();
    assert_eq!(t.name, "x");
    assert_eq!(t.replies()[0].turns.len(), 2);
    let e =
        Transcript::from_jsonl("{\"user\": \"a\"}\n{\"nope\": 1}\n", "x.jsonl", "x").unwrap_err();
    assert_eq!(e.line, Some(2));
}

#[test]
fn placeholders_expand_and_fail_clearly() {
    let vars = Vars {
        workdir: "/w".into(),
        session: "s".into(),
        session_dir: "/w/sessions/s".into(),
    };
    let mut ids = HashMap::new();
    ids.insert("g".to_string(), "call_1".to_string());
    let mut m = Msg::text("a", "assistant", "");
    m.content
        .push(Block::ToolResult(crate::engine::message::ToolResultBlock {
            id: "call_1".into(),
            name: "Glob".into(),
            output: ToolOutput::Text("Found 2 files\n/w/src/a.rs\n/w/src/b.rs".into()),
            state: "success".into(),
            metadata: Value::Null,
            extra: Map::new(),
        }));
    let mut paths = HashMap::new();
    paths.insert(
        "call_1".to_string(),
        first_path_in_result(&[m], "call_1").unwrap(),
    );
    assert_eq!(
        expand_placeholders("{{workdir}}/x {{first_path:g}}", &vars, &ids, &paths).unwrap(),
        "/w/x /w/src/a.rs"
    );
    assert!(matches!(
        expand_placeholders("{{first_path:zz}}", &vars, &ids, &paths),
        Err(ModelError::Script(m)) if m.contains("zz")
    ));
    assert!(expand_placeholders("{{nope}}", &vars, &ids, &paths).is_err());
}
