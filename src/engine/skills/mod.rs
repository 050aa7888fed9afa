//! Skills: per-agent partitions of `SKILL.md` folders (docs/contract.md §2.3, §4).
//!
//! ```text
//! skills/.seed/<dir>/SKILL.md    template, filled from `skill_paths` while empty
//! skills/.seed/.index            the reference's index (§2.3)
//! skills/<agent>/<dir>/...       one partition per agent, copied from .seed
//! skills/default/...             partition of the empty agent id
//! ```
//!
//! Everything goes through the workspace's [`Sandbox`](crate::backend::Sandbox), so it works the same
//! on every backend. Compared with the reference:
//!
//! * a listing reports invalid skills (bad or missing front matter, YAML the
//!   parser rejects, C08) with their path, line, reason and a hint, instead
//!   of dropping them with a log line; they are never modified;
//! * a listing reads the partition and `<child>/SKILL.md` only, never the
//!   whole tree (weak point 9);
//! * `.index` is reconciled when a directory appears or vanishes *or* a
//!   `SKILL.md` changes (weak point 21), and rewritten atomically only when
//!   its entries changed; workspaces without `.index` (written by sandboxed
//!   reference backends) list fine;
//! * archives are expanded in-process with hard limits and no links
//!   (weak point 33), see [`ArchiveFormat`];
//! * a `SKILL.md` over [`MAX_SKILL_MD_BYTES`] is listed as invalid instead
//!   of being read whole on every listing.

mod archive;
mod frontmatter;
mod host_walk;
mod index;
mod install;
mod scan;
mod seed;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde::Serialize;

pub use archive::{ArchiveFormat, DEFAULT_MAX_EXTRACTED_BYTES, MAX_ARCHIVE_MEMBERS};

use self::archive::ArchiveSource;
use self::frontmatter::FrontMatter;
use self::index::{IndexEntry, SkillIndex};
use super::base::WorkspaceBase;
use super::error::{WorkspaceError, WsResult};
use super::events::Event;
use super::layout::{names, partition_name};
use crate::backend::{BackendError, ByteRange, ExecRequest, FileKind, path as bpath};

/// Partition label used in events for skills seeded into `.seed`.
const SEED_LABEL: &str = ".seed";

/// Directory entries probed in parallel while listing.
const PROBE_CONCURRENCY: usize = 8;

/// Largest `SKILL.md` read, in bytes (4 MiB); a larger one is listed as
/// invalid rather than read whole on every listing.
pub const MAX_SKILL_MD_BYTES: u64 = 4 * 1024 * 1024;

/// Range that reads one byte past the limit, to tell "too large" apart.
const SKILL_MD_RANGE: ByteRange = ByteRange {
    offset: 0,
    len: MAX_SKILL_MD_BYTES + 1,
};

fn too_large(len: usize) -> Option<String> {
    (len as u64 > MAX_SKILL_MD_BYTES).then(|| {
        format!(
            "SKILL.md is larger than {} MiB",
            MAX_SKILL_MD_BYTES / (1024 * 1024)
        )
    })
}

/// A loaded skill (docs/contract.md §4.1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    /// Agent-facing name: the front-matter `name`, with a ` (n)` suffix when
    /// another skill of the partition already had it (from `.index`).
    pub name: String,
    /// Front-matter `description`.
    pub description: String,
    /// Backend path of the skill directory.
    pub dir: String,
    /// The markdown after the front matter, trimmed.
    pub markdown: String,
    /// mtime of `SKILL.md`, seconds since the Unix epoch (0.0 if unknown),
    /// as the reference's Local workspace reports it.
    pub updated_at: f64,
}

/// A directory with a `SKILL.md` that is not a valid skill. Listed so the
/// problem can be seen and fixed; never modified, never offered to an
/// agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InvalidSkill {
    /// Backend path of the skill directory.
    pub dir: String,
    /// Backend path of its `SKILL.md`.
    pub path: String,
    /// 1-based line of `SKILL.md` the problem is on, when known (for YAML
    /// errors, the line of the offending `key: value` entry).
    pub line: Option<usize>,
    /// What is wrong; for YAML errors the parser's own message, with line
    /// numbers of the file.
    pub reason: String,
    /// How to fix it, when the cause is a common one (for example: quote a
    /// value holding `: `, C08).
    pub hint: Option<String>,
}

impl InvalidSkill {
    /// One line for messages: `line N: reason. Hint: ...`.
    pub fn describe(&self) -> String {
        frontmatter::describe(self.line, &self.reason, self.hint.as_deref())
    }
}

