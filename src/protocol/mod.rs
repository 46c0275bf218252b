//! Wire-level MCP vocabulary shared by both protocol eras: JSON-RPC envelopes, error codes,
//! protocol versions and content blocks. Nothing here knows about HTTP or sessions.

pub mod content;
pub mod jsonrpc;
pub mod version;

pub use content::{CallToolResult, Content};
pub use jsonrpc::{Incoming, Notification, Request, RequestId, Response, RpcError};
pub use version::{Era, ProtocolVersion};
