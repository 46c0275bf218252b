//! A `command` tool reports progress with `toolgate:progress N/TOTAL message` lines on its
//! stderr: they reach a caller that sent a progress token as `notifications/progress`, and
//! leave the stderr a failed call shows.

use crate::common;

use common::{TestServer, call_with_progress};
use serde_json::json;

/// A tools file with one command tool running `script` (a `/bin/sh` script in `dir`).
async fn server_with_script(dir: &std::path::Path, script: &str) -> TestServer {
    let program = dir.join("steps.sh");
    std::fs::write(&program, format!("#!/bin/sh\n{script}")).expect("write script");
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let file = dir.join("tools.toml");
    let tools = format!(
        "[[tools]]\nname = \"steps\"\ndescription = \"Runs three steps and reports each. Example: {{}}\"\n\
         input_schema = {{ type = \"object\" }}\n\n[tools.command]\nprogram = {:?}\n",
        program.display().to_string()
    );
    std::fs::write(&file, tools).expect("write tools file");
    TestServer::with(move |s| s.tools.path = Some(file)).await
}

#[tokio::test]
async fn progress_lines_on_stderr_reach_the_caller_as_progress_notifications() {
    let dir = tempfile::tempdir().expect("dir");
    let script = "for i in 1 2 3; do echo \"toolgate:progress $i/3 step $i\" >&2; sleep 0.05; done\necho done\n";
    let s = server_with_script(dir.path(), script).await;
    let sid = s.initialize("2025-11-25").await;
    let (progress, answer) = call_with_progress(&s, &sid, "steps", json!({})).await;
    let text = answer["result"]["content"][0]["text"].as_str().expect("text");
    assert!(text.contains("done") && !text.contains("toolgate:progress"), "{text}");
    let seen: Vec<(f64, String)> =
        progress.iter().map(|p| (p["progress"].as_f64().expect("number"), p["message"].as_str().unwrap_or("").to_owned())).collect();
    assert_eq!(seen, vec![(1.0, "step 1".into()), (2.0, "step 2".into()), (3.0, "step 3".into())]);
    assert!(progress.iter().all(|p| p["total"] == 3.0 && p["progressToken"] == "p"), "{progress:?}");
}

#[tokio::test]
async fn progress_lines_are_not_part_of_the_stderr_a_failure_shows() {
    let dir = tempfile::tempdir().expect("dir");
    let script = "echo 'toolgate:progress 1/2 half way' >&2\necho 'disk full' >&2\nexit 3\n";
    let s = server_with_script(dir.path(), script).await;
    let sid = s.initialize("2025-11-25").await;
    let (progress, answer) = call_with_progress(&s, &sid, "steps", json!({})).await;
    assert_eq!(progress.len(), 1);
    let text = answer["result"]["content"][0]["text"].as_str().expect("text");
    assert_eq!(answer["result"]["isError"], true);
    assert!(text.contains("disk full") && !text.contains("toolgate:progress"), "{text}");
}
