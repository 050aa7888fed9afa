//! One `[profiles.<name>]` table, how its durations are written and how
//! its secrets are kept out of printed config.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;
use crate::manager::{
    DEFAULT_KEEP_ALIVE, DEFAULT_SWEEP_INTERVAL, DEFAULT_TTL, IsolationPolicy, PrewarmConfig,
};

/// One `[profiles.<name>]` table: a backend, its options and how the
/// workspace manager runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// Backend kind: `local`, `bubblewrap`, `docker`, `kubernetes`, `e2b`,
    /// `daytona`, `opensandbox`.
    pub backend: BackendKind,
    /// `per_agent` (default), `per_session` or `per_user`.
    #[serde(default)]
    pub isolation: IsolationPolicy,
    /// Idle time before eviction: seconds, or a string like `"1h"`.
    #[serde(default = "default_ttl", with = "duration_serde")]
    pub ttl: Duration,
    /// Sweeper period (sandboxed backends): seconds or `"5m"`; above 0.
    #[serde(default = "default_sweep", with = "duration_serde")]
    pub sweep_interval: Duration,
    /// Provider expiry pushed back by keep-alive renewals while a
    /// workspace is leased (E2B, OpenSandbox); 0 turns renewal off.
    #[serde(default = "default_keep_alive", with = "duration_serde")]
    pub keep_alive: Duration,
    /// Pre-warm pool (`size`, `max_creating`).
    #[serde(default)]
    pub prewarm: PrewarmConfig,
    /// Most bytes of command output (stdout and stderr together) kept in
    /// a tool-result file for this profile's workspaces (wins over
    /// `[limits] tool_result_max_bytes`, default 64 MiB); past it each
    /// stream keeps its first and last bytes with a marker line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result_max_bytes: Option<u64>,
    /// Backend options, checked by the backend when the profile opens.
    /// Keys that look like secrets are redacted when printed.
    #[serde(default, serialize_with = "ser_redacted")]
    pub options: toml::Table,
}

fn default_ttl() -> Duration {
    DEFAULT_TTL
}

fn default_sweep() -> Duration {
    DEFAULT_SWEEP_INTERVAL
}

fn default_keep_alive() -> Duration {
    DEFAULT_KEEP_ALIVE
}

impl ProfileConfig {
    /// The built-in `local` profile: local backend, per_user (one
    /// workspace per user, agents as skill partitions in it, like the
    /// embedded default workspace), reference TTLs. Its base dir is set by
    /// the composition root's `open_profile` from [`Paths`](super::Paths).
    pub fn builtin_local() -> Self {
        Self::builtin(BackendKind::Local)
    }

    /// A built-in profile of `backend` with its default options: per_user
    /// isolation (one default workspace per user, as for `local`).
    pub fn builtin(backend: BackendKind) -> Self {
        ProfileConfig {
            backend,
            isolation: IsolationPolicy::PerUser,
            ttl: DEFAULT_TTL,
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
            keep_alive: DEFAULT_KEEP_ALIVE,
            prewarm: PrewarmConfig::default(),
            tool_result_max_bytes: None,
            options: toml::Table::new(),
        }
    }
}

/// True for option keys whose values are secrets.
fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["key", "token", "secret", "password", "credential"]
        .iter()
        .any(|w| k.contains(w))
}

fn redact(v: &toml::Value, secret: bool) -> serde_json::Value {
    match v {
        toml::Value::String(s) if secret && !(s.starts_with("${") && s.ends_with('}')) => {
            serde_json::Value::String("<redacted>".into())
        }
        toml::Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), redact(v, secret || is_secret_key(k))))
                .collect(),
        ),
        toml::Value::Array(a) => a.iter().map(|v| redact(v, secret)).collect(),
        other => serde_json::to_value(other).unwrap_or(serde_json::Value::Null),
    }
}

fn ser_redacted<S: serde::Serializer>(t: &toml::Table, s: S) -> Result<S::Ok, S::Error> {
    redact(&toml::Value::Table(t.clone()), false).serialize(s)
}

/// Durations as seconds (integer or float) or humantime strings
/// (`"90s"`, `"5m"`, `"1h 30m"`); printed as humantime strings.
mod duration_serde {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor)
    }

    struct DurationVisitor;

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("seconds (a number) or a duration string such as \"90s\", \"5m\", \"1h\"")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            u64::try_from(v)
                .map(Duration::from_secs)
                .map_err(|_| E::custom(format!("duration must not be negative, got {v}")))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(v))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
            Duration::try_from_secs_f64(v).map_err(|_| {
                E::custom(format!(
                    "duration must be a non-negative number of seconds, got {v}"
                ))
            })
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            humantime::parse_duration(v).map_err(|e| {
                E::custom(format!(
                    "bad duration {v:?}: {e} (use seconds or e.g. \"90s\", \"5m\", \"1h\")"
                ))
            })
        }
    }
}
