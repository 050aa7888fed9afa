//! `wsbench workspaces ...`: the workspaces of a profile, including those
//! made by earlier runs (found through the provider, docs/contract.md §8).
//!
//! A one-shot command leaves sandboxes as it found or made them: `open`
//! resumes, `close` suspends (where the backend can), `destroy` deletes.

use super::output::{say, say_err, say_err_part};
use std::io::{BufRead as _, IsTerminal as _, Write as _};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, output};
use crate::manager::{ManagerError, WorkspaceInfo, WorkspaceManager};

/// `workspaces` sub-commands.
#[derive(Debug, Subcommand)]
pub enum WorkspacesCmd {
    /// Every workspace the profile's backend can see: id, profile and
    /// backend, state, user/agent, age, idle time / TTL left, labels.
    ///
    /// States: `ready` / `leased` (open in this process), `provisioning`,
    /// `running`, `suspended` (a closed sandbox: paused or stopped),
    /// `closed` (a closed local workspace), `failed`, `unknown`. TTL LEFT
    /// is the profile's `ttl` minus the idle time, for workspaces that are
    /// open or running; `-` when the idle time is unknown or the workspace
    /// is already closed.
    ///
    /// A profile that cannot be listed (its daemon down, a bad option)
    /// gets one `warning: profile NAME (BACKEND) not listed: CAUSE` line on
    /// stderr and, with --json, one entry in the `errors` array:
    /// `{"workspaces": [...], "errors": [{"profile": NAME, "backend":
    /// BACKEND or null, "error": CAUSE}]}` (`errors` is always there,
    /// empty when every profile answered).
    ///
    /// Exit status: 0 when at least one profile was listed; 1 when none
    /// could be (with --all-profiles: every profile failed).
    List(ListArgs),
    /// Provision the workspace the profile assigns to --user/--agent/
    /// --session (reattaching it if it exists), a fresh one with --new, or
    /// the one named by --id (or the global --workspace-id).
    Create(CreateArgs),
    /// Reattach an existing workspace by id (resuming its sandbox).
    Open {
        /// Workspace id.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::workspace_ids))]
        id: String,
    },
    /// Close a workspace: suspend its sandbox where the backend can.
    Close {
        /// Workspace id.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::workspace_ids))]
        id: String,
    },
    /// Close what is idle past its TTL although no process holds it, and
    /// report orphans (a dry run unless --yes).
    ///
    /// Closes (suspends) every workspace of the profile not open in this
    /// process whose sandbox is running and idle, by the backend's last
    /// activity, for at least the profile's `ttl`, unless another wsbench
    /// process of this host holds it ("left running"). Reports failed
    /// sandboxes, suspended ones idle past the TTL ("stopped": they keep
    /// disk or quota until `workspaces destroy`), and on cloud profiles
    /// the records of this machine whose sandbox the service no longer
    /// has ("orphan record"). Text output stops at 200 lines and says how
    /// many more; --json: `{"acted", "findings", "orphan_records",
    /// "errors", "omitted"}`.
    ///
    /// Exit status: 1 when a profile could not be swept or a close
    /// failed, else 0.
    Gc(super::gc::GcArgs),
    /// Destroy a workspace and all its files (asks first unless --yes).
    Destroy {
        /// Workspace id.
        #[arg(add = clap_complete::ArgValueCandidates::new(super::complete::workspace_ids))]
        id: String,
        /// Do not ask for confirmation (required without a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// Options of `workspaces list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// List the workspaces of every profile (configured and built-in).
    #[arg(long)]
    pub all_profiles: bool,
}

/// Options of `workspaces create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// A new workspace with a fresh id instead of the one the isolation
    /// policy assigns.
    #[arg(long, conflicts_with = "id")]
    pub new: bool,
    /// The workspace with this explicit id, made when missing and
    /// reattached when it exists (`"created"` says which). As in the
    /// reference an explicit id wins over the isolation policy (team tools
    /// share the leader's id, docs/contract.md §8.1): `team-1` is accepted
    /// as is, and `workspaces open team-1` finds it afterwards. Up to 128
    /// bytes, no control characters, no surrounding blanks. The same as
    /// the global `--workspace-id`; given both, they must agree.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
}

