//! `wsbench demo NAME [--step]` (a scripted run) and
//! `wsbench agent "PROMPT"` (a model on an OpenAI-compatible server),
//! both headless: the conversation streams to stdout (`--json`: one agent
//! event per line), and the session is left for `sessions show` and
//! `offload show`.

use super::output::{say, say_err};
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::{Ctx, output};
use crate::agent::openai::{OpenAiConfig, OpenAiModel};
use crate::agent::script::{self, ScriptedModel, Transcript};
use crate::agent::{
    Agent, AgentConfig, AgentEvent, AgentHandle, AgentReceived, ContextPolicy, FinishReason, Model,
    ReplyOutcome, StepControl, Stopper, Toolset,
};
use crate::engine::Workspace;

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Demo name (`explore`, `bugfix`, `long`) or a transcript file
    /// (`.yaml`, or `.jsonl`).
    pub name: Option<String>,
    /// List the shipped demos and exit.
    #[arg(long)]
    pub list: bool,
    /// Pause before each model turn and tool call: Enter runs the next
    /// step, `c` Enter runs to the end, `q` Enter stops.
    #[arg(long)]
    pub step: bool,
    /// Milliseconds between streamed words (0: no delay).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub pace_ms: u64,
}

/// Arguments of `agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The user message.
    pub prompt: String,
    /// Base URL of an OpenAI-compatible server (`http://127.0.0.1:8080/v1`)
    /// or its full `/chat/completions` URL.
    #[arg(long, env = "WSBENCH_MODEL_URL", value_name = "URL")]
    pub model_url: String,
    /// Model name to request.
    #[arg(long, env = "WSBENCH_MODEL")]
    pub model: String,
    /// Environment variable holding the API key (unset: no key is sent).
    #[arg(long, default_value = "OPENAI_API_KEY", value_name = "VAR")]
    pub api_key_env: String,
    /// The model's context window in tokens.
    #[arg(long, default_value_t = 128_000, value_name = "TOKENS")]
    pub context_window: usize,
    /// Largest tool result kept whole, in tokens (reference default 50000).
    #[arg(long, value_name = "TOKENS")]
    pub tool_result_limit: Option<usize>,
    /// Compress past this share of the window (reference default 0.8).
    #[arg(long)]
    pub trigger_ratio: Option<f64>,
    /// Share of the window kept uncompressed (reference default 0.1).
    #[arg(long)]
    pub reserve_ratio: Option<f64>,
    /// Images kept in the context (reference default 5).
    #[arg(long)]
    pub max_image_num: Option<usize>,
    /// Model turns per reply.
    #[arg(long, default_value_t = crate::agent::DEFAULT_MAX_ITERS)]
    pub max_iters: usize,
    /// Replaces the agent's own prompt (skills and workspace instructions
    /// are still appended).
    #[arg(long)]
    pub system_prompt: Option<String>,
    /// Sampling temperature.
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Pause before each model turn and tool call (as `demo --step`).
    #[arg(long)]
    pub step: bool,
}

fn fresh_session(prefix: &str) -> String {
    format!("{prefix}-{}", chrono::Local::now().format("%Y%m%d-%H%M%S"))
}

fn session_for(ctx: &Ctx, prefix: &str) -> String {
    ctx.root
        .global
        .session
        .clone()
        .or_else(|| ctx.root.config.workspace.default_session.clone())
        .unwrap_or_else(|| fresh_session(prefix))
}

fn short(s: &str, max: usize) -> String {
    let one = s.replace('\n', " ⏎ ");
    if one.chars().count() <= max {
        one
    } else {
        format!("{}…", one.chars().take(max).collect::<String>())
    }
}

