use super::*;
use serde_json::json;

fn http_entry() -> Value {
    json!({
        "name": "docs",
        "is_stateful": false,
        "mcp_config": {
            "type": "http_mcp",
            "url": "http://127.0.0.1:8931/mcp",
            "headers": {"X-Team": "demo", "A": "b"},
            "timeout": 30.0
        },
        "enable_tools": null,
        "disable_tools": null,
        "execution_timeout": null,
        "stream_progress": false
    })
}

fn stdio_entry() -> Value {
    json!({
        "name": "everything",
        "is_stateful": true,
        "mcp_config": {
            "type": "stdio_mcp",
            "command": "mcp-server-everything",
            "args": ["stdio"],
            "env": {"LOG_LEVEL": "warn"},
            "cwd": null,
            "encoding_error_handler": "strict"
        },
        "enable_tools": null,
        "disable_tools": null,
        "execution_timeout": null,
        "stream_progress": false
    })
}

fn err_of(v: Value) -> DeclError {
    McpDecl::from_value(&v).expect_err("should be rejected")
}

#[test]
fn round_trips_both_kinds_with_field_order() {
    for v in [http_entry(), stdio_entry()] {
        let decl = McpDecl::from_value(&v).unwrap();
        let back = serde_json::to_string_pretty(&decl).unwrap();
        assert_eq!(back, serde_json::to_string_pretty(&v).unwrap());
    }
}

