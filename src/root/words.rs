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

#[cfg(test)]
mod tests {
    #[test]
    fn count_is_singular_for_one_only() {
        use super::count;
        assert_eq!(count(1, "compression", "compressions"), "1 compression");
        assert_eq!(count(0, "file", "files"), "0 files");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
    }
}
