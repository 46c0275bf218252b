-- Input a running task waits for (src/tasks/inputs.rs). `input_requests`: the requests still
-- unanswered, keyed as the client sees them ({"key": {"method": ..., "params": ...}}), shown by
-- tasks/get while the task is `input_required`. `input_responses`: the answers delivered so
-- far (tasks/update, or a 2025-11-25 client answering on its tasks/result stream), until the
-- replica running the task takes them. Both are NULL while the task needs nothing.
ALTER TABLE tasks ADD COLUMN input_requests TEXT;
ALTER TABLE tasks ADD COLUMN input_responses TEXT;
