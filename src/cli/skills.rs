//! `wsbench skills list | show NAME | add PATH | remove NAME`.

use super::output::say;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::{Ctx, output};
use crate::engine::skills::ArchiveFormat;

/// Skill sub-commands (all scoped to `--agent`).
#[derive(Debug, Subcommand)]
pub enum SkillsCmd {
    /// Skills of the agent's partition: valid ones, then invalid ones with
    /// the path, line and reason.
    List,
    /// Prints one skill's SKILL.md body.
    Show {
        /// Agent-facing skill name.
        name: String,
    },
    /// Installs a skill from a host directory holding SKILL.md, or from a
    /// `.zip`, `.tar`, `.tar.gz` / `.tgz` archive.
    Add {
        /// Directory or archive on the host.
        path: PathBuf,
    },
    /// Removes a skill by its agent-facing name.
    Remove {
        /// Skill name.
        name: String,
    },
}

pub(super) async fn run(ctx: &Ctx, cmd: SkillsCmd) -> anyhow::Result<i32> {
    let ws = ctx.root.open_workspace().await?;
    let agent = ctx.root.global.agent.as_str();
    match cmd {
        SkillsCmd::List => {
            let listing = ws.skills().list(agent).await?;
            // Invalid skills are listed, then reported in the exit code.
            let code = if listing.invalid.is_empty() {
                0
            } else {
                super::EXIT_PARTIAL
            };
            if ctx.json {
                output::json(&listing)?;
                return Ok(code);
            }
            say!(
                "{} in {} ({} valid, {} invalid)",
                crate::root::words::count(
                    listing.skills.len() + listing.invalid.len(),
                    "skill",
                    "skills"
                ),
                listing.partition,
                listing.skills.len(),
                listing.invalid.len()
            );
            if let Some(note) = &listing.note {
                say!("({note})");
            }
            let rows: Vec<Vec<String>> = listing
                .skills
                .iter()
                .map(|s| vec![s.name.clone(), "ok".into(), s.description.clone()])
                .chain(listing.invalid.iter().map(|i| {
                    vec![
                        i.dir.rsplit('/').next().unwrap_or(&i.dir).to_string(),
                        "INVALID".into(),
                        format!("{}: {}", i.path, i.describe()),
                    ]
                }))
                .collect();
            if !rows.is_empty() {
                output::table(&["NAME", "STATUS", "DESCRIPTION"], &rows);
            }
            return Ok(code);
        }
        SkillsCmd::Show { name } => {
            let skill = ws.skills().get(&name, agent).await?;
            if ctx.json {
                output::json(&skill)?;
            } else {
                say!(
                    "# {} — {}\n({})\n",
                    skill.name,
                    skill.description,
                    skill.dir
                );
                say!("{}", skill.markdown);
            }
        }
        SkillsCmd::Add { path } => {
            let installed = if path.is_dir() {
                ws.skills().add(&path, agent).await?
            } else {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let fmt = ArchiveFormat::from_file_name(name).ok_or_else(|| {
                    anyhow::anyhow!(
                        "{}: not a directory and not a .zip, .tar or .tar.gz archive",
                        path.display()
                    )
                })?;
                ws.skills()
                    .add_archive_file(&path, fmt, agent, None)
                    .await?
            };
            if ctx.json {
                output::json(&installed)?;
            } else if installed.already_installed {
                say!(
                    "skill {} is already installed (same content) at {}",
                    installed.name,
                    installed.dir
                );
            } else {
                say!("installed skill {} at {}", installed.name, installed.dir);
            }
        }
        SkillsCmd::Remove { name } => {
            ws.skills().remove(&name, agent).await?;
            if ctx.json {
                output::json(&json!({"removed": name}))?;
            } else {
                say!("removed skill {name}");
            }
        }
    }
    Ok(0)
}
