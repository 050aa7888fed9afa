//! Backend options checked when the config file is parsed, for every
//! profile (issue 14: `memory = "lots"` in a profile nobody selected
//! passed `info` and `workspaces list` and failed only at provisioning,
//! without a file and line).
//!
//! Each profile's `options` table is read into its backend's options type
//! (unknown keys and wrong types refused), and the values the backend
//! parses later are parsed now: Docker's `memory`, the Kubernetes
//! checks of [`KubernetesOptions::validate`]. A value holding `${VAR}`
//! is expanded only when the profile opens, so it is checked then; a
//! missing required option is reported then too, with the backend's own
//! words (some come from the environment).

use serde::de::DeserializeOwned;

use crate::backend::BackendKind;
use crate::backend::bubblewrap::BubblewrapOptions;
use crate::backend::daytona::DaytonaOptions;
use crate::backend::docker::{DockerOptions, parse_memory};
use crate::backend::e2b::E2bOptions;
use crate::backend::kubernetes::KubernetesOptions;
use crate::backend::opensandbox::OpenSandboxOptions;

/// A refused option: the key when one is to blame, and why.
pub(super) type Refusal = (Option<String>, String);

/// Checks `options` for a profile of backend `kind`.
pub(super) fn check(kind: BackendKind, options: &toml::Table) -> Result<(), Refusal> {
    let has_vars = toml::Value::Table(options.clone())
        .to_string()
        .contains("${");
    match kind {
        // The local backend's two keys are checked by `root` (a table of
        // names, no options type).
        BackendKind::Local => Ok(()),
        BackendKind::Bubblewrap => typed::<BubblewrapOptions>(options).map(drop),
        BackendKind::Docker => {
            let Some(o) = typed::<DockerOptions>(options)? else {
                return Ok(());
            };
            match o.memory.as_deref().filter(|m| !m.contains("${")) {
                Some(m) => parse_memory(m)
                    .map(drop)
                    .map_err(|e| (Some("memory".into()), e)),
                None => Ok(()),
            }
        }
        BackendKind::Kubernetes => match typed::<KubernetesOptions>(options)? {
            // Its messages start with the option they are about.
            Some(o) if !has_vars => o.validate().map_err(|e| {
                let key = e
                    .split_whitespace()
                    .next()
                    .filter(|w| options.contains_key(*w));
                (key.map(str::to_string), e)
            }),
            _ => Ok(()),
        },
        BackendKind::E2b => typed::<E2bOptions>(options).map(drop),
        BackendKind::Daytona => typed::<DaytonaOptions>(options).map(drop),
        BackendKind::Opensandbox => typed::<OpenSandboxOptions>(options).map(drop),
    }
}

/// `options` read as `T`; `None` when only a required field is missing.
fn typed<T: DeserializeOwned>(options: &toml::Table) -> Result<Option<T>, Refusal> {
    let read = |t: &toml::Table| toml::Value::Table(t.clone()).try_into::<T>();
    let err = match read(options) {
        Ok(v) => return Ok(Some(v)),
        Err(e) if e.message().starts_with("missing field") => return Ok(None),
        Err(e) => e,
    };
    // The key to blame: the one refused on its own (a wrong type), else
    // the one the message names (`unknown field `x``).
    let alone_refused = |k: &String, v: &toml::Value| {
        let one = toml::Table::from_iter([(k.clone(), v.clone())]);
        read(&one).is_err_and(|e| !e.message().starts_with("missing field"))
    };
    let key = options
        .iter()
        .find(|(k, v)| alone_refused(k, v))
        .map(|(k, _)| k.clone())
        .or_else(|| err.message().split('`').nth(1).map(str::to_string));
    Err((key, err.message().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn bad_values_are_refused_with_their_key() {
        let e = check(BackendKind::Docker, &table("memory = \"lots\"")).unwrap_err();
        assert_eq!(e.0.as_deref(), Some("memory"), "{e:?}");
        let e = check(BackendKind::Docker, &table("cpus = \"many\"")).unwrap_err();
        assert_eq!(e.0.as_deref(), Some("cpus"), "{e:?}");
        let e = check(BackendKind::Bubblewrap, &table("shar_net = true")).unwrap_err();
        assert_eq!(e.0.as_deref(), Some("shar_net"), "{e:?}");
        assert!(check(BackendKind::Docker, &table("memory = \"2g\"")).is_ok());
        assert!(check(BackendKind::Docker, &table("memory = \"${MEM}\"")).is_ok());
        assert!(check(BackendKind::E2b, &table("")).is_ok());
    }
}