pub(super) async fn run(ctx: &Ctx, cmd: WorkspacesCmd) -> anyhow::Result<i32> {
    match cmd {
        WorkspacesCmd::List(a) => list(ctx, a).await,
        WorkspacesCmd::Create(a) => create(ctx, a).await,
        WorkspacesCmd::Open { id } => open(ctx, &id).await,
        WorkspacesCmd::Close { id } => close(ctx, &id).await,
        WorkspacesCmd::Destroy { id, yes } => destroy(ctx, &id, yes).await,
        WorkspacesCmd::Gc(a) => super::gc::run(ctx, a).await,
    }
}

/// A profile `workspaces list` could not list.
struct ListFailure {
    profile: String,
    backend: Option<crate::backend::BackendKind>,
    error: String,
}

async fn list(ctx: &Ctx, a: ListArgs) -> anyhow::Result<i32> {
    let names = if a.all_profiles {
        ctx.root.config.profile_names()
    } else {
        vec![ctx.root.profile_name()]
    };
    let mut all: Vec<WorkspaceInfo> = Vec::new();
    let mut listed: Vec<&str> = Vec::new();
    let mut errors: Vec<ListFailure> = Vec::new();
    for name in &names {
        let result = match ctx.root.manager_for(name) {
            Ok(m) => m.list().await.map_err(list_error),
            Err(e) => Err(e),
        };
        match result {
            Ok(ws) => {
                all.extend(ws);
                listed.push(name);
            }
            Err(e) if a.all_profiles => errors.push(ListFailure {
                profile: name.clone(),
                backend: ctx
                    .root
                    .config
                    .profiles
                    .get(name)
                    .map(|p| p.backend)
                    .or_else(|| crate::config::builtin_backend(name)),
                error: super::error_line(&e),
            }),
            Err(e) => return Err(e.context(format!("listing profile `{name}`"))),
        }
    }
    for f in &errors {
        let backend = f.backend.map(|b| format!(" ({b})")).unwrap_or_default();
        say_err!(
            "warning: profile {}{backend} not listed: {}",
            f.profile,
            f.error
        );
    }
    if ctx.json {
        let errors: Vec<_> = errors
            .iter()
            .map(|f| json!({"profile": f.profile, "backend": f.backend, "error": f.error}))
            .collect();
        output::json(&json!({"workspaces": all, "errors": errors}))?;
    } else {
        let rows: Vec<Vec<String>> = all.iter().map(row).collect();
        if !rows.is_empty() {
            output::table(
                &[
                    "ID", "PROFILE", "BACKEND", "STATE", "USER", "AGENT", "AGE", "IDLE",
                    "TTL LEFT", "LABELS",
                ],
                &rows,
            );
        } else if !listed.is_empty() {
            say!("no workspaces in {}", listed.join(", "));
        }
    }
    Ok(if listed.is_empty() { 1 } else { 0 })
}

/// A listing failure without the manager's "list of workspace  failed"
/// wording (a listing is about no one workspace): the backend's own error,
/// which names the service, status and code.
fn list_error(e: ManagerError) -> anyhow::Error {
    match e {
        ManagerError::Backend {
            op: "list", source, ..
        } => anyhow::Error::new(source),
        e => e.into(),
    }
}

fn row(w: &WorkspaceInfo) -> Vec<String> {
    // The TUI's Workspaces pane shows the same cells (one formatter).
    use crate::manager::display;
    vec![
        w.id.clone(),
        w.profile.clone(),
        w.backend.to_string(),
        display::state(w),
        display::id_or_default(w.user.as_deref()),
        display::id_or_default(w.agent.as_deref()),
        display::span(w.age_secs),
        display::span(w.idle_secs),
        display::span(w.ttl_left_secs),
        display::labels(w),
    ]
}

