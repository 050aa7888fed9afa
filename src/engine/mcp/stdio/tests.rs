use super::*;

fn frames(max: usize, chunks: &[&[u8]]) -> Vec<Frame> {
    let mut f = Framer::new(max);
    let mut out = Vec::new();
    for c in chunks {
        f.push(c, &mut out);
    }
    f.finish(&mut out);
    out
}

#[test]
fn framer_splits_lines_across_chunks() {
    let out = frames(100, &[b"ab", b"c\r\nde", b"\n\nf"]);
    assert_eq!(
        out,
        vec![
            Frame::Line(b"abc".to_vec()),
            Frame::Line(b"de".to_vec()),
            Frame::Line(vec![]),
            Frame::Line(b"f".to_vec()),
        ]
    );
}

#[test]
fn framer_measures_oversized_lines_and_recovers() {
    let big = vec![b'x'; 50_000];
    let mut input = b"{\"id\":7,".to_vec();
    input.extend_from_slice(&big);
    input.extend_from_slice(b"END\nok\n");
    let out = frames(1000, &[&input[..3], &input[3..40_000], &input[40_000..]]);
    assert_eq!(out.len(), 2);
    match &out[0] {
        Frame::Oversized { len, head, tail } => {
            assert_eq!(*len, 8 + 50_000 + 3);
            assert!(head.starts_with(b"{\"id\":7,"));
            assert_eq!(head.len(), KEEP_EDGE);
            assert!(tail.ends_with(b"xEND"));
            assert_eq!(tail.len(), KEEP_EDGE);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(out[1], Frame::Line(b"ok".to_vec()));
}

#[test]
fn a_line_of_exactly_the_limit_is_kept() {
    let line = vec![b'a'; 64];
    let mut input = line.clone();
    input.push(b'\n');
    assert_eq!(frames(64, &[&input]), vec![Frame::Line(line)]);
}

#[test]
fn classify_skips_banners_and_non_rpc_json() {
    let enc = EncodingErrorHandler::Strict;
    for line in [
        &b"Starting server v0.2.6"[..],
        "🖥️ Server mode: STDIO".as_bytes(),
        b"[INFO] ready",
        b"{\"level\":\"info\",\"msg\":\"boot\"}",
        b"Processing request of type CallToolRequest",
    ] {
        match classify(line, enc) {
            (None, Classified::Skip(w)) => {
                assert!(w.contains(&*String::from_utf8_lossy(line)), "{w}")
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(classify(b"  \r", enc), (None, Classified::Blank)));
}

#[test]
fn classify_accepts_messages_after_a_bom() {
    let mut line = BOM.to_vec();
    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#);
    let (note, c) = classify(&line, EncodingErrorHandler::Strict);
    assert!(note.unwrap().contains("byte order mark"));
    assert!(matches!(c, Classified::Message(m) if matches!(*m, JsonRpcMessage::Response(_))));
    let (_, c) = classify(
        br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        EncodingErrorHandler::Strict,
    );
    assert!(matches!(c, Classified::Message(_)), "{c:?}");
}

#[test]
fn encoding_handlers() {
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\"}]}}";
    assert!(matches!(
        classify(line, EncodingErrorHandler::Strict).1,
        Classified::Skip(w) if w.contains("not valid UTF-8")
    ));
    for (enc, want) in [
        (EncodingErrorHandler::Replace, "a\u{fffd}b"),
        (EncodingErrorHandler::Ignore, "ab"),
    ] {
        let (_, c) = classify(line, enc);
        let Classified::Message(m) = c else {
            panic!("{c:?}")
        };
        let v = serde_json::to_value(&*m).unwrap();
        assert_eq!(v["result"]["content"][0]["text"], want);
    }
}

#[test]
fn undecodable_reply_still_fails_its_request() {
    let (_, c) = classify(
        br#"{"jsonrpc":"2.0","id":4,"result":{"tools":"not a list"}}"#,
        EncodingErrorHandler::Strict,
    );
    // rmcp may take it as a custom result; either way it is delivered.
    assert!(matches!(c, Classified::Message(_)), "{c:?}");
    let (_, c) = classify(
        br#"{"jsonrpc":"2.0","id":4,"error":{"code":"x"}}"#,
        EncodingErrorHandler::Strict,
    );
    let Classified::Message(m) = c else {
        panic!("{c:?}")
    };
    let JsonRpcMessage::Error(e) = *m else {
        panic!()
    };
    assert_eq!(e.id, Some(RequestId::Number(4)));
}

#[test]
fn oversized_ids_from_head_tail_or_the_only_request() {
    let none = HashSet::new();
    assert_eq!(
        oversized_id(
            br#"{"jsonrpc":"2.0","id":12,"result":{"content":[{"te"#,
            b"",
            &none
        ),
        Some(RequestId::Number(12))
    );
    assert_eq!(
        oversized_id(
            br#"{"jsonrpc":"2.0","meta":{"id":1,"x":[1,{"y":"}"}]},"id":"s-1","result"#,
            b"",
            &none
        ),
        Some(RequestId::String("s-1".into()))
    );
    let inflight: HashSet<RequestId> = [RequestId::Number(3), RequestId::Number(9)]
        .into_iter()
        .collect();
    assert_eq!(
        oversized_id(
            br#"{"result":{"content":[{"type":"text","text":"xxxx"#,
            br#"xx \"id\":3 xx"}]},"jsonrpc":"2.0","id":9}"#,
            &inflight
        ),
        Some(RequestId::Number(9))
    );
    let one: HashSet<RequestId> = [RequestId::Number(5)].into_iter().collect();
    assert_eq!(
        oversized_id(b"{\"result\":\"xxx", b"xxx", &one),
        Some(RequestId::Number(5))
    );
    assert_eq!(oversized_id(b"{\"result\":\"xxx", b"xxx", &inflight), None);
}
