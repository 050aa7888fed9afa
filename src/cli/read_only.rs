//! `--read-only` for the CLI: which sub-commands change something, in
//! one typed match, checked once before any of them runs (no workspace
//! is opened, nothing is provisioned, nothing is written).
//!
//! A new variant of [`Command`] or of a sub-command enum does not build
//! until it is classified here (the matches are exhaustive, no `_` arm).
//! Reads pass: `tool` too, whose writing tools (Write, Edit, Bash) are
//! refused by the read-only workspace itself, and `mcp serve`, whose
//! calls are refused the same way. `workspaces open` reattaches (and so
//! resumes a suspended sandbox, as any read of it does).

use super::Command;
use super::mcp::McpCmd;
use super::skills::SkillsCmd;
use super::workspaces::WorkspacesCmd;

/// What a sub-command changes, named for the refusal; `None` when it only
/// reads.
pub(super) fn change(command: &Command) -> Option<&'static str> {
    match command {
        Command::Exec(_) => Some("exec runs a command in the workspace"),
        Command::Shell(_) => Some("shell runs an interactive program in the workspace"),
        Command::Demo(a) if a.list => None,
        Command::Demo(_) => Some("demo runs an agent that writes the session"),
        Command::Agent(_) => Some("agent runs an agent that writes the session"),
        Command::Skills(c) => match c {
            SkillsCmd::Add { .. } => Some("skills add installs a skill"),
            SkillsCmd::Remove { .. } => Some("skills remove deletes a skill"),
            SkillsCmd::List | SkillsCmd::Show { .. } => None,
        },
        Command::Mcp(c) => match c {
            McpCmd::Add(_) => Some("mcp add saves .mcp"),
            McpCmd::Remove { .. } => Some("mcp remove saves .mcp"),
            McpCmd::Call { .. } => Some("mcp call runs a server's tool and journals it"),
            McpCmd::Restart { .. } => Some("mcp restart stops and starts a server"),
            McpCmd::List { .. } | McpCmd::Tools { .. } | McpCmd::Serve => None,
        },
        Command::Workspaces(c) => match c {
            WorkspacesCmd::Create(_) => Some("workspaces create provisions a workspace"),
            WorkspacesCmd::Close { .. } => Some("workspaces close suspends a workspace"),
            WorkspacesCmd::Destroy { .. } => Some("workspaces destroy deletes a workspace"),
            WorkspacesCmd::Gc(a) if a.yes => Some("workspaces gc --yes closes workspaces"),
            WorkspacesCmd::Gc(_) => None,
            WorkspacesCmd::List(_) | WorkspacesCmd::Open { .. } => None,
        },
        Command::Tool(_)
        | Command::Sessions(_)
        | Command::Offload(_)
        | Command::Status
        | Command::Info
        | Command::Completions { .. }
        | Command::Man { .. } => None,
    }
}

/// `Err` with one line naming `--read-only` when `read_only` and
/// `command` changes something.
pub(super) fn check(read_only: bool, command: Option<&Command>) -> anyhow::Result<()> {
    match command.and_then(change) {
        Some(what) if read_only => anyhow::bail!(
            "refused: {what}, and --read-only changes nothing (run without --read-only)"
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Option<Command> {
        let mut v = vec!["wsbench"];
        v.extend_from_slice(args);
        super::super::Cli::try_parse_from(v).unwrap().command
    }

    #[test]
    fn writes_are_refused_and_reads_pass() {
        for args in [
            &["workspaces", "create"][..],
            &["workspaces", "close", "x"],
            &["workspaces", "destroy", "--yes", "x"],
            &["skills", "add", "dir"],
            &["skills", "remove", "s"],
            &["mcp", "add", "x", "--", "true"],
            &["mcp", "remove", "x"],
            &["mcp", "call", "x", "t"],
            &["mcp", "restart", "x"],
            &["exec", "--", "true"],
            &[
                "agent",
                "--model-url",
                "http://127.0.0.1:9",
                "--model",
                "m",
                "hi",
            ],
            &["demo", "explore"],
        ] {
            let c = parse(args);
            let e = check(true, c.as_ref()).expect_err(&format!("{args:?}"));
            assert!(e.to_string().contains("--read-only"), "{args:?}: {e}");
            assert!(check(false, c.as_ref()).is_ok(), "{args:?}");
        }
        for args in [
            &["skills", "list"][..],
            &["sessions", "list"],
            &["mcp", "list"],
            &["workspaces", "list"],
            &["info"],
            &["tool", "Read", "{}"],
            &["demo", "--list"],
        ] {
            assert!(check(true, parse(args).as_ref()).is_ok(), "{args:?}");
        }
        assert!(check(true, None).is_ok());
    }
}
