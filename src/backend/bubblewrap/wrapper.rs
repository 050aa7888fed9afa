//! The in-sandbox start announcement: the first byte a command's stdout
//! carries once bwrap has built the sandbox, so a setup failure (no start
//! byte) is told apart from the command's own failure (C11).

/// The byte the in-sandbox wrapper prints before running the command.
pub(super) const STARTED: u8 = b'\x06';

/// The wrapper: announces that the sandbox is up, then becomes the command.
const WRAPPER: &str = "printf '\\006' && exec \"$@\"";

/// What a shell command line (`/bin/sh -c <script>`) runs first instead of
/// going through [`WRAPPER`]: the same start byte from the same shell,
/// which saves one `sh` start per command (issue 18). `;` and no newline,
/// so the script's line numbers and its `&` lists are unchanged.
const START_PREFIX: &str = "printf '\\006'; ";

/// The argv run inside bwrap: a `sh -c` script gets [`START_PREFIX`];
/// anything else goes through [`WRAPPER`].
pub(super) fn wrap(argv: &[String]) -> Vec<String> {
    match argv {
        [sh, c, script, rest @ ..] if (sh == "/bin/sh" || sh == "sh") && c == "-c" => {
            let mut v = vec![sh.clone(), c.clone(), format!("{START_PREFIX}{script}")];
            v.extend(rest.iter().cloned());
            v
        }
        _ => {
            let mut v = vec![
                "/bin/sh".to_string(),
                "-c".into(),
                WRAPPER.into(),
                "sh".into(),
            ];
            v.extend(argv.iter().cloned());
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_shell_script_is_prefixed_in_place_other_commands_are_wrapped() {
        assert_eq!(
            wrap(&v(&["/bin/sh", "-c", "echo $LINENO; a & b"])),
            v(&["/bin/sh", "-c", "printf '\\006'; echo $LINENO; a & b"])
        );
        assert_eq!(
            wrap(&v(&["sh", "-c", "x", "name", "arg"])),
            v(&["sh", "-c", "printf '\\006'; x", "name", "arg"])
        );
        assert_eq!(
            wrap(&v(&["true"])),
            v(&["/bin/sh", "-c", WRAPPER, "sh", "true"])
        );
        assert_eq!(
            wrap(&v(&["/bin/bash", "-c", "x"]))[2],
            WRAPPER,
            "only sh scripts are prefixed"
        );
    }

    #[test]
    fn the_prefixed_script_keeps_its_line_numbers_and_background_lists() {
        let script = "false & wait; echo ok\nno-such-command-18";
        let out = std::process::Command::new("/bin/sh")
            .args(wrap(&v(&["/bin/sh", "-c", script]))[1..].iter())
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"\x06ok\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("2: no-such-command-18"), "{err}");
    }
}