/// Prints events until the agent and its handles are gone.
fn spawn_printer(handle: &AgentHandle, json_lines: bool) -> tokio::task::JoinHandle<usize> {
    let mut sub = handle.subscribe();
    tokio::spawn(async move {
        let mut mid_line = false;
        let mut internal = 0;
        // Model text and tool output are data: printed terminal-safe.
        let mut out = super::output::Safe(std::io::stdout());
        while let Some(r) = sub.recv().await {
            let env = match r {
                AgentReceived::Missed(n) => {
                    say_err!("({n} agent events were dropped: the printer fell behind)");
                    continue;
                }
                AgentReceived::Event(e) => e,
            };
            if matches!(&env.event, AgentEvent::Error { kind, .. } if kind == "internal") {
                internal += 1;
            }
            if json_lines {
                let _ = writeln!(out, "{}", serde_json::to_string(&*env).unwrap_or_default());
                continue;
            }
            let mut end_line = |out: &mut super::output::Safe<std::io::Stdout>| {
                if mid_line {
                    let _ = writeln!(out);
                    mid_line = false;
                }
            };
            match &env.event {
                AgentEvent::ReplyStarted { user_text, .. } => {
                    end_line(&mut out);
                    let _ = writeln!(out, "\n▌ user: {user_text}");
                }
                AgentEvent::TurnStarted {
                    turn,
                    estimated_tokens,
                    ..
                } => {
                    end_line(&mut out);
                    let _ = writeln!(out, "· turn {turn} (~{estimated_tokens} tokens of context)");
                }
                AgentEvent::TextDelta { delta, .. } => {
                    let _ = write!(out, "{delta}");
                    mid_line = !delta.ends_with('\n');
                }
                AgentEvent::TurnFinished { .. } => end_line(&mut out),
                AgentEvent::ToolCallStarted { .. } | AgentEvent::ToolCallDelta { .. } => {}
                AgentEvent::ToolCall { name, input, .. } => {
                    end_line(&mut out);
                    let _ = writeln!(out, "  ▶ {name} {}", short(input, 200));
                }
                AgentEvent::ToolResult {
                    name,
                    state,
                    text,
                    full_chars,
                    offloaded_to,
                    duration_ms,
                    ..
                } => {
                    let mark = if state == "success" { "✓" } else { "✗" };
                    let _ = writeln!(
                        out,
                        "  {mark} {name} · {state} · {full_chars} chars · {duration_ms} ms"
                    );
                    for line in text.lines().take(8) {
                        let _ = writeln!(out, "    │ {}", short(line, 160));
                    }
                    let more = text.lines().count().saturating_sub(8);
                    if more > 0 {
                        let _ = writeln!(out, "    │ … {more} more line(s)");
                    }
                    if let Some(p) = offloaded_to {
                        let _ = writeln!(out, "    ⤓ overflow offloaded to {p}");
                    }
                }
                AgentEvent::OffloadWritten { kind, path, .. } => {
                    let _ = writeln!(out, "  ⤓ {kind:?} offload written: {path}");
                }
                AgentEvent::CompressionDone {
                    path,
                    compressed_messages,
                    kept_messages,
                    tokens_before,
                    tokens_after,
                    fallback,
                    ..
                } => {
                    end_line(&mut out);
                    let _ = writeln!(
                        out,
                        "  ⇣ context compressed: {compressed_messages} message(s) → {path}; {kept_messages} kept; ~{tokens_before} → ~{tokens_after} tokens{}",
                        if *fallback {
                            " (summary made without the model)"
                        } else {
                            ""
                        }
                    );
                }
                AgentEvent::StepPaused { next } => {
                    end_line(&mut out);
                    let _ = writeln!(
                        out,
                        "  ⏸ next: {next} — Enter: step · c Enter: continue · q Enter: stop"
                    );
                }
                AgentEvent::Error { kind, message } => {
                    end_line(&mut out);
                    let _ = out.flush();
                    say_err!("  ! {kind}: {message}");
                }
                AgentEvent::ReplyFinished { reason, .. } => {
                    end_line(&mut out);
                    let _ = writeln!(out, "▌ reply {}", reason.as_str());
                }
            }
            let _ = out.flush();
        }
        internal
    })
}

/// The run's exit code: [`exit_code`] of its replies, but 1 when the
/// replies went well and `internal` errors (a state, journal or offload
/// write that failed: something of the session was not saved) were
/// reported on the way, with a line that says so on stderr.
fn exit_code_with(outcomes: &[ReplyOutcome], internal: usize) -> i32 {
    let code = exit_code(outcomes);
    if internal > 0 {
        say_err!(
            "error: {internal} internal error(s) during the run (shown above as `! internal`): the session may not be saved as shown"
        );
        if code == 0 {
            return 1;
        }
    }
    code
}

