//! A 2026-07-28 call that starts within its request and becomes a task on its handler's word
//! (tools registered with `input_before_task`, for a client with the tasks extension). The
//! handler gathers input by MRTR rounds answered within the request, then calls
//! [`ToolContext::continue_as_task`]: the task is stored, the request answers
//! `CreateTaskResult`, and the handler goes on detached, its result becoming the task's.
//!
//! So the handler can outlive its request it runs as its own spawned future from the start,
//! under its own token: the request's cancellation reaches it until it becomes a task, the
//! task's cancellation after.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::super::{McpServer, RequestCtx};
use super::ended::{Answer, Ended};
use super::task::{created, owner, tool_ttl};
use super::task_input::TaskChannel;
use crate::protocol::jsonrpc::RpcError;
use crate::tool::{ClientChannel, Escalation, RegisteredTool, TaskAsk, ToolContext};

/// The handler's side (in its context) and the request's side of one escalation.
pub(super) fn escalation() -> (Arc<Escalation>, oneshot::Receiver<TaskAsk>) {
    let (ask, asked) = oneshot::channel();
    (Arc::new(Escalation { ask: Mutex::new(Some(ask)), channel: std::sync::OnceLock::new() }), asked)
}

impl McpServer {
    /// Runs the handler until it ends within the request (`Ok`, mapped as any call), or it
    /// becomes a task (`Err`: the `CreateTaskResult`). `tool_cancel` is the handler's token.
    pub(super) async fn run_escalating(
        &self,
        tool: Arc<RegisteredTool>,
        context: ToolContext,
        mut asked: oneshot::Receiver<TaskAsk>,
        tool_cancel: CancellationToken,
        ctx: &RequestCtx,
    ) -> Result<Ended, Answer> {
        let (Some(tasks), Some(me)) = (self.tasks().cloned(), self.me.upgrade()) else { return Err(Err(RpcError::internal())) };
        let run_ctx = RequestCtx {
            version: ctx.version,
            session: ctx.session.clone(),
            caller: ctx.caller.clone(),
            caps: ctx.caps,
            log_level: ctx.log_level.clone(),
            channel: ctx.channel.clone(),
            cancel: tool_cancel.clone(),
            audit: ctx.audit.clone(),
        };
        let (done, mut ended) = oneshot::channel::<Ended>();
        let (became, task_id) = oneshot::channel::<String>();
        let run_tool = tool.clone();
        self.in_flight.spawn(async move {
            let started = std::time::Instant::now();
            let ending = me.run(&run_tool, context, &run_ctx).await;
            // Nobody waits within the request: it became a task (or the request is gone).
            if let Err(ending) = done.send(ending)
                && let Ok(id) = task_id.await
            {
                me.settle_task(&tasks, &id, &run_tool, ending, started, &run_ctx).await;
            }
            // Ends the watch that ties the task's cancellation to this run.
            run_ctx.cancel.cancel();
        });
        // Until it becomes a task, a request that goes away stops the handler.
        let guard = tool_cancel.clone().drop_guard();
        let mut asking = true;
        loop {
            tokio::select! {
                ending = &mut ended => return Ok(ending.unwrap_or(Ended::Panicked)),
                ask = &mut asked, if asking => {
                    asking = false;
                    let Ok(reply) = ask else { continue };
                    match self.become_task(&tool, &tool_cancel, ctx).await {
                        Ok((channel, id, answer)) => {
                            let _ = reply.send(Some(channel));
                            let _ = became.send(id);
                            guard.disarm();
                            return Err(Ok(answer));
                        }
                        // The handler hears `false` and goes on within the request.
                        Err(refused) => {
                            tracing::info!(tool = tool.name(), error = %refused.message, "a call stayed within its request");
                            let _ = reply.send(None);
                        }
                    }
                }
                () = ctx.cancel.cancelled() => tool_cancel.cancel(),
            }
        }
    }

    /// Stores the task, ties its cancellation to the handler's token, and returns the task's
    /// channel, its id and the `CreateTaskResult`.
    async fn become_task(
        &self,
        tool: &RegisteredTool,
        tool_cancel: &CancellationToken,
        ctx: &RequestCtx,
    ) -> Result<(Arc<dyn ClientChannel>, String, serde_json::Value), RpcError> {
        let tasks = self.tasks().cloned().ok_or_else(RpcError::internal)?;
        let client = ctx.caller.client_key().map(|k| k.shared_id()).unwrap_or_default();
        let (task, task_cancel) = tasks.create(&owner(ctx), &client, "modern", tool.name(), tool_ttl(tool)).await?;
        let stop = tool_cancel.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = task_cancel.cancelled() => stop.cancel(),
                () = stop.cancelled() => {}
            }
        });
        let channel: Arc<dyn ClientChannel> = TaskChannel::new(tasks, task.id.clone(), owner(ctx), tool_cancel.clone(), None);
        Ok((channel, task.id.clone(), created(&task, ctx.era())))
    }
}
