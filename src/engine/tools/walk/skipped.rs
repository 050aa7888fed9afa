//! [`Skipped`]: what a walk left out, bounded in count and in bytes.

use std::sync::atomic::Ordering;

/// Paths a walk left out: entries it could not read (a name too long for
/// the OS, a permission error) and files whose names are not UTF-8 (a
/// tool path is a JSON string, so Read could not open them by name).
/// Bounded: the first [`Skipped::SHOWN`] are kept, the rest counted.
#[derive(Debug, Default)]
pub struct Skipped {
    count: std::sync::atomic::AtomicUsize,
    first: std::sync::Mutex<Vec<String>>,
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
            self.first
                .lock()
                .expect("skipped lock")
                .push(Self::shortened(what));
        }
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
}