/// Reads stdin lines in step mode: Enter steps, `c` continues, `q` stops.
/// Each line answers one pause: a line read before the agent pauses
/// (piped input, typed ahead) waits for that pause, so `printf '\n\nq\n'`
/// runs two steps, then stops.
fn spawn_step_reader(step: StepControl, stopper: Stopper) {
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut line = String::new();
        let mut answered = 0;
        loop {
            line.clear();
            let read = stdin.read_line(&mut line);
            // EOF also waits for the next pause, so the steps of lines
            // read before it run one by one first.
            match wait_for_pause(&step, answered) {
                Some(n) => answered = n,
                None => return,
            }
            match read {
                Ok(0) | Err(_) => {
                    // No more input: run to the end rather than hang.
                    step.set_stepping(false);
                    return;
                }
                Ok(_) => match line.trim() {
                    "c" | "continue" => {
                        step.set_stepping(false);
                        return;
                    }
                    "q" | "quit" | "stop" => {
                        stopper.stop();
                        step.set_stepping(false);
                        return;
                    }
                    _ => step.step(),
                },
            }
        }
    });
}

/// Waits until the agent pauses for a step after pause number
/// `answered`; returns the new pause's number, or `None` once step mode
/// is off (continued, stopped), when no pause will come.
fn wait_for_pause(step: &StepControl, answered: u64) -> Option<u64> {
    loop {
        if !step.is_stepping() {
            return None;
        }
        let n = step.pauses();
        if n > answered && step.waiting_for().is_some() {
            return Some(n);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Stops the agent on Ctrl-C.
fn spawn_ctrl_c(stopper: Stopper) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            say_err!("\nstopping the agent…");
            stopper.stop();
        }
    })
}

async fn print_session_summary(
    ws: &Workspace,
    session: &str,
    outcomes: &[ReplyOutcome],
    json_out: bool,
) -> anyhow::Result<()> {
    let detail = ws.sessions().detail(session).await?;
    if json_out {
        say!(
            "{}",
            json!({
                "type": "summary",
                "session": session,
                "replies": outcomes,
                "journal_entries": detail.journal.entries.len(),
                "offloads": detail.offloads,
            })
        );
        return Ok(());
    }
    say!();
    say!(
        "session {session}: {} journalled, {}, context.jsonl {}",
        crate::root::words::count(detail.journal.entries.len(), "tool call", "tool calls"),
        crate::root::words::count(detail.summary.offloads as usize, "offload", "offloads"),
        if detail.summary.context_bytes > 0 {
            output::size(detail.summary.context_bytes)
        } else {
            "not written".into()
        }
    );
    for o in &detail.offloads {
        say!(
            "  {:?} {}",
            o.kind,
            o.url.clone().unwrap_or_else(|| o.path.clone())
        );
    }
    let at = format!(
        " --workdir {}",
        crate::backend::path::shell_quote(ws.layout().workdir())
    );
    say!(
        "inspect: wsbench sessions show {session}{at} · wsbench offload list --session {session}{at} · continue: wsbench agent --session {session}{at} \"...\""
    );
    Ok(())
}

fn exit_code(outcomes: &[ReplyOutcome]) -> i32 {
    match outcomes.last().map(|o| o.reason) {
        Some(FinishReason::Completed) | None => 0,
        Some(FinishReason::Interrupted) => 130,
        Some(FinishReason::ExceedMaxIters) | Some(FinishReason::Error) => 1,
    }
}

pub(super) async fn run_demo(ctx: &Ctx, args: DemoArgs) -> anyhow::Result<i32> {
    if args.list || args.name.is_none() {
        if ctx.json {
            let list: Vec<_> = script::DEMOS
                .iter()
                .filter_map(|(n, _)| Transcript::demo(n).ok())
                .map(|t| json!({"name": t.name, "description": t.description}))
                .collect();
            output::json(&list)?;
        } else {
            for (n, _) in script::DEMOS {
                let t = Transcript::demo(n)?;
                say!("{:<8} {}", t.name, t.description);
            }
            if args.name.is_none() && !args.list {
                say!("\nrun one with: wsbench demo NAME [--step] [--workdir DIR]");
            }
        }
        return Ok(0);
    }
    let name = args.name.expect("checked above");
    let transcript = if Path::new(&name).is_file() {
        Transcript::from_path(Path::new(&name))?
    } else {
        Transcript::demo(&name)?
    };
    let ws = ctx.root.open_workspace().await?;
    let session = session_for(ctx, &format!("demo-{}", transcript.name));
    let setup = script::run_setup(&ws, &transcript).await?;
    if !ctx.json {
        say!(
            "demo {} in {} (session {session})",
            transcript.name,
            ws.layout().workdir()
        );
        for line in &setup {
            say!("  setup: {line}");
        }
    }
    let model = Arc::new(ScriptedModel::new(
        &transcript,
        Duration::from_millis(args.pace_ms),
    ));
    let mut config = AgentConfig::new(session.clone());
    config.agent_id = ctx.root.global.agent.clone();
    config.name = transcript
        .agent
        .clone()
        .unwrap_or_else(|| "agent".to_string());
    config.policy = transcript.policy.clone().unwrap_or_default();
    let tools = Toolset::standard(&ws);
    let mut agent = Agent::open(ws.clone(), model.clone() as Arc<dyn Model>, tools, config).await?;
    agent.set_source(ctx.root.workspace_source(&ws).await?);
    let handle = agent.handle();
    if args.step {
        handle.step_control().set_stepping(true);
        spawn_step_reader(handle.step_control().clone(), handle.stopper());
    }
    let printer = spawn_printer(&handle, ctx.json);
    let ctrl_c = spawn_ctrl_c(handle.stopper());
    let outcomes = script::replay(&mut agent, &model, &transcript).await;
    drop(agent);
    drop(handle);
    ctrl_c.abort();
    let internal = printer.await.unwrap_or(0);
    let outcomes = outcomes?;
    print_session_summary(&ws, &session, &outcomes, ctx.json).await?;
    Ok(exit_code_with(&outcomes, internal))
}

