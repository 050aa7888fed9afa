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

mod builtin;
mod error;
mod expand;
mod location;
mod options_check;
mod paths;
mod profile;
pub mod tui;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::engine::tools::ToolLimits;
pub use builtin::{
    BUILTIN_PROFILE, BUILTIN_PROFILES, builtin_available, builtin_backend,
    builtin_unavailable_reason,
};
pub use error::ConfigError;
pub use expand::expand_env;
use expand::expand_table;
pub use location::line_col;
use location::{find_key_line, key_offset, key_on_line};
pub use paths::Paths;
pub use profile::ProfileConfig;
use tui::TuiConfig;

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

/// Built-in tool behaviour (`[tools]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsSection {
    /// The Bash tool runs each (workspace, agent session)'s commands in
    /// one long-lived shell that keeps `cd`, `export` and functions
    /// (`engine::shell_session`). Off by default: every call is a fresh
    /// `/bin/sh -c`, the reference's semantics (docs/contract.md §3.1).
    pub bash_session: bool,
}

/// MCP client settings (`[mcp]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpSection {
    /// Seconds an MCP tool call may take when the server's declaration
    /// sets no `execution_timeout` (`mcp call`, the agent loop, the TUI).
    /// `0` waits forever, as the reference does. Default 600.
    pub call_timeout_secs: f64,
}

impl Default for McpSection {
    fn default() -> Self {
        McpSection {
            call_timeout_secs: crate::engine::mcp::client::DEFAULT_CALL_TIMEOUT.as_secs_f64(),
        }
    }
}

impl McpSection {
    /// The call timeout as [`McpOptions::call_timeout`](crate::engine::mcp::McpOptions)
    /// takes it: `None` for `0`.
    pub fn call_timeout(&self) -> Option<std::time::Duration> {
        (self.call_timeout_secs > 0.0)
            .then(|| std::time::Duration::from_secs_f64(self.call_timeout_secs))
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
    /// Built-in tool behaviour.
    pub tools: ToolsSection,
    /// MCP client settings.
    pub mcp: McpSection,
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
            if let Err((key, message)) = options_check::check(p.backend, &p.options) {
                let mut keys = vec!["profiles", name.as_str(), "options"];
                keys.extend(key.as_deref());
                let what = key
                    .as_ref()
                    .map_or_else(|| "options".to_string(), |k| format!("option `{k}`"));
                return Err(self.located(&keys, format!("profiles.{name}: {what}: {message}")));
            }
            if p.prewarm.max_creating == 0 {
                return Err(self.located(
                    &["profiles", name, "prewarm", "max_creating"],
                    format!("profiles.{name}.prewarm.max_creating: must be at least 1"),
                ));
            }
        }
        let t = self.mcp.call_timeout_secs;
        if !t.is_finite() || !(0.0..=31_536_000.0).contains(&t) {
            return Err(self.located(
                &["mcp", "call_timeout_secs"],
                "mcp.call_timeout_secs: seconds from 0 (no timeout) to one year",
            ));
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
