//! Running one tool call of a model turn: parse the arguments, run the
//! tool, journal the call, and offload what does not fit the context.

use super::*;

impl Agent {
    pub(super) async fn run_tool_call(
        &mut self,
        reply_id: &str,
        call: &ModelToolCall,
        cancel: &CancellationToken,
    ) {
        self.emit(AgentEvent::ToolCall {
            call_id: call.id.clone(),
            name: call.name.clone(),
            input: call.arguments.clone(),
        });
        let created = now_naive();
        let started_at = chrono::Utc::now();
        let t0 = Instant::now();
        let parsed = parse_call_args(&call.name, &call.arguments);
        let tool = self.tools.get(&call.name);
        let self_journaled = parsed.is_ok() && tool.as_ref().is_some_and(|t| t.journals_itself());
        // A bounded copy (a Write's content is not copied whole).
        let (journal_args, args_cut) = match &parsed {
            Ok(v) => crate::engine::journal::bounded_args(v),
            Err(_) => crate::engine::journal::bounded_args(&Value::String(call.arguments.clone())),
        };
        if !self_journaled {
            self.ws.publish(Event::ToolStarted {
                call_id: call.id.clone(),
                agent: self.config.agent_id.clone(),
                session: self.config.session.clone(),
                tool: call.name.clone(),
                args: journal_args.clone(),
            });
        }
        let result = match (parsed, tool) {
            (Err(msg), _) => ToolResult::error(msg),
            (Ok(_), None) => ToolResult::error(format!(
                "ToolNotFoundError: Tool '{}' not found. Available tools: {}.",
                call.name,
                self.tools.names().join(", ")
            )),
            (Ok(args), Some(tool)) => {
                let ctx = AgentToolContext {
                    workspace: &self.ws,
                    agent: &self.config.agent_id,
                    session: &self.config.session,
                    call_id: &call.id,
                    cancel: cancel.clone(),
                };
                tool.call(&ctx, args).await
            }
        };
        let duration_ms = t0.elapsed().as_millis() as u64;
        if !self_journaled {
            self.ws.publish(Event::ToolFinished {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                state: result.state.as_str().into(),
                duration_ms,
            });
            let entry = JournalEntry::from_bounded(
                JournalCall {
                    call_id: call.id.clone(),
                    agent: self.config.agent_id.clone(),
                    session: self.config.session.clone(),
                    tool: call.name.clone(),
                    args: journal_args,
                },
                args_cut,
                &result,
                started_at,
                duration_ms,
            );
            if let Err(e) = self.ws.journal().append(&entry).await {
                self.emit(AgentEvent::Error {
                    kind: "internal".into(),
                    message: format!("could not journal tool call {}: {e}", call.id),
                });
            }
        }

        let mut block = result.to_block(&call.id, &call.name);
        let mut extra = block_timestamps(created);
        extra.insert("finished_at".into(), Value::String(now_naive()));
        block.extra = extra;
        let full_chars = output_text(&block.output).chars().count();
        let policy = &self.config.policy;
        let split = context::split_tool_result(&block, policy.tool_result_limit, policy.counter());
        let mut kept = split.kept;
        let mut offloaded_to = None;
        if let Some(overflow) = split.overflow {
            let overflow_chars = output_text(&overflow.output).chars().count() as u64;
            match self
                .ws
                .offload()
                .tool_result(&self.config.session, &overflow)
                .await
            {
                Ok(path) => {
                    self.emit(AgentEvent::OffloadWritten {
                        kind: AgentOffload::ToolResult,
                        path: path.clone(),
                        size: overflow_chars,
                    });
                    offloaded_to = Some(path);
                }
                Err(e) => self.emit(AgentEvent::Error {
                    kind: "internal".into(),
                    message: format!(
                        "the overflow of tool result {} could not be offloaded: {e}",
                        call.id
                    ),
                }),
            }
            context::append_to_output(
                &mut kept,
                &context::truncation_reminder(offloaded_to.as_deref()),
            );
        }
        let text = output_text(&kept.output);
        let state = kept.state.clone();
        self.save_to_reply(reply_id, vec![Block::ToolResult(kept)], None);
        self.mark_call_finished(reply_id, &call.id);
        self.emit(AgentEvent::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            state,
            text,
            full_chars,
            offloaded_to,
            duration_ms,
        });
    }
}
