//! Credentials and headers: where an API key comes from (the profile, else
//! the environment) and how it travels (a header value marked sensitive,
//! so it is never printed).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::backend::secret::Secret;
use crate::backend::{BackendError, BackendResult};

/// Builds a header value that is never printed (API keys, tokens).
///
/// Errors: the value holds characters a header cannot carry.
pub fn secret_header(value: &str) -> BackendResult<HeaderValue> {
    let mut v = HeaderValue::from_str(value).map_err(|_| BackendError::Remote {
        service: "http",
        status: None,
        code: Some("invalid_header".into()),
        message: "a credential contains characters that cannot be sent in a header".into(),
    })?;
    v.set_sensitive(true);
    Ok(v)
}

fn header_name(name: &str) -> BackendResult<HeaderName> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| BackendError::Remote {
        service: "http",
        status: None,
        code: Some("invalid_header".into()),
        message: format!("invalid header name `{name}`"),
    })
}

/// Auth headers: `secret` (never printed) and the `plain` pairs.
///
/// Errors: a name or value that cannot be sent in a header.
pub fn auth_headers(secret: (&str, &str), plain: &[(&str, &str)]) -> BackendResult<HeaderMap> {
    let mut headers = HeaderMap::new();
    headers.insert(header_name(secret.0)?, secret_header(secret.1)?);
    for (n, v) in plain {
        let (n, v) = header(n, v)?;
        headers.insert(n, v);
    }
    Ok(headers)
}

/// Builds a plain header pair.
///
/// Errors: the name or value is not valid in a header.
pub fn header(name: &str, value: &str) -> BackendResult<(HeaderName, HeaderValue)> {
    let n = header_name(name)?;
    let v = HeaderValue::from_str(value).map_err(|_| BackendError::Remote {
        service: "http",
        status: None,
        code: Some("invalid_header".into()),
        message: format!("invalid value for header `{name}`"),
    })?;
    Ok((n, v))
}

/// Reads an API key: the explicit value if non-empty, else the environment
/// variable `env`.
///
/// Errors: neither is set — [`BackendError::Remote`] with code
/// `missing_api_key` naming both places.
pub fn api_key(
    service: &'static str,
    explicit: Option<&Secret>,
    env: &str,
) -> BackendResult<Secret> {
    if let Some(k) = explicit.filter(|k| !k.is_blank()) {
        return Ok(Secret::new(k.expose().trim()));
    }
    match std::env::var(env) {
        Ok(k) if !k.trim().is_empty() => Ok(Secret::new(k.trim())),
        _ => Err(BackendError::Remote {
            service,
            status: None,
            code: Some("missing_api_key".into()),
            message: format!("no API key: set {env} or `api_key` in the profile"),
        }),
    }
}

/// A profile option that falls back to the environment variable `var`;
/// empty values count as unset.
pub fn option_or_env(value: &Option<String>, var: &str) -> Option<String> {
    value
        .clone()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var(var).ok().filter(|s| !s.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_prefers_explicit_then_env() {
        let k = |s: &str| Secret::from(s);
        assert_eq!(
            api_key("e2b", Some(&k(" k ")), "WSBENCH_TEST_NO_SUCH_VAR")
                .unwrap()
                .expose(),
            "k"
        );
        let e = api_key("e2b", Some(&k("")), "WSBENCH_TEST_NO_SUCH_VAR").unwrap_err();
        assert!(e.to_string().contains("WSBENCH_TEST_NO_SUCH_VAR"), "{e}");
    }
}
