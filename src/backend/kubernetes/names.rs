//! Object names and label values derived from a workspace id.
//!
//! The reference maps every character outside `[a-z0-9-]` to `-` and cuts
//! at 63 characters, so `A_b` and `a-b` (or two long ids sharing a
//! prefix) land on the same Pod and PVC, and it writes the raw id as a
//! label value, which the API server refuses for ids that are not
//! label-safe (docs/contract.md §11 point 27). Here every derived name carries a
//! hash of the exact id, and a label value is the id itself only when it
//! is already valid, else a sanitised form with the same hash; the raw id
//! always travels in an annotation, which has no such limits.

use sha2::{Digest, Sha256};

/// Longest DNS-1123 label (Pod and PVC names, label values).
pub(crate) const MAX_NAME: usize = 63;

/// Hex digits of the id hash in a derived name (40 bits: a collision
/// needs about a million ids, and the annotation check catches it).
const HASH_HEX: usize = 10;

fn id_hash(id: &str) -> String {
    hex::encode(Sha256::digest(id.as_bytes()))[..HASH_HEX].to_string()
}

/// `[a-z0-9-]` only, runs of `-` squeezed, no `-` at either end.
fn sanitise(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// The Pod and PVC name of workspace `id`: `<prefix><sanitised id>-<hash>`,
/// at most 63 characters, a valid DNS-1123 label. Distinct ids give
/// distinct names (the hash covers the exact id, case and punctuation
/// included). `prefix` is itself sanitised; an empty one becomes `ws-`.
pub fn object_name(prefix: &str, id: &str) -> String {
    let mut prefix = sanitise(prefix);
    if prefix.is_empty() {
        prefix = "ws".into();
    }
    let hash = id_hash(id);
    // `<prefix>-<body>-<hash>` within 63 characters.
    let room = MAX_NAME.saturating_sub(prefix.len() + 2 + HASH_HEX);
    let mut body = sanitise(id);
    body.truncate(room);
    let body = body.trim_end_matches('-');
    let mut name = if body.is_empty() {
        format!("{prefix}-{hash}")
    } else {
        format!("{prefix}-{body}-{hash}")
    };
    if name.len() > MAX_NAME {
        // Only an absurdly long prefix gets here.
        name = format!("ws-{hash}");
    }
    name
}

/// Whether `v` is a valid label value: at most 63 characters of
/// `[A-Za-z0-9._-]`, starting and ending with an alphanumeric (or empty).
pub(crate) fn is_label_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    v.len() <= MAX_NAME
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// `v` itself when it is a valid label value, else a sanitised form with
/// a hash of `v` (`<sanitised>-<hash>`, at most 63 characters). The exact
/// value is kept in an annotation of the same key.
pub(crate) fn label_value(v: &str) -> String {
    if is_label_value(v) {
        return v.to_string();
    }
    let hash = id_hash(v);
    let mut body = sanitise(v);
    body.truncate(MAX_NAME - 1 - HASH_HEX);
    let body = body.trim_end_matches('-');
    if body.is_empty() {
        format!("h{hash}")
    } else {
        format!("{body}-{hash}")
    }
}

/// Whether `k` is a valid label key (`[prefix/]name`, name ≤ 63 of
/// `[A-Za-z0-9._-]` with alphanumeric ends, prefix a DNS subdomain).
pub(crate) fn is_label_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= MAX_NAME
                    && part
                        .bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    prefix_ok && !name.is_empty() && is_label_value(name)
}

/// Whether `name` is a valid DNS-1123 label (namespaces).
pub(crate) fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_distinct_where_the_reference_collides() {
        let ids = [
            "A_b",
            "a-b",
            "a.b",
            "a b",
            "",
            "---",
            "Ünïcode/ids",
            &"x".repeat(200),
            &format!("{}y", "x".repeat(199)),
        ];
        let names: Vec<String> = ids.iter().map(|i| object_name("wsbench-", i)).collect();
        for n in &names {
            assert!(is_dns_label(n), "{n}");
            assert!(n.starts_with("wsbench-"), "{n}");
        }
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(
            object_name("wsbench-", "A_b"),
            object_name("wsbench-", "A_b")
        );
        assert!(object_name("wsbench-", "demo").starts_with("wsbench-demo-"));
        assert!(is_dns_label(&object_name(&"p".repeat(80), "x")));
    }

    #[test]
    fn label_values_keep_valid_ids_and_hash_the_rest() {
        assert_eq!(label_value("alice.coder_1"), "alice.coder_1");
        for bad in ["a b", "-x", "x/y", &"z".repeat(64), "ü"] {
            let v = label_value(bad);
            assert!(is_label_value(&v), "{bad} -> {v}");
            assert_ne!(v, bad);
        }
        assert_ne!(label_value("a b"), label_value("a/b"));
        assert!(is_label_key("wsbench.workspace.id"));
        assert!(is_label_key("app.kubernetes.io/managed-by"));
        assert!(!is_label_key("bad key"));
        assert!(!is_label_key("Bad_Prefix/x"));
    }
}
