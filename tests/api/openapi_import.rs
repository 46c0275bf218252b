//! `toolgate tools import openapi`: one mapping rule per test, on small inline documents.
//! Imported definitions are compiled exactly as a tools file would be, and the ones that are
//! called run against wiremock on loopback, so each rule is checked on the wire too. The
//! acceptance check on real published documents is `tests/openapi_import.sh`.

use std::path::Path;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate::config::Settings;
use toolgate::tool::{Origin, ToolContext};
use toolgate::tooldef::openapi::{Import, ImportOptions, ImportedTool, OutputFormat, import};
use toolgate::tooldef::{RawDef, compile};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn doc(paths: Value) -> Value {
    json!({"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"}, "servers": [{"url": "https://api.example.com/v1"}], "paths": paths})
}

fn run(doc: &Value, options: &ImportOptions) -> Import {
    import(doc, options, &Settings::default()).expect("imports")
}

fn import_all(doc: &Value) -> Import {
    run(doc, &ImportOptions::default())
}

fn tool<'a>(import: &'a Import, name: &str) -> &'a ImportedTool {
    import
        .tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}: {:?} skipped {:?}", names(import), import.skipped))
}

fn names(import: &Import) -> Vec<&str> {
    import.tools.iter().map(|t| t.name.as_str()).collect()
}

/// Compiles an imported definition with loopback reachable and its secrets allowed, and calls it.
async fn call(tool: &ImportedTool, args: Value) -> Result<toolgate::protocol::CallToolResult, toolgate::tool::ToolError> {
    let mut settings = Settings::default();
    settings.tools.http.allow_hosts = vec!["127.0.0.1".into()];
    settings.tools.http.secret_env = vec!["PETS_*".into(), "CARGO_PKG_NAME".into()];
    let raw = RawDef { value: serde_json::to_value(tool).expect("json"), source: "import".into(), base_dir: ".".into() };
    let compiled = compile(&raw, &settings, Origin::File).expect("the imported definition compiles");
    let args = args.as_object().cloned().unwrap_or_default();
    compiled.tool.expect("enabled").invoke(ToolContext::detached(&tool.name, args, CancellationToken::new())).await
}

fn against(server: &MockServer) -> ImportOptions {
    ImportOptions { base_url: Some(server.uri()), ..Default::default() }
}

#[test]
fn operation_ids_become_tool_names_cleaned_to_the_name_rules() {
    let i = import_all(&doc(json!({"/pets": {"get": {"operationId": "pets/list all", "responses": {}}}})));
    assert_eq!(names(&i), ["pets_list_all"]);
    assert_eq!(i.tools[0].labels["openapi_operation"], "pets/list all");
}

