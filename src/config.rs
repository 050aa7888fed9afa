//! Configuration: where wsbench keeps things, and the TOML config file.
//!
//! Paths follow the XDG base directories: the config file is
//! `$XDG_CONFIG_HOME/wsbench/config.toml` (default `~/.config/...`), data
//! (the embedded default workspace) under `$XDG_DATA_HOME/wsbench/`
//! (default `~/.local/share/...`). A missing config file is not an error:
//! built-in defaults apply. Unknown keys and bad values are errors naming
//! the file, line and key.
//!
//! Named profiles (`[profiles.<name>]`) pick a backend, its options and
//! the manager's options; a built-in `local` profile needs no file. Option
//! strings may hold secrets as `${ENV_VAR}`, expanded only when a profile
//! is opened, so the config as printed (`wsbench info`) shows the
//! placeholder, never the secret.
//!
//! The `[tui]` section is part of the same [`Config`] (its
//! [`TuiConfig`] field), so one parse checks every section and places each
//! error at its file, line, column and key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;
use crate::engine::tools::ToolLimits;
use crate::manager::{
    DEFAULT_KEEP_ALIVE, DEFAULT_SWEEP_INTERVAL, DEFAULT_TTL, IsolationPolicy, PrewarmConfig,
};
use crate::tui::config::TuiConfig;

/// Name of the profile that exists without any config file.
pub const BUILTIN_PROFILE: &str = "local";

/// Profiles that work with no config file: `local`, `bwrap`, `docker`, and
/// the cloud services (their keys from the environment: `E2B_API_KEY`,
/// `DAYTONA_API_KEY`, `OPEN_SANDBOX_API_KEY`). A `[profiles.<name>]` table
/// of the same name replaces the built-in one.
pub const BUILTIN_PROFILES: &[(&str, BackendKind)] = &[
    ("local", BackendKind::Local),
    ("bwrap", BackendKind::Bubblewrap),
    ("docker", BackendKind::Docker),
    ("e2b", BackendKind::E2b),
    ("daytona", BackendKind::Daytona),
    ("opensandbox", BackendKind::Opensandbox),
];

/// Whether a built-in profile can work here, judged without I/O beyond a
/// path check: `local` always; `bwrap` when `bwrap` is on PATH; `docker`
/// when `DOCKER_HOST` is set or the default socket exists; the cloud
/// services when their API key variable is set. Used to keep listings
/// (`workspaces list --all-profiles`) free of profiles that cannot answer;
/// any built-in profile can still be named with `--profile`.
pub fn builtin_available(kind: BackendKind) -> bool {
    let env = |v: &str| std::env::var_os(v).is_some_and(|x| !x.is_empty());
    match kind {
        BackendKind::Local => true,
        BackendKind::Bubblewrap => std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("bwrap").is_file())),
        BackendKind::Docker => env("DOCKER_HOST") || Path::new("/var/run/docker.sock").exists(),
        BackendKind::E2b => env("E2B_API_KEY"),
        BackendKind::Daytona => env("DAYTONA_API_KEY"),
        BackendKind::Opensandbox => env("OPEN_SANDBOX_API_KEY"),
        BackendKind::Kubernetes => false,
    }
}

/// Why a built-in profile's backend cannot work here (what
/// [`builtin_available`] found missing), as a short phrase such as
/// `needs E2B_API_KEY`; `None` when it is available.
pub fn builtin_unavailable_reason(kind: BackendKind) -> Option<&'static str> {
    if builtin_available(kind) {
        return None;
    }
    Some(match kind {
        BackendKind::Local => return None,
        BackendKind::Bubblewrap => "needs bwrap on PATH",
        BackendKind::Docker => "needs DOCKER_HOST or /var/run/docker.sock",
        BackendKind::E2b => "needs E2B_API_KEY",
        BackendKind::Daytona => "needs DAYTONA_API_KEY",
        BackendKind::Opensandbox => "needs OPEN_SANDBOX_API_KEY",
        BackendKind::Kubernetes => "needs a [profiles.NAME] table with backend = \"kubernetes\"",
    })
}

/// The backend of a built-in profile name.
pub fn builtin_backend(name: &str) -> Option<BackendKind> {
    BUILTIN_PROFILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
}

/// Errors loading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// File path.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys / bad values.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// File path.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message (names the key).
        message: String,
    },
    /// A problem the parser cannot place in the file (an unknown profile
    /// name, a built-in profile).
    #[error("{path}: {message}")]
    Invalid {
        /// File path (`<built-in>` for built-in settings).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No home directory to derive default paths from.
    #[error(
        "cannot find a home directory; set XDG_DATA_HOME and XDG_CONFIG_HOME or pass --workdir"
    )]
    NoHome,
}

