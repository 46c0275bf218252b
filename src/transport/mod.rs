//! HTTP transports: Streamable HTTP on the MCP endpoint (both eras), the deprecated
//! 2024-11-05 HTTP+SSE pair, the Origin/Host guard, and header negotiation.

pub mod client_ip;
pub mod exchange;
pub mod guard;
pub mod headers;
pub mod legacy_sse;
pub mod listen;
pub mod modern;
pub mod sse;
pub mod streamable;
