//! [`Secret`]: an API key or token held in memory, which `Debug` and
//! `Display` never show, so a profile's options or a provisioner can be
//! printed (logs, `{:?}` in a test failure) without leaking it.
//!
//! The value reaches the wire only through [`Secret::expose`], at the
//! one place that builds an auth header (see `backend::http`, which marks
//! such header values sensitive too).

use serde::{Deserialize, Serialize};

/// An API key or access token. `Debug` prints `"<redacted>"` (so an
/// `Option<Secret>` shows as `Some("<redacted>")`), `Display` prints
/// `<redacted>`. Serde reads and writes the plain string, so profile files
/// keep their format (`api_key = "..."`).
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the header or body that must carry it. Do not
    /// log or format what this returns.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty or only white space (an unset key in a
    /// profile that writes `api_key = ""`).
    pub fn is_blank(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_redacts_and_serde_keeps_the_value() {
        let s = Secret::from("sk-123");
        assert_eq!(format!("{s:?}"), "\"<redacted>\"");
        assert_eq!(format!("{:?}", Some(s.clone())), "Some(\"<redacted>\")");
        assert_eq!(s.to_string(), "<redacted>");
        assert_eq!(s.expose(), "sk-123");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"sk-123\"");
        let back: Secret = serde_json::from_str("\"sk-123\"").unwrap();
        assert_eq!(back, s);
        assert!(Secret::from(" ").is_blank());
    }
}
