//! Running one test again in a child process of the test binary.
//!
//! All integration tests share one process, and libtest runs them on
//! parallel threads: a test that needs process-wide state (the current
//! directory, an environment variable the code under test reads) must not
//! change it under the others. Such a test starts itself alone in a child
//! process with that state given to the child's command, and the child runs
//! the test's body.

use std::process::Command;

/// Set in the child's environment, so the test knows to run its body.
const CHILD: &str = "WSBENCH_TEST_IN_CHILD";

/// True inside a child started by [`run_in_child`].
pub fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs the test `name` (its path inside this binary, such as
/// `tools_search::some_test`) alone in a child process of this binary, after
/// `setup` has set the child's current directory or variables. Panics with
/// the child's output unless exactly that test ran and passed.
pub fn run_in_child(name: &str, setup: impl FnOnce(&mut Command)) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([name, "--exact", "--test-threads=1"])
        .env(CHILD, "1");
    setup(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(" 1 passed;"),
        "{name} in a child process:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
