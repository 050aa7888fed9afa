use super::*;
use serde_json::json;

const P: &str = "/w/.mcp";

fn http(name: &str) -> Value {
    json!({"name": name, "is_stateful": false,
        "mcp_config": {"type": "http_mcp", "url": "http://127.0.0.1:1/mcp", "headers": null, "timeout": 30.0},
        "enable_tools": null, "disable_tools": null, "execution_timeout": null, "stream_progress": false})
}

fn pretty(v: &Value) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(
        &mut buf,
        serde_json::ser::PrettyFormatter::with_indent(b"  "),
    );
    v.serialize(&mut ser).unwrap();
    String::from_utf8(buf).unwrap()
}

fn parse(v: &Value) -> McpStore {
    McpStore::parse(P, Some(pretty(v).as_bytes()))
}

fn names(decls: &[McpDecl]) -> Vec<&str> {
    decls.iter().map(|d| d.name.as_str()).collect()
}

fn errors(st: &McpStore) -> Vec<&McpIssue> {
    st.issues()
        .iter()
        .filter(|i| i.severity == Severity::Error)
        .collect()
}

#[test]
fn absent_and_empty_files() {
    let st = McpStore::parse(P, None);
    assert!(st.pairs().is_empty() && st.issues().is_empty() && st.save_blocked().is_none());
    let st = McpStore::parse(P, Some(b" \n"));
    assert!(st.pairs().is_empty() && !st.has_errors() && st.save_blocked().is_none());
    assert_eq!(st.issues().len(), 1);
}

#[test]
fn round_trip_is_byte_identical_with_unicode() {
    let mut e = http("docs");
    e["mcp_config"]["headers"] = json!({"X-Team": "équipe ✓", "Z": "a\"b\\c\u{1}"});
    let v =
        json!({"version": 2, "mcps": {"b-agent": {"s2": [e], "s1": []}, "": {"": [http("x")]}}});
    let text = pretty(&v);
    assert!(text.contains("équipe ✓"));
    let st = McpStore::parse(P, Some(text.as_bytes()));
    assert!(st.issues().is_empty(), "{:?}", st.issues());
    assert_eq!(st.to_json(), text);
    assert_eq!(st.specs("b-agent", "s1"), Some(vec![]));
    assert_eq!(st.pairs()[0], ("b-agent".to_string(), "s2".to_string()));
}

#[test]
fn version_one_list_and_bom() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(pretty(&json!([http("a"), http("b")])).as_bytes());
    let st = McpStore::parse(P, Some(&bytes));
    assert!(!st.has_errors());
    assert_eq!(st.pairs(), vec![(String::new(), String::new())]);
    assert_eq!(names(&st.declared("", "", &[])), ["a", "b"]);
    assert!(st.issues()[0].message.contains("version-1"));
    let out: Value = serde_json::from_str(&st.to_json()).unwrap();
    assert_eq!(out["version"], 2);
    assert_eq!(out["mcps"][""][""][1]["name"], "b");
}

#[test]
fn broken_json_reports_position_and_blocks_save() {
    let st = McpStore::parse(P, Some(b"{\n  \"version\": 2,\n  \"mcps\": {,\n}"));
    let e = errors(&st);
    assert_eq!(e.len(), 1);
    assert_eq!((e[0].line, e[0].column), (Some(3), Some(12)));
    assert!(
        e[0].to_string().starts_with("/w/.mcp: invalid JSON"),
        "{}",
        e[0]
    );
    assert!(e[0].to_string().contains("line 3 column 12"), "{}", e[0]);
    assert!(st.save_blocked().is_some());
    assert!(st.pairs().is_empty());
}

#[test]
fn wrong_shapes_are_reported_and_block_save() {
    for (v, what) in [
        (json!("hello"), "top level is a string"),
        (
            json!({"version": 3, "mcps": {"a": {"s": [http("x")]}}}),
            "unsupported version 3",
        ),
        (
            json!({"version": 2, "mcps": [http("x")]}),
            "`mcps` is a list",
        ),
        (
            json!({"version": 2, "mcps": {"a": [http("x")], "b": {"s": [http("y")]}}}),
            "expected an object of sessions",
        ),
        (
            json!({"version": 2, "mcps": {"a": {"s": {"x": 1}, "t": [http("y")]}}}),
            "expected a list",
        ),
    ] {
        let st = parse(&v);
        let e = errors(&st);
        assert_eq!(e.len(), 1, "{v}: {:?}", st.issues());
        assert!(e[0].message.contains(what), "{}", e[0]);
        assert!(st.save_blocked().is_some(), "{v}");
    }
    // The parts that fit still load.
    let st = parse(&json!({"version": 3, "mcps": {"a": {"s": [http("x")]}}}));
    assert_eq!(names(&st.declared("a", "s", &[])), ["x"]);
    assert!(errors(&st)[0].to_string().contains('3'));
    let st = parse(&json!({"version": 2, "mcps": {"a": [1], "b": {"s": [http("y")]}}}));
    assert_eq!(errors(&st)[0].location.as_deref(), Some("mcps[\"a\"]"));
    assert_eq!(names(&st.declared("b", "s", &[])), ["y"]);
}

