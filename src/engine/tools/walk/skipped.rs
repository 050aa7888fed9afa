//! [`Skipped`]: what a walk left out, bounded in count and in bytes.

use std::sync::atomic::Ordering;

/// Paths a walk left out: entries it could not read (a name too long for
/// the OS, a permission error) and files whose names are not UTF-8 (a
/// tool path is a JSON string, so Read could not open them by name).
/// Bounded: the first [`Skipped::SHOWN`] are kept, the rest counted.
///
/// Paths are named as the sandbox sees them: the walk runs on the host
/// (bubblewrap's and Docker's bind mounts included), so every host
/// prefix registered with [`Skipped::show_host_as`] is rewritten to its
/// sandbox path (`/workspace/…`) before an entry is kept (issue 14: the
/// note named `/tmp/…/profiles/bwrap/default/…`).
#[derive(Debug, Default)]
pub struct Skipped {
    count: std::sync::atomic::AtomicUsize,
    first: std::sync::Mutex<Vec<String>>,
    /// `(host prefix, sandbox prefix)`, longest host prefix first.
    shown_as: std::sync::Mutex<Vec<(String, String)>>,
}

impl Skipped {
    /// Skipped paths named in a result; the rest are only counted.
    pub const SHOWN: usize = 10;

    /// Bytes of one named entry; a longer one (a path near `PATH_MAX`, with
    /// its error) keeps its head and tail and says how many bytes were cut,
    /// so the note stays under about `SHOWN` × 512 bytes.
    pub const ENTRY_BYTES: usize = 512;

    /// Counts one left-out path and names it while fewer than
    /// [`Self::SHOWN`] are named.
    pub(super) fn add(&self, what: String) {
        let n = self.count.fetch_add(1, Ordering::Relaxed);
        if n < Self::SHOWN {
            let what = self.in_sandbox_terms(what);
            self.first
                .lock()
                .expect("skipped lock")
                .push(Self::shortened(what));
        }
    }

    /// From now on, names a path under host directory `host` as the same
    /// path under `sandbox` (the sandbox path `host` is mounted at). A
    /// host path that is not UTF-8 is not registered (its entries keep
    /// their escaped host form).
    pub fn show_host_as(&self, host: &std::path::Path, sandbox: &str) {
        let Some(h) = host.to_str() else { return };
        let h = h.trim_end_matches('/');
        let sb = sandbox.trim_end_matches('/');
        if h.is_empty() || h == sb {
            return;
        }
        let mut map = self.shown_as.lock().expect("skipped lock");
        if !map.iter().any(|(k, _)| k == h) {
            map.push((h.to_string(), sb.to_string()));
            map.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        }
    }

    /// `what` with every registered host prefix that starts a path
    /// (followed by `/` or by a byte that cannot continue a name: the
    /// end, `:`, space, quote, parenthesis) replaced by its sandbox path.
    fn in_sandbox_terms(&self, what: String) -> String {
        let map = self.shown_as.lock().expect("skipped lock");
        let mut out = what;
        for (host, sb) in map.iter() {
            let mut acc = String::with_capacity(out.len());
            let mut rest = out.as_str();
            while let Some(i) = rest.find(host.as_str()) {
                let after = &rest[i + host.len()..];
                let ends = after
                    .chars()
                    .next()
                    .is_none_or(|c| matches!(c, '/' | ':' | ' ' | '"' | '\'' | ')' | ','));
                acc.push_str(&rest[..i]);
                acc.push_str(if ends { sb } else { host });
                rest = after;
            }
            acc.push_str(rest);
            out = acc;
        }
        out
    }

    /// `what` within [`Self::ENTRY_BYTES`]: its first and last ~240 bytes
    /// (on character boundaries) around `…[N bytes cut]…`.
    fn shortened(what: String) -> String {
        if what.len() <= Self::ENTRY_BYTES {
            return what;
        }
        let keep = (Self::ENTRY_BYTES - 32) / 2;
        let mut head = keep;
        while !what.is_char_boundary(head) {
            head -= 1;
        }
        let mut tail = what.len() - keep;
        while !what.is_char_boundary(tail) {
            tail += 1;
        }
        format!(
            "{}…[{} bytes cut]…{}",
            &what[..head],
            tail - head,
            &what[tail..]
        )
    }

    /// The note for a result, or `None` when nothing was skipped.
    pub fn note(&self) -> Option<String> {
        let n = self.count.load(Ordering::Relaxed);
        if n == 0 {
            return None;
        }
        let mut first = self.first.lock().expect("skipped lock").clone();
        first.sort();
        let mut out = format!("\n{n} path(s) could not be searched and are not listed:");
        for f in &first {
            out.push_str("\n  ");
            out.push_str(f);
        }
        if n > first.len() {
            out.push_str(&format!("\n  ... and {} more", n - first.len()));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skipped_entry_is_bounded_in_bytes_and_says_what_was_cut() {
        let long = format!("/w/{}é/tail.txt: File name too long", "a".repeat(5000));
        let s = Skipped::shortened(long.clone());
        assert!(s.len() <= Skipped::ENTRY_BYTES + 8, "{}", s.len());
        assert!(s.starts_with("/w/aaa") && s.ends_with("tail.txt: File name too long"));
        let cut: usize = s
            .split("…[")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            s.len() - "…[ bytes cut]…".len() - cut.to_string().len() + cut,
            long.len()
        );
        assert_eq!(Skipped::shortened("short".into()), "short");
    }

    #[test]
    fn host_paths_are_named_as_sandbox_paths() {
        let s = Skipped::default();
        s.show_host_as(
            std::path::Path::new("/tmp/h/profiles/bwrap/default"),
            "/workspace",
        );
        s.show_host_as(std::path::Path::new("/tmp/h/other/"), "/tmp");
        s.add(
            "IO error for operation on /tmp/h/profiles/bwrap/default/gg/x: File name too long"
                .into(),
        );
        s.add(r"/tmp/h/profiles/bwrap/default/gg/bad-\xFF\xFE-name.txt (the name is not UTF-8: rename it with Bash to open it)".into());
        s.add("/tmp/h/profiles/bwrap/defaultish/y: kept".into());
        s.add("/tmp/h/other/z (x)".into());
        let note = s.note().unwrap();
        assert!(
            note.contains("operation on /workspace/gg/x: File"),
            "{note}"
        );
        assert!(
            note.contains(r"/workspace/gg/bad-\xFF\xFE-name.txt (the"),
            "{note}"
        );
        assert!(
            note.contains("/tmp/h/profiles/bwrap/defaultish/y"),
            "{note}"
        );
        assert!(note.contains("  /tmp/z (x)"), "{note}");
        assert!(!note.contains("/tmp/h/profiles/bwrap/default/"), "{note}");
    }
}
