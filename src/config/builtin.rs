//! Built-in profiles: the ones that exist without a config file, and
//! whether this machine can use them.

use std::path::Path;

use crate::backend::BackendKind;

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
