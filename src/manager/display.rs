//! The one way a [`WorkspaceInfo`] is shown as text: `wsbench workspaces
//! list` and the TUI's Workspaces pane (and header) both call these, so
//! the same workspace reads the same in both (state names, times, user /
//! agent, labels).

use super::WorkspaceInfo;
use super::labels as mlabels;
use crate::backend::labels as blabels;

/// How an empty user or agent id reads (the default user / agent, which
/// the manager keys with `""`).
pub(crate) const DEFAULT_ID: &str = "(default)";

/// The state in the provider's words, the same in every process:
/// a workspace this process holds open (`ready`, `leased`) is `running`
/// like the provider reports it to any other process; live leases follow
/// in brackets (`running (1 lease)`). Other states (`provisioning`,
/// `suspended`, `failed`, `unknown`) are shown as they are.
pub fn state(w: &WorkspaceInfo) -> String {
    let base = match w.state.as_str() {
        "ready" | "leased" => "running",
        s => s,
    };
    match w.leases {
        0 => base.to_string(),
        1 => format!("{base} (1 lease)"),
        n => format!("{base} ({n} leases)"),
    }
}

/// A user or agent id: `-` when the workspace has no such label,
/// [`DEFAULT_ID`] when it is the empty (default) id.
pub fn id_or_default(v: Option<&str>) -> String {
    match v {
        None => "-".into(),
        Some("") => DEFAULT_ID.into(),
        Some(s) => s.into(),
    }
}

/// A span of seconds in its two largest units (`42s`, `5m 3s`,
/// `2h 10m`, `3d 4h`); `-` when unknown.
pub fn span(secs: Option<f64>) -> String {
    let Some(secs) = secs else {
        return "-".into();
    };
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

/// Labels that are not columns already (id, user, agent, profile are),
/// `key=value` joined by `,`, the session first; `-` when none.
/// `wsbench.isolation=per_user` stays: no column shows it.
pub fn labels(w: &WorkspaceInfo) -> String {
    let columns = [
        blabels::WORKSPACE_ID,
        blabels::USER,
        blabels::AGENT,
        blabels::PROFILE,
        mlabels::SESSION,
    ];
    let mut v: Vec<String> = w
        .labels
        .iter()
        .filter(|(k, _)| !columns.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if let Some(s) = &w.session {
        v.insert(0, format!("session={s}"));
    }
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::BackendKind;

    fn info() -> WorkspaceInfo {
        WorkspaceInfo {
            id: "w".into(),
            profile: "local".into(),
            backend: BackendKind::Local,
            state: "ready".into(),
            reason: None,
            open: true,
            leases: 0,
            user: Some(String::new()),
            agent: None,
            session: None,
            location: None,
            created_at: None,
            age_secs: None,
            idle_secs: None,
            ttl_left_secs: None,
            labels: Default::default(),
        }
    }

    #[test]
    fn open_here_reads_like_the_provider_says() {
        let mut w = info();
        assert_eq!(state(&w), "running");
        w.state = "leased".into();
        w.leases = 2;
        assert_eq!(state(&w), "running (2 leases)");
        w.state = "suspended".into();
        w.leases = 0;
        assert_eq!(state(&w), "suspended");
    }

    #[test]
    fn ids_times_and_labels() {
        let mut w = info();
        assert_eq!(id_or_default(w.user.as_deref()), "(default)");
        assert_eq!(id_or_default(w.agent.as_deref()), "-");
        assert_eq!(span(Some(8640.0)), "2h 24m");
        assert_eq!(span(None), "-");
        assert_eq!(labels(&w), "-");
        w.labels
            .insert("wsbench.isolation".into(), "per_user".into());
        w.labels.insert(blabels::USER.into(), "u".into());
        w.session = Some("s1".into());
        assert_eq!(labels(&w), "session=s1,wsbench.isolation=per_user");
    }
}
