//! Contract generation and drift checks, shared by the `xtask` binary and the tests.
//!
//! - `contracts/control-plane.openapi.json` is produced from the server's code
//!   (`edith_server::openapi()`).
//! - `crates/hermes-sdk/src/generated.rs` (the `EdithHermes` operations) is produced from that
//!   contract.
//! - `contracts/hermes-native.catalog.json` is extracted from the installed hermes-agent by
//!   `scripts/native-catalog.py` (`cargo xtask catalog`), with this project's `implemented`
//!   flags; `crates/hermes-native/src/generated.rs` is generated from it.
//! - `contracts/hermes-desktop.routes.json` is extracted by `scripts/desktop-routes.py` (also
//!   `cargo xtask catalog`); the route table (`hermes_native::desktop`) and the SDK's
//!   `HermesDesktop` operations are generated from it.
//! - `python/edith_hermes/_operations.py` (the Python `AsyncEdithHermes` operations) is
//!   produced from the control-plane contract, and `_desktop_routes.py` (its
//!   `AsyncHermesDesktop` methods) from the Desktop routes.

pub mod desktop;
pub mod native;
pub mod python;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub const CONTRACT: &str = "contracts/control-plane.openapi.json";
pub const GENERATED_CLIENT: &str = "crates/hermes-sdk/src/generated.rs";

/// The workspace root (this crate lives in `<root>/xtask`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask is inside the workspace")
        .to_path_buf()
}

/// The contract as the server's code declares it, as the checked-in file spells it.
pub fn contract_text() -> String {
    let mut text = serde_json::to_string_pretty(edith_server::openapi()).expect("JSON");
    text.push('\n');
    text
}

/// The id type a path parameter holds.
fn id_type(param: &str) -> &'static str {
    match param {
        "instance_id" => "InstanceId",
        "profile_id" => "ProfileId",
        "session_id" => "SessionId",
        "turn_id" => "TurnId",
        "tool_id" => "ToolId",
        "tool_host_id" => "ToolHostId",
        "job_id" => "JobId",
        "key_id" => "ApiKeyId",
        other => panic!("path parameter `{other}` has no id type; add it to xtask"),
    }
}

/// The Rust type of a schema: a `$ref` names an `edith_types` type (`PageOfX` is `Page<X>`);
/// anything else is free JSON.
fn rust_type(schema: &Value, uses: &mut BTreeSet<String>) -> String {
    if schema["type"] == "array" && schema["items"].get("$ref").is_some() {
        return format!("Vec<{}>", rust_type(&schema["items"], uses));
    }
    let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
        return "serde_json::Value".to_owned();
    };
    let name = reference.rsplit('/').next().expect("a $ref has a name");
    match name.strip_prefix("PageOf") {
        Some(item) => {
            uses.insert("Page".to_owned());
            uses.insert(item.to_owned());
            format!("Page<{item}>")
        }
        None => {
            uses.insert(name.to_owned());
            name.to_owned()
        }
    }
}

struct Operation {
    id: String,
    method: String,
    path: String,
    summary: String,
    path_params: Vec<String>,
    body: Option<String>,
    response: Response,
    paginated: bool,
    /// The type of the list's filters (`x-edith-filter`).
    filter: Option<String>,
}

enum Response {
    Json(String),
    /// A log's event stream (`GET`), resumed after a sequence number.
    Events(String),
    /// A `201` whose body is the event stream of the log the request started.
    Started(String),
    /// A WebSocket upgrade: the method opens a self-resuming connection.
    Socket,
}

fn operations(contract: &Value, uses: &mut BTreeSet<String>) -> Vec<Operation> {
    let mut ops = Vec::new();
    let paths = contract["paths"].as_object().expect("paths");
    for (path, methods) in paths {
        for (method, op) in methods.as_object().expect("methods") {
            // Forwarded routes of another contract: the SDK binds them from that one.
            if op.get("x-edith-passthrough").is_some() {
                continue;
            }
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            let path_params = params
                .iter()
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().expect("name").to_owned())
                .collect();
            let paginated = params
                .iter()
                .any(|p| p["in"] == "query" && p["name"] == "cursor");
            let body = op
                .get("requestBody")
                .map(|b| rust_type(&b["content"]["application/json"]["schema"], uses));
            let (status, reply) = op["responses"]
                .as_object()
                .expect("responses")
                .iter()
                .find(|(status, _)| status.starts_with('2') || *status == "101")
                .expect("a success response");
            let response = match reply["content"].get("text/event-stream") {
                _ if status == "101" => Response::Socket,
                Some(sse) => {
                    let event =
                        rust_type(&sse["schema"]["properties"]["data"]["contentSchema"], uses);
                    if status == "201" {
                        Response::Started(event)
                    } else {
                        Response::Events(event)
                    }
                }
                None => Response::Json(rust_type(
                    &reply["content"]["application/json"]["schema"],
                    uses,
                )),
            };
            ops.push(Operation {
                id: op["operationId"].as_str().expect("operationId").to_owned(),
                method: method.to_uppercase(),
                path: path.clone(),
                summary: op["summary"].as_str().unwrap_or_default().to_owned(),
                path_params,
                body,
                response,
                paginated,
                filter: op["x-edith-filter"].as_str().map(|filter| {
                    uses.insert(filter.to_owned());
                    filter.to_owned()
                }),
            });
        }
    }
    ops.sort_by(|a, b| a.id.cmp(&b.id));
    ops
}

