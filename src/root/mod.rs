//! The composition root: what both front ends (the CLI and the TUI) need
//! before they can do anything, built in one place.
//!
//! * [`Context::load`] resolves the paths and loads the config file;
//! * [`Context::profile_name`] is the selected profile;
//! * [`Context::manager_for`] and [`Context::manager_factory`] are the one
//!   way to build a profile's [`WorkspaceManager`] (wired by [`profile`]);
//! * [`Context::open_workspace`] opens the workspace a command or the TUI
//!   works in: `--workdir` as an exact local directory, else the one the
//!   selected profile's manager assigns (the embedded default workspace
//!   for the built-in `local` profile);
//! * [`sandbox_record`] keeps the records of cloud sandboxes, so one that
//!   vanished on the service is reported;
//! * [`JournalWatch`] collects journal failures to print at exit;
//! * [`safe_text`] is the one rule that keeps workspace and server text
//!   from driving the terminal (both front ends print through it);
//! * [`export`] writes a session's report (Markdown or HTML);
//! * [`attach`] joins the real terminal to a shell on a sandbox PTY, for
//!   the TUI's `!` and `wsbench shell` alike.
//!
//! Layering: `cli` and `tui` use this module and never each other; it
//! uses `config`, `manager`, `engine` and `backend`, and nothing here
//! knows about argument parsing; the only terminal code is [`attach`].

pub mod attach;
pub mod export;
mod journal_watch;
pub mod line_mode;
pub mod profile;
mod read_only;
pub mod safe_text;
pub(crate) mod sandbox_record;
pub mod words;
mod workdir;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

pub(crate) use journal_watch::JournalWatch;
pub use profile::{ProfileError, open_profile, profile_options};
pub(crate) use workdir::{check_workdir, workdir_workspace_id};

use crate::backend::local::LocalSandbox;
use crate::config::{Config, Paths};
use crate::engine::{EventBus, Workspace, WorkspaceConfig};
use crate::manager::WorkspaceManager;

/// Builds the manager of a profile by name (the TUI's `:profile <name>`
/// and the Workspaces pane). Errors are shown as they are.
pub type ManagerFactory = Arc<dyn Fn(&str) -> anyhow::Result<WorkspaceManager> + Send + Sync>;

/// Which workspace to work in and where the config is: the options every
/// front end takes (the CLI's global flags and their environment
/// variables fill it).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// An exact directory to use as a local workspace, bypassing profiles.
    pub workdir: Option<PathBuf>,
    /// Make a missing `workdir` (its parent must exist) instead of
    /// refusing it.
    pub create_workdir: bool,
    /// Profile name (default: the config's `default_profile`, else `local`).
    pub profile: Option<String>,
    /// User id the manager assigns workspaces for (`""` is the default user).
    pub user: String,
    /// Agent id (selects the skills partition; `""` = `default`).
    pub agent: String,
    /// Session id (default from config, else `default`).
    pub session: Option<String>,
    /// An explicit workspace id (`--workspace-id`): opened, or made when
    /// missing, instead of the one the isolation policy assigns. As in the
    /// reference an explicit id always wins over the policy
    /// (docs/contract.md §8.1; team tools share the leader's id); `None`
    /// or `""` lets the policy assign. Ignored with `workdir`.
    pub workspace_id: Option<String>,
    /// Config file given explicitly (must exist); `None` = the XDG default.
    pub config: Option<PathBuf>,
    /// `--read-only`: open the workspace without writing anything to it
    /// (see [`WorkspaceConfig::read_only`]).
    pub read_only: bool,
}