#[test]
fn bad_entries_are_skipped_named_and_kept() {
    let mut no_cmd = json!({"name": "a", "is_stateful": true,
        "mcp_config": {"type": "stdio_mcp", "args": []}});
    let v =
        json!({"version": 2, "mcps": {"coder": {"s": [no_cmd.clone(), http("b"), http("b"), 7]}}});
    let mut st = parse(&v);
    let e = errors(&st);
    assert_eq!(e.len(), 3, "{:?}", st.issues());
    assert_eq!(e[0].location.as_deref(), Some("mcps[\"coder\"][\"s\"][0]"));
    assert_eq!((e[0].index, e[0].name.as_deref()), (Some(0), Some("a")));
    assert_eq!(e[0].field.as_deref(), Some("mcp_config.command"));
    assert!(
        e[0].to_string().contains("missing field `command`"),
        "{}",
        e[0]
    );
    assert_eq!((e[1].index, e[1].field.as_deref()), (Some(2), Some("name")));
    assert_eq!((e[2].index, e[2].name.as_deref()), (Some(3), None));
    assert!(st.save_blocked().is_none());
    assert_eq!(names(&st.declared("coder", "s", &[])), ["b"]);
    // Written back verbatim, in place.
    assert_eq!(st.to_json(), pretty(&v));
    // Re-adding the broken name replaces it where it was.
    no_cmd["mcp_config"]["command"] = json!("srv");
    st.add("coder", "s", McpDecl::from_value(&no_cmd).unwrap(), &[])
        .unwrap();
    let out: Value = serde_json::from_str(&st.to_json()).unwrap();
    assert_eq!(out["mcps"]["coder"]["s"][0]["mcp_config"]["command"], "srv");
    assert_eq!(out["mcps"]["coder"]["s"].as_array().unwrap().len(), 4);
    // Removing by name reaches a kept duplicate once the valid one is gone.
    assert!(st.remove("coder", "s", "b", &[]));
    assert!(st.remove("coder", "s", "b", &[]));
    assert!(!st.remove("coder", "s", "b", &[]));
}

#[test]
fn unknown_keys_are_kept_with_warnings() {
    let mut e = http("x");
    e["oauth"] = json!(null);
    let v = json!({"version": 2, "mcps": {"a": {"s": [e]}}, "comment": "mine"});
    let st = parse(&v);
    assert!(!st.has_errors());
    assert_eq!(st.issues().len(), 2, "{:?}", st.issues());
    assert_eq!(st.to_json(), pretty(&v));
    let st = parse(&json!({"mcps": {}}));
    assert!(!st.has_errors() && st.save_blocked().is_none());
}

#[test]
fn add_remove_purge_follow_the_reference() {
    let d1 = McpDecl::from_value(&http("d1")).unwrap();
    let d2 = McpDecl::from_value(&http("d2")).unwrap();
    let defaults = vec![d1.clone(), d2.clone()];
    let mut st = McpStore::parse(P, None);
    assert_eq!(names(&st.declared("a", "s", &defaults)), ["d1", "d2"]);
    // Unknown name: nothing materialised.
    assert!(!st.remove("a", "s", "nope", &defaults));
    assert!(st.pairs().is_empty());
    // Removing a default materialises the rest.
    assert!(st.remove("a", "s", "d1", &defaults));
    assert_eq!(
        st.specs("a", "s").map(|v| names(&v).join(",")),
        Some("d2".into())
    );
    assert!(st.remove("a", "s", "d2", &defaults));
    assert_eq!(st.specs("a", "s"), Some(vec![]), "explicitly none");
    assert!(st.declared("a", "s", &defaults).is_empty());
    // Add on a fresh pair: defaults + new.
    let n = McpDecl::stdio("new", "srv", vec![]);
    st.add("b", "t", n.clone(), &defaults).unwrap();
    assert_eq!(
        names(&st.declared("b", "t", &defaults)),
        ["d1", "d2", "new"]
    );
    let dup = st.add("b", "t", McpDecl::http("d1", "http://h", false), &defaults);
    assert!(
        matches!(dup, Err(McpStoreError::Duplicate { .. })),
        "{dup:?}"
    );
    let dup = st.add("c", "u", McpDecl::http("d2", "http://h", false), &defaults);
    assert!(matches!(dup, Err(McpStoreError::Duplicate { .. })));
    assert!(st.specs("c", "u").is_none(), "nothing changes on error");
    let bad = st.add("b", "t", McpDecl::http("x y", "http://h", false), &defaults);
    assert!(matches!(bad, Err(McpStoreError::Invalid { .. })));
    assert_eq!(st.pairs().len(), 2);
    assert!(st.purge_session("a", "s"));
    assert!(!st.purge_session("a", "s"));
    assert_eq!(names(&st.declared("a", "s", &defaults)), ["d1", "d2"]);
    // A purged then re-created pair goes last, like a Python dict.
    st.add("a", "s", n, &[]).unwrap();
    assert_eq!(st.pairs()[1], ("a".to_string(), "s".to_string()));
}

#[test]
fn issue_display_names_everything() {
    let st = parse(&json!({"version": 2, "mcps": {"coder": {"s-001": [
        {"name": "bad", "is_stateful": true, "mcp_config": {"type": "stdio_mcp"}}]}}}));
    assert_eq!(
        st.issues()[0].to_string(),
        "/w/.mcp: mcps[\"coder\"][\"s-001\"][0] (name \"bad\"), field `mcp_config.command`: \
         missing field `command`; this entry is skipped (and kept in the file)"
    );
}