/// `generated.rs` for a contract.
pub fn generate_client(contract: &Value) -> String {
    let mut uses = BTreeSet::new();
    let ops = operations(contract, &mut uses);
    for op in &ops {
        for param in &op.path_params {
            uses.insert(id_type(param).to_owned());
        }
    }
    let mut out = String::new();
    out.push_str(
        "// @generated by `cargo xtask codegen` from contracts/control-plane.openapi.json.\n\
         // Do not edit: change the server, regenerate, and review the diff.\n\n",
    );
    let _ = writeln!(
        out,
        "use edith_types::{{{}}};",
        uses.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    out.push_str("use reqwest::Method;\n\n");
    out.push_str("use crate::client::{EdithHermes, PageRequest, query_of};\n");
    out.push_str("use crate::error::Result;\n");
    out.push_str("use crate::events::EventStream;\n");
    out.push_str("use crate::gateway::GatewayConnection;\n\n");
    out.push_str("/// Every operation of the contract, by id.\n");
    out.push_str("pub const OPERATIONS: &[&str] = &[\n");
    for op in &ops {
        let _ = writeln!(out, "    \"{}\",", op.id);
    }
    out.push_str("];\n\n");
    out.push_str("impl EdithHermes {\n");
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        write_operation(&mut out, op);
    }
    out.push_str("}\n");
    out
}

fn write_operation(out: &mut String, op: &Operation) {
    let _ = writeln!(out, "    /// {}", op.summary);
    out.push_str("    ///\n");
    let _ = writeln!(out, "    /// `{} {}`", op.method, op.path);
    let mut args: Vec<String> = op
        .path_params
        .iter()
        .map(|p| format!("{p}: &{}", id_type(p)))
        .collect();
    if let Some(body) = &op.body {
        args.push(format!("body: &{body}"));
    }
    if let Some(filter) = &op.filter {
        args.push(format!("filter: &{filter}"));
    }
    if op.paginated {
        args.push("page: &PageRequest".to_owned());
    }
    if matches!(op.response, Response::Events(_)) {
        args.push("after: u64".to_owned());
    }
    let args = if args.is_empty() {
        String::new()
    } else {
        format!(", {}", args.join(", "))
    };
    let path = if op.path_params.is_empty() {
        format!("\"{}\"", op.path)
    } else {
        format!("&format!(\"{}\")", op.path)
    };
    match &op.response {
        Response::Socket => {
            let _ = writeln!(
                out,
                "    pub async fn {}(&self{args}) -> Result<GatewayConnection> {{",
                op.id
            );
            let _ = writeln!(out, "        self.socket({path}).await");
        }
        Response::Events(event) => {
            let _ = writeln!(
                out,
                "    pub fn {}(&self{args}) -> EventStream<{event}> {{",
                op.id
            );
            let owned = if op.path_params.is_empty() {
                format!("{path}.to_owned()")
            } else {
                format!("format!(\"{}\")", op.path)
            };
            let _ = writeln!(out, "        self.stream({owned}, after)");
        }
        Response::Started(event) => {
            let _ = writeln!(
                out,
                "    pub async fn {}(&self{args}) -> Result<EventStream<{event}>> {{",
                op.id
            );
            let _ = writeln!(out, "        self.start_stream({path}, body).await");
        }
        Response::Json(reply) => {
            let _ = writeln!(
                out,
                "    pub async fn {}(&self{args}) -> Result<{reply}> {{",
                op.id
            );
            let query = match (&op.filter, op.paginated) {
                (Some(_), true) => "[page.query(), query_of(filter)].concat()",
                (Some(_), false) => "query_of(filter)",
                (None, true) => "page.query()",
                (None, false) => "Vec::new()",
            };
            let body = if op.body.is_some() {
                "Some(body)"
            } else {
                "None"
            };
            let turbofish = if op.body.is_some() { "" } else { "::<(), _>" };
            let _ = writeln!(
                out,
                "        self.call{turbofish}(Method::{}, {path}, {query}, {body}).await",
                op.method
            );
        }
    }
    out.push_str("    }\n");
}