#[test]
fn an_operation_without_an_id_is_named_by_method_and_path() {
    let i = import_all(&doc(
        json!({"/pets/{petId}/photos": {"get": {"parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "integer"}}], "responses": {}}}}),
    ));
    assert_eq!(names(&i), ["get_pets_petId_photos"]);
}

#[test]
fn duplicate_names_are_numbered_in_document_order() {
    let i = import_all(&doc(json!({
        "/a": {"get": {"operationId": "list", "responses": {}}},
        "/b": {"get": {"operationId": "list", "responses": {}}, "post": {"operationId": "list!", "responses": {}}},
    })));
    assert_eq!(names(&i), ["list", "list_2", "list_3"]);
    assert_eq!(
        names(&import_all(&doc(json!({"/b": {"get": {"operationId": "list"}}, "/a": {"get": {"operationId": "list"}}})))),
        ["list", "list_2"]
    );
}

#[test]
fn the_prefix_goes_before_every_name_and_names_the_environment_variables() {
    let d = doc(json!({"/pets": {"get": {"operationId": "listPets"}}}));
    let i = run(&d, &ImportOptions { prefix: "zoo_".into(), ..Default::default() });
    assert_eq!(names(&i), ["zoo_listPets"]);
    assert_eq!(i.tools[0].http.base_url, json!({"env": "ZOO_BASE_URL", "default": "https://api.example.com/v1"}));
}

#[test]
fn summary_and_description_describe_the_tool() {
    let i = import_all(&doc(json!({
        "/a": {"get": {"operationId": "a", "summary": "List pets", "description": "Every pet, newest first."}},
        "/b": {"get": {"operationId": "b"}},
        "/c": {"get": {"operationId": "c", "summary": "Old", "deprecated": true}},
    })));
    let a = tool(&i, "a");
    assert_eq!((a.title.as_deref(), a.description.as_str()), (Some("List pets"), "List pets\n\nEvery pet, newest first."));
    assert_eq!(tool(&i, "b").description, "GET /b", "never empty");
    assert!(tool(&i, "c").description.starts_with("Deprecated."));
}

#[test]
fn parameters_keep_their_required_list_enums_formats_and_descriptions() {
    let i = import_all(&doc(json!({"/pets/{id}": {"get": {"operationId": "get", "parameters": [
        {"name": "id", "in": "path", "required": true, "description": "The pet.", "schema": {"type": "integer", "format": "int64"}},
        {"name": "status", "in": "query", "required": true, "schema": {"type": "string", "enum": ["sold", "free"]}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 100}},
    ]}}})));
    let schema = &tool(&i, "get").input_schema;
    assert_eq!(schema["required"], json!(["id", "status"]));
    assert_eq!(schema["properties"]["id"], json!({"type": "integer", "format": "int64", "description": "The pet."}));
    assert_eq!(schema["properties"]["status"]["enum"], json!(["sold", "free"]));
    assert_eq!(schema["properties"]["limit"]["maximum"], json!(100));
    assert_eq!(schema["additionalProperties"], json!(false));
}

#[tokio::test]
async fn path_query_and_header_parameters_reach_the_request() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/pets/7%2F8"))
        .and(query_param("filter[kind]", "cat"))
        .and(query_param("tag", "a"))
        .and(header("X-Request-Id", "r-1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .expect(1)
        .mount(&server)
        .await;
    let d = doc(json!({"/pets/{pet-id}": {"get": {"operationId": "get", "parameters": [
        {"name": "pet-id", "in": "path", "required": true, "schema": {"type": "string"}},
        {"name": "filter[kind]", "in": "query", "schema": {"type": "string"}},
        {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
        {"name": "X-Request-Id", "in": "header", "schema": {"type": "string"}},
    ]}}}));
    let i = run(&d, &against(&server));
    let t = tool(&i, "get");
    assert_eq!(t.http.url, "/pets/{pet_id}");
    assert_eq!(t.http.query["filter[kind]"], json!("{filter_kind}"));
    assert_eq!(t.http.headers["X-Request-Id"], json!("{X_Request_Id}"));
    let result = call(t, json!({"pet_id": "7/8", "filter_kind": "cat", "tag": ["a"], "X_Request_Id": "r-1"})).await;
    assert!(result.is_ok(), "{result:?}");
}

#[test]
fn path_level_parameters_apply_and_the_operation_overrides_them() {
    let i = import_all(&doc(json!({"/pets/{id}": {
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "v", "in": "query", "schema": {"type": "string"}}],
        "get": {"operationId": "get", "parameters": [{"name": "v", "in": "query", "required": true, "schema": {"type": "integer"}}]},
    }})));
    let schema = &tool(&i, "get").input_schema;
    assert_eq!(schema["properties"]["v"]["type"], "integer");
    assert_eq!(schema["required"], json!(["id", "v"]));
}

#[test]
fn references_are_inlined_and_recursive_ones_become_defs() {
    let mut d = doc(json!({"/trees": {"post": {"operationId": "plant", "parameters": [{"$ref": "#/components/parameters/Dry"}],
        "requestBody": {"$ref": "#/components/requestBodies/Tree"}}}}));
    d["components"] = json!({
        "parameters": {"Dry": {"name": "dry_run", "in": "query", "schema": {"$ref": "#/components/schemas/Flag"}}},
        "requestBodies": {"Tree": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}},
        "schemas": {
            "Flag": {"type": "boolean", "description": "Only check."},
            "Node": {"type": "object", "required": ["label"], "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}},
        },
    });
    let i = import_all(&d);
    let schema = &tool(&i, "plant").input_schema;
    assert_eq!(schema["properties"]["dry_run"], json!({"type": "boolean", "description": "Only check."}));
    assert_eq!(schema["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
    assert_eq!(schema["$defs"]["Node"]["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
    assert_eq!(schema["required"], json!(["label"]));
}

#[test]
fn a_reference_to_another_document_skips_the_operation_with_the_reason() {
    let i = import_all(&doc(json!({
        "/a": {"get": {"operationId": "a", "parameters": [{"$ref": "common.yaml#/components/parameters/Page"}]}},
        "/b": {"get": {"operationId": "b"}},
    })));
    assert_eq!(names(&i), ["b"]);
    assert_eq!(i.skipped[0].operation, "GET /a (a)");
    assert!(i.skipped[0].reason.contains("common.yaml") && i.skipped[0].reason.contains("another document"), "{:?}", i.skipped);
}

#[test]
fn openapi_3_0_nullable_and_exclusive_limits_become_json_schema_2020_12() {
    let i = import_all(&doc(json!({"/a": {"get": {"operationId": "a", "parameters": [
        {"name": "n", "in": "query", "schema": {"type": "number", "nullable": true, "minimum": 0, "exclusiveMinimum": true}},
    ]}}})));
    assert_eq!(tool(&i, "a").input_schema["properties"]["n"], json!({"type": ["number", "null"], "exclusiveMinimum": 0}));
}

#[tokio::test]
async fn a_json_body_object_becomes_one_argument_per_property() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/pets"))
        .and(body_json(json!({"name": "Rex", "tags": ["good"]})))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 1})))
        .expect(1)
        .mount(&server)
        .await;
    let d = doc(
        json!({"/pets": {"post": {"operationId": "create", "requestBody": {"required": true, "content": {"application/json": {"schema": {
            "type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}, "id": {"type": "integer", "readOnly": true}},
        }}}}}}}),
    );
    let i = run(&d, &against(&server));
    let t = tool(&i, "create");
    assert_eq!(t.http.body, Some(json!({"name": "{name}", "tags": "{tags}"})), "read-only properties are not sent");
    assert_eq!(t.input_schema["required"], json!(["name"]));
    assert!(call(t, json!({"name": "Rex", "tags": ["good"]})).await.is_ok());
}

#[tokio::test]
async fn a_body_that_is_not_a_flat_object_is_one_body_argument() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/tags"))
        .and(header("content-type", "application/merge-patch+json"))
        .and(body_json(json!(["a", "b"])))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    let d = doc(
        json!({"/tags": {"put": {"operationId": "set", "requestBody": {"content": {"application/merge-patch+json": {"schema": {"type": "array", "items": {"type": "string"}}}}}}}}),
    );
    let i = run(&d, &against(&server));
    let t = tool(&i, "set");
    assert_eq!(t.http.body, Some(json!("{body}")));
    assert_eq!(t.input_schema["properties"]["body"]["type"], "array");
    assert!(call(t, json!({"body": ["a", "b"]})).await.is_ok());
}

#[test]
fn a_body_property_named_like_a_parameter_gets_its_own_argument() {
    let i = import_all(&doc(json!({"/pets/{id}": {"patch": {"operationId": "p",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
        "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string"}}}}}}}}})));
    assert_eq!(tool(&i, "p").http.body, Some(json!({"id": "{id_body}"})));
}

