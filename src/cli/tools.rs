//! `toolgate tools`: check, list and import tool definitions.

use std::path::PathBuf;

use clap::Subcommand;
use toolgate::config::Settings;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Check a tools file (or a directory of them: *.toml, *.yaml, *.yml, *.json) completely,
    /// as a reload would; exit 1 with every problem (file, tool, field) when it is invalid.
    Validate {
        /// The tools file or directory; default `tools.path` from the settings.
        file: Option<PathBuf>,
    },
    /// List every tool the server would serve: built-in packs, the tools file and the database.
    List {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Write tool definitions generated from another description of an API.
    Import {
        #[command(subcommand)]
        command: ImportCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// `http` tools from an OpenAPI 3.0 or 3.1 document (JSON or YAML): one tool per
    /// operation, parameters and JSON bodies as input schemas, security schemes as secrets
    /// read from environment variables. Operations that cannot be expressed are skipped
    /// with the reason. Review the output, then check it with `toolgate tools validate`.
    #[command(after_help = "Examples:
  toolgate tools import openapi petstore.json --out deploy/tools/petstore.toml
  toolgate tools import openapi github.json --include-tag issues --prefix gh_ --format yaml --out gh.yaml
  toolgate tools import openapi api.yaml --base-url http://127.0.0.1:9000 > tools.toml")]
    Openapi(OpenapiArgs),
}

#[derive(Debug, clap::Args)]
pub struct OpenapiArgs {
    /// The OpenAPI document: a local JSON or YAML file, with every `$ref` inside it.
    spec: PathBuf,
    /// Write the tools file here (its extension chooses the format); default: standard output.
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
    /// toml, yaml or json; default: the --out file's extension, else toml.
    #[arg(long, value_name = "FORMAT")]
    format: Option<toolgate::tooldef::openapi::OutputFormat>,
    /// The API's address, instead of the document's first server (required when that is a
    /// relative URL). Tools still read <PREFIX>_BASE_URL from the environment first.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Only operations with this tag (repeatable; any case).
    #[arg(long = "include-tag", value_name = "TAG")]
    include_tags: Vec<String>,
    /// Only this operation, by operationId (repeatable).
    #[arg(long = "include-operation", value_name = "ID")]
    include_operations: Vec<String>,
    /// Put before every tool name (e.g. gh_); it also names the environment variables
    /// (GH_BASE_URL, GH_<SCHEME>). Default: none, and the variables are named after the
    /// document's title.
    #[arg(long, default_value = "")]
    prefix: String,
}

/// Imports `args.spec` and writes the tools file; the summary goes to standard error, each
/// line of it passed through `one_line` since it quotes the document (a path or an
/// `operationId` holding a newline would otherwise write lines of its own).
fn import_openapi(settings: &Settings, args: OpenapiArgs) -> anyhow::Result<()> {
    use std::io::Write as _;
    use toolgate::tooldef::openapi::{ImportOptions, OutputFormat, import, one_line, read_document};
    let doc = read_document(&args.spec).map_err(anyhow::Error::msg)?;
    let options = ImportOptions {
        base_url: args.base_url,
        include_tags: args.include_tags,
        include_operations: args.include_operations,
        prefix: args.prefix,
        budgets: Default::default(),
    };
    let result = import(&doc, &options, settings).map_err(|e| anyhow::anyhow!("{}: {}", args.spec.display(), one_line(&e)))?;
    let format = args.format.or_else(|| args.out.as_deref().and_then(OutputFormat::of)).unwrap_or_default();
    let source = args.spec.file_name().map_or_else(|| args.spec.display().to_string(), |n| n.to_string_lossy().into_owned());
    let mut err = std::io::stderr().lock();
    for warning in &result.warnings {
        let _ = writeln!(err, "warning: {}", one_line(warning));
    }
    for skipped in &result.skipped {
        let _ = writeln!(err, "skipped: {}: {}", one_line(&skipped.operation), one_line(&skipped.reason));
    }
    anyhow::ensure!(!result.tools.is_empty(), "{}: no operation could be imported ({} skipped)", args.spec.display(), result.skipped.len());
    let text = result.render(format, &source).map_err(|e| anyhow::anyhow!(one_line(&e)))?;
    let target = match &args.out {
        Some(path) => {
            std::fs::write(path, &text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            path.display().to_string()
        }
        None => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            "standard output".to_owned()
        }
    };
    let _ = writeln!(err, "{} tools written to {target}, {} operations skipped", result.tools.len(), result.skipped.len());
    if !result.secrets.is_empty() {
        let names: Vec<String> = result.secrets.keys().map(|k| format!("{k:?}")).collect();
        let _ = writeln!(err, "secrets the tools read (set them, and allow them with tools.http.secret_env = [{}]):", names.join(", "));
        for (name, holds) in &result.secrets {
            let _ = writeln!(err, "  {name}: {}", one_line(holds));
        }
    }
    if let Some((env, default)) = &result.base_url {
        let _ = writeln!(err, "base URL: {} (set {env} to call another address)", one_line(default));
    }
    Ok(())
}

/// The tools the enabled packs serve: name and description.
fn code_tools(settings: &Settings) -> anyhow::Result<Vec<(String, String)>> {
    let server =
        toolgate::server::McpServer::new(std::sync::Arc::new(settings.clone()), std::sync::Arc::new(toolgate::bus::LocalBus::default()));
    toolgate::packs::install(&server, &settings.tools).map_err(anyhow::Error::msg)?;
    Ok(server.tools.snapshot().iter().map(|t| (t.name().to_owned(), t.tool.descriptor().description.clone())).collect())
}

/// One tool of `tools list`: `source` is the file it is defined in (`database`, `built-in pack`).
struct Row {
    name: String,
    origin: &'static str,
    kind: String,
    enabled: bool,
    source: String,
    description: String,
}

/// The rows as JSON lines, or as a table whose SOURCE column is as wide as its longest path.
fn print_rows(out: &mut impl std::io::Write, rows: &[Row], json: bool) {
    if json {
        for r in rows {
            let line = serde_json::json!({"name": r.name, "origin": r.origin, "kind": r.kind, "enabled": r.enabled, "source": r.source, "description": r.description});
            let _ = writeln!(out, "{line}");
        }
        return;
    }
    let width = rows.iter().map(|r| r.source.chars().count()).max().unwrap_or(0).max("SOURCE".len());
    let _ = writeln!(out, "{:<32} {:<9} {:<8} {:<8} {:<width$} DESCRIPTION", "NAME", "ORIGIN", "KIND", "ENABLED", "SOURCE");
    for r in rows {
        let short: String = r.description.chars().take(60).collect();
        let enabled = if r.enabled { "yes" } else { "no" };
        let _ = writeln!(out, "{:<32} {:<9} {:<8} {enabled:<8} {:<width$} {short}", r.name, r.origin, r.kind, r.source);
    }
}

/// Runs one `toolgate tools` subcommand.
pub async fn run(settings: Settings, command: ToolsCommand) -> anyhow::Result<()> {
    use std::io::Write as _;
    use toolgate::tool::Origin;
    use toolgate::tooldef::{RawDef, compile, compile_all, read_path};
    let mut out = std::io::stdout().lock();
    match command {
        ToolsCommand::Validate { file } => {
            let path = file.or_else(|| settings.tools.path.clone()).ok_or_else(|| anyhow::anyhow!("give a file, or set tools.path"))?;
            let raws = read_path(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
            for warning in toolgate::tooldef::warnings(&raws) {
                eprintln!("warning: {warning}");
            }
            // A name a built-in pack already serves would make the server refuse the file: said
            // in the same report as the definitions' own problems, so one run shows everything.
            let packs = code_tools(&settings)?;
            let taken: Vec<String> =
                raws.iter().enumerate().map(|(i, raw)| raw.label(i)).filter(|n| packs.iter().any(|(name, _)| name == n)).collect();
            let mut problems = Vec::new();
            let compiled = compile_all(&raws, &settings, Origin::File, &path.display().to_string())
                .map_err(|e| problems.push(format!("invalid tool definitions:\n{e}")))
                .unwrap_or_default();
            if !taken.is_empty() {
                let hint = Origin::Code.clash_hint();
                problems.push(format!("{}: {} already served by a built-in pack; {hint}", path.display(), taken.join(", ")));
            }
            anyhow::ensure!(problems.is_empty(), "{}", problems.join("\n"));
            let names: Vec<&str> = compiled.iter().map(|c| c.name.as_str()).collect();
            let _ = writeln!(out, "{}: {} valid tool definitions: {}", path.display(), compiled.len(), names.join(", "));
            Ok(())
        }
        ToolsCommand::List { json } => {
            let mut rows: Vec<Row> = Vec::new();
            for (name, description) in code_tools(&settings)? {
                let source = "built-in pack".to_owned();
                rows.push(Row { name, origin: Origin::Code.as_str(), kind: "code".into(), enabled: true, source, description });
            }
            let mut add = |c: toolgate::tooldef::Compiled, origin: Origin, source: &str, description: String| {
                let (kind, source) = (c.kind.as_str().to_owned(), source.to_owned());
                rows.push(Row { name: c.name, origin: origin.as_str(), kind, enabled: c.enabled, source, description });
            };
            let describe = |raw: &RawDef| raw.value.get("description").and_then(serde_json::Value::as_str).unwrap_or("").to_owned();
            if let Some(path) = &settings.tools.path {
                let raws = read_path(path).map_err(|e| anyhow::anyhow!("{e}"))?;
                let compiled = compile_all(&raws, &settings, Origin::File, &path.display().to_string())
                    .map_err(|e| anyhow::anyhow!("invalid tool definitions:\n{e}"))?;
                for (c, raw) in compiled.into_iter().zip(&raws) {
                    add(c, Origin::File, &raw.source, describe(raw));
                }
            }
            let store = toolgate::store::Store::connect(&settings.storage).await?;
            let stored = toolgate::tooldef::db::load_all(&store).await;
            store.close().await;
            for row in stored? {
                let raw = RawDef { value: row.definition, source: "database".into(), base_dir: PathBuf::from(".") };
                match compile(&raw, &settings, Origin::Database) {
                    Ok(mut c) => {
                        c.enabled = row.enabled;
                        let d = describe(&raw);
                        add(c, Origin::Database, "database", d);
                    }
                    Err(errors) => eprintln!(
                        "stored tool {:?} is invalid: {}",
                        row.name,
                        errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
                    ),
                }
            }
            rows.sort_by(|a, b| a.name.cmp(&b.name));
            print_rows(&mut out, &rows, json);
            Ok(())
        }
        ToolsCommand::Import { command: ImportCommand::Openapi(args) } => import_openapi(&settings, args),
    }
}