/// Resolved locations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Paths {
    /// The config file (may not exist).
    pub config_file: PathBuf,
    /// wsbench's data directory.
    pub data_dir: PathBuf,
    /// The embedded default workspace.
    pub default_workdir: PathBuf,
}

impl Paths {
    /// Paths from the XDG environment (or the platform defaults).
    pub fn from_env() -> Result<Self, ConfigError> {
        let config_dir = env_dir("XDG_CONFIG_HOME")
            .or_else(dirs::config_dir)
            .ok_or(ConfigError::NoHome)?;
        let data_dir = env_dir("XDG_DATA_HOME")
            .or_else(dirs::data_dir)
            .ok_or(ConfigError::NoHome)?;
        let data_dir = data_dir.join("wsbench");
        Ok(Paths {
            config_file: config_dir.join("wsbench").join("config.toml"),
            default_workdir: data_dir.join("workspaces").join("default"),
            data_dir,
        })
    }
}

fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Workspace settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceSection {
    /// Host directories whose skills seed new workspaces.
    pub skill_paths: Vec<PathBuf>,
    /// Replaces the default instructions (`{backend}`, `{workdir}` filled in).
    pub instructions: Option<String>,
    /// Session used when `--session` is not given.
    pub default_session: Option<String>,
}

/// One `[profiles.<name>]` table: a backend, its options and how the
/// workspace manager runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// Backend kind: `local`, `bubblewrap`, `docker`, `kubernetes`, `e2b`,
    /// `daytona`, `opensandbox`.
    pub backend: BackendKind,
    /// `per_agent` (default), `per_session` or `per_user`.
    #[serde(default)]
    pub isolation: IsolationPolicy,
    /// Idle time before eviction: seconds, or a string like `"1h"`.
    #[serde(default = "default_ttl", with = "duration_serde")]
    pub ttl: Duration,
    /// Sweeper period (sandboxed backends): seconds or `"5m"`; above 0.
    #[serde(default = "default_sweep", with = "duration_serde")]
    pub sweep_interval: Duration,
    /// Provider expiry pushed back by keep-alive renewals while a
    /// workspace is leased (E2B, OpenSandbox); 0 turns renewal off.
    #[serde(default = "default_keep_alive", with = "duration_serde")]
    pub keep_alive: Duration,
    /// Pre-warm pool (`size`, `max_creating`).
    #[serde(default)]
    pub prewarm: PrewarmConfig,
    /// Backend options, checked by the backend when the profile opens.
    /// Keys that look like secrets are redacted when printed.
    #[serde(default, serialize_with = "ser_redacted")]
    pub options: toml::Table,
}

fn default_ttl() -> Duration {
    DEFAULT_TTL
}

fn default_sweep() -> Duration {
    DEFAULT_SWEEP_INTERVAL
}

fn default_keep_alive() -> Duration {
    DEFAULT_KEEP_ALIVE
}

impl ProfileConfig {
    /// The built-in `local` profile: local backend, per_user (one
    /// workspace per user, agents as skill partitions in it, like the
    /// embedded default workspace), reference TTLs. Its base dir is set by
    /// [`crate::manager::open_profile`] from [`Paths`].
    pub fn builtin_local() -> Self {
        Self::builtin(BackendKind::Local)
    }

    /// A built-in profile of `backend` with its default options: per_user
    /// isolation (one default workspace per user, as for `local`).
    pub fn builtin(backend: BackendKind) -> Self {
        ProfileConfig {
            backend,
            isolation: IsolationPolicy::PerUser,
            ttl: DEFAULT_TTL,
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
            keep_alive: DEFAULT_KEEP_ALIVE,
            prewarm: PrewarmConfig::default(),
            options: toml::Table::new(),
        }
    }
}

/// Where a loaded config came from, kept to place later errors.
#[derive(Debug, PartialEq)]
struct Source {
    path: PathBuf,
    text: String,
}

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Workspace settings.
    pub workspace: WorkspaceSection,
    /// Built-in tool limits.
    pub limits: ToolLimits,
    /// Profile used when `--profile` is not given (default `local`).
    pub default_profile: Option<String>,
    /// Named profiles.
    pub profiles: BTreeMap<String, ProfileConfig>,
    /// The TUI's settings (`[tui]`, `[tui.keys]`, `[tui.layout]`); see
    /// [`TuiConfig`]. Out-of-range buffer sizes and frame rates are
    /// clamped, not refused.
    pub tui: TuiConfig,
    #[serde(skip)]
    source: Option<Arc<Source>>,
}

