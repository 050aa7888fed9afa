//! The one environment every test that runs the `wsbench` binary uses.
//!
//! A run must see only what the test gives it: no `WSBENCH_*` or `XDG_*`
//! variable, API key, service URL or kubeconfig of the machine running the
//! tests (they would point the run at another config, profile, user or a
//! real service, or leak a real key into captured output). Config and data
//! live under the test's temp home.

use std::path::Path;
use std::process::Command;

/// Service variables removed besides every `WSBENCH_*` and `XDG_*` one:
/// API keys, endpoints and the kubeconfig, which the cloud and Kubernetes
/// profiles read when their options leave them out.
const SERVICE_VARS: &[&str] = &[
    "E2B_API_KEY",
    "E2B_API_URL",
    "E2B_DOMAIN",
    "DAYTONA_API_KEY",
    "DAYTONA_API_URL",
    "DAYTONA_TARGET",
    "DAYTONA_ORGANIZATION_ID",
    "OPEN_SANDBOX_API_KEY",
    "OPEN_SANDBOX_DOMAIN",
    "OPENAI_API_KEY",
    "KUBECONFIG",
];

/// A `wsbench` command (the binary under test) with a clean environment:
/// every `WSBENCH_*`, `XDG_*` and service variable ([`SERVICE_VARS`])
/// and `RUST_LOG` removed, then `XDG_CONFIG_HOME=home/config` and `XDG_DATA_HOME=home/data`.
/// The test adds its arguments and any variable it means to set.
pub fn wsbench_cmd(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wsbench"));
    clean_env(&mut cmd, home);
    cmd
}

/// [`wsbench_cmd`] for async tests.
pub fn wsbench_tokio_cmd(home: &Path) -> tokio::process::Command {
    wsbench_cmd(home).into()
}

/// Gives `cmd` the environment of [`wsbench_cmd`], for a program that
/// starts `wsbench` itself (an MCP client script): the variables pass
/// through it to the binary.
pub fn clean_env<'c>(cmd: &'c mut Command, home: &Path) -> &'c mut Command {
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("WSBENCH_") || name.starts_with("XDG_") {
            cmd.env_remove(name);
        }
    }
    for name in SERVICE_VARS {
        cmd.env_remove(name);
    }
    cmd.env_remove("RUST_LOG");
    cmd.env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
}
