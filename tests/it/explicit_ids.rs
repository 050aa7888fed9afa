//! Explicit workspace ids (issue 23 point 4): `workspaces create --id` and
//! the global `--workspace-id`, with the reference's rule that an explicit
//! id always wins over the isolation policy (docs/contract.md §8.1: team
//! tools pass the leader's id, e.g. `team-1`).

use std::process::Output;

use serde_json::Value;
use wsbench::manager::isolation::per_user_id;

use crate::support::cli;

struct Cli {
    home: tempfile::TempDir,
}

impl Cli {
    fn run(&self, args: &[&str]) -> Output {
        cli::wsbench_cmd(self.home.path())
            .args(args)
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    }
}

#[test]
fn an_explicit_id_is_created_reopened_and_shared_across_users() {
    let cli = Cli {
        home: tempfile::tempdir().unwrap(),
    };
    let err = cli.fails(&["workspaces", "open", "team-1"]);
    assert!(err.contains("no workspace `team-1`"), "{err}");

    let made = cli.json(&[
        "workspaces",
        "create",
        "--id",
        "team-1",
        "--user",
        "alice",
        "--agent",
        "lead",
        "--json",
    ]);
    assert_eq!(made["id"], "team-1");
    assert_eq!(made["created"], true);
    // Again, as another user and agent: the explicit id wins, the same
    // workspace is reattached (team members share the leader's id).
    let again = cli.json(&[
        "workspaces",
        "create",
        "--user",
        "bob",
        "--agent",
        "helper",
        "--workspace-id",
        "team-1",
        "--json",
    ]);
    assert_eq!(again["id"], "team-1");
    assert_eq!(again["created"], false);
    let opened = cli.json(&["workspaces", "open", "team-1", "--json"]);
    assert_eq!(opened["id"], "team-1");

    // Every command that opens a workspace takes --workspace-id: a file
    // written through one user's command is read through another's.
    let o = cli.run(&[
        "exec",
        "--user",
        "alice",
        "--workspace-id",
        "team-1",
        "--",
        "sh",
        "-c",
        "echo shared > note.txt && pwd",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = cli.home.path().join("data/wsbench/workspaces/by-id/team-1");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        dir.canonicalize().unwrap().to_str().unwrap()
    );
    let o = cli.run(&[
        "exec",
        "--user",
        "carol",
        "--workspace-id",
        "team-1",
        "--",
        "cat",
        "note.txt",
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "shared\n");
    // Without it, the policy's workspace (per_user here), not team-1's.
    let o = cli.run(&[
        "exec",
        "--user",
        "carol",
        "--",
        "sh",
        "-c",
        "test -e note.txt || echo absent",
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "absent\n");

    let listed = cli.json(&["workspaces", "list", "--json"]);
    let ids: Vec<&str> = listed["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"team-1"), "{listed}");
    assert!(ids.contains(&per_user_id("carol").as_str()), "{listed}");
}

#[test]
fn explicit_ids_follow_the_rules_and_bad_ones_change_nothing() {
    let cli = Cli {
        home: tempfile::tempdir().unwrap(),
    };
    // Empty: the policy assigns, as the reference's `body.workspace_id or ...`.
    let v = cli.json(&[
        "workspaces",
        "create",
        "--id",
        "",
        "--user",
        "dana",
        "--json",
    ]);
    assert_eq!(v["id"], per_user_id("dana"));
    // Ids a path could be made of stay under the base (by-id/, sanitised).
    let v = cli.json(&["workspaces", "create", "--id", "../up", "--json"]);
    assert_eq!(v["id"], "../up");
    assert!(!cli.home.path().join("data/wsbench/up").exists());

    for (id, why) in [
        (" team", "white space"),
        ("a\nb", "control"),
        (&"x".repeat(129) as &str, "128 bytes"),
    ] {
        let err = cli.fails(&["workspaces", "create", "--id", id]);
        assert!(err.contains(why), "{id:?}: {err}");
        let err = cli.fails(&["exec", "--workspace-id", id, "--", "true"]);
        assert!(err.contains(why), "{id:?}: {err}");
    }
    let err = cli.fails(&["workspaces", "create", "--id", "a", "--workspace-id", "b"]);
    assert!(err.contains("different workspaces"), "{err}");
    let err = cli.fails(&["workspaces", "create", "--id", "a", "--new"]);
    assert!(err.contains("cannot be used with"), "{err}");
    let err = cli.fails(&[
        "exec",
        "--workspace-id",
        "a",
        "--workdir",
        "/tmp",
        "--",
        "true",
    ]);
    assert!(err.contains("cannot be used with"), "{err}");
    // Nothing but the two good workspaces was made.
    let listed = cli.json(&["workspaces", "list", "--json"]);
    assert_eq!(
        listed["workspaces"].as_array().unwrap().len(),
        2,
        "{listed}"
    );
}