impl Config {
    /// Loads `path`; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Self::parse(&text, path)
    }

    /// Parses config text; `path` names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
            let mut message = e.message().to_string();
            // Type errors name the value, not the key: add the key from its line.
            if let Some(key) = key_on_line(text, line).filter(|k| !message.contains(k.as_str())) {
                message = format!("key `{key}`: {message}");
            }
            ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message,
            }
        })?;
        config.source = Some(Arc::new(Source {
            path: path.to_path_buf(),
            text: text.to_string(),
        }));
        config.tui.normalize();
        config.validate()?;
        config
            .limits
            .validate()
            .map_err(|(key, message)| ConfigError::Parse {
                path: path.to_path_buf(),
                line: find_key_line(text, key).unwrap_or(1),
                column: 1,
                message: format!("key `{key}`: {message}"),
            })?;
        Ok(config)
    }

    /// Warnings about `workspace.skill_paths` entries that cannot seed
    /// anything: missing, or without a SKILL.md (naming subfolders that
    /// have one, the usual mistake being the parent folder).
    pub fn skill_path_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.workspace.skill_paths {
            if !p.is_dir() {
                out.push(format!(
                    "skill path {} does not exist or is not a directory",
                    p.display()
                ));
            } else if !p.join("SKILL.md").is_file() {
                let mut subs: Vec<String> = std::fs::read_dir(p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| e.path().join("SKILL.md").is_file())
                    .map(|e| e.path().display().to_string())
                    .collect();
                subs.sort();
                if subs.is_empty() {
                    out.push(format!("skill path {} has no SKILL.md", p.display()));
                } else {
                    out.push(format!(
                        "skill path {} has no SKILL.md; list its skill folders instead: {}",
                        p.display(),
                        subs.join(", ")
                    ));
                }
            }
        }
        out
    }

    /// Checks what serde cannot: profile names, positive periods, the
    /// default profile's existence.
    fn validate(&self) -> Result<(), ConfigError> {
        for (name, p) in &self.profiles {
            if name.is_empty()
                || name.len() > 64
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(self.located(
                    &["profiles", name],
                    format!(
                        "profile name `{name}`: use 1 to 64 letters, digits, `-` or `_` \
                         (it names directories and labels)"
                    ),
                ));
            }
            if p.sweep_interval.is_zero() {
                return Err(self.located(
                    &["profiles", name, "sweep_interval"],
                    format!("profiles.{name}.sweep_interval: must be above 0"),
                ));
            }
            if p.prewarm.max_creating == 0 {
                return Err(self.located(
                    &["profiles", name, "prewarm", "max_creating"],
                    format!("profiles.{name}.prewarm.max_creating: must be at least 1"),
                ));
            }
        }
        if let Some(d) = &self.default_profile
            && !self.has_profile(d)
        {
            return Err(self.located(
                &["default_profile"],
                format!(
                    "default_profile: no profile `{d}` (known: {})",
                    self.profile_names().join(", ")
                ),
            ));
        }
        Ok(())
    }

    fn has_profile(&self, name: &str) -> bool {
        builtin_backend(name).is_some() || self.profiles.contains_key(name)
    }

    /// Every profile name: the built-in ones this machine can use (see
    /// [`builtin_available`]), then the configured ones.
    pub fn profile_names(&self) -> Vec<String> {
        let mut names: Vec<String> = BUILTIN_PROFILES
            .iter()
            .filter(|(n, k)| !self.profiles.contains_key(*n) && builtin_available(*k))
            .map(|(n, _)| n.to_string())
            .collect();
        names.extend(self.profiles.keys().cloned());
        names
    }

    /// Built-in profiles [`Config::profile_names`] leaves out because
    /// this machine cannot use them, each with the reason:
    /// `("e2b", "needs E2B_API_KEY")`. Messages that list the known
    /// profiles name these too, so a README profile is never a mystery.
    pub fn unavailable_builtins(&self) -> Vec<(String, &'static str)> {
        BUILTIN_PROFILES
            .iter()
            .filter(|(n, _)| !self.profiles.contains_key(*n))
            .filter_map(|(n, k)| builtin_unavailable_reason(*k).map(|r| (n.to_string(), r)))
            .collect()
    }

    /// The profile to use when none is named: `default_profile`, else
    /// `local`.
    pub fn default_profile_name(&self) -> &str {
        self.default_profile.as_deref().unwrap_or(BUILTIN_PROFILE)
    }

    /// Profile `name` with `${ENV_VAR}` expanded in its option strings.
    /// A `[profiles.local]` table replaces the built-in one.
    ///
    /// Errors: unknown profile (the message lists the known ones); an
    /// unset variable or a malformed `${` (file, line and key).
    pub fn profile(&self, name: &str) -> Result<ProfileConfig, ConfigError> {
        let mut p = match self.profiles.get(name) {
            Some(p) => p.clone(),
            None if builtin_backend(name).is_some() => {
                return Ok(ProfileConfig::builtin(
                    builtin_backend(name).expect("checked"),
                ));
            }
            None => {
                return Err(ConfigError::Invalid {
                    path: self.origin(),
                    message: {
                        let mut m = format!(
                            "no profile `{name}` (known: {}",
                            self.profile_names().join(", ")
                        );
                        let off: Vec<String> = self
                            .unavailable_builtins()
                            .into_iter()
                            .map(|(n, why)| format!("{n} ({why})"))
                            .collect();
                        if !off.is_empty() {
                            m.push_str(&format!(
                                "; built in but unavailable here: {}",
                                off.join(", ")
                            ));
                        }
                        m.push(')');
                        m
                    },
                });
            }
        };
        let mut at = vec![
            "profiles".to_string(),
            name.to_string(),
            "options".to_string(),
        ];
        expand_table(&mut p.options, &mut at).map_err(|(keys, message)| {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            self.located(&keys, format!("{}: {message}", keys.join(".")))
        })?;
        Ok(p)
    }

    /// The config file this was loaded from (`<built-in>` when none).
    pub fn origin(&self) -> PathBuf {
        self.source
            .as_ref()
            .map(|s| s.path.clone())
            .unwrap_or_else(|| PathBuf::from("<built-in>"))
    }

    /// An error at the key `keys` (a path of table keys, e.g.
    /// `["profiles", "dev", "options", "base_dir"]`): names file, line and
    /// column of the deepest key found in the source text.
    pub fn located(&self, keys: &[&str], message: impl Into<String>) -> ConfigError {
        let message = message.into();
        let Some(src) = &self.source else {
            return ConfigError::Invalid {
                path: self.origin(),
                message,
            };
        };
        let (line, column) = key_offset(&src.text, keys)
            .map(|o| line_col(&src.text, o))
            .unwrap_or((1, 1));
        ConfigError::Parse {
            path: src.path.clone(),
            line,
            column,
            message,
        }
    }
}