/// What every command and the TUI work with: the selection, the resolved
/// paths and config, and the selected profile's manager (made on first
/// use and shared).
pub struct Context {
    /// What was asked for on the command line.
    pub global: Selection,
    /// Resolved paths.
    pub paths: Paths,
    /// Loaded config.
    pub config: Config,
    /// Config file actually used.
    pub config_file: PathBuf,
    /// The selected profile's manager, made on first use.
    manager: tokio::sync::OnceCell<WorkspaceManager>,
    /// Records of that manager's sandboxes (every backend).
    records: std::sync::OnceLock<sandbox_record::SandboxRecords>,
    /// Journal failures of the opened workspaces.
    journal: JournalWatch,
    /// The lease a one-shot command holds on the workspace it opened, for
    /// its whole run (see [`Context::open_workspace`]).
    run_lease: std::sync::Mutex<Option<crate::manager::Lease>>,
}

impl Context {
    /// Resolves paths and loads the config; prints a warning for each
    /// `workspace.skill_paths` entry that seeds nothing.
    ///
    /// Errors: no home directory, a `--config` file that does not exist,
    /// a config file that cannot be read or parsed.
    pub fn load(global: Selection) -> anyhow::Result<Self> {
        // A bad `--session` is refused before anything is opened or made
        // (its id names a directory; an escape in it would reach every
        // terminal that lists the sessions).
        if let Some(s) = global.session.as_deref().filter(|s| !s.is_empty()) {
            crate::engine::layout::check_session_id(s)?;
        }
        let paths = Paths::from_env()?;
        let config_file = global
            .config
            .clone()
            .unwrap_or_else(|| paths.config_file.clone());
        if global.config.is_some() && !config_file.is_file() {
            if config_file.is_dir() {
                anyhow::bail!(
                    "--config {} is a directory; give the config file itself (for example {})",
                    config_file.display(),
                    config_file.join("config.toml").display()
                );
            }
            anyhow::bail!(
                "config file {} (given with --config) does not exist",
                config_file.display()
            );
        }
        let config = Config::load(&config_file)?;
        for w in config.skill_path_warnings() {
            eprintln!("warning: {}: {w}", config_file.display());
        }
        Ok(Context {
            global,
            paths,
            config,
            config_file,
            manager: tokio::sync::OnceCell::new(),
            records: std::sync::OnceLock::new(),
            journal: JournalWatch::default(),
            run_lease: std::sync::Mutex::new(None),
        })
    }

    /// The profile in use: `--profile`, else the config's default.
    pub fn profile_name(&self) -> String {
        self.global
            .profile
            .clone()
            .unwrap_or_else(|| self.config.default_profile_name().to_string())
    }

    /// The manager of profile `name` (not cached; see [`Context::manager`]).
    /// Its pre-warm pool is off: a one-shot command would exit before
    /// claiming, and leave the pool's workspaces behind.
    /// With `--read-only` its workspaces open read-only.
    pub fn manager_for(&self, name: &str) -> anyhow::Result<WorkspaceManager> {
        one_shot_manager(&self.config, &self.paths, name, self.global.read_only)
    }

    /// The workspaces this machine recorded as having a sandbox on
    /// profile `profile` (record names: workspace ids, sanitized for file
    /// names), sorted, at most 10 000, and how many more were not read.
    /// Every backend is recorded (cloud profiles since issue 14, the
    /// others since the issue 15 trial).
    pub fn recorded_sandboxes(&self, profile: &str) -> (Vec<String>, usize) {
        sandbox_record::recorded(&self.paths.data_dir, profile)
    }

    /// [`Context::manager_for`] as a value the TUI keeps (it outlives no
    /// borrow of the context).
    pub fn manager_factory(&self) -> ManagerFactory {
        let (config, paths) = (self.config.clone(), self.paths.clone());
        let read_only = self.global.read_only;
        Arc::new(move |name: &str| one_shot_manager(&config, &paths, name, read_only))
    }

