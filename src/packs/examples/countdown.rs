//! `countdown`: the examples' task-capable tool. It waits the seconds asked, reporting
//! progress each second, so a client can run it as a task (`execution.taskSupport:
//! "optional"`), poll it, watch its progress and cancel it.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::protocol::CallToolResult;
use crate::protocol::task::TaskSupport;
use crate::tool::Tool;

/// The longest countdown; the tool's own timeout leaves room above it.
const MAX_SECONDS: u64 = 60;

pub(crate) fn countdown() -> Tool {
    Tool::builder(
        "countdown",
        "Count down the given number of seconds (1 to 60), reporting progress each second, then say it is done. \
         Runs as a task when the client asks for one, so the caller can poll it or cancel it. Example: {\"seconds\": 5}.",
    )
    .title("Countdown (task demo)")
    .input_schema(json!({
        "type": "object",
        "properties": { "seconds": { "type": "integer", "minimum": 1, "maximum": MAX_SECONDS, "description": "How long to count down" } },
        "required": ["seconds"],
        "additionalProperties": false
    }))
    .read_only()
    .task_support(TaskSupport::Optional)
    .timeout(Duration::from_secs(MAX_SECONDS + 30))
    .handler(|ctx| async move {
        #[derive(Deserialize)]
        struct Args {
            seconds: u64,
        }
        let Args { seconds } = ctx.args()?;
        for done in 1..=seconds {
            // Cancellation (tasks/cancel, a dropped request) ends the sleep at once.
            ctx.sleep(Duration::from_secs(1)).await?;
            let left = seconds - done;
            ctx.progress(done as f64, Some(seconds as f64), Some(&format!("{left} s left"))).await;
        }
        Ok(CallToolResult::text(format!("Countdown of {seconds} s done")))
    })
}
