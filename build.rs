//! Stamps the git commit into the binary for `toolgate_build_info{git_sha}`. A build without
//! git or without `.git` (container images) gets `TOOLGATE_GIT_SHA` from the environment, or
//! "unknown" at the use site.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TOOLGATE_GIT_SHA");
    // `sqlx::migrate!` embeds migrations/ at compile time: a new migration must rebuild.
    println!("cargo:rerun-if-changed=migrations");
    let from_env = std::env::var("TOOLGATE_GIT_SHA").ok().filter(|s| !s.trim().is_empty());
    let sha = from_env.or_else(|| {
        let out = Command::new("git").args(["rev-parse", "--short", "HEAD"]).output().ok()?;
        let sha = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !sha.is_empty()).then_some(sha)
    });
    if let Some(sha) = sha {
        println!("cargo:rustc-env=TOOLGATE_GIT_SHA={sha}");
    }
    // Rerun when HEAD moves (a commit or a checkout), not on every source change.
    let head = Path::new(".git/HEAD");
    if head.exists() {
        println!("cargo:rerun-if-changed=.git/HEAD");
        if let Some(reference) = std::fs::read_to_string(head).ok().and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_owned())) {
            println!("cargo:rerun-if-changed=.git/{reference}");
        }
        // Only when it exists: cargo treats a missing watched file as changed, which rebuilt
        // the crate on every cargo command in a checkout without packed refs.
        if Path::new(".git/packed-refs").exists() {
            println!("cargo:rerun-if-changed=.git/packed-refs");
        }
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
}