#[test]
fn the_first_server_is_the_default_base_url_and_its_variables_are_filled() {
    let mut d = doc(
        json!({"/a": {"get": {"operationId": "a"}}, "/up": {"post": {"operationId": "up", "servers": [{"url": "https://uploads.example.com"}]}}}),
    );
    d["servers"] = json!([{"url": "https://{region}.example.com/{v}", "variables": {"region": {"default": "eu"}, "v": {"default": "v2"}}}]);
    let i = import_all(&d);
    assert_eq!(tool(&i, "a").http.base_url, json!({"env": "PETS_BASE_URL", "default": "https://eu.example.com/v2"}));
    assert_eq!(tool(&i, "up").http.base_url, json!("https://uploads.example.com"), "an operation's own server is kept");
    assert_eq!(i.base_url, Some(("PETS_BASE_URL".to_owned(), "https://eu.example.com/v2".to_owned())));
}

#[test]
fn a_relative_server_needs_base_url() {
    let mut d = doc(json!({"/a": {"get": {"operationId": "a"}}}));
    d["servers"] = json!([{"url": "/api/v3"}]);
    let err = import(&d, &ImportOptions::default(), &Settings::default()).expect_err("relative");
    assert!(err.contains("--base-url") && err.contains("/api/v3"), "{err}");
    let i = run(&d, &ImportOptions { base_url: Some("https://pets.example.com/api/v3".into()), ..Default::default() });
    assert_eq!(i.tools[0].http.base_url["default"], "https://pets.example.com/api/v3");
}

