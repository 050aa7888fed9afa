//! Skills: per-agent partitions of `SKILL.md` folders (contract §2.3, §4).
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
mod index;

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

/// Host directories nested deeper than this are refused when copying a skill.
const MAX_HOST_DEPTH: usize = 64;

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

/// A loaded skill (contract §4.1).
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

/// One entry of a host directory being copied.
struct HostItem {
    rel: String,
    abs: PathBuf,
    is_dir: bool,
    mode: u32,
}

fn secs(t: Option<SystemTime>) -> f64 {
    t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
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
    /// it from `.seed` on first access (contract §4.2).
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

    /// The markdown body of a skill, for the skill viewer (contract §4.5).
    /// Errors as [`Skills::get`].
    pub async fn markdown(self, name: &str, agent: &str) -> WsResult<String> {
        Ok(self.get(name, agent).await?.markdown)
    }

    /// Installs the skill in host directory `host_dir` into `agent`'s
    /// partition with the reference Local rules (contract §4.3): the front
    /// matter must be valid; a skill whose `SKILL.md` is byte-identical to
    /// an installed one is skipped (`already_installed`); the agent-facing
    /// name gets ` (1)`, ` (2)`... on conflict; the directory is the
    /// sanitised name, with `_1`, `_2`... on conflict. Files are copied
    /// into a staging directory of the workdir, then renamed into place, so
    /// a failed copy leaves nothing in the partition. Executable bits are
    /// kept.
    ///
    /// Errors: [`WorkspaceError::Invalid`] when `host_dir` is not a
    /// directory, has no `SKILL.md`, or its front matter is invalid (the
    /// message has the line, the parser's reason and a hint);
    /// [`WorkspaceError::Id`] for a bad agent id; backend errors.
    pub async fn add(self, host_dir: &Path, agent: &str) -> WsResult<InstalledSkill> {
        let label = partition_name(agent)?;
        let origin = host_dir.display().to_string();
        let bytes = read_host_skill_md(host_dir).await?;
        frontmatter::parse(&bytes).map_err(|e| {
            invalid(format!(
                "invalid skill at {origin}: SKILL.md {}",
                e.describe()
            ))
        })?;
        let hash = index::sha256_hex(&bytes);

        let (_guard, mut scan) = self.locked_scan(agent).await?;
        if let Some((d, e)) = scan.index.find_hash(&hash) {
            let done = InstalledSkill {
                name: e.skill_name.clone(),
                dir: format!("{}/{d}", scan.dir),
                already_installed: true,
            };
            self.persist_quietly(&mut scan).await;
            return Ok(done);
        }
        let staging = self.staging_path();
        let res = self
            .stage_host_and_install(&mut scan, host_dir, &staging, &origin)
            .await;
        self.remove_quietly(&staging).await;
        self.persist_quietly(&mut scan).await;
        let installed = res?;
        if !installed.already_installed {
            self.base.publish(Event::SkillAdded {
                agent: label,
                name: installed.name.clone(),
            });
        }
        Ok(installed)
    }

    /// Installs a skill from an archive read from `reader` into `agent`'s
    /// partition; see [`Skills::add_archive_file`] for the rules.
    /// A zip is spooled to a host temp file first (it needs to seek); a tar
    /// is streamed.
    pub async fn add_archive<R>(
        self,
        reader: R,
        fmt: ArchiveFormat,
        agent: &str,
        max_extracted_bytes: Option<u64>,
    ) -> WsResult<InstalledSkill>
    where
        R: std::io::Read + Send + 'static,
    {
        let origin = format!("upload.{fmt}");
        self.install_archive(
            ArchiveSource::Reader(Box::new(reader)),
            fmt,
            agent,
            max_extracted_bytes,
            &origin,
        )
        .await
    }

    /// Installs a skill from the archive at host path `path`.
    ///
    /// The archive is expanded into `<workdir>/.skill-staging-<id>` (always
    /// deleted afterwards) under the safety rules of [`ArchiveFormat`]:
    /// members may not leave the staging directory (absolute paths, `..`),
    /// links become copies only when they resolve to a file inside the
    /// archive, and the expanded size (declared and actually read) may not
    /// pass `max_extracted_bytes` (default
    /// [`DEFAULT_MAX_EXTRACTED_BYTES`]). The skill root is the staging
    /// directory if it holds `SKILL.md`, else its first subdirectory (by
    /// name) that does; it is then installed like [`Skills::add`]
    /// (the name comes from the front matter).
    ///
    /// Errors: [`WorkspaceError::Invalid`] for a refused or unreadable
    /// archive (the reason says which member and why), an archive without a
    /// skill root, or an invalid front matter; [`WorkspaceError::Id`];
    /// backend errors.
    pub async fn add_archive_file(
        self,
        path: &Path,
        fmt: ArchiveFormat,
        agent: &str,
        max_extracted_bytes: Option<u64>,
    ) -> WsResult<InstalledSkill> {
        let origin = path.display().to_string();
        self.install_archive(
            ArchiveSource::Path(path.to_path_buf()),
            fmt,
            agent,
            max_extracted_bytes,
            &origin,
        )
        .await
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

    // --------------------------------------------------- initialise hooks

    /// Moves skills left directly under `skills/` into `skills/.seed/`, and
    /// a stray `skills/.skills` index to `.seed/.index` (contract §2.3,
    /// `_MIGRATE_SKILLS_SHIM`). Idempotent; a name already taken in `.seed`
    /// gets `_1`, `_2`...
    pub(crate) async fn migrate(&self) -> WsResult<()> {
        let skills = self.base.layout().skills_dir();
        let seed = self.base.layout().seed_dir();
        let _guard = self.state.lock.lock().await;
        let entries = match self.base.sandbox().list(&skills).await {
            Ok(e) => e,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let mut moved = 0usize;
        let mut seed_children: Option<HashSet<String>> = None;
        for entry in &entries {
            if entry.name == names::SEED_DIR {
                continue;
            }
            let from = format!("{skills}/{}", entry.name);
            if entry.name == ".skills" && entry.kind == FileKind::File {
                let to = format!("{seed}/{}", names::SKILL_INDEX);
                match self.base.sandbox().stat(&to).await {
                    Err(e) if e.is_not_found() => {
                        self.base.sandbox().mkdir(&seed, true).await?;
                        self.base.sandbox().rename(&from, &to).await?;
                    }
                    _ => {
                        self.skill_log("warn", format!("{from} left in place: {to} already exists"))
                    }
                }
                continue;
            }
            if !entry.is_dir_like() {
                continue;
            }
            match self
                .base
                .sandbox()
                .stat(&format!("{from}/{}", names::SKILL_MD))
                .await
            {
                Ok(st) if st.kind == FileKind::File => {}
                _ => continue,
            }
            if seed_children.is_none() {
                self.base.sandbox().mkdir(&seed, true).await?;
                seed_children = Some(
                    self.base
                        .sandbox()
                        .list(&seed)
                        .await?
                        .into_iter()
                        .map(|e| e.name)
                        .collect(),
                );
            }
            let taken = seed_children.as_mut().expect("filled above");
            let dir = index::unique_dir_name(&entry.name, taken);
            self.base
                .sandbox()
                .rename(&from, &format!("{seed}/{dir}"))
                .await?;
            taken.insert(dir);
            moved += 1;
        }
        if moved > 0 {
            self.skill_log(
                "info",
                format!("migrated {moved} skill(s) from {skills} into {seed}"),
            );
        }
        Ok(())
    }

    /// Copies `config.skill_paths` (host directories) into `skills/.seed`
    /// while it holds no skill directory, with the reference Local rules
    /// (contract §4.3): SHA-256 dedup, ` (n)` name suffixes, sanitised
    /// directory names with `_n` suffixes, `.index` updated.
    ///
    /// Nothing here is fatal: a path without `SKILL.md` or that cannot be
    /// copied is skipped with a warning event. A path whose front matter is
    /// invalid is not indexed (never offered to an agent) but is copied
    /// under its folder name, with a warning, so that every listing shows
    /// it as invalid instead of it silently missing.
    pub(crate) async fn seed(&self) -> WsResult<()> {
        if self.seed_paths.is_empty() {
            return Ok(());
        }
        let seed = self.base.layout().seed_dir();
        let _guard = self.state.lock.lock().await;
        self.base.sandbox().mkdir(&seed, true).await?;
        let entries = self.base.sandbox().list(&seed).await?;
        if entries.iter().any(|e| e.is_dir_like()) {
            return Ok(());
        }
        let mut scan = self.scan_dir(&seed).await?;
        for path in self.seed_paths {
            if let Err(e) = self.seed_one(&mut scan, path).await {
                self.skill_log(
                    "warn",
                    format!("skill path {} not seeded: {e}", path.display()),
                );
            }
        }
        self.persist_quietly(&mut scan).await;
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

    /// Makes sure `agent`'s partition exists, copying `.seed` into it on
    /// first access (contract §4.2). The copy goes to
    /// `<partition>.equipping-<id>` and is renamed into place; if another
    /// writer got there first the copy is discarded. The partition's
    /// existence is the "equipped" marker, so a seed skill the agent deleted
    /// stays deleted. Returns the partition path.
    async fn equip(&self, agent: &str) -> WsResult<String> {
        let partition = self.base.layout().partition_dir(agent)?;
        let label = partition_name(agent)?;
        if self
            .state
            .equipped
            .lock()
            .expect("equipped lock")
            .contains(&label)
        {
            return Ok(partition);
        }
        match self.base.sandbox().stat(&partition).await {
            Ok(st) if st.is_dir_like() => {}
            Ok(_) => {
                return Err(invalid(format!(
                    "{partition} exists but is not a directory, so it cannot hold skills"
                )));
            }
            Err(e) if e.is_not_found() => self.materialise_partition(&partition).await?,
            Err(e) => return Err(e.into()),
        }
        self.state
            .equipped
            .lock()
            .expect("equipped lock")
            .insert(label);
        Ok(partition)
    }

    async fn materialise_partition(&self, partition: &str) -> WsResult<()> {
        let seed = self.base.layout().seed_dir();
        let tmp = format!("{partition}.equipping-{}", uuid::Uuid::new_v4().simple());
        let copied = async {
            self.base
                .sandbox()
                .mkdir(&self.base.layout().skills_dir(), true)
                .await?;
            self.base.sandbox().mkdir(&tmp, false).await?;
            match self.base.sandbox().stat(&seed).await {
                Ok(st) if st.kind == FileKind::Dir => self.copy_sandbox_dir(&seed, &tmp).await,
                Ok(_) => Ok(()),
                Err(e) if e.is_not_found() => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        .await;
        if let Err(e) = copied {
            self.remove_quietly(&tmp).await;
            return Err(e);
        }
        if let Err(e) = self.base.sandbox().rename(&tmp, partition).await {
            self.remove_quietly(&tmp).await;
            // Losing the race to another equip is fine: the partition is there.
            return match self.base.sandbox().stat(partition).await {
                Ok(st) if st.is_dir_like() => Ok(()),
                _ => Err(e.into()),
            };
        }
        self.skill_log("info", format!("equipped {partition} from {seed}"));
        Ok(())
    }

    /// Equips, takes the skill lock and scans the partition. If the
    /// partition vanished since it was cached as equipped, equips again.
    async fn locked_scan(&self, agent: &str) -> WsResult<(tokio::sync::MutexGuard<'_, ()>, Scan)> {
        let label = partition_name(agent)?;
        let partition = self.equip(agent).await?;
        let guard = self.state.lock.lock().await;
        match self.scan_dir(&partition).await {
            Err(WorkspaceError::Backend(BackendError::NotFound(p))) if p == partition => {
                drop(guard);
                self.state
                    .equipped
                    .lock()
                    .expect("equipped lock")
                    .remove(&label);
                let partition = self.equip(agent).await?;
                let guard = self.state.lock.lock().await;
                let scan = self.scan_dir(&partition).await?;
                Ok((guard, scan))
            }
            other => Ok((guard, other?)),
        }
    }

    /// Reads one `<dir>/<child>/SKILL.md`.
    async fn probe(&self, dir: &str, child: &str) -> Probe {
        let skill_dir = format!("{dir}/{child}");
        let path = format!("{skill_dir}/{}", names::SKILL_MD);
        let (stat, bytes) = tokio::join!(
            self.base.sandbox().stat(&path),
            self.base.sandbox().read(&path, Some(SKILL_MD_RANGE))
        );
        let bad = |line, reason: String, hint| {
            Probe::Invalid(InvalidSkill {
                dir: skill_dir.clone(),
                path: path.clone(),
                line,
                reason,
                hint,
            })
        };
        let bytes = match bytes {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return Probe::NotASkill,
            Err(BackendError::IsADirectory(_)) => {
                return bad(None, "SKILL.md is a directory, not a file".into(), None);
            }
            Err(e) => return bad(None, format!("cannot read SKILL.md: {e}"), None),
        };
        if let Some(reason) = too_large(bytes.len()) {
            return bad(None, reason, None);
        }
        match frontmatter::parse(&bytes) {
            Ok(fm) => Probe::Valid {
                fm,
                hash: index::sha256_hex(&bytes),
                updated_at: secs(stat.ok().and_then(|s| s.modified)),
            },
            Err(e) => bad(e.line, e.reason, e.hint),
        }
    }

    /// Reads a directory's `.index` and skill folders and reconciles them:
    /// entries of vanished or now-invalid folders are dropped; an entry
    /// whose `SKILL.md` changed gets the new hash and, if the front-matter
    /// name changed, a new name; new valid folders are added (by name) with
    /// ` (n)` suffixes on name conflicts. Names of unchanged entries are
    /// kept as stored.
    async fn scan_dir(&self, dir: &str) -> WsResult<Scan> {
        let index_path = format!("{dir}/{}", names::SKILL_INDEX);
        // `None` = no usable index on disk; `Some(true)` = the file exists
        // but cannot be parsed.
        let (old, corrupt) = match self.base.sandbox().read(&index_path, None).await {
            Ok(bytes) => match SkillIndex::parse(&bytes) {
                Ok(idx) => (Some(idx), false),
                Err(e) => {
                    self.skill_log(
                        "warn",
                        format!("{index_path} is not a valid index ({e}); rebuilding it"),
                    );
                    (None, true)
                }
            },
            Err(e) if e.is_not_found() => (None, false),
            Err(e) => return Err(e.into()),
        };
        let entries = self.base.sandbox().list(dir).await?;
        let children: HashSet<String> = entries.iter().map(|e| e.name.clone()).collect();
        let candidates: Vec<String> = entries
            .iter()
            .filter(|e| e.is_dir_like())
            .map(|e| e.name.clone())
            .collect();
        let probes: Vec<(String, Probe)> = futures::stream::iter(candidates)
            .map(|name| async move {
                let p = self.probe(dir, &name).await;
                (name, p)
            })
            .buffered(PROBE_CONCURRENCY)
            .collect()
            .await;

        let mut valid: HashMap<String, (FrontMatter, f64)> = HashMap::new();
        let mut hashes: HashMap<String, String> = HashMap::new();
        let mut invalid_skills = Vec::new();
        for (name, probe) in probes {
            match probe {
                Probe::NotASkill => {}
                Probe::Invalid(bad) => invalid_skills.push(bad),
                Probe::Valid {
                    fm,
                    hash,
                    updated_at,
                } => {
                    hashes.insert(name.clone(), hash);
                    valid.insert(name, (fm, updated_at));
                }
            }
        }

        let old_index = old.clone().unwrap_or_default();
        let mut taken: HashSet<String> = old_index
            .entries
            .iter()
            .filter(|(d, e)| hashes.get(d) == Some(&e.hash))
            .map(|(_, e)| e.skill_name.clone())
            .collect();
        let mut new_entries: Vec<(String, IndexEntry)> = Vec::new();
        for (d, e) in &old_index.entries {
            let Some(hash) = hashes.get(d) else { continue };
            if *hash == e.hash {
                new_entries.push((d.clone(), e.clone()));
                continue;
            }
            let raw = &valid[d].0.name;
            let name =
                if index::name_derives_from(&e.skill_name, raw) && !taken.contains(&e.skill_name) {
                    e.skill_name.clone()
                } else {
                    index::unique_agent_name(raw, &taken)
                };
            taken.insert(name.clone());
            new_entries.push((
                d.clone(),
                IndexEntry {
                    hash: hash.clone(),
                    skill_name: name,
                    extra: e.extra.clone(),
                },
            ));
        }
        let indexed: HashSet<String> = new_entries.iter().map(|(d, _)| d.clone()).collect();
        let mut fresh: Vec<&String> = valid.keys().filter(|d| !indexed.contains(*d)).collect();
        fresh.sort();
        for d in fresh {
            let name = index::unique_agent_name(&valid[d].0.name, &taken);
            taken.insert(name.clone());
            new_entries.push((
                d.clone(),
                IndexEntry {
                    hash: hashes[d].clone(),
                    skill_name: name,
                    extra: Default::default(),
                },
            ));
        }
        let index = SkillIndex {
            skills_dir_mtime: old_index.skills_dir_mtime,
            entries: new_entries,
            extra: old_index.extra.clone(),
        };
        let changed = match &old {
            Some(o) => !o.same_entries(&index),
            None => corrupt || !index.entries.is_empty(),
        };
        invalid_skills.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(Scan {
            dir: dir.to_string(),
            index,
            changed,
            valid,
            invalid: invalid_skills,
            children,
        })
    }

    /// Writes `.index` if it changed, with the directory's current mtime.
    async fn persist(&self, scan: &mut Scan) -> WsResult<()> {
        if !scan.changed {
            return Ok(());
        }
        let mtime = self
            .base
            .sandbox()
            .stat(&scan.dir)
            .await
            .ok()
            .and_then(|s| s.modified);
        scan.index.skills_dir_mtime = secs(mtime);
        let path = format!("{}/{}", scan.dir, names::SKILL_INDEX);
        self.base
            .sandbox()
            .write(&path, &scan.index.to_json())
            .await?;
        scan.changed = false;
        Ok(())
    }

    /// [`Self::persist`], logging a failure: the index is a cache that the
    /// next listing rebuilds.
    async fn persist_quietly(&self, scan: &mut Scan) {
        if let Err(e) = self.persist(scan).await {
            self.skill_log(
                "warn",
                format!("cannot write {}/{}: {e}", scan.dir, names::SKILL_INDEX),
            );
        }
    }

    /// Installs the skill folder `src` (a sandbox path outside the
    /// partition, normally under a staging directory) into `scan.dir` by
    /// renaming it. Caller holds the skill lock and persists `scan`.
    async fn install_staged(
        &self,
        scan: &mut Scan,
        src: &str,
        origin: &str,
    ) -> WsResult<InstalledSkill> {
        let md = format!("{src}/{}", names::SKILL_MD);
        let bytes = match self.base.sandbox().read(&md, Some(SKILL_MD_RANGE)).await {
            Ok(b) => b,
            Err(e) if e.is_not_found() => {
                return Err(invalid(format!("{origin} holds no SKILL.md")));
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(reason) = too_large(bytes.len()) {
            return Err(invalid(format!("invalid skill at {origin}: {reason}")));
        }
        let fm = frontmatter::parse(&bytes).map_err(|e| {
            invalid(format!(
                "invalid skill at {origin}: SKILL.md {}",
                e.describe()
            ))
        })?;
        let hash = index::sha256_hex(&bytes);
        if let Some((d, e)) = scan.index.find_hash(&hash) {
            return Ok(InstalledSkill {
                name: e.skill_name.clone(),
                dir: format!("{}/{d}", scan.dir),
                already_installed: true,
            });
        }
        let name = index::unique_agent_name(&fm.name, &scan.index.names());
        let mut taken_dirs = scan.children.clone();
        taken_dirs.extend(scan.index.entries.iter().map(|(d, _)| d.clone()));
        taken_dirs.insert(names::SKILL_INDEX.to_string());
        let dir_name = index::unique_dir_name(&index::sanitize_dir_name(&fm.name), &taken_dirs);
        let dest = format!("{}/{dir_name}", scan.dir);
        self.base.sandbox().rename(src, &dest).await?;
        let updated_at = secs(
            self.base
                .sandbox()
                .stat(&format!("{dest}/{}", names::SKILL_MD))
                .await
                .ok()
                .and_then(|s| s.modified),
        );
        scan.children.insert(dir_name.clone());
        scan.index.entries.push((
            dir_name.clone(),
            IndexEntry {
                hash,
                skill_name: name.clone(),
                extra: Default::default(),
            },
        ));
        scan.valid.insert(dir_name, (fm, updated_at));
        scan.changed = true;
        Ok(InstalledSkill {
            name,
            dir: dest,
            already_installed: false,
        })
    }

    async fn stage_host_and_install(
        &self,
        scan: &mut Scan,
        host_dir: &Path,
        staging: &str,
        origin: &str,
    ) -> WsResult<InstalledSkill> {
        self.base.sandbox().mkdir(staging, false).await?;
        self.copy_host_dir(host_dir, staging).await?;
        self.install_staged(scan, staging, origin).await
    }

    async fn install_archive(
        &self,
        source: ArchiveSource,
        fmt: ArchiveFormat,
        agent: &str,
        max_extracted_bytes: Option<u64>,
        origin: &str,
    ) -> WsResult<InstalledSkill> {
        let label = partition_name(agent)?;
        self.equip(agent).await?;
        let staging = self.staging_path();
        let res = self
            .extract_and_install(&staging, source, fmt, agent, max_extracted_bytes, origin)
            .await;
        self.remove_quietly(&staging).await;
        let installed = res?;
        if !installed.already_installed {
            self.base.publish(Event::SkillAdded {
                agent: label,
                name: installed.name.clone(),
            });
        }
        Ok(installed)
    }

    async fn extract_and_install(
        &self,
        staging: &str,
        source: ArchiveSource,
        fmt: ArchiveFormat,
        agent: &str,
        max_extracted_bytes: Option<u64>,
        origin: &str,
    ) -> WsResult<InstalledSkill> {
        let max = max_extracted_bytes.unwrap_or(DEFAULT_MAX_EXTRACTED_BYTES);
        self.base.sandbox().mkdir(staging, false).await?;
        let extracted = archive::extract(self.base.sandbox(), source, fmt, staging, max)
            .await
            .map_err(|reason| invalid(format!("refused the {fmt} archive {origin}: {reason}")))?;
        self.mark_executable(staging, &extracted.executables).await;
        let root = self.find_skill_root(staging, origin).await?;
        let (_guard, mut scan) = self.locked_scan(agent).await?;
        let res = self.install_staged(&mut scan, &root, origin).await;
        self.persist_quietly(&mut scan).await;
        res
    }

    /// The staging directory if it holds `SKILL.md`, else its first
    /// subdirectory (by name) that does.
    async fn find_skill_root(&self, staging: &str, origin: &str) -> WsResult<String> {
        let entries = self.base.sandbox().list(staging).await?;
        if entries
            .iter()
            .any(|e| e.name == names::SKILL_MD && e.kind == FileKind::File)
        {
            return Ok(staging.to_string());
        }
        for e in entries.iter().filter(|e| e.kind == FileKind::Dir) {
            let dir = format!("{staging}/{}", e.name);
            if let Ok(st) = self
                .base
                .sandbox()
                .stat(&format!("{dir}/{}", names::SKILL_MD))
                .await
                && st.kind == FileKind::File
            {
                return Ok(dir);
            }
        }
        Err(invalid(format!(
            "the archive {origin} holds no SKILL.md, neither at its top level nor in a top-level folder"
        )))
    }

    async fn seed_one(&self, scan: &mut Scan, path: &Path) -> WsResult<()> {
        let origin = path.display().to_string();
        let bytes = read_host_skill_md(path).await?;
        let parsed = frontmatter::parse(&bytes);
        if parsed.is_ok() {
            let hash = index::sha256_hex(&bytes);
            if let Some((d, _)) = scan.index.find_hash(&hash) {
                self.skill_log(
                    "info",
                    format!("skill at {origin} is already seeded as {}/{d}", scan.dir),
                );
                return Ok(());
            }
        }
        let staging = self.staging_path();
        let res = async {
            self.base.sandbox().mkdir(&staging, false).await?;
            self.copy_host_dir(path, &staging).await?;
            match &parsed {
                Ok(_) => {
                    let done = self.install_staged(scan, &staging, &origin).await?;
                    if !done.already_installed {
                        self.base.publish(Event::SkillAdded {
                            agent: SEED_LABEL.into(),
                            name: done.name,
                        });
                    }
                }
                Err(e) => {
                    let base = path
                        .file_name()
                        .map(|n| index::sanitize_dir_name(&n.to_string_lossy()))
                        .filter(|n| !n.is_empty())
                        .unwrap_or_else(|| "skill".into());
                    let mut taken = scan.children.clone();
                    taken.insert(names::SKILL_INDEX.to_string());
                    let dir = index::unique_dir_name(&base, &taken);
                    self.base.sandbox().rename(&staging, &format!("{}/{dir}", scan.dir)).await?;
                    scan.children.insert(dir.clone());
                    self.skill_log(
                        "warn",
                        format!(
                            "skill at {origin} is invalid and will be listed as such (copied to {}/{dir}, not offered to agents): SKILL.md {}",
                            scan.dir,
                            e.describe()
                        ),
                    );
                }
            }
            Ok::<(), WorkspaceError>(())
        }
        .await;
        self.remove_quietly(&staging).await;
        res
    }

    /// Copies host directory `host` into the existing sandbox directory
    /// `dest`, following symlinks like the reference's `copytree`, keeping
    /// executable bits.
    async fn copy_host_dir(&self, host: &Path, dest: &str) -> WsResult<()> {
        let root = host.to_path_buf();
        let items = tokio::task::spawn_blocking(move || walk_host(&root))
            .await
            .map_err(|e| invalid(format!("copy task failed: {e}")))??;
        let mut executables = Vec::new();
        for item in items {
            let target = format!("{dest}/{}", item.rel);
            if item.is_dir {
                self.base.sandbox().mkdir(&target, true).await?;
                continue;
            }
            let file = tokio::fs::File::open(&item.abs)
                .await
                .map_err(|e| invalid(format!("cannot read {}: {e}", item.abs.display())))?;
            self.base
                .sandbox()
                .write_stream(&target, Box::new(file))
                .await?;
            if item.mode & 0o111 != 0 {
                executables.push((item.rel, item.mode));
            }
        }
        self.mark_executable(dest, &executables).await;
        Ok(())
    }

    /// Copies sandbox directory `src` into the existing directory `dest`,
    /// level by level. Symlinks and special files are skipped with a
    /// warning: following them could copy files from outside the workspace.
    async fn copy_sandbox_dir(&self, src: &str, dest: &str) -> WsResult<()> {
        let mut pending = vec![String::new()];
        let mut executables = Vec::new();
        while let Some(rel) = pending.pop() {
            let join = |name: &str| {
                if rel.is_empty() {
                    name.to_string()
                } else {
                    format!("{rel}/{name}")
                }
            };
            let from_dir = if rel.is_empty() {
                src.to_string()
            } else {
                format!("{src}/{rel}")
            };
            for entry in self.base.sandbox().list(&from_dir).await? {
                let r = join(&entry.name);
                match entry.kind {
                    FileKind::Dir => {
                        self.base
                            .sandbox()
                            .mkdir(&format!("{dest}/{r}"), true)
                            .await?;
                        pending.push(r);
                    }
                    FileKind::File => {
                        let data = self
                            .base
                            .sandbox()
                            .read(&format!("{src}/{r}"), None)
                            .await?;
                        self.base
                            .sandbox()
                            .write(&format!("{dest}/{r}"), &data)
                            .await?;
                        if let Some(mode) = entry.mode.filter(|m| m & 0o111 != 0) {
                            executables.push((r, mode));
                        }
                    }
                    FileKind::Symlink | FileKind::Other => {
                        self.skill_log(
                            "warn",
                            format!("{src}/{r} is not a regular file or directory; not copied"),
                        );
                    }
                }
            }
        }
        self.mark_executable(dest, &executables).await;
        Ok(())
    }

    /// Gives files under `base` their original permission bits (only files
    /// with an executable bit are passed in; others keep the default).
    /// Directly on the host where the backend shares it, else with one
    /// `chmod` per mode. Failures are logged: a skill without `+x` still
    /// reads fine.
    async fn mark_executable(&self, base: &str, files: &[(String, u32)]) {
        if files.is_empty() {
            return;
        }
        if self.base.sandbox().host_root().is_some() {
            for (rel, mode) in files {
                let path = format!("{base}/{rel}");
                let Some(host) = self.base.sandbox().host_path(&path) else {
                    continue;
                };
                let perms = std::os::unix::fs::PermissionsExt::from_mode(mode & 0o777);
                if let Err(e) = tokio::fs::set_permissions(&host, perms).await {
                    self.skill_log("warn", format!("cannot set the mode of {path}: {e}"));
                }
            }
            return;
        }
        let mut by_mode: HashMap<u32, Vec<String>> = HashMap::new();
        for (rel, mode) in files {
            by_mode
                .entry(mode & 0o777)
                .or_default()
                .push(format!("{base}/{rel}"));
        }
        for (mode, paths) in by_mode {
            for chunk in paths.chunks(200) {
                let mut argv = vec!["chmod".to_string(), format!("{mode:o}"), "--".to_string()];
                argv.extend(chunk.iter().cloned());
                match self.base.sandbox().exec(ExecRequest::new(argv), None).await {
                    Ok(out) if out.exit_code == Some(0) => {}
                    Ok(out) => self.skill_log(
                        "warn",
                        format!(
                            "chmod {mode:o} under {base} exited with {:?}",
                            out.exit_code
                        ),
                    ),
                    Err(e) => {
                        self.skill_log("warn", format!("chmod {mode:o} under {base} failed: {e}"))
                    }
                }
            }
        }
    }
}

/// Reads `<dir>/SKILL.md` on the host, with a clear error when the folder or
/// the file is missing.
async fn read_host_skill_md(dir: &Path) -> WsResult<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let md = dir.join(names::SKILL_MD);
    match tokio::fs::File::open(&md).await {
        Ok(f) => {
            let mut bytes = Vec::new();
            f.take(SKILL_MD_RANGE.len)
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| invalid(format!("cannot read {}: {e}", md.display())))?;
            match too_large(bytes.len()) {
                Some(reason) => Err(invalid(format!(
                    "invalid skill at {}: {reason}",
                    dir.display()
                ))),
                None => Ok(bytes),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if tokio::fs::metadata(dir).await.is_ok_and(|m| m.is_dir()) {
                Err(invalid(format!(
                    "{} holds no SKILL.md, so it is not a skill",
                    dir.display()
                )))
            } else {
                Err(invalid(format!("{} is not a directory", dir.display())))
            }
        }
        Err(e) => Err(invalid(format!("cannot read {}: {e}", md.display()))),
    }
}

/// Lists a host directory recursively (parents before children, by name),
/// following symlinks like `shutil.copytree(symlinks=False)`; refuses
/// dangling links, symlink loops and absurd depth. Special files are
/// skipped.
fn walk_host(root: &Path) -> WsResult<Vec<HostItem>> {
    use std::os::unix::fs::PermissionsExt;
    fn visit(
        dir: &Path,
        rel: &str,
        depth: usize,
        ancestors: &mut Vec<PathBuf>,
        out: &mut Vec<HostItem>,
    ) -> WsResult<()> {
        if depth > MAX_HOST_DEPTH {
            return Err(invalid(format!("{} is nested too deeply", dir.display())));
        }
        let canon = std::fs::canonicalize(dir)
            .map_err(|e| invalid(format!("cannot read {}: {e}", dir.display())))?;
        if ancestors.contains(&canon) {
            return Err(invalid(format!("{} is a symlink loop", dir.display())));
        }
        ancestors.push(canon);
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| invalid(format!("cannot read {}: {e}", dir.display())))?
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(format!("cannot read {}: {e}", dir.display())))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let abs = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let meta = std::fs::metadata(&abs)
                .map_err(|e| invalid(format!("cannot copy {}: {e}", abs.display())))?;
            if meta.is_dir() {
                out.push(HostItem {
                    rel: r.clone(),
                    abs: abs.clone(),
                    is_dir: true,
                    mode: meta.permissions().mode(),
                });
                visit(&abs, &r, depth + 1, ancestors, out)?;
            } else if meta.is_file() {
                out.push(HostItem {
                    rel: r,
                    abs,
                    is_dir: false,
                    mode: meta.permissions().mode(),
                });
            }
        }
        ancestors.pop();
        Ok(())
    }
    let mut out = Vec::new();
    visit(root, "", 0, &mut Vec::new(), &mut out)?;
    Ok(out)
}
