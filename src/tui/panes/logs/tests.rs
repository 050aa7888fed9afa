//! Tests of the Logs pane: retention by level, order, wrapping.

use super::*;

fn line(level: Level, src: &str, msg: &str) -> LogLine {
    LogLine::now(level, src, msg)
}

#[test]
fn store_and_filtered_index_stay_in_step() {
    let mut p = LogsPane::new(100);
    for i in 0..1000 {
        let lvl = if i % 10 == 0 {
            Level::Error
        } else {
            Level::Info
        };
        p.push(line(lvl, "x", &i.to_string()));
    }
    // Info lines went first: all 100 error lines are still held.
    assert_eq!(p.len(), 100);
    assert_eq!(p.filtered_len(), 100);
    p.min_level = Level::Error;
    p.refilter();
    assert_eq!(p.filtered_len(), 100);
    p.min_level = Level::Info;
    p.refilter();
    for i in 1000..1100 {
        p.push(line(Level::Info, "x", &i.to_string()));
    }
    // Info lines now only push out each other (here: themselves).
    assert_eq!(p.len(), 100);
    assert_eq!(p.filtered_len(), 100, "the index follows evictions");
    p.min_level = Level::Error;
    p.refilter();
    assert_eq!(p.filtered_len(), 100);
    p.push(line(Level::Error, "x", "boom"));
    assert_eq!(p.filtered_len(), 100, "the oldest error made room");
    assert_eq!(p.entry(p.filtered_len() - 1).unwrap().message, "boom");
    assert_eq!(p.entry(0).unwrap().message, "10");
}

/// Issue 16: 100,000 debug lines do not evict one warn line, and the
/// title says which levels were dropped.
#[test]
fn a_hundred_thousand_debug_lines_keep_the_warn_line() {
    let mut p = LogsPane::with_budget(10_000, 4 << 20);
    p.push(line(Level::Info, "bus:command", "[default] $ yes"));
    p.push(line(Level::Warn, "tui", "the one warning"));
    for i in 0..100_000 {
        p.push(line(
            Level::Debug,
            "watch",
            &format!("modify /w/tool_result-{i}.txt"),
        ));
    }
    let kept: Vec<&str> = p.lines().map(|l| l.message.as_str()).collect();
    assert!(kept.contains(&"the one warning"));
    assert!(kept.contains(&"[default] $ yes"));
    assert_eq!(p.dropped()[0], (Level::Debug, 100_000 - 9_998));
    assert!(p.bytes() <= 4 << 20);
    p.min_level = Level::Warn;
    p.refilter();
    assert_eq!(p.filtered_len(), 1);
}

/// With wrap on, the rows of an entry are ratatui's word-wrapped
/// rows, not characters divided by the width.
#[test]
fn wrapped_rows_count_word_wrap() {
    // 10 columns: "aaaaaa bbbbbb" wraps as words into 2 rows, while
    // 13 chars / 10 is also 2; "aaaaaa bbbbbb cccccc" is 20 chars
    // (2 by division) but 3 rows word-wrapped.
    let l = Line::from("aaaaaa bbbbbb cccccc");
    assert_eq!(wrapped_rows(&l, 10), 3);
}

#[test]
fn source_filter_and_search() {
    let mut p = LogsPane::new(100);
    p.push(line(Level::Info, "bus:tool", "Bash success"));
    p.push(line(Level::Info, "stderr", "hello world"));
    p.push(line(Level::Info, "bus:file", "created /x"));
    p.source = Some("bus".into());
    p.refilter();
    assert_eq!(p.filtered_len(), 2);
    p.source = None;
    p.refilter();
    p.search.set("hello");
    p.selected = 0;
    assert!(p.find(false));
    assert_eq!(p.entry(p.selected).unwrap().message, "hello world");
    assert_eq!(p.search.label(), "/hello  1/1");
}

/// The viewer's search in Logs: `n` follows the direction of `/` or
/// `?`, `N` goes the other way, both wrap; smart case; the source is
/// searched as well as the message; no match leaves the selection.
#[test]
fn search_moves_both_ways_and_wraps() {
    let mut p = LogsPane::new(100);
    for (src, msg) in [
        ("bus:tool", "Bash success"),
        ("stderr", "disk ERROR one"),
        ("stderr", "fine"),
        ("stderr", "error two"),
        ("bus:mcp", "fine"),
    ] {
        p.push(line(Level::Info, src, msg));
    }
    p.search.set("error");
    p.selected = 0;
    assert!(p.find(false));
    assert_eq!(p.selected, 1);
    assert!(p.find(false));
    assert_eq!(p.selected, 3);
    assert_eq!(p.search.label(), "/error  2/2");
    assert!(p.find(false), "wraps to the top");
    assert_eq!(p.selected, 1);
    assert!(p.find(true), "N goes up, wrapping to the bottom");
    assert_eq!(p.selected, 3);
    p.search.backward = true;
    assert!(p.find(false), "? goes up");
    assert_eq!(p.selected, 1);
    p.search.set("ERROR");
    assert!(p.find(false), "smart case: only the upper-case one");
    assert_eq!(p.selected, 1);
    assert_eq!(p.search.label(), "?ERROR  1/1");
    p.search.set("mcp");
    assert!(p.find(false), "the source is searched");
    assert_eq!(p.selected, 4);
    p.search.set("absent");
    assert!(!p.find(false));
    assert_eq!(p.selected, 4, "no match keeps the selection");
    assert_eq!(p.search.label(), "?absent  no match");
}
