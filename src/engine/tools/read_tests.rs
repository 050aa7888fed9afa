//! Unit tests of the Read tool (`read.rs`): the line collector, pages, caps.

use super::*;

fn collect(pieces: &[&[u8]], offset: u64, limit: u64, max: usize) -> Vec<(u64, String, bool)> {
    let mut c = LineCollector::new(offset, limit, max);
    for p in pieces {
        if c.done {
            break;
        }
        c.feed(p);
    }
    c.finish();
    c.lines()
        .map(|(n, b, cut)| (n, String::from_utf8_lossy(b).into_owned(), cut))
        .collect()
}

fn lines(pieces: &[&[u8]]) -> Vec<String> {
    collect(pieces, 1, 100, 2000)
        .into_iter()
        .map(|(_, s, _)| s)
        .collect()
}

#[test]
fn splits_on_lf_crlf_and_cr_across_pieces() {
    assert_eq!(lines(&[b"a\r\nb\rc\nd"]), ["a", "b", "c", "d"]);
    // CR at the end of a piece, LF at the start of the next: one break.
    assert_eq!(lines(&[b"a\r", b"\nb\r", b"c"]), ["a", "b", "c"]);
    assert_eq!(lines(&[b"a\n", b"\n"]), ["a", ""]);
    assert_eq!(lines(&[b"x\r"]), ["x"]);
    assert!(lines(&[b""]).is_empty());
    assert_eq!(lines(&[b"ab", b"cd\n", b"e"]), ["abcd", "e"]);
}

#[test]
fn offset_and_limit_select_lines_and_stop_early() {
    let got = collect(&[b"1\n2\n3\n4\n5\n"], 2, 2, 2000);
    assert_eq!(got, [(2, "2".into(), false), (3, "3".into(), false)]);
    let mut c = LineCollector::new(2, 2, 2000);
    c.feed(b"1\n2\n3\n");
    assert!(c.done, "stops once the last wanted line is complete");
    assert!(collect(&[b"1\n2\n"], 5, 10, 2000).is_empty());
}

#[test]
fn a_long_last_line_is_cut_without_reading_to_its_end() {
    let mut c = LineCollector::new(1, 1, 3);
    c.feed(&[b'x'; 100]);
    assert!(c.done);
    let got: Vec<_> = c.lines().collect();
    assert_eq!(got[0].1.len(), 16);
    assert!(got[0].2);
    assert_eq!(truncate_line("x".repeat(16), 3, true), "xxx[truncated]");
    assert_eq!(truncate_line("abcd".into(), 3, false), "abc[truncated]");
    assert_eq!(truncate_line("abc".into(), 3, false), "abc");
    assert_eq!(truncate_line("ééé".into(), 3, false), "ééé");
}

#[test]
fn a_wanted_line_with_a_nul_byte_stops_the_read() {
    let mut c = LineCollector::new(2, 10, 2000);
    c.feed(b"\0skipped\nok\nbin\0ary\nnever\n");
    assert!(c.done);
    assert_eq!(c.binary_line, Some(3));
    let got: Vec<_> = c.lines().collect();
    assert_eq!(got, [(2, &b"ok"[..], false)]);
}

#[test]
fn pages_values() {
    assert_eq!(parse_pages("3"), Ok((3, 3)));
    assert_eq!(parse_pages("1-5"), Ok((1, 5)));
    assert_eq!(parse_pages(" 2 - 4 "), Ok((2, 4)));
    assert!(parse_pages("0").is_err());
    assert!(parse_pages("5-1").is_err());
    assert!(parse_pages("1-21").is_err());
    assert!(parse_pages("x").is_err());
    assert!(parse_pages("").is_err());
}
