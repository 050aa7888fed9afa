//! Host file names made from ids (workspace ids, sandbox names).

/// Makes an id safe as one file-name segment: `[A-Za-z0-9._-]` kept,
/// everything else `_`, plus a short hash suffix when anything changed so
/// distinct ids never collide.
pub fn sanitize_segment(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let clean = clean.trim_start_matches('.').to_string();
    if clean == id && !clean.is_empty() {
        return clean;
    }
    use sha2::Digest;
    let h = hex::encode(&sha2::Sha256::digest(id.as_bytes())[..4]);
    if clean.is_empty() {
        h
    } else {
        format!("{clean}-{h}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_ids_without_collisions() {
        assert_eq!(sanitize_segment("abc-1"), "abc-1");
        let a = sanitize_segment("a/b");
        let b = sanitize_segment("a_b");
        assert_ne!(a, b);
        assert!(!sanitize_segment("..").starts_with('.'));
    }
}
