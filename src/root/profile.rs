//! Profiles: from a `[profiles.<name>]` table to a running
//! [`WorkspaceManager`].
//!
//! [`make_provisioner`] is the one place that turns a backend kind and its
//! options into a [`Provisioner`]; each backend adds its arm there. The
//! options table deserialises into the backend's own option struct
//! (`deny_unknown_fields`), so an unknown or mistyped option is an error
//! naming it. Every kind has an implementation;
//! [`ProfileError::Unavailable`] stays for builds that leave one out.

use std::path::PathBuf;
use std::sync::Arc;

use crate::backend::local::LocalProvisioner;
use crate::backend::{BackendKind, Provisioner};
use crate::config::{Config, ConfigError, Paths};
use crate::engine::mcp::McpOptions;
use crate::engine::{EventBus, WorkspaceConfig};
use crate::manager::layout::{local_layout, reference_layout};
use crate::manager::{ManagerOptions, WorkspaceManager};

/// Options the local backend takes (`[profiles.<name>.options]`).
pub(crate) const LOCAL_OPTIONS: &[&str] = &["base_dir", "layout"];

/// Errors turning a profile into a provisioner or a manager.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The backend kind has no implementation in this build.
    #[error("backend {backend} is not available in this build yet (profile `{profile}`)")]
    Unavailable {
        /// Backend kind asked for.
        backend: BackendKind,
        /// Profile name.
        profile: String,
    },
    /// An option the backend does not know.
    #[error(
        "unknown option `{key}` for the {backend} backend (profile `{profile}`); known options: {known}"
    )]
    UnknownOption {
        /// Profile name.
        profile: String,
        /// Backend kind.
        backend: BackendKind,
        /// The option key.
        key: String,
        /// The options it knows, comma-separated.
        known: String,
    },
    /// An option with a value the backend cannot use.
    #[error("option `{key}` of profile `{profile}`: {message}")]
    BadOption {
        /// Profile name.
        profile: String,
        /// The option key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The backend needs an API key and neither the profile nor the
    /// environment has one; `message` names both places.
    #[error("profile `{profile}`: {message}")]
    MissingApiKey {
        /// Profile name.
        profile: String,
        /// What to set.
        message: String,
    },
    /// The config (unknown profile, unset `${VAR}`, or one of the errors
    /// above placed at its file, line and key).
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl ProfileError {
    /// The option key the error is about, if any.
    pub(crate) fn option_key(&self) -> Option<&str> {
        match self {
            ProfileError::UnknownOption { key, .. } | ProfileError::BadOption { key, .. } => {
                Some(key)
            }
            _ => None,
        }
    }
}

/// Builds the provisioner of profile `name` for backend `kind` from its
/// `options` (already `${VAR}`-expanded). Default locations derive from
/// `paths` (the local base dir is `<data_dir>/profiles/<name>`).
///
/// Errors: [`ProfileError::Unavailable`] for kinds without an
/// implementation yet, [`ProfileError::UnknownOption`] /
/// [`ProfileError::BadOption`] naming the offending key.
pub(crate) fn make_provisioner(
    kind: BackendKind,
    name: &str,
    options: &toml::Table,
    paths: &Paths,
) -> Result<Arc<dyn Provisioner>, ProfileError> {
    use crate::backend::{bubblewrap, daytona, docker, e2b, kubernetes, opensandbox};
    let remote = |e: crate::backend::BackendError| match e {
        crate::backend::BackendError::Remote {
            code: Some(code),
            message,
            ..
        } if code == "missing_api_key" => ProfileError::MissingApiKey {
            profile: name.to_string(),
            message,
        },
        e => ProfileError::BadOption {
            profile: name.to_string(),
            key: "options".into(),
            message: e.to_string(),
        },
    };
    match kind {
        BackendKind::Local => local(name, options, paths),
        BackendKind::Bubblewrap => {
            let mut opts: bubblewrap::BubblewrapOptions = typed(name, options)?;
            let base = opts
                .base_dir
                .get_or_insert_with(|| paths.data_dir.join("profiles").join(name))
                .clone();
            Ok(Arc::new(
                bubblewrap::BubblewrapProvisioner::new(opts)
                    .with_layout(move |spec| local_layout(&base, spec)),
            ))
        }
        BackendKind::Docker => {
            let mut opts: docker::DockerOptions = typed(name, options)?;
            let base = opts
                .base_dir
                .get_or_insert_with(|| paths.data_dir.join("profiles").join(name))
                .clone();
            Ok(Arc::new(
                docker::DockerProvisioner::new(opts)
                    .with_profile(name)
                    .with_layout(move |spec| local_layout(&base, spec)),
            ))
        }
        BackendKind::E2b => Ok(Arc::new(
            e2b::E2bProvisioner::new(typed(name, options)?).map_err(remote)?,
        )),
        BackendKind::Daytona => Ok(Arc::new(
            daytona::DaytonaProvisioner::new(typed(name, options)?).map_err(remote)?,
        )),
        BackendKind::Opensandbox => Ok(Arc::new(
            opensandbox::OpenSandboxProvisioner::new(typed(name, options)?).map_err(remote)?,
        )),
        BackendKind::Kubernetes => {
            let opts: kubernetes::KubernetesOptions = typed(name, options)?;
            let p = kubernetes::KubernetesProvisioner::new(opts).map_err(|message| {
                // The checks' messages start with the option they are about.
                let key = message
                    .split([' ', '`'])
                    .next()
                    .filter(|k| options.contains_key(*k))
                    .unwrap_or("options")
                    .to_string();
                ProfileError::BadOption {
                    profile: name.to_string(),
                    key,
                    message,
                }
            })?;
            Ok(Arc::new(p.with_profile(name)))
        }
    }
}

/// The options table as a backend's option struct. serde's message names
/// an unknown field but not the key of a mistyped value (the table is
/// already parsed, so there is no position either): the key reported is
/// the first one that fails on its own, so the error lands on that key's
/// line (`image_pull_policy`, `tolerations`), not on the table header.
fn typed<T: serde::de::DeserializeOwned>(
    name: &str,
    options: &toml::Table,
) -> Result<T, ProfileError> {
    toml::Value::Table(options.clone())
        .try_into()
        .map_err(|e: toml::de::Error| {
            let message = e.message().to_string();
            let culprit = options.iter().find_map(|(k, v)| {
                let mut alone = toml::Table::new();
                alone.insert(k.clone(), v.clone());
                toml::Value::Table(alone)
                    .try_into::<T>()
                    .err()
                    .filter(|e| !e.message().starts_with("missing field"))
                    .map(|_| k.clone())
            });
            let named = message
                .split('`')
                .nth(1)
                .filter(|_| {
                    message.starts_with("unknown field") || message.starts_with("missing field")
                })
                .map(str::to_string);
            let key = culprit.or(named).unwrap_or_else(|| "options".into());
            ProfileError::BadOption {
                profile: name.to_string(),
                key,
                message,
            }
        })
}

fn check_keys(
    kind: BackendKind,
    name: &str,
    options: &toml::Table,
    known: &[&str],
) -> Result<(), ProfileError> {
    match options.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(ProfileError::UnknownOption {
            profile: name.to_string(),
            backend: kind,
            key: key.clone(),
            known: known.join(", "),
        }),
        None => Ok(()),
    }
}

