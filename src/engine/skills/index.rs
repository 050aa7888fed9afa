//! The `.index` file of `.seed` and of each partition (docs/contract.md §2.3), and
//! the reference's naming rules for installed skills (docs/contract.md §4.3).
//!
//! Format, byte for byte as the reference writes it (`json.dumps(indent=2,
//! ensure_ascii=False)`, no trailing newline):
//!
//! ```json
//! {
//!   "skills_dir_mtime": 1795937718.1738248,
//!   "skills": {
//!     "<dir>": {
//!       "hash": "<sha256 of SKILL.md>",
//!       "skill_name": "<agent-facing name>"
//!     }
//!   }
//! }
//! ```

use std::collections::HashSet;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// One indexed skill directory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IndexEntry {
    /// Lower-case hex SHA-256 of the directory's `SKILL.md` bytes.
    pub hash: String,
    /// Name shown to the agent; may carry a ` (n)` suffix.
    pub skill_name: String,
    /// Keys of the entry wsbench does not know, kept as read.
    pub extra: Map<String, Value>,
}

/// A parsed `.index`.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct SkillIndex {
    /// mtime of the indexed directory (seconds since the epoch) when the
    /// index was last written; the reference reconciles when it differs.
    pub skills_dir_mtime: f64,
    /// Directory name → entry, in file order.
    pub entries: Vec<(String, IndexEntry)>,
    /// Top-level keys wsbench does not know, kept as read.
    pub extra: Map<String, Value>,
}

impl SkillIndex {
    /// Parses `.index` bytes. Entries lacking a string `hash` or
    /// `skill_name` are dropped (reconciliation indexes their directory
    /// again); anything that is not a JSON object is an error.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let Value::Object(mut top) = value else {
            return Err("not a JSON object".into());
        };
        let skills_dir_mtime = top
            .remove("skills_dir_mtime")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0);
        let mut entries = Vec::new();
        match top.remove("skills") {
            None | Some(Value::Null) => {}
            Some(Value::Object(skills)) => {
                for (dir, entry) in skills {
                    let Value::Object(mut e) = entry else {
                        continue;
                    };
                    let (Some(Value::String(hash)), Some(Value::String(skill_name))) =
                        (e.remove("hash"), e.remove("skill_name"))
                    else {
                        continue;
                    };
                    entries.push((
                        dir,
                        IndexEntry {
                            hash,
                            skill_name,
                            extra: e,
                        },
                    ));
                }
            }
            Some(_) => return Err("`skills` is not an object".into()),
        }
        Ok(SkillIndex {
            skills_dir_mtime,
            entries,
            extra: top,
        })
    }

    /// Serialises like the reference: two-space indent, `skills_dir_mtime`
    /// then `skills`, non-ASCII kept as UTF-8, no trailing newline.
    pub fn to_json(&self) -> Vec<u8> {
        let mut top = Map::new();
        top.insert(
            "skills_dir_mtime".into(),
            float_value(self.skills_dir_mtime),
        );
        let mut skills = Map::new();
        for (dir, e) in &self.entries {
            let mut m = Map::new();
            m.insert("hash".into(), Value::String(e.hash.clone()));
            m.insert("skill_name".into(), Value::String(e.skill_name.clone()));
            m.extend(e.extra.clone());
            skills.insert(dir.clone(), Value::Object(m));
        }
        top.insert("skills".into(), Value::Object(skills));
        top.extend(self.extra.clone());
        serde_json::to_vec_pretty(&Value::Object(top)).expect("a JSON value always serialises")
    }

    /// The directory and entry with this agent-facing name.
    pub fn find_name(&self, name: &str) -> Option<(&str, &IndexEntry)> {
        self.entries
            .iter()
            .find(|(_, e)| e.skill_name == name)
            .map(|(d, e)| (d.as_str(), e))
    }

    /// The directory and entry with this content hash.
    pub fn find_hash(&self, hash: &str) -> Option<(&str, &IndexEntry)> {
        self.entries
            .iter()
            .find(|(_, e)| e.hash == hash)
            .map(|(d, e)| (d.as_str(), e))
    }

    /// Agent-facing names in use.
    pub fn names(&self) -> HashSet<String> {
        self.entries
            .iter()
            .map(|(_, e)| e.skill_name.clone())
            .collect()
    }

    /// Drops the entry of a directory; true if there was one.
    pub fn remove(&mut self, dir: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(d, _)| d != dir);
        self.entries.len() != before
    }

    /// True when both list the same directories with the same hashes and
    /// names in the same order (the mtime and unknown keys do not count).
    pub fn same_entries(&self, other: &SkillIndex) -> bool {
        self.entries.len() == other.entries.len()
            && self
                .entries
                .iter()
                .zip(&other.entries)
                .all(|((d1, e1), (d2, e2))| {
                    d1 == d2 && e1.hash == e2.hash && e1.skill_name == e2.skill_name
                })
    }
}