    /// The manager of the selected profile, shared by the whole run.
    /// Its workspaces are recorded, so that one whose sandbox vanished
    /// (on the service, or removed by hand) is reported when it is made anew
    /// (see [`Context::report_lost_sandboxes`]).
    pub async fn manager(&self) -> anyhow::Result<&WorkspaceManager> {
        self.manager
            .get_or_try_init(|| async {
                let name = self.profile_name();
                let m = self.manager_for(&name)?;
                let _ = self.records.set(sandbox_record::SandboxRecords::new(
                    &self.paths.data_dir,
                    &name,
                    m.backend(),
                    m.events().subscribe(),
                ));
                Ok(m)
            })
            .await
    }

    /// Prints a notice for each workspace of the selected profile that got
    /// a new sandbox because its recorded one is gone (saying whether its
    /// files were kept), and updates the records (made, destroyed). Called
    /// after opening a workspace and when a run ends.
    pub(crate) fn report_lost_sandboxes(&self) {
        if let Some(r) = self.records.get() {
            for n in r.drain() {
                eprintln!("{n}");
            }
        }
    }

    /// Under per_session isolation, says when this
    /// run's session got a new workspace because the sandbox of the one
    /// it had is gone from the service (see
    /// [`sandbox_record::SandboxRecords::session_moved`]).
    fn report_moved_session(&self, manager: &WorkspaceManager, id: &str) {
        if manager.options().isolation != crate::manager::IsolationPolicy::PerSession {
            return;
        }
        if let Some(r) = self.records.get()
            && let Some(n) =
                r.session_moved(&self.global.user, &self.global.agent, &self.session(), id)
        {
            eprintln!("{n}");
        }
    }

    /// What a run leaves on stderr when it ends: the lost-sandbox notices
    /// (see [`Context::report_lost_sandboxes`]), then each journal failure
    /// once (see [`Context::journal_warnings`]).
    pub fn report_at_exit(&self) {
        self.report_lost_sandboxes();
        for w in self.journal_warnings() {
            eprintln!("{w}");
        }
    }

    /// The workspace directory to open.
    pub fn workdir(&self) -> PathBuf {
        self.global
            .workdir
            .clone()
            .unwrap_or_else(|| self.paths.default_workdir.clone())
    }

    /// The session id in use.
    pub fn session(&self) -> String {
        self.global
            .session
            .clone()
            .or_else(|| self.config.workspace.default_session.clone())
            .unwrap_or_else(|| "default".to_string())
    }

    /// Opens the workspace: `--workdir` as an exact local directory, else
    /// `--workspace-id` when given, else the one the selected profile's
    /// manager assigns to `(--user, --agent, session)` (created, or
    /// reattached when an earlier run made it).
    ///
    /// A workspace from the manager is leased for the rest of the run
    /// (the run lease): a one-shot command (`exec`, `tool`, `shell`, an
    /// agent or demo run, ...) is work in flight from start to end, so
    /// its own manager's TTL sweeper never evicts (stops, suspends) the
    /// sandbox under it, and other processes see it in use (the lease
    /// refreshes this host's last-use stamp). Long-lived holders that
    /// lease per call (`mcp serve`, the TUI) give it back with
    /// [`Context::release_run_lease`]. Opening again replaces the lease.
    pub async fn open_workspace(&self) -> anyhow::Result<Arc<Workspace>> {
        if self.global.workdir.is_none() {
            let manager = self.manager().await?;
            let lease = manager
                .acquire(
                    &self.global.user,
                    &self.global.agent,
                    &self.session(),
                    self.global.workspace_id.as_deref(),
                )
                .await
                .with_context(|| format!("opening a workspace of profile `{}`", manager.profile()));
            let ws = lease.map(|l| {
                let ws = l.workspace().clone();
                *self
                    .run_lease
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(l);
                ws
            });
            self.report_lost_sandboxes();
            if let Ok(ws) = &ws {
                self.report_moved_session(manager, ws.id());
                self.journal.watch(ws);
                self.sweep_temps(ws).await;
            }
            return ws;
        }
        let dir = self.workdir();
        check_workdir(&dir, self.global.create_workdir)?;
        let sandbox = LocalSandbox::open(&dir)
            .with_context(|| format!("opening workspace {}", dir.display()))?;
        // Stable across launches: the Workspaces pane, the header and
        // `:ws` name the same directory by the same id every time.
        let id = crate::backend::Sandbox::host_root(&sandbox)
            .map(workdir_workspace_id)
            .unwrap_or_else(|| workdir_workspace_id(&dir));
        let config = WorkspaceConfig {
            workspace_id: Some(id),
            skill_paths: self.config.workspace.skill_paths.clone(),
            instructions: self.config.workspace.instructions.clone(),
            limits: self.config.limits.clone(),
            bash_session: self.config.tools.bash_session,
            default_mcps: Vec::new(),
            read_only: self.global.read_only,
            mcp: profile::mcp_options(&self.config),
        };
        let ws = Workspace::open(Arc::new(sandbox), config, EventBus::default()).await?;
        self.journal.watch(&ws);
        self.sweep_temps(&ws).await;
        Ok(ws)
    }

