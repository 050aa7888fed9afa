//! The `.seed` partition: migrating stray skills into it, seeding it
//! from host paths on initialise, and equipping an agent partition from it.

use super::install::read_host_skill_md;
use super::*;

impl Skills<'_> {
    // --------------------------------------------------- initialise hooks

    /// Moves skills left directly under `skills/` into `skills/.seed/`, and
    /// a stray `skills/.skills` index to `.seed/.index` (docs/contract.md §2.3,
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
    /// (docs/contract.md §4.3): SHA-256 dedup, ` (n)` name suffixes, sanitised
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

    /// Makes sure `agent`'s partition exists, copying `.seed` into it on
    /// first access (docs/contract.md §4.2). The copy goes to
    /// `<partition>.equipping-<id>` and is renamed into place; if another
    /// writer got there first the copy is discarded. The partition's
    /// existence is the "equipped" marker, so a seed skill the agent deleted
    /// stays deleted. Returns the partition path.
    pub(super) async fn equip(&self, agent: &str) -> WsResult<String> {
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

    pub(super) async fn materialise_partition(&self, partition: &str) -> WsResult<()> {
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
        self.keep_seed_mtime(&seed, partition).await;
        self.skill_log("info", format!("equipped {partition} from {seed}"));
        Ok(())
    }

    /// Gives a freshly equipped partition the seed folder's mtime, as the
    /// reference's equip does (`shutil.copytree` ends with `copystat`):
    /// the `.index` copied from the seed records the seed's mtime, so the
    /// partition then matches it and the reference's first `list_skills`
    /// leaves it alone instead of rewriting it (found in issue 23's
    /// both-directions trial). Limit: a seed whose `.index` is itself
    /// stale (the reference's own seeding leaves it a few ms older than
    /// the folder) still gets one rewrite, as after the reference's own
    /// equip. Only where the folder has a host path (the
    /// reference reads `.index` only on local); a failure is ignored, it
    /// costs one rewrite by the reference.
    async fn keep_seed_mtime(&self, seed: &str, partition: &str) {
        let sandbox = self.base.sandbox();
        let Some(host) = sandbox.host_path(partition) else {
            return;
        };
        let Some(t) = sandbox.stat(seed).await.ok().and_then(|s| s.modified) else {
            return;
        };
        let _ = tokio::task::spawn_blocking(move || {
            std::fs::File::open(&host).and_then(|f| f.set_modified(t))
        })
        .await;
    }

    pub(super) async fn seed_one(&self, scan: &mut Scan, path: &Path) -> WsResult<()> {
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
}
