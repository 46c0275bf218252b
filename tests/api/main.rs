//! The integration tests, linked as one binary (one link instead of one per file): each
//! module is one concern, tested over real HTTP, a real database or a real process where
//! that is what the rule is about. Shared harnesses: [`common`] (servers, clients, tokens,
//! SSE readers) and [`audit_support`] (audit stores on SQLite and Postgres).
//!
//! Metric and log assertions read process-wide state, so the suite runs under nextest (one
//! process per test): `cargo nextest run`. One module: `cargo nextest run -E 'test(/^layers::/)'`.

mod audit_support;
mod common;

mod admin_api;
mod admin_console;
mod admin_series;
mod admin_tasks;
mod admin_try_stream;
mod admission;
mod audit_http;
mod audit_kill9;
mod audit_log;
mod audit_migrate;
mod audit_outage;
mod audit_record;
mod auth_dev;
mod auth_http;
mod auth_introspection;
mod auth_jwt;
mod authserver_clients;
mod authserver_federation;
mod authserver_flow;
mod bearer_gate;
mod caps_http;
mod catalog_approval;
mod check_config;
mod client_ip_http;
mod cluster_pg;
mod command_progress;
mod connections;
mod execution;
mod front_door;
mod health_http;
mod http_progress;
mod layers;
mod legacy_http;
mod legacy_streams;
mod limits_http;
mod limits_local;
mod limits_memory;
mod limits_redis;
mod limits_rejection;
mod limits_settings;
mod metrics_http;
mod modern_http;
mod openapi_hostile;
mod openapi_import;
mod operator_auth;
mod operator_errors;
mod operator_settings;
mod operator_tools;
#[cfg(feature = "otel")]
mod otel_export;
mod shutdown;
mod store_connect;
mod task_inputs;
mod task_notifications;
mod tasks_legacy;
mod tasks_modern;
mod tasks_pg;
mod tasks_rules;
mod telemetry_logs;
mod tls;
mod tls_reload;
mod tooldef_command;
mod tooldef_compile;
mod tooldef_http;
mod tooldef_policies;
mod tooldef_reload;
mod tooldef_yaml;
mod upstream_detail;
mod upstream_names;
mod upstreams;
mod upstreams_admin;
mod upstreams_http;
mod upstreams_modern;
mod upstreams_oauth;
mod vault_connect;
mod virtual_servers;
mod virtual_servers_admin;
