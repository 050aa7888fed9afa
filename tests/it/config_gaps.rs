//! Issue 14's clear-error gaps: a bad option in a profile nobody selected
//! fails at parse time with file:line; `--config` naming a directory or a
//! missing path says so; a missing `--workdir` is an error unless
//! `--create-workdir` asks for it.

use crate::support::cli;

use std::path::Path;
use std::process::Output;

fn run(home: &Path, args: &[&str]) -> Output {
    cli::wsbench_cmd(home).args(args).output().unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_bad_option_in_any_profile_fails_at_parse_time_with_file_and_line() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("wsbench.toml");
    std::fs::write(
        &file,
        "[profiles.fine]\nbackend = \"local\"\n\n[profiles.box]\nbackend = \"docker\"\n\n[profiles.box.options]\nimage = \"debian:bookworm-slim\"\nmemory = \"lots\"\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    for args in [
        &["--config", f, "info"][..],
        &["--config", f, "workspaces", "list"][..],
    ] {
        let o = run(home.path(), args);
        assert_ne!(o.status.code(), Some(0), "{args:?} passed");
        let e = err(&o);
        assert!(
            e.contains(&format!("{f}:9")) && e.contains("memory"),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn config_and_workdir_paths_that_are_not_there_are_named() {
    let home = tempfile::tempdir().unwrap();
    let missing = home.path().join("nope/config.toml");
    let o = run(
        home.path(),
        &["--config", missing.to_str().unwrap(), "info"],
    );
    assert!(err(&o).contains("does not exist"), "{}", err(&o));
    let o = run(
        home.path(),
        &["--config", home.path().to_str().unwrap(), "info"],
    );
    assert!(err(&o).contains("is a directory"), "{}", err(&o));

    let w = home.path().join("typo");
    let o = run(
        home.path(),
        &["--workdir", w.to_str().unwrap(), "exec", "--", "true"],
    );
    assert_ne!(o.status.code(), Some(0));
    assert!(
        err(&o).contains("does not exist") && err(&o).contains("--create-workdir"),
        "{}",
        err(&o)
    );
    assert!(!w.exists(), "made {w:?}");
    let o = run(
        home.path(),
        &[
            "--workdir",
            w.to_str().unwrap(),
            "--create-workdir",
            "exec",
            "--",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(w.is_dir());
}
