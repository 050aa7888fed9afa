//! Checked appends against writers that rewrite the file: one that takes
//! the same `flock` (nothing may be duplicated) and one that takes none
//! (what it drops comes back, with few duplicates).

use super::*;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn line(i: usize) -> Vec<u8> {
    format!(
        "{{\"id\":\"w{i:04}\",\"pad\":\"{}\"}}\n",
        "x".repeat(i % 300)
    )
    .into_bytes()
}

/// Appends `n` lines one by one, each a checked append tracking the
/// records the previous one returned (as the engine's guard does).
fn append_all(p: &Path, n: usize) -> (Vec<TrackedRecord>, usize) {
    let mut tracked = Vec::new();
    let mut reappended = 0;
    for i in 0..n {
        let out = append_checked_host(p, tracked, &line(i)).unwrap();
        reappended += out.reappended;
        tracked = out.records;
        // Paced like an agent's turns (faster), so the rewriters run often
        // between appends.
        std::thread::sleep(std::time::Duration::from_micros(150));
    }
    (tracked, reappended)
}

fn counts(p: &Path) -> HashMap<String, usize> {
    let mut c = HashMap::new();
    for l in std::fs::read_to_string(p).unwrap().lines() {
        *c.entry(l.to_string()).or_default() += 1;
    }
    c
}

#[test]
fn a_rewriter_holding_the_same_lock_causes_no_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("context.jsonl");
    std::fs::write(&p, b"{\"id\":\"seed\"}\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rewriter = {
        let (p, stop) = (p.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) {
                // The same flock wsbench takes, then truncate and write
                // back what was read, in two writes (a slow rewrite).
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&p)
                    .unwrap();
                let f = Flock::lock(f, FlockArg::LockExclusive).unwrap();
                let all = std::fs::read(&p).unwrap();
                f.set_len(0).unwrap();
                let half = all.len() / 2;
                f.write_all_at(&all[..half], 0).unwrap();
                std::thread::sleep(std::time::Duration::from_micros(300));
                f.write_all_at(&all[half..], half as u64).unwrap();
                drop(f);
                rounds += 1;
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            rounds
        })
    };
    let (_, reappended) = append_all(&p, 300);
    stop.store(true, Ordering::Relaxed);
    let rounds = rewriter.join().unwrap();
    assert!(rounds > 10, "the rewriter ran only {rounds} times");
    assert_eq!(reappended, 0);
    let c = counts(&p);
    for i in 0..300 {
        let l = String::from_utf8(line(i)).unwrap();
        assert_eq!(c.get(l.trim_end()), Some(&1), "line {i}");
    }
    assert_eq!(c.len(), 301);
}

#[test]
fn a_lock_free_rewriter_loses_nothing_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("context.jsonl");
    std::fs::write(&p, b"{\"id\":\"seed\"}\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rewriter = {
        let (p, stop) = (p.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                // The reference's offload_context: read all, then later
                // open with truncation and write all plus its own line.
                let mut all = std::fs::read(&p).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(1));
                all.extend_from_slice(format!("{{\"id\":\"ref{n}\"}}\n").as_bytes());
                std::fs::write(&p, &all).unwrap();
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            n
        })
    };
    let (tracked, reappended) = append_all(&p, 200);
    stop.store(true, Ordering::Relaxed);
    let rounds = rewriter.join().unwrap();
    // One more append after the other writer stopped repairs the rest.
    let out = append_checked_host(&p, tracked, b"{\"id\":\"last\"}\n").unwrap();
    let reappended = reappended + out.reappended;
    assert!(rounds > 10, "the rewriter ran only {rounds} times");
    assert!(reappended > 0, "the rewriter never dropped a line");
    let c = counts(&p);
    let mut dups = 0;
    for i in 0..200 {
        let l = String::from_utf8(line(i)).unwrap();
        let k = c.get(l.trim_end()).copied().unwrap_or(0);
        assert!(k >= 1, "line {i} is lost");
        dups += k - 1;
    }
    eprintln!("{dups} duplicates, {reappended} re-appended, {rounds} rewrites");
    // A duplicate needs a rewrite caught half-way despite the settle wait.
    assert!(dups <= 3, "{dups} duplicates for {reappended} re-appended");
}

#[test]
fn a_deleted_file_forgets_the_earlier_lines() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s/context.jsonl");
    let (tracked, _) = append_all(&p, 2);
    std::fs::remove_file(&p).unwrap();
    let out = append_checked_host(&p, tracked, b"{\"id\":\"b\"}\n").unwrap();
    assert!(out.was_missing);
    assert_eq!(std::fs::read(&p).unwrap(), b"{\"id\":\"b\"}\n");
    assert_eq!(out.records.len(), 1);
}

#[test]
fn a_file_half_way_through_a_rewrite_is_waited_for_not_taken_as_a_loss() {
    // Another writer truncated the file and has written it back only up
    // to the middle of a line; the rest comes 20 ms later. The check waits
    // for the file to end in a newline and hold still instead of
    // re-appending the lines it cannot see yet.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("context.jsonl");
    let (tracked, _) = append_all(&p, 3);
    let all = std::fs::read(&p).unwrap();
    let cut = all.len() - 5;
    std::fs::write(&p, &all[..cut]).unwrap();
    let refill = {
        let p = p.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            f.write_all_at(&all[cut..], cut as u64).unwrap();
        })
    };
    let out = append_checked_host(&p, tracked, &line(3)).unwrap();
    refill.join().unwrap();
    assert_eq!(out.reappended, 0);
    let c = counts(&p);
    assert_eq!(c.len(), 4, "{c:?}");
    assert!(c.values().all(|k| *k == 1), "{c:?}");
}