fn local(
    name: &str,
    options: &toml::Table,
    paths: &Paths,
) -> Result<Arc<dyn Provisioner>, ProfileError> {
    check_keys(BackendKind::Local, name, options, LOCAL_OPTIONS)?;
    let bad = |message: String| ProfileError::BadOption {
        profile: name.to_string(),
        key: "base_dir".into(),
        message,
    };
    let base = match options.get("base_dir") {
        None => paths.data_dir.join("profiles").join(name),
        Some(toml::Value::String(s)) => {
            let p = match s.strip_prefix("~/") {
                Some(rest) => dirs::home_dir()
                    .ok_or_else(|| bad("`~` used but there is no home directory".into()))?
                    .join(rest),
                None => PathBuf::from(s),
            };
            if !p.is_absolute() {
                return Err(bad(format!("must be an absolute path, got {s:?}")));
            }
            p
        }
        Some(other) => return Err(bad(format!("must be a string, got {}", other.type_str()))),
    };
    let layout_base = base.clone();
    // `layout = "reference"`: the reference's `<base>/<agent>` (README,
    // "A base folder shared with the reference").
    match options.get("layout") {
        None => {}
        Some(toml::Value::String(s)) if s == "wsbench" => {}
        Some(toml::Value::String(s)) if s == "reference" => {
            return Ok(Arc::new(
                LocalProvisioner::new(&base)
                    .with_layout(move |spec| reference_layout(&layout_base, spec))
                    .with_foreign_dirs(),
            ));
        }
        Some(other) => {
            return Err(ProfileError::BadOption {
                profile: name.to_string(),
                key: "layout".into(),
                message: format!(
                    "must be \"wsbench\" (<base>/<user>/<agent>, the default) or \"reference\" \
                     (<base>/<agent>, as the reference's local manager), got {other}"
                ),
            });
        }
    }
    Ok(Arc::new(
        LocalProvisioner::new(&base).with_layout(move |spec| local_layout(&layout_base, spec)),
    ))
}

