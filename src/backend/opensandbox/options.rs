//! The OpenSandbox profile options (`[profiles.<name>.options]`) and the
//! lifecycle URL they lead to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::backend::http;
use crate::backend::secret::Secret;

/// OpenSandbox profile options (docs/contract.md §7.7 constructor, plus URLs).
///
/// Environment fallbacks: `OPEN_SANDBOX_API_KEY`, `OPEN_SANDBOX_DOMAIN`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OpenSandboxOptions {
    /// API key; empty or absent = env `OPEN_SANDBOX_API_KEY`. Never logged.
    /// With neither, requests go without the `OPEN-SANDBOX-API-KEY` header:
    /// a server started without `api_key` in its config (a local
    /// `opensandbox-server`) does not check it, and one that does answers
    /// 401 with a hint naming the variable.
    pub api_key: Option<Secret>,
    /// Lifecycle base URL including `/v1`; default
    /// `<protocol>://<domain>/v1`.
    pub api_url: Option<String>,
    /// Server domain; default env `OPEN_SANDBOX_DOMAIN`, else
    /// `localhost:8080`. A domain starting with `http(s)://` is used as is.
    pub domain: Option<String>,
    /// `http` or `https`, for the domain and for execd endpoints (which
    /// come without a scheme).
    pub protocol: String,
    /// Container image (`python:3.11-slim`).
    pub image: String,
    /// Entry process (required by the server with an image).
    pub entrypoint: Vec<String>,
    /// Provider expiry in seconds (≥ 60); `0` or `None`: no expiry.
    pub timeout_secs: Option<u64>,
    /// `resourceLimits`, e.g. `{"cpu": "1", "memory": "2Gi"}`.
    pub resource_limits: BTreeMap<String, String>,
    /// Environment of the sandbox and of every command.
    pub env: BTreeMap<String, String>,
    /// Extra metadata on every sandbox; `wsbench.workspace.id` always wins.
    pub metadata: BTreeMap<String, String>,
    /// Agent-visible root inside the sandbox.
    pub workdir: String,
    /// Reach execd through the lifecycle server's proxy
    /// (`use_server_proxy=true`).
    pub use_server_proxy: bool,
    /// `X-EXECD-ACCESS-TOKEN`, when execd was started with one.
    pub execd_access_token: Option<Secret>,
    /// How long to wait for the endpoint and execd's `/ping`.
    pub ready_timeout_secs: u64,
    /// How long to wait for a state change (pause, resume).
    pub state_timeout_secs: u64,
    /// Limit for one unary request.
    pub request_timeout_secs: u64,
    /// Retries on 429/5xx.
    pub max_retries: u32,
    /// Seconds without any event (execd pings every 3 s) before a command
    /// stream counts as broken.
    pub stream_idle_secs: u64,
}

impl Default for OpenSandboxOptions {
    fn default() -> Self {
        let mut limits = BTreeMap::new();
        limits.insert("cpu".to_string(), "1".to_string());
        limits.insert("memory".to_string(), "2Gi".to_string());
        OpenSandboxOptions {
            api_key: None,
            api_url: None,
            domain: None,
            protocol: "http".into(),
            image: "python:3.11-slim".into(),
            entrypoint: vec!["tail".into(), "-f".into(), "/dev/null".into()],
            timeout_secs: Some(300),
            resource_limits: limits,
            env: BTreeMap::new(),
            metadata: BTreeMap::new(),
            workdir: "/workspace".into(),
            use_server_proxy: false,
            execd_access_token: None,
            ready_timeout_secs: 30,
            state_timeout_secs: 60,
            request_timeout_secs: 60,
            max_retries: 4,
            stream_idle_secs: 60,
        }
    }
}

impl OpenSandboxOptions {
    pub(super) fn api_url(&self) -> String {
        if let Some(u) = self.api_url.clone().filter(|u| !u.is_empty()) {
            return u;
        }
        let domain = http::option_or_env(&self.domain, "OPEN_SANDBOX_DOMAIN")
            .unwrap_or_else(|| "localhost:8080".into());
        let base = if domain.starts_with("http://") || domain.starts_with("https://") {
            domain
        } else {
            format!("{}://{domain}", self.protocol)
        };
        http::join_url(&base, "/v1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_default_and_reject_unknown() {
        let o: OpenSandboxOptions = serde_json::from_value(json!({"domain": "h:1"})).unwrap();
        assert_eq!(o.api_url(), "http://h:1/v1");
        assert_eq!(o.entrypoint, ["tail", "-f", "/dev/null"]);
        assert!(serde_json::from_value::<OpenSandboxOptions>(json!({"imag": "x"})).is_err());
        let o = OpenSandboxOptions {
            api_key: Some("secret-k".into()),
            ..Default::default()
        };
        assert!(!format!("{o:?}").contains("secret-k"));
    }
}
