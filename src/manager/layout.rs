//! Where a local workspace's directory lives under a base directory,
//! decided by the labels the manager gives it. Used by the local,
//! bubblewrap and Docker provisioners a profile builds.

use std::path::{Path, PathBuf};

use super::isolation::{IsolationPolicy, dir_segment, per_agent_id, per_user_id};
use super::labels as mlabels;
use crate::backend::host::sanitize_segment;
use crate::backend::local::plain_segment;
use crate::backend::{ProvisionSpec, labels};

/// Where a local workspace lives under `base` (docs/contract.md §12, §11 point
/// 26), decided by its labels:
/// * per_agent, id derived from its user and agent → `<base>/<user>/<agent>`
///   (users never share a directory);
/// * per_user, id derived from its user → `<base>/<user>`;
/// * every other id (per_session, explicit team ids, pre-warmed) →
///   `<base>/by-id/<id>`.
///
/// Segments go through [`dir_segment`] (`""` → `default`, reserved names
/// suffixed) or [`sanitize_segment`], so no id escapes `base` and `by-id`
/// is never a user's directory. A base dir should serve one isolation
/// policy: a per_user directory would contain per_agent ones.
pub fn local_layout(base: &Path, spec: &ProvisionSpec) -> PathBuf {
    let l = &spec.labels;
    let policy = l
        .get(mlabels::ISOLATION)
        .and_then(|p| p.parse::<IsolationPolicy>().ok());
    let user = l.get(labels::USER);
    let agent = l.get(labels::AGENT);
    match (policy, user, agent) {
        (Some(IsolationPolicy::PerAgent), Some(u), Some(a))
            if spec.workspace_id == per_agent_id(u, a) =>
        {
            base.join(dir_segment(u)).join(dir_segment(a))
        }
        (Some(IsolationPolicy::PerUser), Some(u), _) if spec.workspace_id == per_user_id(u) => {
            base.join(dir_segment(u))
        }
        _ => base
            .join("by-id")
            .join(sanitize_segment(&spec.workspace_id)),
    }
}

/// The reference's local layout, for profiles with `layout = "reference"`
/// (docs/contract.md §8.3, §11 point 26): every workspace of an agent is
/// `<base>/<agent>`, whatever its user, isolation policy or id, so users
/// of one agent share a folder, as in the reference. The agent id is the
/// folder name as it is when it is a [`plain_segment`]; otherwise (empty,
/// `..`, a `/`, a leading `.`, `by-id`) it goes through [`dir_segment`]
/// (`""` → `default`), where the reference would use the base itself or a
/// path outside it. A workspace without an agent (a pre-warmed one) is
/// `<base>/by-id/<id>`.
pub fn reference_layout(base: &Path, spec: &ProvisionSpec) -> PathBuf {
    match spec.labels.get(labels::AGENT) {
        Some(a) if plain_segment(a) => base.join(a),
        Some(a) => base.join(dir_segment(a)),
        None => base
            .join("by-id")
            .join(sanitize_segment(&spec.workspace_id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn spec(id: &str, user: &str, agent: &str) -> ProvisionSpec {
        spec_as(IsolationPolicy::PerAgent, id, user, agent)
    }

    fn spec_as(policy: IsolationPolicy, id: &str, user: &str, agent: &str) -> ProvisionSpec {
        let mut l = BTreeMap::new();
        l.insert(mlabels::ISOLATION.to_string(), policy.as_str().to_string());
        l.insert(labels::USER.to_string(), user.to_string());
        l.insert(labels::AGENT.to_string(), agent.to_string());
        ProvisionSpec {
            workspace_id: id.to_string(),
            labels: l,
        }
    }

    #[test]
    fn reference_layout_is_base_slash_agent_for_every_id() {
        let base = Path::new("/b");
        for (id, user) in [
            (per_agent_id("alice", "coder"), "alice"),
            (per_agent_id("bob", "coder"), "bob"),
            ("team-7".to_string(), "alice"),
        ] {
            assert_eq!(
                reference_layout(base, &spec(&id, user, "coder")),
                Path::new("/b/coder")
            );
        }
        let per_user = IsolationPolicy::PerUser;
        assert_eq!(
            reference_layout(base, &spec_as(per_user, &per_user_id("u"), "u", "x")),
            Path::new("/b/x")
        );
        // Names the reference would take out of the base, or onto it.
        for bad in ["", "..", ".", "../etc", "a/b", ".wsbench", "by-id"] {
            let p = reference_layout(base, &spec("w", "u", bad));
            assert_eq!(p.parent(), Some(Path::new("/b")), "{bad:?} -> {p:?}");
            let name = p.file_name().unwrap().to_str().unwrap();
            assert!(plain_segment(name), "{bad:?} -> {p:?}");
        }
        let mut bare = spec("w", "u", "a");
        bare.labels.remove(labels::AGENT);
        assert_eq!(reference_layout(base, &bare), Path::new("/b/by-id/w"));
    }

    #[test]
    fn layout_separates_users_and_keeps_other_ids_apart() {
        let base = Path::new("/b");
        let alice = local_layout(
            base,
            &spec(&per_agent_id("alice", "coder"), "alice", "coder"),
        );
        let bob = local_layout(base, &spec(&per_agent_id("bob", "coder"), "bob", "coder"));
        assert_eq!(alice, Path::new("/b/alice/coder"));
        assert_eq!(bob, Path::new("/b/bob/coder"));
        // A team id used by alice's coder is not her per_agent directory.
        assert_eq!(
            local_layout(base, &spec("team-7", "alice", "coder")),
            Path::new("/b/by-id/team-7")
        );
        let hostile = local_layout(base, &spec(&per_agent_id("../..", "/etc"), "../..", "/etc"));
        assert!(hostile.starts_with("/b/"), "{hostile:?}");
        assert_eq!(hostile.components().count(), 4, "{hostile:?}");
        assert_eq!(
            local_layout(base, &spec(&per_agent_id("", ""), "", "")),
            Path::new("/b/default/default")
        );
        let per_user = IsolationPolicy::PerUser;
        assert_eq!(
            local_layout(base, &spec_as(per_user, &per_user_id("bob"), "bob", "x")),
            Path::new("/b/bob")
        );
        assert_eq!(
            local_layout(base, &spec_as(per_user, &per_user_id(""), "", "")),
            Path::new("/b/default")
        );
        // The reference's cross-policy collision (§11 point 28) does not
        // move a directory: the policy label decides.
        let id = per_user_id("user");
        assert_eq!(id, per_agent_id("user", "user"));
        assert_eq!(
            local_layout(base, &spec_as(per_user, &id, "user", "user")),
            Path::new("/b/user")
        );
        // Without a policy label nothing is derived: one dir per id.
        let mut bare = spec(&per_agent_id("a", "b"), "a", "b");
        bare.labels.remove(mlabels::ISOLATION);
        assert!(local_layout(base, &bare).starts_with("/b/by-id"));
    }
}
