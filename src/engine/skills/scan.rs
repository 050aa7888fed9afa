//! Scanning a partition: probing each skill directory, reconciling
//! with `.index`, and writing the index back.

use super::*;

/// Most writes of `.index` per [`Skills::persist`]: the first records the
/// mtime before the write, each further one the mtime the last produced.
const INDEX_MTIME_ROUNDS: usize = 4;

impl Skills<'_> {
    /// Equips, takes the skill lock and scans the partition. If the
    /// partition vanished since it was cached as equipped, equips again.
    pub(super) async fn locked_scan(
        &self,
        agent: &str,
    ) -> WsResult<(tokio::sync::MutexGuard<'_, ()>, Scan)> {
        let label = partition_name(agent)?;
        if self.base.is_read_only() {
            return self.read_only_scan(agent).await;
        }
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
    pub(super) async fn probe(&self, dir: &str, child: &str) -> Probe {
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
    pub(super) async fn scan_dir(&self, dir: &str) -> WsResult<Scan> {
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
            note: None,
        })
    }

    /// Writes `.index` if it changed, so that the folder's mtime is the
    /// one recorded (issue 23 point 2): a write by temp + rename changes
    /// the folder's mtime, and the reference reconciles (and rewrites the
    /// index) whenever the two differ. Where the folder has a host path
    /// (local, bubblewrap, Docker bind mount), the index records the
    /// mtime from before the write and the folder's mtime is set back to
    /// it afterwards. Elsewhere: write, stat, and write again with the
    /// new mtime, at most [`INDEX_MTIME_ROUNDS`] times (converges where
    /// timestamps are coarse; the reference uses `.index` only on local).
    /// Limit: a change to the folder between the stat and the reset is
    /// hidden from the reference's mtime check, as it is from its own.
    pub(super) async fn persist(&self, scan: &mut Scan) -> WsResult<()> {
        if !scan.changed {
            return Ok(());
        }
        let path = format!("{}/{}", scan.dir, names::SKILL_INDEX);
        let sandbox = self.base.sandbox();
        let before = sandbox.stat(&scan.dir).await.ok().and_then(|s| s.modified);
        let mut mtime = secs(before);
        if let (Some(host), Some(t)) = (sandbox.host_path(&scan.dir), before) {
            scan.index.skills_dir_mtime = mtime;
            sandbox.write(&path, &scan.index.to_json()).await?;
            let reset = tokio::task::spawn_blocking(move || {
                std::fs::File::open(&host).and_then(|f| f.set_modified(t))
            })
            .await;
            if let Ok(Ok(())) = reset {
                scan.changed = false;
                return Ok(());
            }
            mtime = self.dir_mtime(&scan.dir).await;
        }
        for _ in 0..INDEX_MTIME_ROUNDS {
            scan.index.skills_dir_mtime = mtime;
            sandbox.write(&path, &scan.index.to_json()).await?;
            let after = self.dir_mtime(&scan.dir).await;
            if after.to_bits() == mtime.to_bits() {
                break;
            }
            mtime = after;
        }
        scan.changed = false;
        Ok(())
    }

    /// The folder's mtime in seconds as Python's `os.stat().st_mtime`
    /// gives it (0.0 when it cannot be read, as the reference).
    async fn dir_mtime(&self, dir: &str) -> f64 {
        secs(
            self.base
                .sandbox()
                .stat(dir)
                .await
                .ok()
                .and_then(|s| s.modified),
        )
    }

    /// [`Self::persist`], logging a failure: the index is a cache that the
    /// next listing rebuilds.
    pub(super) async fn persist_quietly(&self, scan: &mut Scan) {
        // Read-only: `.index` is reconciled in memory only.
        if self.base.is_read_only() {
            return;
        }
        if let Err(e) = self.persist(scan).await {
            self.skill_log(
                "warn",
                format!("cannot write {}/{}: {e}", scan.dir, names::SKILL_INDEX),
            );
        }
    }

    /// The read-only listing: `agent`'s partition when it exists, else
    /// `.seed` (what the partition would be equipped with), else nothing;
    /// equips, seeds and writes nothing. `Scan::note` says which it is.
    async fn read_only_scan(
        &self,
        agent: &str,
    ) -> WsResult<(tokio::sync::MutexGuard<'_, ()>, Scan)> {
        let partition = self.base.layout().partition_dir(agent)?;
        let seed = self.base.layout().seed_dir();
        let guard = self.state.lock.lock().await;
        for dir in [&partition, &seed] {
            match self.scan_dir(dir).await {
                Ok(mut scan) => {
                    if *dir == seed {
                        scan.note = Some(format!(
                            "read-only: {partition} is not equipped; listing {seed}, which it would be equipped from"
                        ));
                    }
                    return Ok((guard, scan));
                }
                Err(WorkspaceError::Backend(BackendError::NotFound(_))) => continue,
                Err(e) => return Err(e),
            }
        }
        let note = if self.seed_paths.is_empty() {
            format!("read-only: {partition} is not equipped and {seed} does not exist")
        } else {
            format!(
                "read-only: skills not seeded ({} skill path(s) of the config are copied on the first writable open)",
                self.seed_paths.len()
            )
        };
        let scan = Scan {
            dir: partition,
            index: SkillIndex::default(),
            changed: false,
            valid: HashMap::new(),
            invalid: Vec::new(),
            children: HashSet::new(),
            note: Some(note),
        };
        Ok((guard, scan))
    }
}
