//! Pure POSIX path helpers for backend paths (never consult the host cwd).

/// Name prefix of the temp file an atomic write makes next to its target
/// (same directory, so the final rename stays on one file system). One
/// left by a write killed mid-way is never listed by Glob, Grep or the
/// Files tree ([`is_temp_name`]).
pub const TEMP_PREFIX: &str = ".wsbench-tmp-";

/// Name prefix of the temp file an exclusive create makes on the shell
/// backends before linking it into place.
pub const NEW_PREFIX: &str = ".wsbench-new-";

/// True for the names of wsbench's own temp files ([`TEMP_PREFIX`],
/// [`NEW_PREFIX`]): hidden from searches and listings meant for people
/// and agents, since they are either in flight or debris of a killed write.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX) || name.starts_with(NEW_PREFIX)
}

/// Lexically normalises `path`: collapses `//`, drops `.`, resolves `..`
/// against earlier segments (never above `/` for absolute paths).
/// Returns `"."` for an empty relative result.
pub fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".to_string()
    } else {
        joined
    }
}

/// Joins `rel` onto `base` (an absolute `rel` wins), then normalises.
pub fn join(base: &str, rel: &str) -> String {
    if rel.starts_with('/') {
        normalize(rel)
    } else {
        normalize(&format!("{base}/{rel}"))
    }
}

/// True when `path` is absolute.
pub fn is_absolute(path: &str) -> bool {
    path.starts_with('/')
}

/// The part of `path` below `root` (both normalised), `""` for the root
/// itself; `None` when `path` is not inside `root`.
pub fn strip_root(root: &str, path: &str) -> Option<String> {
    let root = normalize(root);
    let path = normalize(path);
    if path == root {
        return Some(String::new());
    }
    let prefix = if root.ends_with('/') {
        root.clone()
    } else {
        format!("{root}/")
    };
    path.strip_prefix(&prefix).map(str::to_string)
}

/// Parent directory (`"/"` for `/x`, `"."` for a bare name).
pub fn parent(path: &str) -> String {
    let path = normalize(path);
    match path.rfind('/') {
        Some(0) => "/".to_string(),
        Some(i) => path[..i].to_string(),
        None => ".".to_string(),
    }
}

/// Last segment of a path.
pub fn file_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

/// POSIX shell quoting of one word, by `shlex` (its output is safe for
/// `sh`, `dash`, `bash` and busybox `sh`, the shells our scripts run in).
/// A word that needs no quotes comes back as it is; `""` becomes `''`.
///
/// A NUL byte, which no shell word can carry, is kept as it is: the exec
/// that gets the script refuses it (Rust's `Command`, the services'
/// APIs), so the caller sees an error instead of a silently cut word.
/// This is the one shell quoting of the crate: the cloud scripts and the
/// session shell use it too.
pub fn shell_quote(word: &str) -> String {
    shlex::Quoter::new()
        .allow_nul(true)
        .quote(word)
        .map(|q| q.into_owned())
        .unwrap_or_else(|e| unreachable!("shlex refuses nothing with allow_nul: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(normalize("/a/./b//c/../d"), "/a/b/d");
        assert_eq!(normalize("/../.."), "/");
        assert_eq!(normalize("a/../../b"), "../b");
        assert_eq!(normalize(""), ".");
    }

    #[test]
    fn strips_root() {
        assert_eq!(strip_root("/w", "/w/a/b").as_deref(), Some("a/b"));
        assert_eq!(strip_root("/w", "/w").as_deref(), Some(""));
        assert_eq!(strip_root("/w", "/wx/a"), None);
        assert_eq!(strip_root("/w", "/w/../etc"), None);
        assert_eq!(strip_root("/", "/etc").as_deref(), Some("etc"));
    }

    #[test]
    fn joins_and_parents() {
        assert_eq!(join("/w", "a/../b"), "/w/b");
        assert_eq!(join("/w", "/abs"), "/abs");
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert_eq!(file_name("/a/b.txt"), "b.txt");
    }

    #[test]
    fn quotes() {
        assert_eq!(shell_quote("abc"), "abc");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("/w/a.txt"), "/w/a.txt");
        // Whatever the form, `sh` reads each word back as it was.
        for w in [
            "it's", "a b", "$HOME", "`id`", "x\ny", "*", "~", "é ü", "-n", "a\"b",
        ] {
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("printf %s {}", shell_quote(w))])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), w, "{w:?}");
        }
    }
}
