//! The E2B profile options (`[profiles.<name>.options]`) and the URLs
//! they lead to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::backend::http;
use crate::backend::secret::Secret;

/// E2B profile options (docs/contract.md §7.4 constructor, plus URLs for tests).
///
/// Environment fallbacks: `E2B_API_KEY`, `E2B_API_URL`, `E2B_DOMAIN`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct E2bOptions {
    /// API key; empty or absent = env `E2B_API_KEY`. Never logged.
    pub api_key: Option<Secret>,
    /// Control-plane base URL; default env `E2B_API_URL`, else
    /// `https://api.<domain>`.
    pub api_url: Option<String>,
    /// Sandbox domain; default env `E2B_DOMAIN`, else `e2b.app`.
    pub domain: Option<String>,
    /// envd base URL template; `{sandbox_id}`, `{domain}` and `{port}` are
    /// filled in. Default `https://{port}-{sandbox_id}.{domain}`. Requests
    /// also carry `E2b-Sandbox-Id`/`E2b-Sandbox-Port`, so one host can
    /// route (the shared-host form, and the test fakes).
    pub envd_url: Option<String>,
    /// Template id (`base`).
    pub template: String,
    /// Provider lifetime in seconds (`timeout` on create/connect; 300).
    pub timeout_secs: u64,
    /// Agent-visible root inside the sandbox.
    pub workdir: String,
    /// OS user for envd (sent as `Authorization: Basic`); `None` = the
    /// template's default user.
    pub user: Option<String>,
    /// Environment for every command (`envVars` on create too).
    pub env: BTreeMap<String, String>,
    /// Extra metadata on every sandbox; `wsbench.workspace.id` always wins.
    pub metadata: BTreeMap<String, String>,
    /// Ask E2B to pause instead of kill on expiry (`autoPause`). wsbench
    /// defaults to `true` although the service defaults to `false`: a
    /// one-shot command leaves its sandbox running, and a killed sandbox
    /// takes the workspace's files with it (the next command would get a
    /// new empty one); a paused one is resumed by the next command.
    /// `false` sends `autoPause: false` (kill on expiry); `None`, which a
    /// profile cannot write, leaves the field out.
    pub auto_pause: Option<bool>,
    /// How long to wait for envd's `/health` after create/connect.
    pub ready_timeout_secs: u64,
    /// Limit for one unary request.
    pub request_timeout_secs: u64,
    /// Retries on 429/5xx.
    pub max_retries: u32,
    /// Seconds without any frame (envd sends keep-alives) before a command
    /// stream counts as broken.
    pub stream_idle_secs: u64,
}

impl Default for E2bOptions {
    fn default() -> Self {
        E2bOptions {
            api_key: None,
            api_url: None,
            domain: None,
            envd_url: None,
            template: "base".into(),
            timeout_secs: 300,
            workdir: "/home/user/workspace".into(),
            user: None,
            env: BTreeMap::new(),
            metadata: BTreeMap::new(),
            auto_pause: Some(true),
            ready_timeout_secs: 30,
            request_timeout_secs: 60,
            max_retries: 4,
            stream_idle_secs: 180,
        }
    }
}

impl E2bOptions {
    pub(super) fn domain(&self) -> String {
        http::option_or_env(&self.domain, "E2B_DOMAIN").unwrap_or_else(|| "e2b.app".into())
    }

    pub(super) fn api_url(&self) -> String {
        http::option_or_env(&self.api_url, "E2B_API_URL")
            .unwrap_or_else(|| format!("https://api.{}", self.domain()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_reject_unknown_fields_and_hide_the_key() {
        let e = serde_json::from_value::<E2bOptions>(json!({"templat": "x"}));
        assert!(e.is_err());
        let o: E2bOptions = serde_json::from_value(json!({"api_key": "sk-secret"})).unwrap();
        assert!(!format!("{o:?}").contains("sk-secret"));
        assert_eq!(o.template, "base");
        // Files survive the provider's expiry unless the profile says no.
        assert_eq!(o.auto_pause, Some(true));
        let o: E2bOptions = serde_json::from_value(json!({"auto_pause": false})).unwrap();
        assert_eq!(o.auto_pause, Some(false));
    }
}