/// Reads a checked-in file of the workspace.
pub fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
}

/// Writes every file generated from the code and the checked-in contracts; returns the ones
/// that changed. The native catalog is re-flagged (`implemented`) but not re-extracted.
pub fn write_all() -> std::io::Result<Vec<&'static str>> {
    let contract = contract_text();
    let parsed: Value = serde_json::from_str(&contract).expect("JSON");
    let catalog =
        native::with_implemented(serde_json::from_str(&read(native::CATALOG)).expect("JSON"));
    let routes: Value = serde_json::from_str(&read(desktop::ROUTES)).expect("JSON");
    write_files([
        (CONTRACT, contract.clone()),
        (GENERATED_CLIENT, generate_client(&parsed)),
        (native::CATALOG, native::catalog_text(&catalog)),
        (
            native::GENERATED_NAMESPACES,
            native::generate_namespaces(&catalog),
        ),
        (desktop::GENERATED_ROUTES, desktop::generate_routes(&routes)),
        (desktop::GENERATED_CLIENT, desktop::generate_client(&routes)),
        (
            python::GENERATED_OPERATIONS,
            python::generate_operations(&parsed),
        ),
        (
            python::GENERATED_DESKTOP_ROUTES,
            python::generate_desktop_routes(&routes),
        ),
        (
            native::RUNTIMES_DOC,
            native::with_method_table(&read(native::RUNTIMES_DOC), &catalog),
        ),
    ])
}

/// Re-extracts the native catalog and the Desktop routes from the installed hermes-agent,
/// then regenerates.
pub fn write_catalog() -> Result<Vec<&'static str>, String> {
    let catalog = native::with_implemented(native::extract()?);
    let routes = desktop::extract()?;
    let mut changed = write_files([
        (native::CATALOG, native::catalog_text(&catalog)),
        (desktop::ROUTES, native::catalog_text(&routes)),
    ])
    .map_err(|e| e.to_string())?;
    changed.extend(write_all().map_err(|e| e.to_string())?);
    Ok(changed)
}

