//! The `wsbench` binary: parses the command line and runs it — the TUI
//! for a bare `wsbench` on a terminal, else the CLI.

use clap::Parser;
use wsbench::cli::Cli;

fn main() {
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
    let cli = Cli::parse();
    // Libraries log their own failures at ERROR (rmcp's transport
    // workers, kube's client builder, rustls' certificate verifier) and
    // wsbench reports the same failure as its one error line: by default
    // only wsbench's own warnings show; `WSBENCH_LOG` (an `EnvFilter`
    // such as `debug` or `wsbench=debug,kube=info`) shows the rest.
    let filter = match std::env::var("WSBENCH_LOG") {
        Ok(v) if !v.trim().is_empty() => match tracing_subscriber::EnvFilter::try_new(&v) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("wsbench: ignoring WSBENCH_LOG={v:?}: {e}");
                tracing_subscriber::EnvFilter::new(wsbench::cli::DEFAULT_LOG_FILTER)
            }
        },
        _ => tracing_subscriber::EnvFilter::new(wsbench::cli::DEFAULT_LOG_FILTER),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        // No colour when the TUI will capture stderr into its Logs pane
        // (no sub-command): the pane shows text, not escape codes.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()) && cli.command.is_some())
        .with_writer(std::io::stderr)
        .init();
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
    let code = match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", wsbench::cli::error_line(&e));
            1
        }
    };
    // Do not wait for detached blocking tasks (a watcher, a spool) on exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    std::process::exit(code);
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
    ctx.report_at_exit();
    code
}
