//! Profile options of a Docker workspace: image, storage, suspend mode, limits, and their defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The default image of the built-in `docker` profile.
pub const DEFAULT_IMAGE: &str = "debian:bookworm-slim";

/// Path of the workspace inside the container (docs/contract.md §7.3).
pub(crate) const CONTAINER_WORKDIR: &str = "/workspace";

/// Label: how the workspace stores its files (`bind`, `volume`, `ephemeral`).
pub(crate) const LABEL_STORAGE: &str = "wsbench.docker.storage";
/// Label: host directory of a bind-mounted workspace.
pub(crate) const LABEL_HOST_DIR: &str = "wsbench.docker.host_dir";
/// Label: named volume of a volume workspace.
pub(crate) const LABEL_VOLUME: &str = "wsbench.docker.volume";
/// Label: user commands run as (`uid:gid`), empty for the image default.
pub const LABEL_USER: &str = "wsbench.docker.user";

/// When to pull the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PullPolicy {
    /// Pull only when the image is not present locally.
    #[default]
    Missing,
    /// Pull before every create.
    Always,
    /// Never pull; a missing image is an error.
    Never,
}

/// Where a workspace's files live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Storage {
    /// A host directory (one per workspace under the base dir)
    /// bind-mounted at `/workspace`.
    #[default]
    Bind,
    /// A named volume `wsbench-<id>` mounted at `/workspace`.
    Volume,
    /// Nothing: files live in the container and die with it.
    Ephemeral,
}

/// What suspend does to the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuspendMode {
    /// `docker stop`: frees memory; resume starts it again.
    #[default]
    Stop,
    /// `docker pause`: freezes the processes; resume is instant.
    Pause,
}

/// Profile options of a Docker workspace (`[profiles.<name>]` with
/// `backend = "docker"`, or JSON). Every field has a default, so the
/// built-in `docker` profile needs none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DockerOptions {
    /// Daemon address (`unix:///var/run/docker.sock`, `tcp://...`);
    /// `None` = `$DOCKER_HOST`, else the local socket.
    pub host: Option<String>,
    /// Image to run.
    pub image: String,
    /// When to pull the image.
    pub pull: PullPolicy,
    /// Where files live.
    pub storage: Storage,
    /// Parent of the per-workspace host directories (bind storage);
    /// `None` = `$XDG_DATA_HOME/wsbench/docker` ([`default_base_dir`]).
    pub base_dir: Option<PathBuf>,
    /// Network mode: `none` (default) or `host` on machines whose daemon
    /// runs without a bridge; any mode the daemon knows otherwise.
    pub network: String,
    /// Memory limit: bytes, or a number with `k`, `m` or `g` (`"2g"`).
    pub memory: Option<String>,
    /// CPU limit in cores (`1.5`).
    pub cpus: Option<f64>,
    /// Most processes the container may have.
    pub pids_limit: Option<i64>,
    /// Docker's init as PID 1 (reaps orphans). Off: the command below is
    /// PID 1.
    pub init: bool,
    /// The container's main command; it only has to stay alive.
    pub command: Vec<String>,
    /// What suspend does.
    pub suspend: SuspendMode,
    /// User commands run as (`uid[:gid]` or a name in the image). `None`:
    /// the host user's `uid:gid` with bind storage, the image's user
    /// otherwise.
    pub user: Option<String>,
    /// Extra environment for every command. With a bind mount and a
    /// non-root user, `HOME` defaults to `/workspace`.
    pub env: BTreeMap<String, String>,
    /// Prefix of container and volume names.
    pub name_prefix: String,
    /// Seconds `docker stop` waits before killing.
    pub stop_timeout_secs: u32,
    /// Destroy removes the named volume too.
    pub remove_volume: bool,
    /// Extra host paths bound read-only at the same place in the container
    /// (a host tool such as `node` and its packages, for MCP stdio
    /// servers); missing ones are skipped, as bubblewrap's `ro_binds` do.
    /// Fixed when the container is created.
    pub ro_binds: Vec<PathBuf>,
}

impl Default for DockerOptions {
    fn default() -> Self {
        DockerOptions {
            host: None,
            image: DEFAULT_IMAGE.into(),
            pull: PullPolicy::Missing,
            storage: Storage::Bind,
            base_dir: None,
            network: "none".into(),
            memory: None,
            cpus: None,
            pids_limit: Some(4096),
            init: true,
            command: vec!["sleep".into(), "infinity".into()],
            suspend: SuspendMode::Stop,
            user: None,
            env: BTreeMap::new(),
            name_prefix: "wsbench-".into(),
            stop_timeout_secs: 5,
            remove_volume: true,
            ro_binds: Vec::new(),
        }
    }
}

/// `$XDG_DATA_HOME/wsbench/docker` (default `~/.local/share/wsbench/docker`).
pub fn default_base_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(dirs::data_dir)
        .map(|d| d.join("wsbench").join("docker"))
        .unwrap_or_else(|| PathBuf::from("wsbench-docker"))
}

/// Parses a memory size: plain bytes or a number with `b`, `k`, `m`, `g`
/// (binary multiples, case-insensitive).
pub(crate) fn parse_memory(s: &str) -> Result<i64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1i64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('b') => (&t[..t.len() - 1], 1),
        _ => (t.as_str(), 1),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad memory size `{s}` (use bytes or a number with k, m or g)"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("memory size `{s}` must be positive"));
    }
    Ok((v * mult as f64) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_deserialize_strictly_with_defaults() {
        let o: DockerOptions = toml::from_str("").unwrap();
        assert_eq!(o, DockerOptions::default());
        assert_eq!(o.image, DEFAULT_IMAGE);
        assert_eq!(o.network, "none");
        let o: DockerOptions = toml::from_str(
            "image = \"busybox\"\nstorage = \"volume\"\nsuspend = \"pause\"\nmemory = \"512m\"\ncpus = 1.5\npull = \"never\"",
        )
        .unwrap();
        assert_eq!(o.storage, Storage::Volume);
        assert_eq!(o.suspend, SuspendMode::Pause);
        assert_eq!(o.pull, PullPolicy::Never);
        let e = toml::from_str::<DockerOptions>("imgae = \"x\"").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        let e = toml::from_str::<DockerOptions>("storage = \"nfs\"").unwrap_err();
        assert!(e.to_string().contains("unknown variant"), "{e}");
        let j: DockerOptions = serde_json::from_str(r#"{"network": "host"}"#).unwrap();
        assert_eq!(j.network, "host");
    }

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory("512m").unwrap(), 512 << 20);
        assert_eq!(parse_memory("2G").unwrap(), 2 << 30);
        assert_eq!(parse_memory("1000").unwrap(), 1000);
        assert_eq!(parse_memory("1.5k").unwrap(), 1536);
        assert!(parse_memory("lots").is_err());
        assert!(parse_memory("-1m").is_err());
    }
}
