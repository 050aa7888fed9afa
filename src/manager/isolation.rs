//! Isolation grain and workspace-id derivation (docs/contract.md §8.1).
//!
//! The ids are the reference's, bit for bit, wherever the reference is
//! deterministic (per_user, and per_agent without bound session storage):
//! a BLAKE2b digest of size 8 (not a truncated 64-byte digest: the digest
//! size is part of BLAKE2b's parameter block), as 16 lower-case hex digits.
//! That keeps a workspace made by one implementation reachable from the
//! other. The reference's cross-policy collision (docs/contract.md §11 point 28:
//! per_agent `("user", u)` hashes like per_user `u`) is kept for the same
//! reason; the ids are only 64-bit, which is plenty for the handful of
//! workspaces one installation holds.

use std::fmt;
use std::str::FromStr;

use blake2::Blake2b;
use blake2::digest::Digest;
use blake2::digest::consts::U8;
use serde::{Deserialize, Serialize};

/// Which callers share a workspace (docs/contract.md §8.1 `IsolationPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolationPolicy {
    /// Every session gets its own workspace (a fresh id, remembered per
    /// `(user, agent, session)`).
    PerSession,
    /// One workspace per `(user, agent)` pair (the reference's default).
    #[default]
    PerAgent,
    /// One workspace per user, shared by all their agents.
    PerUser,
}

impl IsolationPolicy {
    /// The config/CLI spelling (`per_agent`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationPolicy::PerSession => "per_session",
            IsolationPolicy::PerAgent => "per_agent",
            IsolationPolicy::PerUser => "per_user",
        }
    }
}

impl fmt::Display for IsolationPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for IsolationPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "per_session" => Ok(IsolationPolicy::PerSession),
            "per_agent" => Ok(IsolationPolicy::PerAgent),
            "per_user" => Ok(IsolationPolicy::PerUser),
            other => Err(format!(
                "unknown isolation policy `{other}`, expected per_session, per_agent or per_user"
            )),
        }
    }
}

/// `blake2b(text, digest_size=8).hexdigest()`: 16 lower-case hex digits.
pub(crate) fn blake2b_64_hex(text: &str) -> String {
    hex::encode(Blake2b::<U8>::digest(text.as_bytes()))
}

/// The id the reference derives for `(user, agent)` under per_agent when
/// no session storage is bound: `blake2b(user + "::" + agent, 8)`.
pub fn per_agent_id(user: &str, agent: &str) -> String {
    blake2b_64_hex(&format!("{user}::{agent}"))
}

/// The id the reference derives for `user` under per_user:
/// `blake2b("user::" + user, 8)`.
pub fn per_user_id(user: &str) -> String {
    blake2b_64_hex(&format!("user::{user}"))
}

/// A fresh workspace id: uuid4 as 32 lower-case hex digits, like the
/// reference's `_mint_workspace_id` without a pre-warm pool.
pub(crate) fn mint_workspace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The id `policy` gives without any state, or `None` for per_session,
/// whose ids are minted.
pub(crate) fn derived_workspace_id(
    policy: IsolationPolicy,
    user: &str,
    agent: &str,
) -> Option<String> {
    match policy {
        IsolationPolicy::PerAgent => Some(per_agent_id(user, agent)),
        IsolationPolicy::PerUser => Some(per_user_id(user)),
        IsolationPolicy::PerSession => None,
    }
}

/// Refuses a user or agent id holding `::` (issue 23 point 6): the
/// per_agent hash input is `user + "::" + agent`, so such ids can share a
/// workspace with another pair. Ids without `::` keep the reference's
/// hash, so every id the reference can tell apart still matches it.
pub(crate) fn check_principals(user: &str, agent: &str) -> Result<(), super::ManagerError> {
    for (what, id) in [("user", user), ("agent", agent)] {
        if id.contains("::") {
            return Err(super::ManagerError::InvalidPrincipal {
                what,
                id: id.to_string(),
            });
        }
    }
    Ok(())
}

