//! The error of loading or reading the configuration.

use std::path::PathBuf;

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
