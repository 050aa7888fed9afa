//! The finder's ranking: nucleo's fuzzy score of every listed path per
//! keystroke, and the matched characters of the rows on screen.

use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32String};

/// The text nucleo matches, built once per listing (not per keystroke).
pub fn haystacks(paths: &[String]) -> Vec<Utf32String> {
    paths
        .iter()
        .map(|p| Utf32String::from(p.as_str()))
        .collect()
}

/// A matcher set for paths (a `/` bonus, as fzf's path scheme).
pub fn path_matcher() -> Matcher {
    Matcher::new(Config::DEFAULT.match_paths())
}

/// The nucleo pattern of what was typed: fzf's syntax (`'exact`,
/// `^prefix`, `suffix$`, `!not`, words separated by spaces), smart case.
pub fn pattern(needle: &str) -> Pattern {
    Pattern::parse(needle, CaseMatching::Smart, Normalization::Smart)
}

/// Indexes of `hay` that match `needle`, best first; ties keep listing
/// order (newest first). An empty needle keeps every path in order.
/// Cost: one score per path (about 100k paths in one frame, see
/// `benches/tui.rs`).
pub fn rank(m: &mut Matcher, needle: &str, hay: &[Utf32String]) -> Vec<u32> {
    if needle.trim().is_empty() {
        return (0..hay.len() as u32).collect();
    }
    let pat = pattern(needle);
    let mut scored: Vec<(u32, u32)> = hay
        .iter()
        .enumerate()
        .filter_map(|(i, h)| pat.score(h.slice(..), m).map(|s| (s, i as u32)))
        .collect();
    scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, i)| i).collect()
}

/// Char positions of `needle`'s match in `hay` (for highlighting the
/// rows on screen), sorted, without duplicates.
pub fn match_positions(m: &mut Matcher, pat: &Pattern, hay: &Utf32String) -> Vec<u32> {
    let mut idx = Vec::new();
    pat.indices(hay.slice(..), m, &mut idx);
    idx.sort_unstable();
    idx.dedup();
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_by_fuzzy_score_then_listing_order() {
        let paths: Vec<String> = [
            "docs/README.md",
            "src/engine/mcp/client.rs",
            "src/main.rs",
            "src/engine/mcp/mod.rs",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let hay = haystacks(&paths);
        let mut m = path_matcher();
        let r = rank(&mut m, "mcpcli", &hay);
        assert_eq!(r.first(), Some(&1), "{r:?}");
        assert!(!r.contains(&0) && !r.contains(&2));
        assert_eq!(rank(&mut m, "", &hay), [0, 1, 2, 3]);
        assert!(rank(&mut m, "zzz", &hay).is_empty());
        let pos = match_positions(&mut m, &pattern("main"), &hay[2]);
        assert_eq!(pos, [4, 5, 6, 7]);
    }
}
