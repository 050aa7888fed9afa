//! Where wsbench keeps things: the XDG config file and data directory.

use std::path::PathBuf;

use serde::Serialize;

use super::ConfigError;

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