#[test]
fn get_is_read_only_put_and_delete_are_idempotent_and_delete_destructive() {
    let i = import_all(&doc(json!({"/a": {
        "get": {"operationId": "g"}, "put": {"operationId": "u"}, "delete": {"operationId": "d"}, "post": {"operationId": "p"},
    }})));
    let a = |n: &str| serde_json::to_value(&tool(&i, n).annotations).expect("json");
    assert_eq!(a("g"), json!({"read_only_hint": true, "open_world_hint": true}));
    assert_eq!(a("u"), json!({"idempotent_hint": true, "open_world_hint": true}));
    assert_eq!(a("d"), json!({"idempotent_hint": true, "destructive_hint": true, "open_world_hint": true}));
    assert_eq!(a("p"), json!({"open_world_hint": true}));
}

fn secured(schemes: Value, security: Value) -> Import {
    let mut d = doc(json!({"/a": {"get": {"operationId": "a", "security": security}}}));
    d["components"] = json!({"securitySchemes": schemes});
    import_all(&d)
}

#[test]
fn an_api_key_header_is_read_from_an_environment_variable_never_written() {
    let i = secured(json!({"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}), json!([{"key": []}]));
    let t = tool(&i, "a");
    assert_eq!(t.http.headers["X-Api-Key"], json!({"env": "PETS_KEY"}));
    assert!(t.comments.iter().any(|c| c.contains("PETS_KEY") && c.contains("tools.http.secret_env")), "{:?}", t.comments);
    assert!(i.secrets["PETS_KEY"].contains("X-Api-Key"));
}

#[test]
fn bearer_basic_oauth2_and_openid_connect_become_authorization_secrets() {
    for (scheme, prefix) in [
        (json!({"type": "http", "scheme": "bearer"}), "Bearer "),
        (json!({"type": "http", "scheme": "basic"}), "Basic "),
        (json!({"type": "oauth2", "flows": {}}), "Bearer "),
        (json!({"type": "openIdConnect", "openIdConnectUrl": "https://id.example.com"}), "Bearer "),
    ] {
        let i = secured(json!({"auth": scheme}), json!([{"auth": []}]));
        assert_eq!(tool(&i, "a").http.headers["Authorization"], json!({"env": "PETS_AUTH", "prefix": prefix}));
    }
}

#[tokio::test]
async fn the_secret_is_read_at_call_time() {
    // Cargo sets CARGO_PKG_NAME for every test process: the prefix `cargo_` and the scheme
    // `pkg_name` name exactly that variable (the crate forbids the unsafe `set_var`).
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/a"))
        .and(header("X-Api-Key", "toolgate"))
        .respond_with(ResponseTemplate::new(200))
        .expect(1)
        .mount(&server)
        .await;
    let mut d = doc(json!({"/a": {"get": {"operationId": "a"}}}));
    d["components"] = json!({"securitySchemes": {"pkg_name": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}});
    d["security"] = json!([{"pkg_name": []}]);
    let i = run(&d, &ImportOptions { prefix: "cargo_".into(), ..against(&server) });
    let t = tool(&i, "cargo_a");
    assert_eq!(t.http.headers["X-Api-Key"], json!({"env": "CARGO_PKG_NAME"}));
    assert!(call(t, json!({})).await.is_ok());
}

#[test]
fn an_unusable_scheme_falls_back_to_the_next_alternative_or_skips_with_the_reason() {
    let schemes = json!({
        "h": {"type": "apiKey", "in": "header", "name": "X-Key"},
        "c": {"type": "apiKey", "in": "cookie", "name": "sid"},
        "m": {"type": "mutualTLS"},
    });
    let i = secured(schemes.clone(), json!([{"c": []}, {"h": []}]));
    assert_eq!(tool(&i, "a").http.headers["X-Key"], json!({"env": "PETS_H"}));
    let i = secured(schemes.clone(), json!([{"c": []}, {"m": []}]));
    assert!(i.tools.is_empty());
    assert!(i.skipped[0].reason.contains("cookie") && i.skipped[0].reason.contains("mutual TLS"), "{:?}", i.skipped);
    let i = secured(schemes, json!([{}, {"h": []}]));
    assert!(tool(&i, "a").http.headers.is_empty(), "an empty alternative makes credentials optional");
}

#[tokio::test]
async fn an_api_key_in_the_query_is_a_secret_query_parameter_redacted_from_errors() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/a"))
        .and(query_param("api_key", "toolgate"))
        .respond_with(ResponseTemplate::new(403).set_body_string("key toolgate is not allowed here"))
        .expect(1)
        .mount(&server)
        .await;
    let mut d = doc(json!({"/a": {"get": {"operationId": "a"}}}));
    d["components"] = json!({"securitySchemes": {"pkg_name": {"type": "apiKey", "in": "query", "name": "api_key"}}});
    d["security"] = json!([{"pkg_name": []}]);
    let i = run(&d, &ImportOptions { prefix: "cargo_".into(), ..against(&server) });
    let t = tool(&i, "cargo_a");
    assert_eq!(t.http.query["api_key"], json!({"env": "CARGO_PKG_NAME"}));
    assert!(i.secrets["CARGO_PKG_NAME"].contains("\"api_key\" query parameter"), "{:?}", i.secrets);
    match call(t, json!({})).await {
        Err(toolgate::tool::ToolError::Failed(message)) => {
            assert!(message.contains("403") && message.contains("[redacted]") && !message.contains("toolgate"), "{message}")
        }
        other => panic!("expected the upstream's refusal, got {other:?}"),
    }
}

#[test]
fn form_and_multipart_bodies_skip_the_operation_with_the_reason() {
    let i = import_all(&doc(json!({
        "/form": {"post": {"operationId": "form", "requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {"type": "object"}}}}}},
        "/upload": {"post": {"operationId": "upload", "requestBody": {"content": {"multipart/form-data": {"schema": {"type": "object"}}}}}},
        "/both": {"post": {"operationId": "both", "requestBody": {"content": {"multipart/form-data": {}, "application/json": {"schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}},
    })));
    assert_eq!(names(&i), ["both"], "JSON is chosen when offered");
    let reasons: Vec<String> = i.skipped.iter().map(|s| format!("{}: {}", s.operation, s.reason)).collect();
    assert!(reasons.iter().any(|r| r.starts_with("POST /form (form)") && r.contains("application/x-www-form-urlencoded")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.starts_with("POST /upload (upload)") && r.contains("multipart/form-data")), "{reasons:?}");
}

#[test]
fn cookies_and_inexpressible_styles_leave_optional_parameters_out_and_skip_required_ones() {
    let i = import_all(&doc(json!({
        "/a": {"get": {"operationId": "a", "parameters": [
            {"name": "session", "in": "cookie", "schema": {"type": "string"}},
            {"name": "filter", "in": "query", "style": "deepObject", "schema": {"type": "object"}},
            {"name": "ok", "in": "query", "schema": {"type": "string"}},
        ]}},
        "/b": {"get": {"operationId": "b", "parameters": [{"name": "session", "in": "cookie", "required": true, "schema": {"type": "string"}}]}},
    })));
    assert_eq!(names(&i), ["a"]);
    let props: Vec<&String> = tool(&i, "a").input_schema["properties"].as_object().expect("object").keys().collect();
    assert_eq!(props, ["ok"]);
    assert!(
        i.warnings.iter().any(|w| w.starts_with("GET /a (a)") && w.contains("cookie parameter `session` left out")),
        "{:?}",
        i.warnings
    );
    assert!(i.warnings.iter().any(|w| w.contains("`filter`") && w.contains("deepObject")), "{:?}", i.warnings);
    assert!(i.skipped[0].reason.contains("required cookie parameter `session`"), "{:?}", i.skipped);
}

#[test]
fn tags_and_operation_ids_select_what_is_imported() {
    let d = doc(json!({
        "/a": {"get": {"operationId": "a", "tags": ["Pets"]}},
        "/b": {"get": {"operationId": "b", "tags": ["store"]}},
        "/c": {"get": {"operationId": "c"}},
    }));
    let i = run(
        &d,
        &ImportOptions { include_tags: vec!["pets".into()], include_operations: vec!["c".into(), "zz".into()], ..Default::default() },
    );
    assert_eq!(names(&i), ["a", "c"]);
    assert!(i.warnings.iter().any(|w| w.contains("--include-operation zz matched no operation")), "{:?}", i.warnings);
}

#[test]
fn only_openapi_3_documents_are_read() {
    let err = import(&json!({"swagger": "2.0", "paths": {}}), &ImportOptions::default(), &Settings::default()).expect_err("2.0");
    assert!(err.contains("Swagger 2.0") && err.contains("convert"), "{err}");
    let mut d = doc(json!({"/a": {"get": {"operationId": "a"}}}));
    d["openapi"] = json!("3.1.0");
    assert_eq!(names(&import_all(&d)), ["a"]);
}

fn toolgate(args: &[&str], dir: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command.args(args).current_dir(dir).env("TOOLGATE__STORAGE__DATA_DIR", dir).env_remove("TOOLGATE_CONFIG");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("toolgate runs")
}

#[test]
fn every_output_format_passes_tools_validate_once_its_secrets_are_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut d = doc(json!({
        "/pets/{id}": {"get": {"operationId": "getPet", "summary": "A pet", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "default": null, "nullable": true}}]}},
        "/pets": {"post": {"operationId": "addPet", "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"name": {"type": "string", "enum": ["a", null], "nullable": true}}}}}}}},
    }));
    d["components"] = json!({"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}});
    d["security"] = json!([{"key": []}]);
    let spec = dir.path().join("spec.yaml");
    std::fs::write(&spec, toolgate::yaml::to_string(&d).expect("yaml")).expect("written");
    for format in ["toml", "yaml", "json"] {
        let out_file = format!("pets.{format}");
        let out = toolgate(&["tools", "import", "openapi", "spec.yaml", "--out", &out_file], dir.path(), &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!("2 tools written to {out_file}, 0 operations skipped")) && stderr.contains("PETS_KEY"),
            "{stderr}"
        );
        let written = std::fs::read_to_string(dir.path().join(&out_file)).expect("written");
        assert!(!written.contains("k-123"), "never a value");
        if format != "json" {
            assert!(written.contains("# secret: set PETS_KEY"), "{written}");
        }
        let refused = toolgate(&["tools", "validate", &out_file], dir.path(), &[]);
        assert!(!refused.status.success(), "the secret must be allowed by the operator");
        let out = toolgate(&["tools", "validate", &out_file], dir.path(), &[("TOOLGATE__TOOLS__HTTP__SECRET_ENV", "PETS_KEY")]);
        assert!(out.status.success(), "{format}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("2 valid tool definitions: addPet, getPet"));
    }
    let out = toolgate(&["tools", "import", "openapi", "spec.yaml", "--format", "yaml"], dir.path(), &[]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("# Generated by `toolgate tools import openapi` from spec.yaml"));
    assert!(OutputFormat::of(Path::new("x.yml")) == Some(OutputFormat::Yaml));
}
