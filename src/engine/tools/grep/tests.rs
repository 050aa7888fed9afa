use super::*;

fn opts(mode: Mode) -> Opts {
    Opts {
        mode,
        before: 0,
        after: 0,
        line_numbers: true,
        multiline: false,
        case_insensitive: false,
        max_columns: 500,
        keep: None,
    }
}

fn run(opts: &Opts, pattern: &str, data: &[u8], explicit: bool) -> Option<Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f.txt");
    std::fs::write(&p, data).unwrap();
    let m = build_matcher(pattern, opts.case_insensitive, opts.multiline).unwrap();
    let stop = AtomicBool::new(false);
    search_file(
        &mut searcher_for(opts, explicit),
        &m,
        opts,
        &p,
        "/w/f.txt",
        explicit,
        &stop,
    )
}

#[test]
fn splits_globs_like_the_reference() {
    assert_eq!(split_globs("*.rs, *.toml"), ["*.rs", "*.toml"]);
    assert_eq!(split_globs("*.{ts,tsx} a,b"), ["*.{ts,tsx}", "a", "b"]);
    assert!(split_globs("  ").is_empty());
}

#[test]
fn content_lines_and_context() {
    let data = b"one\ntwo needle\nthree\nfour\nfive\nsix\nseven needle\neight\n";
    assert_eq!(
        run(&opts(Mode::Content), "needle", data, false).unwrap(),
        ["/w/f.txt:2:two needle", "/w/f.txt:7:seven needle"]
    );
    let o = Opts {
        before: 1,
        after: 1,
        ..opts(Mode::Content)
    };
    assert_eq!(
        run(&o, "needle", data, false).unwrap(),
        [
            "/w/f.txt-1-one",
            "/w/f.txt:2:two needle",
            "/w/f.txt-3-three",
            "--",
            "/w/f.txt-6-six",
            "/w/f.txt:7:seven needle",
            "/w/f.txt-8-eight"
        ]
    );
    let o = Opts {
        line_numbers: false,
        ..opts(Mode::Content)
    };
    assert_eq!(
        run(&o, "needle", data, true).unwrap(),
        ["two needle", "seven needle"]
    );
    assert_eq!(
        run(&opts(Mode::Count), "needle", data, true).unwrap(),
        ["2"]
    );
    assert_eq!(
        run(&opts(Mode::Count), "needle", data, false).unwrap(),
        ["/w/f.txt:2"]
    );
    assert_eq!(
        run(&opts(Mode::Files), "needle", data, true).unwrap(),
        ["/w/f.txt"]
    );
    assert!(run(&opts(Mode::Files), "absent", data, false).is_none());
}

#[test]
fn long_lines_crlf_and_latin1() {
    let mut data = "x".repeat(493).into_bytes();
    data.extend_from_slice(b"needle\n");
    data.extend("y".repeat(494).as_bytes());
    data.extend_from_slice(b"needle\n");
    data.extend_from_slice(b"crlf needle\r\ncaf\xe9 needle\n");
    let lines = run(&opts(Mode::Content), "needle", &data, true).unwrap();
    assert_eq!(lines[0].len(), 2 + 499);
    assert_eq!(lines[1], "2:[Omitted long matching line]");
    assert_eq!(lines[2], "3:crlf needle");
    assert_eq!(lines[3], "4:caf\u{FFFD} needle");
}

#[test]
fn binary_files() {
    let data = b"ab\0cd needle\n";
    assert!(run(&opts(Mode::Content), "needle", data, false).is_none());
    assert_eq!(
        run(&opts(Mode::Content), "needle", data, true).unwrap(),
        ["binary file matches (found \"\\0\" byte around offset 2)"]
    );
    assert_eq!(
        run(&opts(Mode::Count), "needle", data, true).unwrap(),
        ["1"]
    );
}

#[test]
fn multiline_counts_matches() {
    let o = Opts {
        multiline: true,
        ..opts(Mode::Count)
    };
    assert_eq!(
        run(&o, "needle|b", b"a needle\nb\nneedle c\n", true).unwrap(),
        ["3"]
    );
    assert_eq!(
        run(
            &o,
            "a needle\nb|b\nneedle",
            b"a needle\nb\nneedle c\n",
            true
        )
        .unwrap(),
        ["1"]
    );
    let o = Opts {
        multiline: true,
        ..opts(Mode::Content)
    };
    assert_eq!(
        run(&o, "needle.b", b"a needle\nb\nneedle c\n", true).unwrap(),
        ["1:a needle", "2:b"]
    );
}

#[test]
fn regex_errors_are_clear() {
    let e = build_matcher("a(", false, false).unwrap_err();
    assert!(e.starts_with("Error: invalid regex `a(`"), "{e}");
    let e = build_matcher("a\\nb", false, false).unwrap_err();
    assert!(e.contains("multiline"), "{e}");
    assert!(
        build_types("nosuchtype")
            .unwrap_err()
            .contains("nosuchtype")
    );
}

#[test]
fn collector_keeps_order_and_bounds() {
    let mut c = Collector::new(Some(3), false);
    for name in ["d", "b", "a.txt", "a/x", "c"] {
        c.add(PathBuf::from(name), vec![name.to_string()]);
    }
    let (lines, total) = c.finish();
    assert_eq!(total, 5);
    assert_eq!(lines, ["a/x", "a.txt", "b"]);
    let mut c = Collector::new(None, true);
    c.add("b".into(), vec!["b1".into()]);
    c.add("a".into(), vec!["a1".into(), "a2".into()]);
    assert_eq!(
        c.finish(),
        (vec!["a1".into(), "a2".into(), "--".into(), "b1".into()], 4)
    );
}
