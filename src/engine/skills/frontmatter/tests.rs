//! Front-matter tests: the reference's answers for the edge cases
//! (`tests/fixtures/frontmatter/cases.json`, made by `gen.py` beside it
//! with agentscope 2.0.11) and wsbench's own diagnostics.

use super::*;

/// Each case of the fixture: the reference's skill (name, description,
/// markdown) or no skill; wsbench must agree on every one.
#[test]
fn a_control_character_is_refused_with_its_line_and_column() {
    let e = parse(b"---\nname: \"ab\x1bc\"\ndescription: d\n---\nbody\n")
        .err()
        .unwrap();
    assert_eq!(e.line, Some(2));
    let msg = e.describe();
    assert!(
        msg.starts_with("line 2: a control character (U+001B) at column 10"),
        "{msg}"
    );
    // In the description too; a tab stays allowed.
    let e = parse(b"\n---\nname: a\ndescription: x\x07y\n---\n")
        .err()
        .unwrap();
    assert_eq!(e.line, Some(4));
    assert!(parse(b"---\nname: a\ndescription: x\ty\n---\n").is_ok());
}

#[test]
fn reads_every_edge_case_as_the_reference() {
    let raw = include_str!("../../../../tests/fixtures/frontmatter/cases.json");
    let doc: serde_json::Value = serde_json::from_str(raw).unwrap();
    assert_eq!(doc["generated_by"], "agentscope 2.0.11");
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 28, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for c in cases {
        let id = c["id"].as_str().unwrap();
        let text = c["text"].as_str().unwrap();
        let got = parse(text.as_bytes());
        match (c["valid"].as_bool().unwrap(), &got) {
            (true, Ok(fm)) => {
                let want = (
                    c["name"].as_str().unwrap(),
                    c["description"].as_str().unwrap(),
                    c["body"].as_str().unwrap(),
                );
                if (fm.name.as_str(), fm.description.as_str(), fm.body.as_str()) != want {
                    wrong.push(format!("{id}: got {fm:?}, reference {want:?}"));
                }
            }
            (false, Err(_)) => {}
            (valid, got) => wrong.push(format!("{id}: reference valid={valid}, got {got:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn accepted_oddities_carry_warnings() {
    let fm = parse(b"---\nname: yes\ndescription: d\n---\n").unwrap();
    assert_eq!(fm.name, "True");
    assert_eq!(fm.warnings.len(), 1, "{:?}", fm.warnings);
    assert!(
        fm.warnings[0].starts_with("line 2: `name` `yes` is a boolean"),
        "{:?}",
        fm.warnings
    );
    assert!(
        fm.warnings[0].contains("name: \"yes\""),
        "{:?}",
        fm.warnings
    );
    let fm = parse(b"---\nname: a\ndescription: one\ndescription: two\n---\n").unwrap();
    assert_eq!(fm.description, "two");
    assert!(
        fm.warnings[0].contains("given 2 times (lines 3, 4)"),
        "{:?}",
        fm.warnings
    );
    let fm = parse(b"---\nname: a\ndescription: \"plain\"\n---\n").unwrap();
    assert!(fm.warnings.is_empty());
}

#[test]
fn falsy_values_and_bom_say_why() {
    let e = parse(b"---\nname: a\ndescription: off\n---\n").unwrap_err();
    assert_eq!(e.line, Some(3));
    assert!(e.reason.contains("a boolean `False`"), "{}", e.reason);
    assert_eq!(
        e.hint.as_deref(),
        Some("quote the value, for example: description: \"off\"")
    );
    let e = parse("\u{feff}---\nname: a\ndescription: d\n---\n".as_bytes()).unwrap_err();
    assert!(e.reason.contains("byte order mark"), "{}", e.reason);
}

#[test]
fn accepts_crlf_leading_blank_lines_and_extra_keys() {
    let fm = parse(b"\r\n---\r\nname: a\r\nlicense: MIT\r\ndescription: \"x: y\"\r\n---\r\nB\r\n")
        .unwrap();
    assert_eq!(
        (fm.name.as_str(), fm.description.as_str(), fm.body.as_str()),
        ("a", "x: y", "B")
    );
}

#[test]
fn parses_valid_front_matter() {
    let fm =
        parse(b"---\nname: git-helper\ndescription: Summarise history.\n---\n# Title\n\nBody.\n")
            .unwrap();
    assert_eq!(fm.name, "git-helper");
    assert_eq!(fm.description, "Summarise history.");
    assert_eq!(fm.body, "# Title\n\nBody.");
}

#[test]
fn c08_colon_in_plain_value_reports_line_reason_and_hint() {
    let text = "---\nname: harness\ndescription: Configure the harness: Hooks, MCP Servers, Skills\n---\nBody text.\n";
    let err = parse(text.as_bytes()).unwrap_err();
    assert_eq!(err.line, Some(3));
    assert!(
        err.reason.contains("mapping values are not allowed"),
        "{}",
        err.reason
    );
    assert!(
        err.reason.contains("line 3"),
        "file line numbers: {}",
        err.reason
    );
    let hint = err.hint.unwrap();
    assert!(
        hint.contains("description: \"Configure the harness: Hooks, MCP Servers, Skills\""),
        "{hint}"
    );
}

#[test]
fn unclosed_flow_sequence_points_at_its_entry() {
    let err = parse(
        b"---\nname: broken-skill\ndescription: [this front matter is not valid YAML\n---\nBody.\n",
    )
    .unwrap_err();
    assert_eq!(err.line, Some(3));
    assert!(err.reason.contains("flow sequence"), "{}", err.reason);
    assert!(err.hint.unwrap().contains("description: \"[this"));
}

#[test]
fn missing_or_empty_fields_and_no_front_matter() {
    let e = parse(b"---\nname: a\n---\nbody").unwrap_err();
    assert!(e.reason.contains("no `description`"), "{}", e.reason);
    assert_eq!(e.line, Some(1));
    let e = parse(b"---\nname: ''\ndescription: d\n---\n").unwrap_err();
    assert!(e.reason.contains("no `name`"), "{}", e.reason);
    let e = parse(b"---\n---\n").unwrap_err();
    assert!(
        e.reason.contains("`name` and `description`"),
        "{}",
        e.reason
    );
    let e = parse(b"# Just markdown\n").unwrap_err();
    assert_eq!(e.line, None);
    assert!(e.reason.contains("no front matter"));
    let e = parse(b"---\nname: a\ndescription: b\n").unwrap_err();
    assert!(e.reason.contains("never closed"), "{}", e.reason);
    let e = parse(b"---\n- a\n---\n").unwrap_err();
    assert!(e.reason.contains("not a mapping"), "{}", e.reason);
    // A list is text to the reference (`str(['a', 'b'])`), with a warning.
    let fm = parse(b"---\nname: [a, b]\ndescription: d\n---\n").unwrap();
    assert_eq!(fm.name, "['a', 'b']");
    assert_eq!(fm.warnings.len(), 1);
    let e = parse(&[0xff, 0xfe]).unwrap_err();
    assert!(e.reason.contains("UTF-8"));
}

#[test]
fn path_like_and_control_names_are_refused() {
    for name in [
        "../../etc/evil",
        "a/b",
        "a\\\\b",
        "..",
        ".",
        "x..y",
        "\"a\\u001b]52;c;eA==\\u0007\"",
    ] {
        let text = format!("---\ndescription: d\nname: {name}\n---\n");
        let e = parse(text.as_bytes()).unwrap_err();
        assert!(e.reason.contains("skill name"), "{name}: {}", e.reason);
        assert_eq!(e.line, Some(3), "{name}");
    }
    assert!(parse(b"---\nname: Git Helper 2\ndescription: d\n---\n").is_ok());
}

#[test]
fn scalar_names_become_text() {
    let fm = parse(b"---\nname: 42\ndescription: true\n---\n").unwrap();
    assert_eq!((fm.name.as_str(), fm.description.as_str()), ("42", "True"));
}

#[test]
fn shifts_every_line_number() {
    assert_eq!(
        shift_lines(
            "x at line 3 column 1, while parsing y at line 2 column 14",
            1
        ),
        "x at line 4 column 1, while parsing y at line 3 column 14"
    );
    assert_eq!(shift_lines("no numbers", 5), "no numbers");
}