fn write_files<const N: usize>(
    files: [(&'static str, String); N],
) -> std::io::Result<Vec<&'static str>> {
    let mut changed = Vec::new();
    for (path, text) in files {
        let full = root().join(path);
        if std::fs::read_to_string(&full).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&full, text)?;
            changed.push(path);
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = "run `cargo xtask codegen` and commit the result";

    #[test]
    fn the_checked_in_contract_matches_the_server() {
        assert!(
            read(CONTRACT) == contract_text(),
            "{CONTRACT} differs from the server's code: {FIX}"
        );
    }

    #[test]
    fn the_generated_client_matches_the_contract() {
        let contract: Value = serde_json::from_str(&read(CONTRACT)).expect("JSON");
        assert!(
            read(GENERATED_CLIENT) == generate_client(&contract),
            "{GENERATED_CLIENT} differs from the contract: {FIX}"
        );
    }

    #[test]
    fn the_python_operations_match_the_contract() {
        let contract: Value = serde_json::from_str(&read(CONTRACT)).expect("JSON");
        assert!(
            read(python::GENERATED_OPERATIONS) == python::generate_operations(&contract),
            "{} differs from the contract: {FIX}",
            python::GENERATED_OPERATIONS
        );
        let routes: Value = serde_json::from_str(&read(desktop::ROUTES)).expect("JSON");
        assert!(
            read(python::GENERATED_DESKTOP_ROUTES) == python::generate_desktop_routes(&routes),
            "{} differs from the routes: {FIX}",
            python::GENERATED_DESKTOP_ROUTES
        );
    }

    #[test]
    fn the_catalog_marks_exactly_the_methods_our_runtime_implements() {
        let catalog: Value = serde_json::from_str(&read(native::CATALOG)).expect("JSON");
        assert!(
            read(native::CATALOG) == native::catalog_text(&native::with_implemented(catalog)),
            "{} has stale `implemented` flags: {FIX}",
            native::CATALOG
        );
        let names: Vec<String> =
            serde_json::from_str::<Value>(&read(native::CATALOG)).unwrap()["methods"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["name"].as_str().unwrap().to_owned())
                .collect();
        for method in hermes_runtime::IMPLEMENTED_METHODS {
            assert!(
                names.iter().any(|n| n == method),
                "`{method}` is not a Hermes 0.19 method"
            );
        }
    }

    #[test]
    fn the_method_table_of_the_runtime_docs_matches_the_catalog() {
        let catalog: Value = serde_json::from_str(&read(native::CATALOG)).expect("JSON");
        let doc = read(native::RUNTIMES_DOC);
        assert!(
            doc == native::with_method_table(&doc, &catalog),
            "the method table of {} differs from the catalog: {FIX}",
            native::RUNTIMES_DOC
        );
    }

    #[test]
    fn the_native_namespaces_match_the_catalog() {
        let catalog: Value = serde_json::from_str(&read(native::CATALOG)).expect("JSON");
        assert!(
            read(native::GENERATED_NAMESPACES) == native::generate_namespaces(&catalog),
            "{} differs from the catalog: {FIX}",
            native::GENERATED_NAMESPACES
        );
    }

    #[test]
    fn every_administering_method_says_so_in_its_generated_doc() {
        let catalog: Value = serde_json::from_str(&read(native::CATALOG)).expect("JSON");
        let generated = read(native::GENERATED_NAMESPACES);
        let admin: Vec<&str> = catalog["methods"]
            .as_array()
            .expect("methods")
            .iter()
            .filter(|m| m["admin"] == true)
            .map(|m| m["name"].as_str().expect("name"))
            .collect();
        assert!(!admin.is_empty(), "the catalog marks administering methods");
        for name in admin {
            let doc = format!("/// `{name}` (");
            let line = generated
                .lines()
                .find(|l| l.trim_start().starts_with(&doc))
                .unwrap_or_else(|| panic!("`{name}` has no generated doc"));
            assert!(
                line.contains("admin: administers the whole runtime, even through a profile"),
                "`{name}`'s doc does not say it administers the runtime: {line}"
            );
        }
    }

    /// Needs the real hermes-agent installed (`scripts/hermes-venv`, which `scripts/test` runs).
    #[test]
    fn the_catalog_is_what_the_extractor_reads_from_the_real_hermes_0_19_0() {
        let extracted = native::extract().unwrap_or_else(|e| panic!("{e}"));
        let checked_in: Value = serde_json::from_str(&read(native::CATALOG)).expect("JSON");
        assert_eq!(extracted["hermes_agent_version"], "0.19.0");
        assert!(
            extracted == native::without_implemented(checked_in),
            "{} differs from what {} reads from the installed package: run \
             `cargo xtask catalog` and review the diff",
            native::CATALOG,
            native::EXTRACTOR
        );
    }

    #[test]
    fn the_desktop_route_table_and_client_match_the_routes() {
        let routes: Value = serde_json::from_str(&read(desktop::ROUTES)).expect("JSON");
        assert!(
            read(desktop::GENERATED_ROUTES) == desktop::generate_routes(&routes),
            "{} differs from the routes: {FIX}",
            desktop::GENERATED_ROUTES
        );
        assert!(
            read(desktop::GENERATED_CLIENT) == desktop::generate_client(&routes),
            "{} differs from the routes: {FIX}",
            desktop::GENERATED_CLIENT
        );
    }

    /// Needs the real hermes-agent installed (`scripts/hermes-venv`, which `scripts/test` runs).
    #[test]
    fn the_desktop_routes_are_what_the_extractor_reads_from_the_real_hermes_0_19_0() {
        let extracted = desktop::extract().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(extracted["hermes_agent_version"], "0.19.0");
        assert!(
            extracted == serde_json::from_str::<Value>(&read(desktop::ROUTES)).expect("JSON"),
            "{} differs from what {} reads from the installed package: run \
             `cargo xtask catalog` and review the diff",
            desktop::ROUTES,
            desktop::EXTRACTOR
        );
    }

    /// Rust sources under `dir`, recursively.
    fn rust_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                rust_files(&path, found);
            } else if path.extension().is_some_and(|x| x == "rs") {
                found.push(path);
            }
        }
    }

    /// The protocol is declared once, in `hermes-native`: product code (libraries, binaries,
    /// examples) names native methods and events through its types, never as strings. Tests may
    /// use names as data (the conformance suite must stay independent of our declarations).
    #[test]
    fn no_native_method_or_event_name_is_written_out_beyond_hermes_native() {
        let catalog: Value = serde_json::from_str(&read(native::CATALOG)).expect("JSON");
        let mut names: Vec<&str> = catalog["methods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        names.extend(
            catalog["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str),
        );
        // Names without a dot (`error`, `reaction`) are ordinary words and JSON keys too.
        names.retain(|n| n.contains('.'));
        let mut files = Vec::new();
        for entry in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
            if entry.file_name() != "hermes-native" {
                rust_files(&entry.path().join("src"), &mut files);
                rust_files(&entry.path().join("examples"), &mut files);
            }
        }
        rust_files(&root().join("examples"), &mut files);
        rust_files(&root().join("xtask/src"), &mut files);
        assert!(files.len() > 20, "the scan found the sources: {files:?}");
        // The control plane's own turn log (another protocol) has an event of the same name.
        let own_protocol = [("edith-types/src/events.rs", concat!("message", ".delta"))];
        let mut found = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for name in &names {
                let allowed = own_protocol
                    .iter()
                    .any(|(path, n)| file.ends_with(path) && n == name);
                if !allowed && text.contains(&format!("\"{name}\"")) {
                    found.push(format!("{}: \"{name}\"", file.display()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "use the declarations of hermes-native instead: {found:#?}"
        );
    }

    /// The crate graph of `docs/architecture.md`: each crate uses only the workspace crates
    /// listed for it (normal dependencies; `?` marks an optional one).
    #[test]
    fn crates_depend_only_on_what_the_architecture_allows() {
        let allowed: &[(&str, &[&str])] = &[
            ("edith-types", &[]),
            ("hermes-native", &[]),
            ("edith-mcp", &[]),
            ("testkit", &[]),
            ("edith-sqlite", &[]),
            ("edith-store", &["edith-sqlite", "edith-types"]),
            (
                "hermes-runtime",
                &["edith-mcp", "edith-sqlite", "hermes-native"],
            ),
            (
                "edith-server",
                &[
                    "edith-mcp",
                    "edith-store",
                    "edith-types",
                    "hermes-native",
                    "hermes-runtime?",
                ],
            ),
            (
                "hermes-sdk",
                &[
                    "edith-mcp?",
                    "edith-server?",
                    "edith-types",
                    "hermes-native",
                ],
            ),
            ("edith-cli", &["edith-server", "edith-types", "hermes-sdk"]),
            ("edith-hermes-py", &["edith-types", "hermes-sdk"]),
            (
                "xtask",
                &["edith-server", "hermes-native", "hermes-runtime"],
            ),
        ];
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let output = std::process::Command::new(cargo)
            .current_dir(root())
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .output()
            .expect("cargo metadata runs");
        let metadata: Value = serde_json::from_slice(&output.stdout).expect("metadata");
        let packages = metadata["packages"].as_array().unwrap();
        let members: BTreeSet<&str> = packages
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            members.len(),
            allowed.len(),
            "a crate is missing from this list: {members:?}"
        );
        for package in packages {
            let name = package["name"].as_str().unwrap();
            let mut deps: Vec<String> = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null() && members.contains(d["name"].as_str().unwrap()))
                .map(|d| {
                    let optional = if d["optional"] == true { "?" } else { "" };
                    format!("{}{optional}", d["name"].as_str().unwrap())
                })
                .collect();
            deps.sort();
            let expected = allowed
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, d)| d.to_vec());
            assert_eq!(
                Some(deps.iter().map(String::as_str).collect()),
                expected,
                "{name}"
            );
        }
    }

    /// A `Hermes::remote` user does not compile a server, a database or the runtime.
    #[test]
    fn a_remote_only_sdk_build_needs_no_server_database_or_runtime() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let tree = std::process::Command::new(cargo)
            .current_dir(root())
            .args(["tree", "--offline", "--locked", "-p", "hermes-sdk"])
            .args(["--no-default-features", "-e", "normal", "--prefix", "none"])
            .output()
            .expect("cargo tree runs");
        assert!(
            tree.status.success(),
            "{}",
            String::from_utf8_lossy(&tree.stderr)
        );
        let tree = String::from_utf8(tree.stdout).unwrap();
        assert!(tree.contains("hermes-native"), "{tree}");
        for heavy in [
            "axum ",
            "sqlx ",
            "hermes-runtime ",
            "edith-server ",
            "edith-store ",
            "edith-sqlite ",
        ] {
            assert!(
                !tree.contains(heavy),
                "a remote-only build pulls in {heavy}:\n{tree}"
            );
        }
    }

    #[test]
    fn every_operation_has_a_snake_case_resource_verb_id() {
        let contract: Value = serde_json::from_str(&read(CONTRACT)).expect("JSON");
        let mut uses = BTreeSet::new();
        for op in operations(&contract, &mut uses) {
            assert!(
                op.id.contains('_') && op.id.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "operationId `{}` is not <resource>_<verb>",
                op.id
            );
        }
    }
}
