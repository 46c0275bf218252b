//! toolgate: a remote MCP server that lets AI clients discover and call tools over HTTPS.
//!
//! The crate is layered from the wire inwards: [`transport`] speaks HTTP (both protocol eras
//! and the deprecated HTTP+SSE transport), [`session`] holds legacy sessions and resumable
//! streams, [`server`] implements the MCP methods, [`tool`] is the API tools are written
//! against, and [`packs`] ships built-in tools. [`app`] wires it together.

pub mod admin;
pub mod admission;
pub mod app;
pub mod approval;
pub mod audit;
pub mod auth;
pub mod authserver;
pub mod authserver_http;
pub mod bus;
pub mod caller;
pub mod catalog;
pub mod cluster;
pub mod config;
pub mod health;
pub mod limits;
pub mod metrics;
pub mod packs;
pub mod principal;
pub mod protocol;
pub mod redact;
pub mod server;
pub mod session;
pub mod store;
pub mod tasks;
pub mod telemetry;
pub mod tool;
pub mod tooldef;
pub mod transport;
pub mod untrusted;
pub mod upstream;
pub mod vault;
pub mod virtual_servers;
pub mod yaml;