/// The skills of one partition: loaded ones and invalid ones, separately.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SkillListing {
    /// Backend path of the partition directory.
    pub partition: String,
    /// Valid skills, in `.index` order.
    pub skills: Vec<Skill>,
    /// Invalid skills, by directory name.
    pub invalid: Vec<InvalidSkill>,
    /// Why the listing is not the partition itself (read-only: not
    /// equipped, or not seeded); `None` normally.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl SkillListing {
    /// The skill with this agent-facing name.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Agent-facing names, in listing order.
    pub fn names(&self) -> Vec<&str> {
        self.skills.iter().map(|s| s.name.as_str()).collect()
    }
}

/// Outcome of an install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstalledSkill {
    /// Agent-facing name (may carry a ` (n)` suffix).
    pub name: String,
    /// Backend path of the skill directory.
    pub dir: String,
    /// The partition already held a skill with a byte-identical `SKILL.md`;
    /// nothing was copied and `name`/`dir` are the existing skill's
    /// (the reference skips duplicates silently).
    pub already_installed: bool,
}

/// What one child directory of a partition turned out to be.
enum Probe {
    /// No `SKILL.md`: not a skill, ignored like the reference does.
    NotASkill,
    Invalid(InvalidSkill),
    Valid {
        fm: FrontMatter,
        hash: String,
        updated_at: f64,
    },
}

/// A partition (or `.seed`) read and reconciled with its `.index`.
struct Scan {
    /// Backend path of the directory.
    dir: String,
    /// The reconciled index.
    index: SkillIndex,
    /// `index` differs from the file on disk.
    changed: bool,
    /// Valid skill directories: name → (front matter, SKILL.md mtime).
    valid: HashMap<String, (FrontMatter, f64)>,
    invalid: Vec<InvalidSkill>,
    /// Every entry name of the directory (for directory-name conflicts).
    children: HashSet<String>,
    /// Read-only: what this scan stands for when it is not the partition.
    note: Option<String>,
}

impl Scan {
    fn skills(&self) -> Vec<Skill> {
        self.index
            .entries
            .iter()
            .filter_map(|(d, e)| {
                let (fm, updated_at) = self.valid.get(d)?;
                Some(Skill {
                    name: e.skill_name.clone(),
                    description: fm.description.clone(),
                    dir: format!("{}/{d}", self.dir),
                    markdown: fm.body.clone(),
                    updated_at: *updated_at,
                })
            })
            .collect()
    }

    fn available(&self) -> String {
        let names: Vec<&str> = self
            .index
            .entries
            .iter()
            .map(|(_, e)| e.skill_name.as_str())
            .collect();
        if names.is_empty() {
            "(none)".into()
        } else {
            names.join(", ")
        }
    }
}

/// Seconds since the epoch as CPython's `os.stat().st_mtime` computes
/// them (`sec + nsec * 1e-9`, posixmodule.c `fill_time`), bit for bit: the
/// reference compares `.index`'s `skills_dir_mtime` with `!=`, and
/// `Duration::as_secs_f64` (`nsec / 1e9`) can differ in the last bit.
pub(crate) fn secs(t: Option<SystemTime>) -> f64 {
    t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as f64 + f64::from(d.subsec_nanos()) * 1e-9)
        .unwrap_or(0.0)
}

fn invalid(msg: impl Into<String>) -> WorkspaceError {
    WorkspaceError::Invalid(msg.into())
}

/// What the skills of a workspace keep between calls; owned by the
/// workspace, used through [`Skills`].
#[derive(Debug, Default)]
pub struct SkillState {
    /// Serialises changes to `skills/` (equip, add, remove, seed).
    lock: tokio::sync::Mutex<()>,
    /// Partition labels equipped by this process.
    equipped: std::sync::Mutex<HashSet<String>>,
}

impl SkillState {
    /// Forgets which partitions were equipped (after a reset).
    pub fn forget_equipped(&self) {
        self.equipped.lock().expect("equipped lock").clear();
    }
}

/// The skills of one workspace, reached through
/// `Workspace::skills`.
#[derive(Debug, Clone, Copy)]
pub struct Skills<'a> {
    base: &'a WorkspaceBase,
    state: &'a SkillState,
    /// Host directories seeded into `.seed` on initialise.
    seed_paths: &'a [PathBuf],
}