/// `assign_workspace_id(user_id, agent_id, session_id)` of docs/contract.md §8.1
/// without bound storage: pure and deterministic for per_agent and
/// per_user; per_session mints a fresh id on every call (the manager
/// remembers which session got which). The session id does not enter the
/// hash, as in the reference. An explicit workspace id, where a caller has
/// one, wins over all of this; see
/// [`WorkspaceManager::get_workspace`](super::WorkspaceManager::get_workspace).
pub fn assign_workspace_id(
    policy: IsolationPolicy,
    user: &str,
    agent: &str,
    _session: &str,
) -> String {
    derived_workspace_id(policy, user, agent).unwrap_or_else(mint_workspace_id)
}

/// Names that a user or agent directory must not take, because the local
/// layout uses them itself (`<base>/by-id/<id>`) or because the empty id
/// is spelled that way (`""` → `default`).
const RESERVED_SEGMENTS: [&str; 2] = ["default", "by-id"];

/// A user or agent id as one directory name, never colliding with another
/// id's: `""` becomes `default`; a reserved name gets a hash suffix; other
/// ids go through [`sanitize_segment`](crate::backend::host::sanitize_segment)
/// (unsafe characters replaced, plus a hash suffix when anything changed).
pub(crate) fn dir_segment(id: &str) -> String {
    if id.is_empty() {
        return "default".to_string();
    }
    if RESERVED_SEGMENTS.contains(&id) {
        use sha2::Digest as _;
        let h = hex::encode(&sha2::Sha256::digest(id.as_bytes())[..4]);
        return format!("{id}-{h}");
    }
    crate::backend::host::sanitize_segment(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vectors_hold() {
        // Two cases copied from tests/fixtures/workspace-ids.json; the
        // integration test `tests/it/manager.rs` checks the whole file.
        assert_eq!(per_agent_id("alice", "coder"), "6ecd6692afe6f0d3");
        assert_eq!(per_user_id("用户"), "701a04fabac23755");
        assert_eq!(
            assign_workspace_id(IsolationPolicy::PerAgent, "", "", "s1"),
            "7587abe7998fb773"
        );
    }

    #[test]
    fn session_is_ignored_by_hashes_and_per_session_mints() {
        let a = assign_workspace_id(IsolationPolicy::PerUser, "bob", "x", "s1");
        let b = assign_workspace_id(IsolationPolicy::PerUser, "bob", "y", "s2");
        assert_eq!(a, b);
        let m1 = assign_workspace_id(IsolationPolicy::PerSession, "bob", "x", "s1");
        let m2 = assign_workspace_id(IsolationPolicy::PerSession, "bob", "x", "s1");
        assert_ne!(m1, m2);
        assert_eq!(m1.len(), 32);
        assert!(m1.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    /// The collision the reference has (same hash input), and the refusal
    /// that keeps wsbench out of it.
    #[test]
    fn double_colon_ids_are_refused() {
        assert_eq!(per_agent_id("a::b", "c"), per_agent_id("a", "b::c"));
        for (u, a, what) in [
            ("a::b", "c", "user"),
            ("a", "b::c", "agent"),
            ("::", "", "user"),
        ] {
            let e = check_principals(u, a).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("invalid {what} id")),
                "{e}"
            );
            assert!(e.to_string().contains("without `::`"), "{e}");
        }
        assert!(check_principals("a:b", "c:").is_ok());
        assert!(check_principals("", "").is_ok());
    }

    #[test]
    fn policies_parse_and_print() {
        for p in [
            IsolationPolicy::PerSession,
            IsolationPolicy::PerAgent,
            IsolationPolicy::PerUser,
        ] {
            assert_eq!(p.as_str().parse::<IsolationPolicy>().unwrap(), p);
        }
        assert!("per_team".parse::<IsolationPolicy>().is_err());
        assert_eq!(IsolationPolicy::default(), IsolationPolicy::PerAgent);
    }

    #[test]
    fn dir_segments_never_collide() {
        assert_eq!(dir_segment(""), "default");
        assert_ne!(dir_segment("default"), "default");
        assert!(dir_segment("default").starts_with("default-"));
        assert_ne!(dir_segment("by-id"), "by-id");
        assert_eq!(dir_segment("alice"), "alice");
        assert_ne!(dir_segment("a/b"), dir_segment("a_b"));
        assert!(!dir_segment("..").starts_with('.'));
        assert!(!dir_segment("../x").contains('/'));
    }
}