/// Byte offset of the deepest of `keys` present in `text`.
fn key_offset(text: &str, keys: &[&str]) -> Option<usize> {
    let root = toml::de::DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut found = None;
    for (i, k) in keys.iter().enumerate() {
        let Some((key, value)) = table.iter().find(|(key, _)| key.get_ref() == k) else {
            break;
        };
        found = Some(key.span().start);
        if i + 1 < keys.len() {
            match value.get_ref().as_table() {
                Some(t) => table = t,
                None => break,
            }
        }
    }
    found
}

/// Expands `${NAME}` from the environment; `$${` stands for a literal
/// `${`. Errors name the variable.
pub fn expand_env(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let end = tail
                .find('}')
                .ok_or_else(|| format!("unterminated `${{` in {text:?}"))?;
            let name = &tail[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "`${{{name}}}` is not a valid environment variable name"
                ));
            }
            match std::env::var(name) {
                Ok(v) => out.push_str(&v),
                Err(std::env::VarError::NotPresent) => {
                    return Err(format!("environment variable {name} is not set"));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(format!("environment variable {name} is not valid UTF-8"));
                }
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Expands every string in `table`; on error returns the key path.
fn expand_table(
    table: &mut toml::Table,
    at: &mut Vec<String>,
) -> Result<(), (Vec<String>, String)> {
    for (k, v) in table.iter_mut() {
        at.push(k.clone());
        expand_value(v, at)?;
        at.pop();
    }
    Ok(())
}

fn expand_value(v: &mut toml::Value, at: &mut Vec<String>) -> Result<(), (Vec<String>, String)> {
    match v {
        toml::Value::String(s) => *s = expand_env(s).map_err(|e| (at.clone(), e))?,
        toml::Value::Array(items) => {
            for item in items {
                expand_value(item, at)?;
            }
        }
        toml::Value::Table(t) => expand_table(t, at)?,
        _ => {}
    }
    Ok(())
}

/// True for option keys whose values are secrets.
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["key", "token", "secret", "password", "credential"]
        .iter()
        .any(|w| k.contains(w))
}

