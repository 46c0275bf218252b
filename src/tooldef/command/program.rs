//! Which program a `command` tool runs: resolved once at build time to an absolute path that
//! exists, is an executable file and is allowed by the operator.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::super::BuildCtx;

/// `program` as an absolute path: a bare name is looked up on the server's `PATH`, any other
/// relative path is resolved against the definition's base directory.
pub(crate) fn resolve(program: &str, cx: &BuildCtx<'_>) -> Result<PathBuf, String> {
    if program.is_empty() {
        return Err("give the program to run: an absolute path, or a name found on the server's PATH".into());
    }
    if program.contains('\0') {
        return Err("contains a NUL character".into());
    }
    let path = if program.contains('/') {
        // Absolute even when the base directory is not: a relative program path would be
        // looked up from the child's working directory.
        let path = std::path::absolute(cx.resolve(Path::new(program))).map_err(|e| format!("cannot be resolved: {e}"))?;
        check_executable(&path)?;
        path
    } else {
        search_path(program, std::env::var_os("PATH").as_deref())?
    };
    check_allowed(&path, &cx.settings.command.allowed_programs)
}

/// The first executable `name` in the absolute directories of `path_var`.
fn search_path(name: &str, path_var: Option<&OsStr>) -> Result<PathBuf, String> {
    let dirs = path_var.map(|p| std::env::split_paths(p).collect::<Vec<_>>()).unwrap_or_default();
    // Relative PATH entries would make the program depend on the server's working directory.
    let found = dirs.iter().filter(|d| d.is_absolute()).map(|d| d.join(name)).find(|p| check_executable(p).is_ok());
    found.ok_or_else(|| format!("`{name}` was not found on the server's PATH; give its absolute path"))
}

fn check_executable(path: &Path) -> Result<(), String> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(format!("`{shown}` does not exist")),
        Err(e) => return Err(format!("`{shown}` cannot be read: {e}")),
    };
    if !meta.is_file() {
        return Err(format!("`{shown}` is not a regular file"));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("`{shown}` is not executable"));
    }
    Ok(())
}

/// An empty allow-list allows any program; otherwise `path` must be listed, as written or as
/// the same file after following symbolic links. Returns what to run: on a match through links,
/// the operator's entry, so a link the definition named cannot be re-pointed later.
fn check_allowed(path: &Path, allowed: &[PathBuf]) -> Result<PathBuf, String> {
    if allowed.is_empty() || allowed.iter().any(|a| a == path) {
        return Ok(path.to_owned());
    }
    if let Ok(canonical) = std::fs::canonicalize(path)
        && let Some(entry) = allowed.iter().find(|a| std::fs::canonicalize(a).is_ok_and(|c| c == canonical))
    {
        return Ok(entry.clone());
    }
    Err(format!("`{}` is not in the server's `tools.command.allowed_programs`; an operator must add it there", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_names_are_found_on_absolute_path_entries_only() {
        assert_eq!(search_path("sh", Some(OsStr::new("relative:/bin:/usr/bin"))).map(|p| p.is_absolute()), Ok(true));
        assert!(search_path("sh", Some(OsStr::new("bin:usr/bin"))).is_err());
        assert!(search_path("sh", None).is_err());
        let err = search_path("no-such-program-here", Some(OsStr::new("/bin:/usr/bin"))).err().unwrap_or_default();
        assert!(err.contains("not found on the server's PATH"), "{err}");
    }

    #[test]
    fn files_must_be_executable_regular_files() {
        let Ok(dir) = tempfile::tempdir() else { panic!("tempdir") };
        let file = dir.path().join("data.txt");
        std::fs::write(&file, "x").unwrap_or_else(|e| panic!("{e}"));
        assert!(check_executable(&file).err().unwrap_or_default().contains("is not executable"));
        assert!(check_executable(dir.path()).err().unwrap_or_default().contains("is not a regular file"));
        assert!(check_executable(&dir.path().join("nope")).err().unwrap_or_default().contains("does not exist"));
    }

    #[test]
    fn allow_list_matches_listed_paths_and_their_targets() {
        let Ok(dir) = tempfile::tempdir() else { panic!("tempdir") };
        let real = dir.path().join("real");
        let link = dir.path().join("link");
        std::fs::write(&real, "").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&real, &link).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check_allowed(&link, &[]), Ok(link.clone()));
        assert_eq!(check_allowed(&link, std::slice::from_ref(&real)), Ok(real.clone()));
        assert_eq!(check_allowed(&real, std::slice::from_ref(&link)), Ok(link));
        let err = check_allowed(&real, &[dir.path().join("other")]).err().unwrap_or_default();
        assert!(err.contains("allowed_programs"), "{err}");
    }
}
