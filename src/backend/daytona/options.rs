//! The Daytona profile options (`[profiles.<name>.options]`) and how
//! commands run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::backend::http;
use crate::backend::secret::Secret;

/// How commands are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DaytonaExecMode {
    /// Toolbox session + followed log: streamed, separate stdout/stderr.
    #[default]
    Session,
    /// `POST /process/execute`: one blocking call; stdout and stderr come
    /// back merged as the daemon's `result` (reported as stdout).
    Execute,
}

/// Daytona profile options (docs/contract.md §7.5 constructor, plus URLs).
///
/// Environment fallbacks: `DAYTONA_API_KEY`, `DAYTONA_API_URL`,
/// `DAYTONA_TARGET`, `DAYTONA_ORGANIZATION_ID`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DaytonaOptions {
    /// API key; empty or absent = env `DAYTONA_API_KEY`. Never logged.
    pub api_key: Option<Secret>,
    /// API base; default env `DAYTONA_API_URL`, else
    /// `https://app.daytona.io/api`.
    pub api_url: Option<String>,
    /// `X-Daytona-Organization-ID` (needed with a JWT instead of a key).
    pub organization_id: Option<String>,
    /// Region target; default env `DAYTONA_TARGET`, else the service's.
    pub target: Option<String>,
    /// Snapshot to create from; `None` = the service default.
    pub snapshot: Option<String>,
    /// OS user in the sandbox.
    pub user: Option<String>,
    /// Environment of the sandbox (and of every command).
    pub env: BTreeMap<String, String>,
    /// Extra labels on every sandbox; `wsbench.workspace.id` always wins.
    pub labels: BTreeMap<String, String>,
    /// Minutes of inactivity before Daytona stops the sandbox (`None` =
    /// the service default; 0 = never).
    pub auto_stop_interval: Option<u32>,
    /// Agent-visible root; `None` = the toolbox's work dir.
    pub workdir: Option<String>,
    /// Toolbox base URL override (default: the sandbox's
    /// `toolboxProxyUrl`).
    pub toolbox_url: Option<String>,
    /// How commands run.
    pub exec_mode: DaytonaExecMode,
    /// Timeout sent with `/process/execute` when a request has none, in
    /// seconds (the daemon's own default is a hidden 10 s).
    pub default_exec_timeout_secs: u64,
    /// How long to wait for a state change (start, stop).
    pub state_timeout_secs: u64,
    /// Limit for one unary request.
    pub request_timeout_secs: u64,
    /// Retries on 429/5xx.
    pub max_retries: u32,
}

impl Default for DaytonaOptions {
    fn default() -> Self {
        DaytonaOptions {
            api_key: None,
            api_url: None,
            organization_id: None,
            target: None,
            snapshot: None,
            user: None,
            env: BTreeMap::new(),
            labels: BTreeMap::new(),
            auto_stop_interval: None,
            workdir: None,
            toolbox_url: None,
            exec_mode: DaytonaExecMode::Session,
            default_exec_timeout_secs: 1800,
            state_timeout_secs: 300,
            request_timeout_secs: 60,
            max_retries: 4,
        }
    }
}

impl DaytonaOptions {
    pub(super) fn api_url(&self) -> String {
        http::option_or_env(&self.api_url, "DAYTONA_API_URL")
            .unwrap_or_else(|| "https://app.daytona.io/api".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_reject_unknown_and_parse_mode() {
        let o: DaytonaOptions = serde_json::from_value(json!({"exec_mode": "execute"})).unwrap();
        assert_eq!(o.exec_mode, DaytonaExecMode::Execute);
        assert!(serde_json::from_value::<DaytonaOptions>(json!({"label": {}})).is_err());
    }
}
