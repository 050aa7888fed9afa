//! `${ENV_VAR}` expansion in profile option strings.

/// Expands `${NAME}` from the environment; `$${` stands for a literal
/// `${`. Errors name the variable.
pub fn expand_env(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let end = tail
                .find('}')
                .ok_or_else(|| format!("unterminated `${{` in {text:?}"))?;
            let name = &tail[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "`${{{name}}}` is not a valid environment variable name"
                ));
            }
            match std::env::var(name) {
                Ok(v) => out.push_str(&v),
                Err(std::env::VarError::NotPresent) => {
                    return Err(format!("environment variable {name} is not set"));
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(format!("environment variable {name} is not valid UTF-8"));
                }
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Expands every string in `table`; on error returns the key path.
pub(super) fn expand_table(
    table: &mut toml::Table,
    at: &mut Vec<String>,
) -> Result<(), (Vec<String>, String)> {
    for (k, v) in table.iter_mut() {
        at.push(k.clone());
        expand_value(v, at)?;
        at.pop();
    }
    Ok(())
}

fn expand_value(v: &mut toml::Value, at: &mut Vec<String>) -> Result<(), (Vec<String>, String)> {
    match v {
        toml::Value::String(s) => *s = expand_env(s).map_err(|e| (at.clone(), e))?,
        toml::Value::Array(items) => {
            for item in items {
                expand_value(item, at)?;
            }
        }
        toml::Value::Table(t) => expand_table(t, at)?,
        _ => {}
    }
    Ok(())
}