fn redact(v: &toml::Value, secret: bool) -> serde_json::Value {
    match v {
        toml::Value::String(s) if secret && !(s.starts_with("${") && s.ends_with('}')) => {
            serde_json::Value::String("<redacted>".into())
        }
        toml::Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), redact(v, secret || is_secret_key(k))))
                .collect(),
        ),
        toml::Value::Array(a) => a.iter().map(|v| redact(v, secret)).collect(),
        other => serde_json::to_value(other).unwrap_or(serde_json::Value::Null),
    }
}

fn ser_redacted<S: serde::Serializer>(t: &toml::Table, s: S) -> Result<S::Ok, S::Error> {
    redact(&toml::Value::Table(t.clone()), false).serialize(s)
}

/// Durations as seconds (integer or float) or humantime strings
/// (`"90s"`, `"5m"`, `"1h 30m"`); printed as humantime strings.
mod duration_serde {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor)
    }

    struct DurationVisitor;

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("seconds (a number) or a duration string such as \"90s\", \"5m\", \"1h\"")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v)
                .map(Duration::from_secs)
                .map_err(|_| E::custom(format!("duration must not be negative, got {v}")))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(v))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
            Duration::try_from_secs_f64(v).map_err(|_| {
                E::custom(format!(
                    "duration must be a non-negative number of seconds, got {v}"
                ))
            })
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            humantime::parse_duration(v).map_err(|e| {
                E::custom(format!(
                    "bad duration {v:?}: {e} (use seconds or e.g. \"90s\", \"5m\", \"1h\")"
                ))
            })
        }
    }
}

/// The key of a `key = value` line (1-based), if the line has one.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let (key, _) = l.split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

/// 1-based line where `key = ...` is set.
fn find_key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == key)
        })
        .map(|i| i + 1)
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {

    #[test]
    fn unknown_profile_names_the_unavailable_built_in_ones() {
        let c = Config::default();
        let e = c.profile("nosuch").unwrap_err().to_string();
        assert!(e.contains("no profile `nosuch` (known: local"), "{e}");
        if std::env::var_os("E2B_API_KEY").is_none_or(|v| v.is_empty()) {
            assert!(e.contains("e2b (needs E2B_API_KEY)"), "{e}");
            assert!(
                c.unavailable_builtins()
                    .contains(&("e2b".to_string(), "needs E2B_API_KEY"))
            );
        }
    }
    use super::*;

    #[test]
    fn missing_file_gives_defaults() {
        let c = Config::load(Path::new("/nonexistent/wsbench.toml")).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn unknown_keys_name_file_line_and_key() {
        let text = "[limits]\nbash_max_output_chars = 10\nbash_timeout = 5\n";
        let err = Config::parse(text, Path::new("/etc/w.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("/etc/w.toml:3:"), "{err}");
        assert!(err.contains("bash_timeout"), "{err}");
    }

    #[test]
    fn bad_values_are_errors_naming_the_key() {
        let err = Config::parse("[limits]\nread_max_lines = \"many\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("c.toml:2:"), "{err}");
        assert!(err.contains("read_max_lines"), "{err}");
        let err = Config::parse("[limits]\nread_max_lines = 0\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("c.toml:2:") && err.contains("read_max_lines"),
            "{err}"
        );
        let err = Config::parse(
            "[limits]\nbash_default_timeout_ms = 900000\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("bash_default_timeout_ms"), "{err}");
    }

    #[test]
    fn skill_paths_that_seed_nothing_are_warned_about() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("one")).unwrap();
        std::fs::write(
            d.path().join("one/SKILL.md"),
            "---\nname: a\ndescription: b\n---\n",
        )
        .unwrap();
        let c = Config {
            workspace: WorkspaceSection {
                skill_paths: vec![
                    d.path().to_path_buf(),
                    d.path().join("missing"),
                    d.path().join("one"),
                ],
                ..Default::default()
            },
            ..Default::default()
        };
        let w = c.skill_path_warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("list its skill folders instead") && w[0].contains("one"));
        assert!(w[1].contains("does not exist"));
    }

    #[test]
    fn values_apply() {
        let c = Config::parse(
            "[limits]\nbash_max_output_chars = 10\n[workspace]\ndefault_session = \"x\"\n",
            Path::new("c"),
        )
        .unwrap();
        assert_eq!(c.limits.bash_max_output_chars, 10);
        assert_eq!(c.limits.read_max_lines, 2000);
        assert_eq!(c.workspace.default_session.as_deref(), Some("x"));
    }
}
