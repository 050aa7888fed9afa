//! `wsbench shell [-- CMD]`: a terminal inside the workspace's sandbox
//! (the image's `bash`, else `sh`; or CMD, run interactively), attached
//! to this terminal by [`crate::root::attach`], as the TUI's `!` does.
//! Exits with the program's exit code.

use clap::Args;

use super::Ctx;
use super::output::say_err;
use crate::root::attach;

/// Arguments of `shell`.
#[derive(Debug, Args)]
pub struct ShellArgs {
    /// A program and its arguments to run instead of the shell (after
    /// `--`), run directly, not through a shell.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub command: Vec<String>,
}

pub(super) async fn run(ctx: &Ctx, args: ShellArgs) -> anyhow::Result<i32> {
    let ws = ctx.root.open_workspace().await?;
    let sb = ws.sandbox().clone();
    if let Some(why) = attach::why_no_shell(&*sb) {
        say_err!("wsbench: {why}");
        return Ok(1);
    }
    say_err!("{}", attach::banner(&*sb, ws.id()));
    let code = attach::run(&*sb, attach::shell_request(&args.command)).await;
    ws.close().await;
    Ok(code?.unwrap_or(1))
}
