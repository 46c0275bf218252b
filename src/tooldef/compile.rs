//! Parsing and compiling definitions into tools.
