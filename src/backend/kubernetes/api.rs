//! The API connection: kube errors in the backend's terms, connecting with a kubeconfig, annotation keys.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::options::KubernetesOptions;
use crate::backend::{BackendError, BackendResult};

/// Maps a kube error to [`BackendError::Remote`] with the API's status
/// code and reason; see [`kube_error_at`].
pub(super) fn kube_error(context: &str, e: kube::Error) -> BackendError {
    kube_error_at(None, context, e)
}

/// Maps a kube error to [`BackendError::Remote`]: an API answer keeps its
/// status code and reason (401/403 with a hint about the kubeconfig
/// user); a request that got no answer says, in one line, which API
/// server (`server`, when known) could not be reached and the root cause
/// (`connection refused`, an unknown certificate issuer).
pub(super) fn kube_error_at(server: Option<&str>, context: &str, e: kube::Error) -> BackendError {
    use crate::backend::http::{is_tls_error, root_cause};
    let at = server
        .map(|s| format!("the Kubernetes API at {s}"))
        .unwrap_or_else(|| "the Kubernetes API".into());
    match e {
        kube::Error::Api(s) => {
            let hint = match s.code {
                401 => " (check the user credentials of the kubeconfig context)",
                403 => {
                    " (the kubeconfig user lacks an RBAC permission; see the README's Kubernetes section)"
                }
                _ => "",
            };
            BackendError::Remote {
                service: "kubernetes",
                status: Some(s.code),
                code: Some(s.reason.clone()).filter(|r| !r.is_empty()),
                message: format!("{context}: {}{hint}", s.message),
            }
        }
        ref other @ (kube::Error::HyperError(_) | kube::Error::Service(_)) => {
            let cause = root_cause(other);
            if is_tls_error(other) {
                BackendError::Remote {
                    service: "kubernetes",
                    status: None,
                    code: Some("tls".into()),
                    message: format!(
                        "{context}: TLS with {at} failed: {cause} (check the cluster's certificate-authority in the kubeconfig)"
                    ),
                }
            } else {
                BackendError::Remote {
                    service: "kubernetes",
                    status: None,
                    code: None,
                    message: format!("{context}: cannot reach {at}: {cause}"),
                }
            }
        }
        other => BackendError::Remote {
            service: "kubernetes",
            status: None,
            code: None,
            message: format!("{context}: {}", crate::backend::http::error_chain(&other)),
        },
    }
}

pub(super) fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Builds a kube client from the options (see [`KubernetesOptions`]).
///
/// Errors: [`BackendError::Unavailable`] naming what was tried.
pub async fn connect(opts: &KubernetesOptions) -> BackendResult<Client> {
    Ok(connect_to(opts).await?.0)
}

/// [`connect`], also returning the API server's URL (for messages).
pub(super) async fn connect_to(opts: &KubernetesOptions) -> BackendResult<(Client, String)> {
    crate::backend::http::ensure_crypto_provider();
    let kco = KubeConfigOptions {
        context: opts.context.clone(),
        ..Default::default()
    };
    let unavailable = |what: String| BackendError::unreachable(format!("kubernetes: {what}"));
    let config = if opts.in_cluster {
        Config::incluster().map_err(|e| unavailable(format!("in-cluster config: {e}")))?
    } else if let Some(path) = &opts.kubeconfig {
        let kc = Kubeconfig::read_from(path)
            .map_err(|e| unavailable(format!("reading kubeconfig {}: {e}", path.display())))?;
        check_context(&kc, opts.context.as_deref(), &path.display().to_string())
            .map_err(unavailable)?;
        Config::from_custom_kubeconfig(kc, &kco)
            .await
            .map_err(|e| unavailable(format!("kubeconfig {}: {e}", path.display())))?
    } else if opts.context.is_some() {
        if let Ok(kc) = Kubeconfig::read() {
            check_context(&kc, opts.context.as_deref(), "the default kubeconfig")
                .map_err(unavailable)?;
        }
        Config::from_kubeconfig(&kco)
            .await
            .map_err(|e| unavailable(format!("default kubeconfig: {e}")))?
    } else {
        // kube-rs tries $KUBECONFIG / ~/.kube/config first, then the
        // in-cluster service account.
        Config::infer().await.map_err(|e| {
            unavailable(format!(
                "no usable kubeconfig and no in-cluster config ({e}); set `kubeconfig` or `context`"
            ))
        })?
    };
    let server = config.cluster_url.to_string();
    let server = server.trim_end_matches('/').to_string();
    let client =
        Client::try_from(config).map_err(|e| unavailable(format!("building the client: {e}")))?;
    Ok((client, server))
}

/// Checks that `context` (when set) is one of `kc`'s contexts; the error
/// lists the ones there are.
pub(super) fn check_context(
    kc: &Kubeconfig,
    context: Option<&str>,
    file: &str,
) -> Result<(), String> {
    let Some(want) = context else {
        return Ok(());
    };
    if kc.contexts.iter().any(|c| c.name == want) {
        return Ok(());
    }
    let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    Err(format!(
        "context `{want}` is not in {file}; its contexts: {}",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    ))
}

/// Annotation holding the exact value of a label (label values are
/// length- and charset-limited, annotations are not).
pub(super) fn annotation_key(label: &str) -> String {
    label.to_string()
}
