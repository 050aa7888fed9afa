//! Tests of the merged session timeline.

use super::*;

const REF_LINES: &str = include_str!("../../tests/fixtures/reference-lines/tool-call.jsonl");

#[test]
fn a_reference_written_session_gets_its_tool_calls_counted() {
    let t = build(
        "s",
        TimelineInputs {
            context: Some(REF_LINES.as_bytes().to_vec()),
            ..TimelineInputs::default()
        },
    );
    assert_eq!(t.tool_calls, 2, "{t:#?}");
    let glob = t
        .rows
        .iter()
        .find(|r| r.call_id.as_deref() == Some("call-1"))
        .unwrap();
    assert_eq!(glob.tool.as_deref(), Some("Glob"));
    assert_eq!(glob.args, "pattern=*.rs");
    assert_eq!(glob.state.as_deref(), Some("success"));
    assert_eq!(glob.duration_ms, Some(1000));
    assert_eq!(glob.result_size, Some("src/main.rs".len() as u64));
    assert_eq!(t.rows[0].kind, RowKind::Turn);
}

#[test]
fn reference_result_files_become_offload_rows_after_their_call() {
    let t = build(
        "s",
        TimelineInputs {
            context: Some(REF_LINES.as_bytes().to_vec()),
            result_files: vec![("/w/sessions/s/tool_result-call-2(1).txt".into(), 4096)],
            ..TimelineInputs::default()
        },
    );
    let i = t
        .rows
        .iter()
        .position(|r| r.call_id.as_deref() == Some("call-2") && r.kind == RowKind::ToolCall)
        .unwrap();
    let o = &t.rows[i + 1];
    assert_eq!(o.kind, RowKind::Offload);
    assert_eq!(o.tool.as_deref(), Some("Bash"));
    assert_eq!(o.offload.as_ref().unwrap().full, Some(4096));
}

#[test]
fn agent_log_and_journal_merge_by_call_id_with_offload_and_compression() {
    let log = concat!(
        r#"{"seq":1,"at":"2026-12-06T04:00:00.000Z","type":"turn_started","reply_id":"r","turn":1,"estimated_tokens":900}"#,
        "\n",
        r#"{"seq":2,"at":"2026-12-06T04:00:01.000Z","type":"tool_call","call_id":"c1","name":"Read","input":"{\"file_path\":\"/w/big.txt\"}"}"#,
        "\n",
        r#"{"seq":3,"at":"2026-12-06T04:00:02.000Z","type":"tool_result","call_id":"c1","name":"Read","state":"success","text":"abc","full_chars":1312000,"offloaded_to":"/w/sessions/s/tool_result-c1.txt","duration_ms":7}"#,
        "\n",
        r#"{"seq":4,"at":"2026-12-06T04:00:03.000Z","type":"compression_done","path":"p","compressed_messages":4,"kept_messages":2,"tokens_before":16531,"tokens_after":5675,"summary":"We read big.txt.","fallback":false}"#,
        "\n",
        r#"{"seq":5,"at":"2026-12-06T04:00:04.000Z","type":"tool_result","call_id":"c2","name":"Bash","state":"error","text":"boom","full_chars":4,"offloaded_to":null,"duration_ms":3}"#,
        "\n",
    );
    let journal = r#"{"started_at":"2026-12-06T04:00:01Z","call_id":"c1","agent":"a","session":"s","tool":"Read","args":{"file_path":"/w/big.txt"},"state":"success","duration_ms":9,"output_bytes":1312000,"offload_path":"/w/sessions/s/tool_result-c1.txt"}
"#;
    let t = build(
        "s",
        TimelineInputs {
            agent_log: Some(log.as_bytes().to_vec()),
            journal: Some(journal.as_bytes().to_vec()),
            result_files: vec![("/w/sessions/s/tool_result-c1.txt".into(), 1_312_000)],
            ..TimelineInputs::default()
        },
    );
    let kinds: Vec<RowKind> = t.rows.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            RowKind::Turn,
            RowKind::ToolCall,
            RowKind::Offload,
            RowKind::Compression,
            RowKind::ToolCall
        ],
        "{t:#?}"
    );
    assert_eq!(t.tool_calls, 2);
    assert_eq!(t.errors, 1);
    assert_eq!(t.rows[0].tokens, Some(900));
    assert_eq!(
        t.rows[1].duration_ms,
        Some(9),
        "the journal's duration wins"
    );
    let o = t.rows[2].offload.as_ref().unwrap();
    assert_eq!((o.kept_chars, o.full), (Some(3), Some(1_312_000)));
    let c = t.rows[3].compression.as_ref().unwrap();
    assert_eq!((c.tokens_before, c.tokens_after), (Some(16531), Some(5675)));
    assert_eq!(c.summary, "We read big.txt.");
}

#[test]
fn a_file_read_short_is_cut_to_whole_lines_and_noted() {
    let mut notes = Vec::new();
    let b = bound_lines(
        b"{\"a\":1}\n{\"b\":".to_vec(),
        100,
        "agent.jsonl",
        &mut notes,
    );
    assert_eq!(b, b"{\"a\":1}\n");
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("92 bytes left unread"), "{notes:?}");
}

#[test]
fn the_state_summary_shows_when_no_compression_was_logged() {
    let state = r#"{"version":1,"agent":"a","session":"s","summary":"Earlier: listed files.","context":[]}"#;
    let t = build(
        "s",
        TimelineInputs {
            state: Some(state.as_bytes().to_vec()),
            ..TimelineInputs::default()
        },
    );
    assert_eq!(t.rows.len(), 1);
    assert_eq!(
        t.rows[0].compression.as_ref().unwrap().summary,
        "Earlier: listed files."
    );
}
