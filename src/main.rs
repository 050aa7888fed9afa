//! The `wsbench` binary: parses the command line and runs it — the TUI
//! for a bare `wsbench` on a terminal, else the CLI.

use clap::Parser;
use wsbench::cli::Cli;

fn main() {
    // `WSBENCH_COMPLETE=bash wsbench …`: the shell asking for candidates.
    wsbench::cli::complete::maybe_complete();
    if version_only() {
        // Same text as clap's `--version`; tests/it/cli.rs compares them.
        println!("wsbench {}", wsbench::cli::VERSION);
        return;
    }
    // A reader that closes our stdout early (`wsbench ... | head`) ends the
    // program quietly, as with other command-line tools, instead of a
    // panic from `println!`. SIGPIPE stays ignored so that writing to a
    // dead child's stdin is an error, not a kill.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default_hook(info);
    }));
    let json_args = std::env::args_os().any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version are answers, not errors; a usage error under
        // `--json` is also a JSON object on stdout (exit 2, as clap's).
        Err(e) if json_args && e.use_stderr() => {
            // The message is the text before clap's blank line and usage.
            let text = e.to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let first = first.join(" ");
            let first = first.trim_start_matches("error: ");
            println!(
                "{}",
                serde_json::json!({ "error": first, "kind": "usage", "causes": [first] })
            );
            let _ = e.print();
            std::process::exit(2);
        }
        Err(e) => e.exit(),
    };
    // Libraries log their own failures at ERROR (rmcp's transport
    // workers, kube's client builder, rustls' certificate verifier) and
    // wsbench reports the same failure as its one error line: by default
    // only wsbench's own warnings reach stderr; `WSBENCH_LOG` (or
    // `RUST_LOG`) shows the rest. The log file keeps more (see
    // `cli::logging`). No colour when the TUI will capture stderr into
    // its Logs pane (no sub-command): the pane shows text, not escapes.
    let log_guard = wsbench::cli::logging::init(
        std::io::IsTerminal::is_terminal(&std::io::stderr()) && cli.command.is_some(),
        cli.global.read_only,
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let json = cli.global.json;
    let code = match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            // Under `--json` stdout gets the error as JSON too (scripts
            // read stdout); stderr keeps the one text line.
            if json {
                println!("{}", wsbench::cli::error_json(&e));
            }
            eprintln!("error: {}", wsbench::cli::error_line(&e));
            1
        }
    };
    // Do not wait for detached blocking tasks (a watcher, a spool) on exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    // `exit` runs no destructors: flush the log file's queue first.
    drop(log_guard);
    std::process::exit(code);
}

/// True for exactly `wsbench --version` or `wsbench -V`, answered before
/// anything is set up: clap builds the whole command tree (every
/// sub-command's arguments) before it parses, which cost more than the
/// rest of the process start (issue 18: `--version` within 2 ms).
fn version_only() -> bool {
    let mut args = std::env::args_os().skip(1);
    match (args.next(), args.next()) {
        (Some(a), None) => a == "--version" || a == "-V",
        _ => false,
    }
}

/// Opens the TUI for a bare `wsbench` on a terminal (without `--json`);
/// every other command line goes to the CLI.
async fn run(cli: Cli) -> anyhow::Result<i32> {
    if cli.command.is_some() || cli.global.json || !wsbench::tui::can_open() {
        return wsbench::cli::run(cli).await;
    }
    let ctx = wsbench::root::Context::load(cli.global.selection())?;
    let options = wsbench::tui::TuiOptions {
        read_only: cli.global.read_only,
        theme: cli.tui.theme,
        no_mouse: cli.tui.no_mouse,
    };
    let code = wsbench::tui::run(&ctx, options).await;
    ctx.close_at_exit().await;
    ctx.report_at_exit();
    code
}