impl<'a> Skills<'a> {
    /// Skills over `base`, with `state` kept across calls and `seed_paths`
    /// copied into `.seed` by [`Skills::seed`].
    pub fn new(base: &'a WorkspaceBase, state: &'a SkillState, seed_paths: &'a [PathBuf]) -> Self {
        Skills {
            base,
            state,
            seed_paths,
        }
    }
}

impl Skills<'_> {
    // ----------------------------------------------------------------- API

    /// Lists the skills of `agent`'s partition (`""` = `default`), equipping
    /// it from `.seed` on first access (docs/contract.md §4.2).
    ///
    /// Reconciles `.index` with the directory (new or vanished skill
    /// directories, changed `SKILL.md` files) and rewrites it only when its
    /// entries changed; a failure to write it is logged, not returned.
    ///
    /// Errors: [`WorkspaceError::Id`] for an agent id that starts with `.`
    /// or holds `/`, `\` or NUL; backend errors.
    pub async fn list(self, agent: &str) -> WsResult<SkillListing> {
        let (_guard, mut scan) = self.locked_scan(agent).await?;
        self.persist_quietly(&mut scan).await;
        Ok(SkillListing {
            partition: scan.dir.clone(),
            skills: scan.skills(),
            invalid: scan.invalid,
            note: scan.note,
        })
    }

    /// The skill with agent-facing `name` in `agent`'s partition.
    ///
    /// Errors: [`WorkspaceError::NotFound`] naming the available skills;
    /// [`WorkspaceError::Invalid`] with the reason when `name` is the
    /// directory of an invalid skill.
    pub async fn get(self, name: &str, agent: &str) -> WsResult<Skill> {
        let listing = self.list(agent).await?;
        if let Some(s) = listing.get(name) {
            return Ok(s.clone());
        }
        if let Some(bad) = listing
            .invalid
            .iter()
            .find(|i| bpath::file_name(&i.dir) == name)
        {
            return Err(invalid(format!(
                "Skill '{name}' is invalid: {}: {}",
                bad.path,
                bad.describe()
            )));
        }
        let names = listing.names();
        Err(WorkspaceError::NotFound(format!(
            "Skill '{name}' not found. Available skills: {}",
            if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            }
        )))
    }

    /// The markdown body of a skill, for the skill viewer (docs/contract.md §4.5).
    /// Errors as [`Skills::get`].
    pub async fn markdown(self, name: &str, agent: &str) -> WsResult<String> {
        Ok(self.get(name, agent).await?.markdown)
    }

    /// Removes the skill with agent-facing `name` from `agent`'s partition
    /// and drops its `.index` entry. An invalid skill can be removed by its
    /// directory name.
    ///
    /// Errors: [`WorkspaceError::NotFound`] listing the available names
    /// (the reference Local only logs a warning); [`WorkspaceError::Id`];
    /// backend errors.
    pub async fn remove(self, name: &str, agent: &str) -> WsResult<()> {
        let label = partition_name(agent)?;
        let (_guard, mut scan) = self.locked_scan(agent).await?;
        let target = if let Some((d, _)) = scan.index.find_name(name) {
            d.to_string()
        } else if let Some(bad) = scan
            .invalid
            .iter()
            .find(|i| bpath::file_name(&i.dir) == name)
        {
            bpath::file_name(&bad.dir).to_string()
        } else {
            self.persist_quietly(&mut scan).await;
            return Err(WorkspaceError::NotFound(format!(
                "no skill named {name:?} in {}; available: {}",
                scan.dir,
                scan.available()
            )));
        };
        match self
            .base
            .sandbox()
            .remove(&format!("{}/{target}", scan.dir), true)
            .await
        {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        if scan.index.remove(&target) {
            scan.changed = true;
        }
        self.persist_quietly(&mut scan).await;
        self.base.publish(Event::SkillRemoved {
            agent: label,
            name: name.to_string(),
        });
        Ok(())
    }

    // ------------------------------------------------------------ internals

    fn skill_log(&self, level: &str, message: String) {
        match level {
            "warn" => tracing::warn!(target: "wsbench::skills", "{message}"),
            _ => tracing::info!(target: "wsbench::skills", "{message}"),
        }
        self.base.publish(Event::Log {
            level: level.to_string(),
            source: "skills".into(),
            message,
        });
    }

    fn staging_path(&self) -> String {
        self.base
            .layout()
            .join(&format!(".skill-staging-{}", uuid::Uuid::new_v4().simple()))
    }

    async fn remove_quietly(&self, path: &str) {
        match self.base.sandbox().remove(path, true).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => self.skill_log("warn", format!("cannot remove {path}: {e}")),
        }
    }
}