    /// Gives back the run lease [`Context::open_workspace`] took, for a
    /// holder that leases per call or per view (`mcp serve`, the TUI), so
    /// its workspace can be evicted when the calls stop. No-op without
    /// one.
    pub fn release_run_lease(&self) {
        self.run_lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// Closes what this run's manager holds open, at the exit of a
    /// long-lived holder (the TUI, `mcp serve`): each sandbox is suspended
    /// where the backend can, unless another wsbench process of this host
    /// still holds it (the manager's shared hold), as the README promises.
    /// One-shot commands do not call it: they leave the sandbox as it is,
    /// so the next command starts at once; a later process's TTL sweep or
    /// `workspaces gc` suspends it. A failure is a warning in the log.
    pub async fn close_at_exit(&self) {
        self.release_run_lease();
        if let Some(m) = self.manager.get()
            && let Err(e) = m.close_all().await
        {
            tracing::warn!(
                "closing the workspaces of profile {} at exit: {e}",
                m.profile()
            );
        }
    }

    /// Where a long-lived holder (`mcp serve`, the agent loop) gets `ws`
    /// for each call ([`crate::engine::activity`]): the selected profile's
    /// manager, which leases it per call (so calls keep it from eviction
    /// and renew the provider's keep-alive, and it is let go when they
    /// stop), or `ws` itself for a `--workdir` directory, which no manager
    /// holds.
    pub async fn workspace_source(
        &self,
        ws: &Arc<Workspace>,
    ) -> anyhow::Result<Arc<dyn crate::engine::activity::WorkspaceSource>> {
        if self.global.workdir.is_some() {
            return Ok(Arc::new(crate::engine::activity::FixedSource(ws.clone())));
        }
        let m = self.manager().await?;
        Ok(Arc::new(m.source(
            ws.id(),
            &self.global.user,
            &self.global.agent,
            &self.session(),
        )))
    }

    /// Removes the temp files that writes killed mid-way left in the
    /// workspace's host directory (local, bubblewrap, Docker bind mount),
    /// once they are old enough that no live writer can own them; bounded
    /// ([`crate::backend::host::sweep`]). Nothing under `--read-only`.
    async fn sweep_temps(&self, ws: &Workspace) {
        if self.global.read_only {
            return;
        }
        let Some(root) = ws.sandbox().host_root().map(std::path::Path::to_path_buf) else {
            return;
        };
        use crate::backend::host::sweep;
        let job = move || {
            sweep::remove_stale_temps(&root, std::time::SystemTime::now(), Default::default())
        };
        if let Err(e) = tokio::task::spawn_blocking(job).await {
            tracing::debug!("the stale temp sweep did not finish: {e}");
        }
    }

    /// The journal failures the opened workspaces reported during the
    /// run, each distinct message once, as `warning: ...` lines.
    pub(crate) fn journal_warnings(&self) -> Vec<String> {
        self.journal.warnings()
    }
}

/// The manager of profile `name`, pre-warm pool off, on its own bus; when
/// `read_only` its workspaces open read-only and its provisioner creates
/// and destroys nothing ([`read_only::ReadOnlyProvisioner`]: a workspace
/// that does not exist is an error, not a new sandbox).
fn one_shot_manager(
    config: &Config,
    paths: &Paths,
    name: &str,
    read_only: bool,
) -> anyhow::Result<WorkspaceManager> {
    let (mut provisioner, mut opts) = profile_options(config, name, paths)?;
    opts.prewarm.size = 0;
    opts.workspace.read_only = read_only;
    if read_only {
        provisioner = Arc::new(read_only::ReadOnlyProvisioner::new(provisioner));
    }
    Ok(WorkspaceManager::new(
        name,
        provisioner,
        opts,
        EventBus::default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A context over a temp home, with `config_text` as its config.
    fn context(home: &std::path::Path, config_text: &str, read_only: bool) -> Context {
        let config_file = home.join("config.toml");
        Context {
            global: Selection {
                read_only,
                ..Selection::default()
            },
            paths: Paths {
                config_file: config_file.clone(),
                data_dir: home.join("data"),
                default_workdir: home.join("data/workspaces/default"),
            },
            config: Config::parse(config_text, &config_file).unwrap(),
            config_file,
            manager: tokio::sync::OnceCell::new(),
            records: std::sync::OnceLock::new(),
            journal: JournalWatch::default(),
            run_lease: std::sync::Mutex::new(None),
        }
    }

    #[tokio::test]
    async fn every_way_of_opening_a_workspace_carries_the_mcp_call_timeout() {
        let d = tempfile::tempdir().unwrap();
        let ctx = context(d.path(), "[mcp]\ncall_timeout_secs = 7\n", false);
        let want = Some(Duration::from_secs(7));
        // The TUI's `:profile` and the Workspaces pane.
        let m = (ctx.manager_factory())("local").unwrap();
        let ws = m.get_workspace("", "a", "s", None).await.unwrap();
        assert_eq!(ws.mcp().options().call_timeout, want);
        m.shutdown().await.unwrap();
        // The selected profile (the TUI's start, `mcp serve`, the agent).
        let ws = ctx.open_workspace().await.unwrap();
        assert_eq!(ws.mcp().options().call_timeout, want);
        // `--workdir`.
        let w = tempfile::tempdir().unwrap();
        let mut ctx = context(d.path(), "[mcp]\ncall_timeout_secs = 0\n", false);
        ctx.global.workdir = Some(w.path().to_path_buf());
        let ws = ctx.open_workspace().await.unwrap();
        assert_eq!(ws.mcp().options().call_timeout, None);
    }

    #[tokio::test]
    async fn a_read_only_context_opens_read_only_workspaces_through_the_factory() {
        let d = tempfile::tempdir().unwrap();
        // Made by an earlier, writable run: read-only creates nothing.
        let writable = (context(d.path(), "", false).manager_factory())("local").unwrap();
        writable.get_workspace("", "a", "s", None).await.unwrap();
        writable.shutdown().await.unwrap();
        let ctx = context(d.path(), "", true);
        let m = (ctx.manager_factory())("local").unwrap();
        let err = m
            .get_workspace("", "a", "s", Some("never-made"))
            .await
            .err()
            .unwrap();
        assert!(
            format!("{err:#}").contains("--read-only does not create"),
            "{err:#}"
        );
        let ws = m.get_workspace("", "a", "s", None).await.unwrap();
        assert!(ws.base().is_read_only());
        let err = ws.sandbox().write(&ws.layout().join("x"), b"x").await;
        assert!(err.unwrap_err().to_string().contains("--read-only"));
        m.shutdown().await.unwrap();
    }
}
