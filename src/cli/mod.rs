//! Subcommands too large to sit in `main.rs`.

pub mod tools;
