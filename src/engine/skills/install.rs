//! Installing skills: from a host directory or an archive, through a
//! staging directory, then copied into the partition with modes kept.

use super::host_walk;
use super::*;

impl Skills<'_> {
    /// Installs the skill in host directory `host_dir` into `agent`'s
    /// partition with the reference Local rules (docs/contract.md §4.3): the front
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

    /// Installs the skill folder `src` (a sandbox path outside the
    /// partition, normally under a staging directory) into `scan.dir` by
    /// renaming it. Caller holds the skill lock and persists `scan`.
    pub(super) async fn install_staged(
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

    pub(super) async fn stage_host_and_install(
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

    pub(super) async fn install_archive(
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

    pub(super) async fn extract_and_install(
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

    /// The staging directory if it holds `SKILL.md`, else its one
    /// top-level subdirectory that does. An archive with several skill
    /// folders is refused naming them all: installing only the first (as
    /// the reference does) silently dropped the others.
    pub(super) async fn find_skill_root(&self, staging: &str, origin: &str) -> WsResult<String> {
        let entries = self.base.sandbox().list(staging).await?;
        if entries
            .iter()
            .any(|e| e.name == names::SKILL_MD && e.kind == FileKind::File)
        {
            return Ok(staging.to_string());
        }
        let mut roots = Vec::new();
        for e in entries.iter().filter(|e| e.kind == FileKind::Dir) {
            let dir = format!("{staging}/{}", e.name);
            if let Ok(st) = self
                .base
                .sandbox()
                .stat(&format!("{dir}/{}", names::SKILL_MD))
                .await
                && st.kind == FileKind::File
            {
                roots.push((e.name.clone(), dir));
            }
        }
        match roots.len() {
            0 => Err(invalid(format!(
                "the archive {origin} holds no SKILL.md, neither at its top level nor in a top-level folder"
            ))),
            1 => Ok(roots.remove(0).1),
            n => {
                let listed: Vec<&str> = roots.iter().map(|(name, _)| name.as_str()).collect();
                Err(invalid(format!(
                    "the archive {origin} holds {n} skills ({}); nothing was installed: add one archive per skill",
                    listed.join(", ")
                )))
            }
        }
    }

    /// Copies host directory `host` into the existing sandbox directory
    /// `dest`, keeping executable bits. Links follow the one rule of
    /// [`host_walk`](super::host_walk) (the archive's): a link to a file
    /// inside the folder becomes a copy, any other refuses the copy.
    pub(super) async fn copy_host_dir(&self, host: &Path, dest: &str) -> WsResult<()> {
        let root = host.to_path_buf();
        let walked = tokio::task::spawn_blocking(move || host_walk::walk_host(&root))
            .await
            .map_err(|e| invalid(format!("copy task failed: {e}")))??;
        for special in &walked.skipped {
            self.skill_log(
                "warn",
                format!(
                    "{:?} is not a regular file or directory; not copied",
                    format!("{}/{special}", host.display())
                ),
            );
        }
        let mut executables = Vec::new();
        for item in walked.items {
            let target = format!("{dest}/{}", item.rel);
            if item.is_dir {
                self.base.sandbox().mkdir(&target, true).await?;
                continue;
            }
            // O_NOFOLLOW: the walk resolved every link; a file swapped for
            // a link since then is refused instead of followed.
            let file = tokio::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&item.abs)
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
    pub(super) async fn copy_sandbox_dir(&self, src: &str, dest: &str) -> WsResult<()> {
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
    pub(super) async fn mark_executable(&self, base: &str, files: &[(String, u32)]) {
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
pub(super) async fn read_host_skill_md(dir: &Path) -> WsResult<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let md = dir.join(names::SKILL_MD);
    // A `SKILL.md` linked out of the folder is refused before it is read:
    // its text would otherwise be parsed and quoted in an error.
    let root = dir.to_path_buf();
    tokio::task::spawn_blocking(move || host_walk::check_link(&root, names::SKILL_MD))
        .await
        .map_err(|e| invalid(format!("checking {}: {e}", md.display())))??;
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
