//! Any POST body the MCP endpoint could receive: JSON first, then each message (a batch is
//! an array) classified by `Incoming::from_value`, then the reply the server would build for
//! it. Replies are built from client-controlled ids, methods and error objects, so they are
//! re-classified: a reply the server's own parser rejects would be a reply clients reject too.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate::protocol::jsonrpc::{Incoming, RequestId, RpcError, error_message, result_message, result_string};

fuzz_target!(|data: &[u8]| {
    let Ok(body) = serde_json::from_slice::<Value>(data) else { return };
    match body {
        Value::Array(batch) => batch.into_iter().for_each(classify_and_reply),
        single => classify_and_reply(single),
    }
});

fn classify_and_reply(message: Value) {
    match Incoming::from_value(message) {
        Ok(Incoming::Request(request)) => {
            // Echo the params as a result: arbitrary JSON inside a success envelope.
            let result = Value::Object(request.params);
            check_reply(&request.id, result_message(&request.id, &result), Ok(&result));
            let _ = result_string(&request.id, &result);
            let error = RpcError::method_not_found(&request.method);
            check_reply(&request.id, error_message(Some(&request.id), &error), Err(&error));
        }
        Ok(Incoming::Notification(notification)) => {
            let _ = error_message(None, &RpcError::method_not_found(&notification.method));
        }
        // A client's response carries its own result or error object: send both back.
        Ok(Incoming::Response(response)) => match &response.outcome {
            Ok(result) => check_reply(&response.id, result_message(&response.id, result), Ok(result)),
            Err(error) => check_reply(&response.id, error_message(Some(&response.id), error), Err(error)),
        },
        // The server answers a malformed message with its error, echoing the id when readable.
        Err(malformed) => {
            let reply = error_message(malformed.id.as_ref(), &malformed.error);
            assert!(malformed.id.is_some() || reply.get("id").is_none(), "J-06: an unknown id is omitted, never null");
        }
    }
}

/// The reply must classify as a response with the same id (type included, J-03) and outcome.
fn check_reply(id: &RequestId, reply: Value, expected: Result<&Value, &RpcError>) {
    let reparsed = Incoming::from_value(reply);
    let Ok(Incoming::Response(response)) = reparsed else { panic!("the server's reply is not a response: {reparsed:?}") };
    assert_eq!(&response.id, id);
    assert_eq!(response.outcome.as_ref(), expected);
}
