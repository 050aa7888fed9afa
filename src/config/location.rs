//! Placing an error in the config text: line, column, the key on a line.

/// Byte offset of the deepest of `keys` present in `text`.
pub(super) fn key_offset(text: &str, keys: &[&str]) -> Option<usize> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut found = None;
    for (i, k) in keys.iter().enumerate() {
        let Some((key, value)) = table.iter().find(|(key, _)| key.get_ref() == k) else {
            break;
        };
        found = Some(key.span().start);
        if i + 1 < keys.len() {
            match value.get_ref().as_table() {
                Some(t) => table = t,
                None => break,
            }
        }
    }
    found
}

/// The key of a `key = value` line (1-based), if the line has one.
pub(super) fn key_on_line(text: &str, line: usize) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let (key, _) = l.split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

/// 1-based line where `key = ...` is set.
pub(super) fn find_key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == key)
        })
        .map(|i| i + 1)
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}