/// The provisioner and manager options of profile `name` of `config`:
/// backend options, the profile's manager settings, and the workspace
/// template from `[workspace]` and `[limits]`. Option errors come back
/// placed at file, line and key. Callers may adjust the options (the
/// one-shot CLI turns the pre-warm pool off) before building the manager.
///
/// The built-in `local` profile (when the file has no `[profiles.local]`)
/// keeps the CLI's embedded workspaces: per_user under
/// `<data_dir>/workspaces`, so the default user `""` works in
/// `<data_dir>/workspaces/default` ([`Paths::default_workdir`]) and
/// `--agent` picks a skills partition inside it.
pub fn profile_options(
    config: &Config,
    name: &str,
    paths: &Paths,
) -> Result<(Arc<dyn Provisioner>, ManagerOptions), ProfileError> {
    let mut p = config.profile(name)?;
    // Only the built-in `local` profile keeps the embedded workspaces; the
    // other built-in profiles get their own base dirs (`profiles/<name>`),
    // so destroying a sandbox never deletes another profile's files.
    if !config.profiles.contains_key(name) && p.backend == BackendKind::Local {
        let base = paths.data_dir.join("workspaces");
        p.options.insert(
            "base_dir".into(),
            toml::Value::String(base.to_string_lossy().into_owned()),
        );
    }
    let provisioner = make_provisioner(p.backend, name, &p.options, paths).map_err(|e| {
        let keys: Option<Vec<&str>> = match &e {
            ProfileError::Unavailable { .. } => Some(vec!["profiles", name, "backend"]),
            _ => e.option_key().map(|k| vec!["profiles", name, "options", k]),
        };
        match keys {
            Some(keys) if config.profiles.contains_key(name) => {
                ProfileError::Config(config.located(&keys, e.to_string()))
            }
            _ => e,
        }
    })?;
    let mut opts = ManagerOptions::for_provisioner(provisioner.as_ref());
    opts.isolation = p.isolation;
    opts.ttl = p.ttl;
    opts.sweep_interval = p.sweep_interval;
    opts.keep_alive = p.keep_alive;
    opts.prewarm = p.prewarm;
    opts.workspace = WorkspaceConfig {
        workspace_id: None,
        skill_paths: config.workspace.skill_paths.clone(),
        instructions: config.workspace.instructions.clone(),
        limits: profile_limits(config, &p),
        bash_session: config.tools.bash_session,
        mcp: mcp_options(config),
        ..Default::default()
    };
    Ok((provisioner, opts))
}

/// `[limits]` with what the profile `p` overrides (its
/// `tool_result_max_bytes`).
fn profile_limits(
    config: &crate::config::Config,
    p: &crate::config::ProfileConfig,
) -> crate::engine::tools::ToolLimits {
    let mut l = config.limits.clone();
    if let Some(cap) = p.tool_result_max_bytes {
        l.tool_result_max_bytes = cap.max(2);
    }
    l
}