#[test]
fn defaults_fill_absent_fields_and_float_stays_float() {
    let v = json!({"name": "h", "is_stateful": true, "mcp_config": {"type": "http_mcp", "url": "https://x/mcp"}});
    let decl = McpDecl::from_value(&v).unwrap();
    let McpConfig::Http(cfg) = &decl.mcp_config else {
        panic!()
    };
    assert_eq!(cfg.timeout, Some(30.0));
    assert!(!decl.stream_progress);
    let text = serde_json::to_string(&decl).unwrap();
    assert!(text.contains(r#""timeout":30.0"#), "{text}");
    // An integer timeout is read as a float and written as one.
    let v = json!({"name": "h", "is_stateful": true,
        "mcp_config": {"type": "http_mcp", "url": "https://x", "timeout": 5}});
    let text = serde_json::to_string(&McpDecl::from_value(&v).unwrap()).unwrap();
    assert!(text.contains(r#""timeout":5.0"#), "{text}");
    // An explicit null timeout stays null.
    let v = json!({"name": "h", "is_stateful": true,
        "mcp_config": {"type": "http_mcp", "url": "https://x", "timeout": null}});
    let McpConfig::Http(cfg) = McpDecl::from_value(&v).unwrap().mcp_config else {
        panic!()
    };
    assert_eq!(cfg.timeout, None);
    let v = json!({"name": "s", "is_stateful": true, "mcp_config": {"type": "stdio_mcp", "command": "x"}});
    let McpConfig::Stdio(cfg) = McpDecl::from_value(&v).unwrap().mcp_config else {
        panic!()
    };
    assert_eq!(cfg.encoding_error_handler, EncodingErrorHandler::Strict);
    assert_eq!(cfg.args, None);
}

#[test]
fn missing_command_names_the_field() {
    let mut v = stdio_entry();
    v["mcp_config"].as_object_mut().unwrap().remove("command");
    let e = err_of(v);
    assert_eq!(e.field.as_deref(), Some("mcp_config.command"));
    assert_eq!(e.message, "missing field `command`");
    assert!(e.to_string().contains("missing field `command`"));
}

#[test]
fn type_errors_point_at_the_element() {
    let mut v = stdio_entry();
    v["mcp_config"]["args"] = json!(["ok", 3]);
    assert_eq!(err_of(v).field.as_deref(), Some("mcp_config.args[1]"));
    let mut v = stdio_entry();
    v["mcp_config"]["env"] = json!({"A": "x", "B": 1});
    assert_eq!(err_of(v).field.as_deref(), Some("mcp_config.env.B"));
    let mut v = http_entry();
    v["is_stateful"] = json!("yes");
    let e = err_of(v);
    assert_eq!(e.field.as_deref(), Some("is_stateful"));
    assert!(e.message.contains("expected a boolean"), "{}", e.message);
    let mut v = http_entry();
    v["stream_progress"] = Value::Null;
    assert_eq!(err_of(v).field.as_deref(), Some("stream_progress"));
    let mut v = stdio_entry();
    v["mcp_config"]["encoding_error_handler"] = json!("skip");
    let e = err_of(v);
    assert_eq!(
        e.field.as_deref(),
        Some("mcp_config.encoding_error_handler")
    );
    assert!(
        e.message.contains("unknown variant `skip`"),
        "{}",
        e.message
    );
    let mut v = http_entry();
    v["mcp_config"]["type"] = json!("ws_mcp");
    assert_eq!(err_of(v).field.as_deref(), Some("mcp_config.type"));
    let mut v = http_entry();
    v["mcp_config"].as_object_mut().unwrap().remove("type");
    assert_eq!(err_of(v).message, "missing field `type`");
    assert_eq!(err_of(json!([1])).field, None);
}

#[test]
fn construction_rules() {
    let mut v = stdio_entry();
    v["is_stateful"] = json!(false);
    assert_eq!(err_of(v).field.as_deref(), Some("is_stateful"));
    for bad in ["", "a b", "x.y", "naïve", "a/b"] {
        let mut v = http_entry();
        v["name"] = json!(bad);
        assert_eq!(err_of(v).field.as_deref(), Some("name"), "{bad:?}");
    }
    let mut v = http_entry();
    v["enable_tools"] = json!(["a", "b"]);
    v["disable_tools"] = json!(["c", "b"]);
    let e = err_of(v);
    assert_eq!(e.field.as_deref(), Some("disable_tools"));
    assert!(e.message.contains("\"b\""), "{}", e.message);
    for bad in [
        "ftp://h/x",
        "localhost:8080/mcp",
        "http:///x",
        "http://h/a b",
    ] {
        let mut v = http_entry();
        v["mcp_config"]["url"] = json!(bad);
        assert_eq!(
            err_of(v).field.as_deref(),
            Some("mcp_config.url"),
            "{bad:?}"
        );
    }
    let mut v = stdio_entry();
    v["mcp_config"]["command"] = json!(" ");
    assert_eq!(err_of(v).field.as_deref(), Some("mcp_config.command"));
    // A command that does not exist is a valid declaration (it fails
    // at start, which is a different report).
    let mut v = stdio_entry();
    v["mcp_config"]["command"] = json!("/nonexistent/bin/server");
    assert!(McpDecl::from_value(&v).is_ok());
    assert!(
        McpDecl::stdio("ok-name_1", "srv", vec![])
            .validate()
            .is_ok()
    );
    assert!(
        McpDecl::http("h", "HTTPS://Example.com", false)
            .validate()
            .is_ok()
    );
}

#[test]
fn unknown_fields_are_kept_and_written_last() {
    let mut v = http_entry();
    v["oauth"] = json!({"client_id": "x"});
    v["mcp_config"]["sse_read_timeout"] = json!(300);
    let decl = McpDecl::from_value(&v).unwrap();
    assert_eq!(
        decl.unknown_fields(),
        vec!["oauth", "mcp_config.sse_read_timeout"]
    );
    let back = serde_json::to_value(&decl).unwrap();
    assert_eq!(back, v);
    let keys: Vec<_> = back.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.last().map(String::as_str), Some("oauth"));
}

#[test]
fn transport_looks_at_the_path_only() {
    let t = |url: &str| McpDecl::http("h", url, false).transport();
    assert_eq!(t("http://h/sse"), McpTransport::Sse);
    assert_eq!(t("http://h/sse?key=1"), McpTransport::Sse);
    assert_eq!(t("http://h/x/messages/"), McpTransport::Sse);
    assert_eq!(t("http://h/x/messages/#frag"), McpTransport::Sse);
    assert_eq!(t("http://h/mcp"), McpTransport::StreamableHttp);
    assert_eq!(t("http://h/mcp?next=/sse"), McpTransport::StreamableHttp);
    assert_eq!(t("http://sse"), McpTransport::StreamableHttp);
    assert_eq!(t("http://h/ssex"), McpTransport::StreamableHttp);
    assert_eq!(
        McpDecl::stdio("s", "c", vec![]).transport(),
        McpTransport::Stdio
    );
}

#[test]
fn env_and_header_references_expand_only_on_resolve() {
    let mut decl = McpDecl::stdio("s", "srv", vec!["${NOT_EXPANDED}".into()]);
    if let McpConfig::Stdio(c) = &mut decl.mcp_config {
        c.env = Some(StrMap::from_iter([
            ("TOKEN", "Bearer ${API_TOKEN}"),
            ("PRICE", "$$5 and $x and ${API_TOKEN}${OTHER}"),
        ]));
    }
    let lookup = |k: &str| match k {
        "API_TOKEN" => Some("s3cr3t".to_string()),
        "OTHER" => Some("!".to_string()),
        _ => None,
    };
    let r = decl.resolved_with(lookup).unwrap();
    let McpConfig::Stdio(c) = &r.mcp_config else {
        panic!()
    };
    let env = c.env.as_ref().unwrap();
    assert_eq!(env.get("TOKEN"), Some("Bearer s3cr3t"));
    assert_eq!(env.get("PRICE"), Some("$5 and $x and s3cr3t!"));
    assert_eq!(c.args.as_ref().unwrap()[0], "${NOT_EXPANDED}");
    // The declaration itself keeps the references.
    assert!(
        serde_json::to_string(&decl)
            .unwrap()
            .contains("Bearer ${API_TOKEN}")
    );
    assert_eq!(decl.referenced_vars(), vec!["API_TOKEN", "OTHER"]);

    let mut h = McpDecl::http("h", "https://x/mcp", false);
    if let McpConfig::Http(c) = &mut h.mcp_config {
        c.headers = Some(StrMap::from_iter([(
            "Authorization",
            "Bearer ${MISSING_ONE}",
        )]));
    }
    let e = h.resolved_with(lookup).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("mcp_config.headers.Authorization"));
    assert!(
        e.message.contains("`MISSING_ONE` is not set"),
        "{}",
        e.message
    );
    for bad in ["${", "${1X}", "${A-B}", "${}"] {
        if let McpConfig::Http(c) = &mut h.mcp_config {
            c.headers = Some(StrMap::from_iter([("X", bad)]));
        }
        assert!(h.resolved_with(lookup).is_err(), "{bad:?}");
    }
}

#[test]
fn str_map_keeps_order_and_first_position() {
    let m: StrMap = serde_json::from_str(r#"{"b": "1", "a": "2", "b": "3"}"#).unwrap();
    assert_eq!(m.iter().collect::<Vec<_>>(), vec![("b", "3"), ("a", "2")]);
    assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"b":"3","a":"2"}"#);
}

#[test]
fn serde_deserialize_validates() {
    let e = serde_json::from_value::<McpDecl>(json!({"name": "x y", "is_stateful": true,
        "mcp_config": {"type": "stdio_mcp", "command": "c"}}))
    .unwrap_err();
    assert!(e.to_string().contains("field `name`"), "{e}");
}
