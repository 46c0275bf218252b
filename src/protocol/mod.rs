//! Wire-level MCP vocabulary shared by both protocol eras: JSON-RPC envelopes, error codes,
//! protocol versions and eras, content blocks, SSE framing and pagination cursors. Nothing here knows
//! about HTTP, sessions or metrics, and nothing here imports from the rest of the crate.

pub mod content;
pub mod cursor;
pub mod era;
pub mod jsonrpc;
pub mod sse;
pub mod task;
pub mod version;

pub use content::{CallToolResult, Content};
pub use jsonrpc::{Incoming, Notification, Request, RequestId, Response, RpcError};
pub use version::{Era, ProtocolVersion};