/// The MCP client options of `config`'s `[mcp]` section (the default call
/// timeout), the one place every way of opening a workspace takes them
/// from: [`profile_options`] puts them in each manager's workspace
/// template (the TUI's start, `:ws`, `:profile`, `mcp serve`, the agent
/// loop all open through a manager or `--workdir`), and
/// `Context::open_workspace` in a `--workdir` workspace's.
pub fn mcp_options(config: &Config) -> McpOptions {
    McpOptions {
        call_timeout: config.mcp.call_timeout(),
        ..McpOptions::default()
    }
}

/// Opens profile `name` of `config` as a manager publishing on `bus`; see
/// [`profile_options`].
pub fn open_profile(
    config: &Config,
    name: &str,
    paths: &Paths,
    bus: EventBus,
) -> Result<WorkspaceManager, ProfileError> {
    let (provisioner, opts) = profile_options(config, name, paths)?;
    Ok(WorkspaceManager::new(name, provisioner, opts, bus))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::manager::IsolationPolicy;

    fn paths(dir: &Path) -> Paths {
        Paths {
            config_file: dir.join("config.toml"),
            data_dir: dir.join("data"),
            default_workdir: dir.join("data/workspaces/default"),
        }
    }

    #[test]
    fn kubernetes_builds_from_its_options_without_a_cluster() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        // No cluster is contacted until a workspace is opened.
        let prov = make_provisioner(BackendKind::Kubernetes, "k", &toml::Table::new(), &p).unwrap();
        assert_eq!(prov.kind(), BackendKind::Kubernetes);
        assert!(prov.capabilities().suspend && prov.capabilities().persistent);
        let mut t = toml::Table::new();
        t.insert("namespce".into(), "x".into());
        let err = make_provisioner(BackendKind::Kubernetes, "k", &t, &p)
            .err()
            .unwrap();
        assert_eq!(err.option_key(), Some("namespce"), "{err}");
        let mut t = toml::Table::new();
        t.insert("namespace".into(), "Not_Valid".into());
        let err = make_provisioner(BackendKind::Kubernetes, "k", &t, &p)
            .err()
            .unwrap();
        assert!(err.to_string().contains("DNS-1123"), "{err}");
    }

    #[test]
    fn sandbox_backends_build_from_their_option_structs() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        for kind in [BackendKind::Bubblewrap, BackendKind::Docker] {
            assert!(make_provisioner(kind, "x", &toml::Table::new(), &p).is_ok());
            let mut t = toml::Table::new();
            t.insert("imagee".into(), "x".into());
            let err = make_provisioner(kind, "x", &t, &p).err().unwrap();
            assert_eq!(err.option_key(), Some("imagee"), "{err}");
        }
        let mut t = toml::Table::new();
        t.insert("api_key".into(), "k".into());
        t.insert("api_url".into(), "http://127.0.0.1:9".into());
        assert!(make_provisioner(BackendKind::E2b, "e", &t, &p).is_ok());
    }

    #[test]
    fn bwrap_is_an_alias_of_bubblewrap() {
        let config = Config::parse("[profiles.b]\nbackend = \"bwrap\"\n", Path::new("c")).unwrap();
        assert_eq!(config.profiles["b"].backend, BackendKind::Bubblewrap);
    }

    #[test]
    fn local_options_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        let mut t = toml::Table::new();
        t.insert("base_dri".into(), "/x".into());
        let err = make_provisioner(BackendKind::Local, "l", &t, &p)
            .err()
            .unwrap();
        assert_eq!(err.option_key(), Some("base_dri"));
        assert!(err.to_string().contains("known options: base_dir"), "{err}");
        let mut t = toml::Table::new();
        t.insert("base_dir".into(), "relative/dir".into());
        let err = make_provisioner(BackendKind::Local, "l", &t, &p)
            .err()
            .unwrap();
        assert!(err.to_string().contains("absolute"), "{err}");
        let mut t = toml::Table::new();
        t.insert("base_dir".into(), 3.into());
        assert!(make_provisioner(BackendKind::Local, "l", &t, &p).is_err());
    }

    /// The error `open_profile` gives for profile `name` of config `text`
    /// (read as file `file`).
    /// Options are checked at parse time too (config/options_check.rs):
    /// then the parse error is the one.
    fn profile_error(text: &str, file: &str, name: &str, dir: &Path) -> String {
        let config = match Config::parse(text, Path::new(file)) {
            Ok(c) => c,
            Err(e) => return e.to_string(),
        };
        open_profile(&config, name, &paths(dir), EventBus::default())
            .err()
            .unwrap()
            .to_string()
    }

    #[test]
    fn option_errors_name_file_line_and_key() {
        let d = tempfile::tempdir().unwrap();
        let text = "[profiles.dev]\nbackend = \"local\"\n\n[profiles.dev.options]\nbase_dir = \"/srv\"\nflavour = 1\n";
        let err = profile_error(text, "/etc/wsbench.toml", "dev", d.path());
        assert!(err.starts_with("/etc/wsbench.toml:6:"), "{err}");
        assert!(err.contains("flavour"), "{err}");
        let text = "[profiles.box]\nbackend = \"kubernetes\"\n\n[profiles.box.options]\nnamespace = \"ns\"\nimagee = \"x\"\n";
        let err = profile_error(text, "c.toml", "box", d.path());
        assert!(err.starts_with("c.toml:6:"), "{err}");
        assert!(err.contains("imagee"), "{err}");
        // A mistyped value and a typo inside a toleration land on their
        // own key's line, named.
        let text = "[profiles.box]\nbackend = \"kubernetes\"\n\n[profiles.box.options]\nnamespace = \"ns\"\nimage_pull_policy = \"ifnotpresent\"\n";
        let err = profile_error(text, "c.toml", "box", d.path());
        assert!(err.starts_with("c.toml:6:"), "{err}");
        assert!(err.contains("option `image_pull_policy`"), "{err}");
        let text = "[profiles.box]\nbackend = \"kubernetes\"\n\n[profiles.box.options]\nready_timeout_secs = 5\ntolerations = [{ key = \"k\", operatr = \"Exists\" }]\n";
        let err = profile_error(text, "c.toml", "box", d.path());
        assert!(err.starts_with("c.toml:6:"), "{err}");
        assert!(
            err.contains("option `tolerations`") && err.contains("operatr"),
            "{err}"
        );
        let text = "[profiles.box]\nbackend = \"kubernetes\"\n\n[profiles.box.options]\nnamespace = \"Bad_NS\"\n";
        let err = profile_error(text, "c.toml", "box", d.path());
        assert!(err.starts_with("c.toml:5:"), "{err}");
        assert!(err.contains("option `namespace`"), "{err}");
    }

    #[test]
    fn a_missing_api_key_is_a_plain_line() {
        if std::env::var_os("E2B_API_KEY").is_some() {
            println!("SKIPPED: E2B_API_KEY is set");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let text = "[profiles.e]\nbackend = \"e2b\"\n\n[profiles.e.options]\napi_url = \"http://127.0.0.1:9\"\napi_key = \"\"\n";
        let config = Config::parse(text, Path::new("c.toml")).unwrap();
        let err = open_profile(&config, "e", &paths(d.path()), EventBus::default())
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "profile `e`: no API key: set E2B_API_KEY or `api_key` in the profile"
        );
    }

    #[tokio::test]
    async fn builtin_local_profile_needs_no_file() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        let m = open_profile(&Config::default(), "local", &p, EventBus::default()).unwrap();
        assert_eq!(m.options().isolation, IsolationPolicy::PerUser);
        let ws = m.get_workspace("", "coder", "s", None).await.unwrap();
        assert_eq!(ws.sandbox().host_root().unwrap(), p.default_workdir);
        let alice = m.get_workspace("alice", "coder", "s", None).await.unwrap();
        let root = alice.sandbox().host_root().unwrap().to_path_buf();
        assert_eq!(root, p.data_dir.join("workspaces/alice"));
        m.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn a_configured_local_profile_gets_its_own_base() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        let config =
            Config::parse("[profiles.local]\nbackend = \"local\"\n", Path::new("c")).unwrap();
        let m = open_profile(&config, "local", &p, EventBus::default()).unwrap();
        assert_eq!(m.options().isolation, IsolationPolicy::PerAgent);
        let ws = m.get_workspace("alice", "coder", "s", None).await.unwrap();
        let root = ws.sandbox().host_root().unwrap().to_path_buf();
        assert_eq!(root, p.data_dir.join("profiles/local/alice/coder"));
        m.shutdown().await.unwrap();
    }
}
