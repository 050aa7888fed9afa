//! Configuration: where wsbench keeps things, and the TOML config file.
//!
//! Paths follow the XDG base directories: the config file is
//! `$XDG_CONFIG_HOME/wsbench/config.toml` (default `~/.config/...`), data
//! (the embedded default workspace) under `$XDG_DATA_HOME/wsbench/`
//! (default `~/.local/share/...`). A missing config file is not an error:
//! built-in defaults apply. Unknown keys and bad values are errors naming
//! the file, line and key.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::tools::ToolLimits;

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

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Workspace settings.
    pub workspace: WorkspaceSection,
    /// Built-in tool limits.
    pub limits: ToolLimits,
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
        let config: Config = toml::from_str(text).map_err(|e| {
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