/// A float as JSON the way Python prints it; JSON has no NaN, so a
/// non-finite mtime is written as `0.0`.
fn float_value(f: f64) -> Value {
    serde_json::Number::from_f64(f)
        .or_else(|| serde_json::Number::from_f64(0.0))
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Lower-case hex SHA-256 of a `SKILL.md`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Directory name for a front-matter name: every character outside
/// `[A-Za-z0-9_-]` and the CJK block `一-鿿` becomes `_` (docs/contract.md §4.3).
pub(crate) fn sanitize_dir_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric()
                || c == '_'
                || c == '-'
                || ('\u{4e00}'..='\u{9fff}').contains(&c)
            {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `raw`, or `raw (1)`, `raw (2)`, ... — the first not in `taken`.
pub(crate) fn unique_agent_name(raw: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(raw) {
        return raw.to_string();
    }
    (1u64..)
        .map(|n| format!("{raw} ({n})"))
        .find(|c| !taken.contains(c))
        .expect("an unbounded counter finds a free name")
}

/// `base`, or `base_1`, `base_2`, ... — the first not in `taken`.
pub(crate) fn unique_dir_name(base: &str, taken: &HashSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_string();
    }
    (1u64..)
        .map(|n| format!("{base}_{n}"))
        .find(|c| !taken.contains(c))
        .expect("an unbounded counter finds a free name")
}

/// True when `stored` is `raw` or `raw (n)`: an index name that still
/// belongs to a skill whose front-matter name is `raw`.
pub(crate) fn name_derives_from(stored: &str, raw: &str) -> bool {
    if stored == raw {
        return true;
    }
    stored
        .strip_prefix(raw)
        .and_then(|s| s.strip_prefix(" ("))
        .and_then(|s| s.strip_suffix(')'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = r#"{
  "skills_dir_mtime": 1795937718.1738248,
  "skills": {
    "git-helper": {
      "hash": "a8dee170a8ff7a8a2bb235501e7b8fb03ef56eafe15b5d953f170092b3acb2d2",
      "skill_name": "git-helper"
    },
    "test-runner": {
      "hash": "e3c8fa8e9a75b0c9d89e3378c0783e1beaffb3046912f74b8e3db0a2db65629c",
      "skill_name": "test-runner"
    }
  }
}"#;

    #[test]
    fn round_trips_the_reference_format_byte_for_byte() {
        let idx = SkillIndex::parse(FIXTURE.as_bytes()).unwrap();
        assert_eq!(idx.entries.len(), 2);
        assert_eq!(idx.find_name("test-runner").unwrap().0, "test-runner");
        assert_eq!(String::from_utf8(idx.to_json()).unwrap(), FIXTURE);
    }

    #[test]
    fn writes_zero_and_unicode_like_python() {
        let mut idx = SkillIndex::default();
        idx.entries.push((
            "代码".into(),
            IndexEntry {
                hash: "h".into(),
                skill_name: "代码 (1)".into(),
                extra: Map::new(),
            },
        ));
        let s = String::from_utf8(idx.to_json()).unwrap();
        assert!(s.starts_with("{\n  \"skills_dir_mtime\": 0.0,\n"), "{s}");
        assert!(s.contains("\"skill_name\": \"代码 (1)\""), "{s}");
        assert_eq!(
            String::from_utf8(SkillIndex::default().to_json()).unwrap(),
            "{\n  \"skills_dir_mtime\": 0.0,\n  \"skills\": {}\n}"
        );
    }

    #[test]
    fn keeps_unknown_keys_and_drops_broken_entries() {
        let idx = SkillIndex::parse(br#"{"v": 1, "skills_dir_mtime": 3, "skills": {"a": {"hash": "x", "skill_name": "a", "k": true}, "b": {"hash": 1}}}"#)
            .unwrap();
        assert_eq!(idx.skills_dir_mtime, 3.0);
        assert_eq!(idx.entries.len(), 1);
        let s = String::from_utf8(idx.to_json()).unwrap();
        assert!(s.contains("\"k\": true") && s.contains("\"v\": 1"), "{s}");
        assert!(SkillIndex::parse(b"[]").is_err());
        assert!(SkillIndex::parse(b"{").is_err());
    }

    #[test]
    fn naming_rules() {
        assert_eq!(sanitize_dir_name("My Skill/v2.0"), "My_Skill_v2_0");
        assert_eq!(sanitize_dir_name("代码-助手_x"), "代码-助手_x");
        assert_eq!(sanitize_dir_name("café"), "caf_");
        let taken: HashSet<String> = ["a", "a (1)", "d", "d_1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(unique_agent_name("a", &taken), "a (2)");
        assert_eq!(unique_agent_name("b", &taken), "b");
        assert_eq!(unique_dir_name("d", &taken), "d_2");
        assert!(name_derives_from("a (3)", "a"));
        assert!(name_derives_from("a", "a"));
        assert!(!name_derives_from("ab", "a"));
        assert!(!name_derives_from("a ()", "a"));
    }
}

/// `secs` against CPython's `st_mtime` for the same nanoseconds
/// (`tests/fixtures/skill-index/mtimes.json`, made by `gen.py` beside it):
/// the reference rewrites `.index` unless the recorded float is equal.
#[cfg(test)]
mod mtime_tests {
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn recorded_mtime_is_bit_for_bit_cpythons_st_mtime() {
        let raw = include_str!("../../../tests/fixtures/skill-index/mtimes.json");
        let doc: serde_json::Value = serde_json::from_str(raw).unwrap();
        let rows = doc["mtimes"].as_array().unwrap();
        assert!(rows.len() > 200);
        for r in rows {
            let ns: u128 = r["ns"].as_str().unwrap().parse().unwrap();
            let want: f64 = r["st_mtime"].as_str().unwrap().parse().unwrap();
            let t = UNIX_EPOCH + Duration::from_nanos(ns as u64);
            let got = super::super::secs(Some(t));
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{ns} ns: {got} vs CPython {want}"
            );
        }
    }

    /// The recorded float survives `.index` both ways, bit for bit: wsbench
    /// writes the reference's text for it, and reads the reference's text
    /// (and its own) back to the same float. serde_json's default float
    /// parser is off by one ulp for about one 17-digit mtime in eight; the
    /// `float_roundtrip` feature (Cargo.toml) makes it correctly rounded,
    /// as Python's `json.loads`. Without it wsbench saw its own index as
    /// stale (and the `.index` test in `tests/it/skills.rs` was flaky).
    #[test]
    fn recorded_mtime_round_trips_through_index_text_as_the_references() {
        use super::SkillIndex;
        let raw = include_str!("../../../tests/fixtures/skill-index/mtimes.json");
        let doc: serde_json::Value = serde_json::from_str(raw).unwrap();
        for r in doc["mtimes"].as_array().unwrap() {
            let want: f64 = r["st_mtime"].as_str().unwrap().parse().unwrap();
            let text = r["json"].as_str().unwrap();
            let written = SkillIndex {
                skills_dir_mtime: want,
                ..SkillIndex::default()
            }
            .to_json();
            let written = String::from_utf8(written).unwrap();
            // Python writes `1e-09` where ryu writes `1e-9` (both read back
            // the same): only the exponent form, never a real mtime, differs.
            assert!(
                text.contains('e') || written.contains(&format!("\"skills_dir_mtime\": {text},")),
                "{written} does not record {text} as the reference"
            );
            let theirs = format!("{{\"skills_dir_mtime\": {text}, \"skills\": {{}}}}");
            for (who, bytes) in [
                ("reference", theirs.as_bytes()),
                ("wsbench", written.as_bytes()),
            ] {
                let got = SkillIndex::parse(bytes).unwrap().skills_dir_mtime;
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{who}'s {text} read as {got}"
                );
            }
        }
    }
}