pub(super) async fn run_agent(ctx: &Ctx, args: AgentArgs) -> anyhow::Result<i32> {
    let api_key = std::env::var(&args.api_key_env)
        .ok()
        .filter(|k| !k.is_empty());
    let mut oc = OpenAiConfig::new(args.model_url.clone(), args.model.clone());
    oc.api_key = api_key;
    oc.temperature = args.temperature;
    let model = OpenAiModel::new(oc)?;
    let ws = ctx.root.open_workspace().await?;
    let session = session_for(ctx, "agent");
    let mut policy = ContextPolicy {
        context_window: args.context_window,
        ..ContextPolicy::default()
    };
    if let Some(v) = args.tool_result_limit {
        policy.tool_result_limit = v;
    }
    if let Some(v) = args.trigger_ratio {
        policy.trigger_ratio = v;
    }
    if let Some(v) = args.reserve_ratio {
        policy.reserve_ratio = v;
    }
    if let Some(v) = args.max_image_num {
        policy.max_image_num = v;
    }
    let mut config = AgentConfig::new(session.clone());
    config.agent_id = ctx.root.global.agent.clone();
    if !ctx.root.global.agent.is_empty() {
        config.name = ctx.root.global.agent.clone();
    }
    config.policy = policy;
    config.max_iters = args.max_iters;
    if let Some(p) = args.system_prompt {
        config.system_prompt = p;
    }
    let tools = Toolset::standard(&ws);
    let mut agent = Agent::open(ws.clone(), Arc::new(model), tools, config).await?;
    agent.set_source(ctx.root.workspace_source(&ws).await?);
    if !ctx.json {
        let resumed = agent.context().len();
        say!(
            "agent on {} ({}) in {} — session {session}{}",
            args.model,
            args.model_url,
            ws.layout().workdir(),
            if resumed > 0 {
                format!(", continuing {resumed} message(s)")
            } else {
                String::new()
            }
        );
    }
    let handle = agent.handle();
    if args.step {
        handle.step_control().set_stepping(true);
        spawn_step_reader(handle.step_control().clone(), handle.stopper());
    }
    let printer = spawn_printer(&handle, ctx.json);
    let ctrl_c = spawn_ctrl_c(handle.stopper());
    let outcome = agent.reply_text(&args.prompt).await;
    drop(agent);
    drop(handle);
    ctrl_c.abort();
    let internal = printer.await.unwrap_or(0);
    let outcome = outcome?;
    let outcomes = vec![outcome];
    print_session_summary(&ws, &session, &outcomes, ctx.json).await?;
    if let Some(e) = &outcomes[0].error {
        say_err!("error: {e}");
    }
    Ok(exit_code_with(&outcomes, internal))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(reason: FinishReason) -> ReplyOutcome {
        ReplyOutcome {
            reply_id: "r".into(),
            reason,
            text: String::new(),
            error: None,
            turns: 1,
        }
    }

    #[test]
    fn internal_errors_make_a_completed_run_fail() {
        let done = [outcome(FinishReason::Completed)];
        assert_eq!(exit_code_with(&done, 0), 0);
        // A state, journal or offload write failed: not a success.
        assert_eq!(exit_code_with(&done, 2), 1);
        // A run that already failed keeps its own code.
        let stopped = [outcome(FinishReason::Interrupted)];
        assert_eq!(exit_code_with(&stopped, 1), 130);
    }
}
