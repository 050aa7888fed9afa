//! Words shared by the front ends (CLI and TUI), so both say the same.

/// `n` and its noun, singular for exactly one (`1 file`, `0 files`,
/// `2 entries`): the one place wsbench pluralises (issue 22). `many` is
/// given, not derived, so irregular plurals (`entry` → `entries`) are
/// right.
pub fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// A byte size in binary units with one decimal (`512 B`, `1.5 KiB`,
/// `3.2 MiB`, up to TiB): the one size format of the CLI tables and the
/// TUI (issue 22).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_in_binary_units() {
        use super::size;
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 << 40), "3.0 TiB");
        assert_eq!(size(5 << 50), "5120.0 TiB");
    }

    #[test]
    fn count_is_singular_for_one_only() {
        use super::count;
        assert_eq!(count(1, "compression", "compressions"), "1 compression");
        assert_eq!(count(0, "file", "files"), "0 files");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
    }
}
