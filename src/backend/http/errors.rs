//! Error answers and transport failures as text: the `(code, message)` in
//! each service's error body, the root cause and chain of a transport
//! error, and whether it is a TLS failure.

use serde_json::Value;

/// The innermost source of `e` as a short phrase: `connection refused`
/// rather than `error sending request for url (...)`, without the
/// `(os error 111)` tail.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last: &(dyn std::error::Error + 'static) = e;
    while let Some(s) = last.source() {
        last = s;
    }
    let text = last.to_string();
    let text = match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    // `Connection refused` → `connection refused`, but keep `TLS ...`.
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase() => a
            .to_lowercase()
            .chain(text[a.len_utf8()..].chars())
            .collect(),
        _ => text,
    }
}

/// Whether `e` or one of its sources is a TLS failure (bad or unknown
/// certificate, failed handshake): repeating the request cannot help.
pub fn is_tls_error(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        if c.is::<rustls::Error>() {
            return true;
        }
        // An `io::Error` hides the error it wraps from `source()` (and
        // tokio-rustls wraps twice).
        cur = match c.downcast_ref::<std::io::Error>() {
            Some(io) => match io.get_ref() {
                Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                None => std::error::Error::source(io),
            },
            None => c.source(),
        };
    }
    false
}

/// The error text of `e` and its sources, joined with `: `.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

/// Pulls `(code, message)` out of the error bodies the three services send:
/// E2B `{code:int, message}`, Connect `{code:"not_found", message}`,
/// Daytona/NestJS `{statusCode, message (string or list), error, code?}`,
/// OpenSandbox `{code:"DOCKER::…", message}`. Non-JSON bodies become the
/// message.
pub fn parse_error_body(body: &[u8]) -> (Option<String>, String) {
    let text = String::from_utf8_lossy(body);
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else {
        return (None, snippet(text.trim()));
    };
    let as_text = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Array(items) => Some(
                items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| i.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            _ => None,
        }
    };
    let code = map
        .get("error_code")
        .and_then(as_text)
        .or_else(|| map.get("code").and_then(as_text));
    let message = map
        .get("message")
        .and_then(as_text)
        .or_else(|| map.get("error").and_then(as_text))
        .or_else(|| map.get("detail").and_then(as_text))
        .unwrap_or_else(|| snippet(text.trim()));
    (code, message)
}

/// At most 500 characters of `s`, for error messages.
pub fn snippet(s: &str) -> String {
    const MAX: usize = 500;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_services_error_body() {
        assert_eq!(
            parse_error_body(br#"{"code":404,"message":"sandbox not found"}"#),
            (Some("404".into()), "sandbox not found".into())
        );
        assert_eq!(
            parse_error_body(br#"{"code":"DOCKER::SANDBOX_NOT_FOUND","message":"gone"}"#),
            (Some("DOCKER::SANDBOX_NOT_FOUND".into()), "gone".into())
        );
        assert_eq!(
            parse_error_body(
                br#"{"statusCode":400,"message":["labels must be JSON","x"],"error":"Bad Request"}"#
            ),
            (None, "labels must be JSON; x".into())
        );
        assert_eq!(
            parse_error_body(b"<html>bad gateway</html>").1,
            "<html>bad gateway</html>"
        );
    }
}
