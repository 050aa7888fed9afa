//! `wsbench tool NAME 'JSON'`: call any built-in tool.

use super::output::{say, say_part};
use clap::Args;

use super::{Ctx, output};
use crate::engine::ToolCall;

/// Arguments of `tool`.
#[derive(Debug, Args)]
pub struct ToolArgs {
    /// Tool name (`Bash`, `Read`, `Write`, `Edit`, `Glob`, `Grep`); `list`
    /// prints the tools with their schemas.
    pub name: String,
    /// Arguments as a JSON object.
    #[arg(default_value = "{}")]
    pub args: String,
}

pub(super) async fn run(ctx: &Ctx, args: ToolArgs) -> anyhow::Result<i32> {
    let ws = ctx.root.open_workspace().await?;
    if args.name == "list" {
        let tools = ws.list_tools();
        if ctx.json {
            output::json(&tools)?;
        } else {
            for t in tools {
                say!(
                    "{:<6} {}",
                    t.name,
                    t.description.lines().next().unwrap_or("")
                );
            }
        }
        return Ok(0);
    }
    let value: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| anyhow::anyhow!("tool arguments are not valid JSON: {e}"))?;
    anyhow::ensure!(
        value.is_object(),
        "tool arguments must be a JSON object, got {value}"
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupted = super::cancel_on_signals(cancel.clone());
    let result = ws
        .call_tool(ToolCall {
            agent: ctx.root.global.agent.clone(),
            session: ctx.root.session(),
            tool: args.name,
            args: value,
            cancel: Some(cancel),
            ..Default::default()
        })
        .await;
    let signal = interrupted.load(std::sync::atomic::Ordering::SeqCst);
    if signal != 0 {
        return Ok(128 + signal);
    }
    if ctx.json {
        output::json(&result)?;
    } else {
        let text = result.text();
        say_part!("{text}");
        if !text.ends_with('\n') && !text.is_empty() {
            say!();
        }
        for b in &result.content {
            if let crate::engine::message::Block::Data(d) = b {
                say!(
                    "[data block: {} ({})]",
                    d.name.as_deref().unwrap_or("unnamed"),
                    d.source.media_type()
                );
            }
        }
    }
    Ok(if result.is_success() { 0 } else { 1 })
}