async fn describe(
    ctx: &Ctx,
    m: &WorkspaceManager,
    ws: &crate::engine::Workspace,
    extra: serde_json::Value,
) -> anyhow::Result<()> {
    let mut v = json!({
        "id": ws.id(),
        "profile": m.profile(),
        "backend": m.backend(),
        "root": ws.layout().workdir(),
        "host_dir": ws.sandbox().host_root(),
    });
    if let (Some(obj), Some(more)) = (v.as_object_mut(), extra.as_object()) {
        obj.extend(more.clone());
    }
    if ctx.json {
        output::json(&v)?;
    } else {
        say!(
            "workspace {} ({} profile, {} backend)",
            ws.id(),
            m.profile(),
            m.backend()
        );
        say!("root: {}", ws.layout().workdir());
        if let Some(created) = v.get("created").and_then(|c| c.as_bool()) {
            say!("{}", if created { "created" } else { "reattached" });
        }
    }
    Ok(())
}

async fn create(ctx: &Ctx, a: CreateArgs) -> anyhow::Result<i32> {
    let m = ctx.root.manager().await?;
    let (user, agent, session) = (
        &ctx.root.global.user,
        &ctx.root.global.agent,
        ctx.root.session(),
    );
    let explicit = match (a.id.as_deref(), ctx.root.global.workspace_id.as_deref()) {
        (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() && a != b => {
            bail!("--id {a:?} and --workspace-id {b:?} name different workspaces; give one")
        }
        (Some(id), _) | (None, Some(id)) if !id.is_empty() => Some(id.to_string()),
        _ => None,
    };
    if a.new && explicit.is_some() {
        bail!("--new makes a workspace with a fresh id; it cannot be combined with --workspace-id");
    }
    let (ws, created) = if a.new {
        (m.create(user, agent, &session).await?, true)
    } else {
        let id = match explicit {
            Some(id) => id,
            None => m.assign_workspace_id(user, agent, &session).await?,
        };
        let existed = m
            .provisioner()
            .find(&id)
            .await
            .with_context(|| format!("looking up workspace {id}"))?
            .is_some();
        (
            m.get_workspace(user, agent, &session, Some(&id)).await?,
            !existed,
        )
    };
    describe(
        ctx,
        m,
        &ws,
        json!({"created": created, "user": user, "agent": agent, "session": session}),
    )
    .await?;
    Ok(0)
}

async fn open(ctx: &Ctx, id: &str) -> anyhow::Result<i32> {
    let m = ctx.root.manager().await?;
    let ws = m.open(id).await?;
    describe(ctx, m, &ws, json!({})).await?;
    Ok(0)
}

async fn close(ctx: &Ctx, id: &str) -> anyhow::Result<i32> {
    let m = ctx.root.manager().await?;
    if !m.close(id).await? {
        bail!("no workspace `{id}` in profile `{}`", m.profile());
    }
    if ctx.json {
        output::json(&json!({"id": id, "profile": m.profile(), "closed": true}))?;
    } else {
        say!("closed workspace {id}");
    }
    Ok(0)
}

async fn destroy(ctx: &Ctx, id: &str, yes: bool) -> anyhow::Result<i32> {
    let m = ctx.root.manager().await?;
    let Some(info) = m
        .provisioner()
        .find(id)
        .await
        .with_context(|| format!("looking up workspace {id}"))?
    else {
        bail!("no workspace `{id}` in profile `{}`", m.profile());
    };
    if !yes {
        if !std::io::stdin().is_terminal() {
            bail!(
                "refusing to destroy workspace {id} without confirmation: no terminal to ask on; pass --yes"
            );
        }
        say_err_part!(
            "Destroy workspace {id} ({}) and everything in it? [y/N] ",
            info.backend_id
        );
        std::io::stderr().flush().ok();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
            say_err!("not destroyed");
            return Ok(1);
        }
    }
    m.destroy(id).await?;
    if ctx.json {
        output::json(&json!({"id": id, "profile": m.profile(), "destroyed": true}))?;
    } else {
        say!("destroyed workspace {id} ({})", info.backend_id);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use crate::manager::display::span;

    #[test]
    fn spans_use_two_units() {
        assert_eq!(span(Some(42.9)), "42s");
        assert_eq!(span(Some(303.0)), "5m 3s");
        assert_eq!(span(Some(7800.0)), "2h 10m");
        assert_eq!(span(Some(3.0 * 86400.0 + 4.0 * 3600.0)), "3d 4h");
        assert_eq!(span(Some(-1.0)), "0s");
    }
}
