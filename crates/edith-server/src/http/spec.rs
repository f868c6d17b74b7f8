//! Declares each operation once: the same call adds the axum route and its OpenAPI entry, so the
//! served surface and the checked-in contract cannot drift apart.

use std::collections::HashMap;

use axum::Router;
use axum::http::Method;
use axum::routing::MethodRouter;
use edith_types::{Scope, rules};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::state::AppState;

/// Who may call an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (only `/healthz`).
    Public,
    /// A key holding this scope (or a wider one).
    Key(Scope),
    /// No control-plane key: the handler checks a token of its own (the MCP endpoint a runtime
    /// calls checks the instance's MCP token) and refuses everyone else with a 401.
    OwnToken,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Access::Public => f.write_str("anyone"),
            Access::Key(scope) => write!(f, "a key with `{}`", scope.as_str()),
            Access::OwnToken => f.write_str("its own token"),
        }
    }
}

/// The access rule of each route, by route pattern and method.
pub type AccessRules = HashMap<&'static str, HashMap<Method, Access>>;

/// What the router needs to know of each route besides its handler.
#[derive(Default)]
pub struct Rules {
    pub access: AccessRules,
    /// The routes (pattern, method) served by the replica owning the path's instance
    /// (`http::forward`).
    pub on_owner: std::collections::HashSet<(&'static str, Method)>,
}

/// One operation's contract.
pub struct Op {
    access: Access,
    /// Served by the replica that owns the path's instance (see [`Op::on_owner`]).
    on_owner: bool,
    method: &'static str,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    body: Option<Value>,
    /// Status and the response object (description, content, headers).
    responses: Vec<(u16, Value)>,
    /// For a route that forwards another contract's routes: that contract.
    passthrough: Option<&'static str>,
    /// Query parameters: name, description, schema.
    query: Vec<(String, String, Value)>,
    headers: Vec<(&'static str, &'static str, Value)>,
    /// The type whose properties are the list's filters.
    filter: Option<String>,
}

/// Builds the router, the OpenAPI document and the access rules together.
pub struct Api {
    router: Router<AppState>,
    paths: Map<String, Value>,
    generator: SchemaGenerator,
    rules: Rules,
}

impl Op {
    fn new(method: &'static str, path: &'static str, id: &'static str) -> Self {
        // Reading needs `read`; anything that changes something needs `write`.
        let scope = if method == "get" {
            Scope::Read
        } else {
            Scope::Write
        };
        Self {
            access: Access::Key(scope),
            // What changes something in an instance may touch its runtime.
            on_owner: method != "get" && path.starts_with("/v1/instances/{instance_id}/"),
            method,
            path,
            id,
            summary: "",
            body: None,
            responses: Vec::new(),
            query: Vec::new(),
            headers: Vec::new(),
            filter: None,
            passthrough: None,
        }
    }

    /// Whether the operation only reads (GET).
    pub fn is_read(&self) -> bool {
        self.method == "get"
    }

    /// Forwards the routes of `contract` (its last path parameter, `{*path}`, is one of their
    /// paths); the SDK binds those routes from that contract, not this one.
    pub fn passthrough(mut self, contract: &'static str) -> Self {
        self.passthrough = Some(contract);
        self
    }

    pub fn get(path: &'static str, id: &'static str) -> Self {
        Self::new("get", path, id)
    }

    pub fn post(path: &'static str, id: &'static str) -> Self {
        Self::new("post", path, id)
    }

    pub fn put(path: &'static str, id: &'static str) -> Self {
        Self::new("put", path, id)
    }

    pub fn patch(path: &'static str, id: &'static str) -> Self {
        Self::new("patch", path, id)
    }

    pub fn delete(path: &'static str, id: &'static str) -> Self {
        Self::new("delete", path, id)
    }

    /// Reads from the instance's runtime, so it is served by the replica owning the instance
    /// (what changes something in an instance always is).
    pub fn on_owner(mut self) -> Self {
        assert!(
            self.path.starts_with("/v1/instances/{instance_id}"),
            "only an instance's route has an owner"
        );
        self.on_owner = true;
        self
    }

    /// Callable without a key.
    pub fn public(mut self) -> Self {
        self.access = Access::Public;
        self
    }

    /// Needs `scope` rather than the method's default (`read` for GET, `write` otherwise).
    pub fn scope(mut self, scope: Scope) -> Self {
        self.access = Access::Key(scope);
        self
    }

    pub fn summary(mut self, summary: &'static str) -> Self {
        self.summary = summary;
        self
    }

    /// Marks the body (filled in with its schema when the op is added).
    pub fn body<T: JsonSchema>(mut self, api: &mut Api) -> Self {
        self.body = Some(api.generator.subschema_for::<T>().to_value());
        self
    }

    pub fn returns<T: JsonSchema>(
        mut self,
        api: &mut Api,
        status: u16,
        what: &'static str,
    ) -> Self {
        let schema = api.generator.subschema_for::<T>().to_value();
        self.responses.push((
            status,
            json!({"description": what, "content": {"application/json": {"schema": schema}}}),
        ));
        self
    }

    /// A `text/event-stream` reply whose `data:` lines are `T`, resumable with `Last-Event-ID`
    /// or `?after=`.
    pub fn streams<T: JsonSchema>(mut self, api: &mut Api, what: &'static str) -> Self {
        let content = event_stream::<T>(api);
        self.responses
            .push((200, json!({"description": what, "content": content})));
        self.headers.push((
            "Last-Event-ID",
            "Resume after this event sequence number.",
            json!({"type": "string", "pattern": rules::LAST_EVENT_ID}),
        ));
        self.query.push((
            "after".to_owned(),
            "Resume after this event sequence number (like `Last-Event-ID`).".to_owned(),
            json!({"type": "integer", "minimum": 0, "maximum": rules::SEQ_MAX}),
        ));
        self
    }

    /// Creates a resource whose event log is the reply: `201 Created`, a `text/event-stream` of
    /// `T` from the log's first event, and `Location` naming the log's own stream, where it is
    /// read again after `Last-Event-ID`. A retry with the request's `Idempotency-Key` is
    /// `303 See Other` to that `Location` (`http::idempotency`): the work is not done twice.
    pub fn starts_stream<T: JsonSchema>(mut self, api: &mut Api, what: &'static str) -> Self {
        let content = event_stream::<T>(api);
        let location = |what: &str| json!({"Location": {"description": what, "required": true, "schema": {"type": "string"}}});
        self.responses.push((
            201,
            json!({
                "description": what,
                "content": content,
                "headers": location("The new log's stream: read it again there, after `Last-Event-ID`."),
            }),
        ));
        self.responses.push((
            303,
            json!({
                "description": "A retry with the first request's `Idempotency-Key`: its log is at `Location`.",
                "headers": {
                    "Location": location("The log the first request started.")["Location"],
                    "Idempotent-Replayed": {"description": "Always `true`.", "schema": {"type": "string", "const": "true"}},
                },
            }),
        ));
        self
    }

    /// A WebSocket upgrade (101) whose server messages are `T`.
    pub fn upgrades<T: JsonSchema>(mut self, api: &mut Api, what: &'static str) -> Self {
        let schema = api.generator.subschema_for::<T>().to_value();
        self.responses.push((
            101,
            json!({
                "description": what,
                "content": {"application/json": {"schema": {"type": "string"}, "x-websocket-messages": schema}},
            }),
        ));
        self
    }

    /// A query parameter.
    pub fn query(mut self, name: &'static str, what: &'static str, schema: Value) -> Self {
        self.query.push((name.to_owned(), what.to_owned(), schema));
        self
    }

    /// Filters of a list, as query parameters: the properties of `T` (which the generated
    /// client takes as one argument, named by `x-edith-filter`).
    pub fn filtered<T: JsonSchema>(mut self, api: &mut Api) -> Self {
        let _ = api.generator.subschema_for::<T>();
        let name = T::schema_name().into_owned();
        let definition = api.generator.definitions()[&name].clone();
        let properties = definition["properties"]
            .as_object()
            .expect("a filter is an object");
        for (param, property) in properties {
            let what = property["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            self.query.push((param.clone(), what, not_null(property)));
        }
        self.filter = Some(name);
        self
    }

    /// `?cursor=&limit=` of a list of `Id`s (a cursor is the id of the last item seen).
    pub fn paginated<Id: JsonSchema>(mut self, api: &mut Api) -> Self {
        let cursor = api.generator.subschema_for::<Id>().to_value();
        self.query.push((
            "cursor".to_owned(),
            "The `next_cursor` of the previous page.".to_owned(),
            cursor,
        ));
        self.query.push((
            "limit".to_owned(),
            "Items per page, 1 to 200 (default 50).".to_owned(),
            json!({"type": "integer", "minimum": 1, "maximum": 200}),
        ));
        self
    }

    fn to_openapi(&self, generator: &mut SchemaGenerator) -> Value {
        let mut parameters: Vec<Value> = path_params(self.path)
            .map(|name| {
                let schema = id_schema(generator, name);
                json!({"name": name, "in": "path", "required": true, "schema": schema})
            })
            .collect();
        parameters.extend(self.query.iter().map(|(name, description, schema)| {
            json!({"name": name, "in": "query", "required": false, "description": description, "schema": schema})
        }));
        parameters.extend(self.headers.iter().map(|(name, description, schema)| {
            json!({"name": name, "in": "header", "required": false, "description": description, "schema": schema})
        }));
        if self.method == "post" {
            parameters.push(json!({
                "name": "Idempotency-Key", "in": "header", "required": false,
                "description": "Retrying with the same key and request returns the first reply \
                    (marked `Idempotent-Replayed: true`; where that reply streamed a log, a 303 to \
                    the log) instead of doing the work twice; the same key with another request \
                    is 409. Server errors and 429s are not kept: a retry runs again.",
                "schema": {"type": "string", "minLength": 1, "maxLength": 255}
            }));
        }
        let mut responses = Map::new();
        for (status, response) in &self.responses {
            responses.insert(status.to_string(), response.clone());
        }
        responses.insert(
            "default".to_owned(),
            json!({
                "description": "An error, as RFC 9457 problem details with a stable `code`.",
                "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            }),
        );
        let mut op = json!({
            "operationId": self.id,
            "summary": self.summary,
            "parameters": parameters,
            "responses": responses,
        });
        match self.access {
            Access::Public => op["security"] = json!([]),
            Access::Key(scope) => {
                op["security"] = json!([{"apiKey": []}]);
                op["x-edith-scope"] = json!(scope.as_str());
            }
            // `Op` offers no way to set it: only routes outside the contract check their own.
            Access::OwnToken => unreachable!("a contract operation with its own token"),
        }
        if let Some(filter) = &self.filter {
            op["x-edith-filter"] = json!(filter);
        }
        if let Some(contract) = self.passthrough {
            op["x-edith-passthrough"] = json!(contract);
        }
        if let Some(body) = &self.body {
            op["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": body}}});
        }
        op
    }
}

/// The content of a `text/event-stream` reply whose `data:` lines are `T`: the schema of one event
/// (as OpenAPI 3.1 tools read an event stream's schema), its `id`, its `event` name and its
/// `data`, a JSON document of `T` (`contentSchema`).
fn event_stream<T: JsonSchema>(api: &mut Api) -> Value {
    let schema = api.generator.subschema_for::<T>().to_value();
    let event = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "event": {"type": "string"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": schema,
            },
        },
        "required": ["data"],
    });
    json!({"text/event-stream": {"schema": event}})
}

/// The schema of an optional value without its `null` (a query parameter is absent instead),
/// and without the description, which the parameter carries.
fn not_null(schema: &Value) -> Value {
    let variants = schema["anyOf"].as_array().map(|variants| {
        variants
            .iter()
            .filter(|v| v["type"] != "null")
            .cloned()
            .collect::<Vec<_>>()
    });
    let mut schema = match variants {
        Some(mut variants) if variants.len() == 1 => variants.remove(0),
        _ => schema.clone(),
    };
    if let Some(types) = schema["type"].as_array() {
        let types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if types.len() == 1 {
            schema["type"] = types[0].clone();
        }
    }
    if let Some(object) = schema.as_object_mut() {
        object.remove("description");
        object.remove("default");
    }
    schema
}

/// The schema of a path parameter: the id type it holds, with its pattern.
fn id_schema(generator: &mut SchemaGenerator, param: &str) -> Value {
    use edith_types::*;
    let schema = match param {
        "path" => {
            return json!({"type": "string", "description": "A path of the forwarded contract, \
                without its leading `/` (e.g. `api/sessions`)."});
        }
        "instance_id" => generator.subschema_for::<InstanceId>(),
        "profile_id" => generator.subschema_for::<ProfileId>(),
        "session_id" => generator.subschema_for::<SessionId>(),
        "turn_id" => generator.subschema_for::<TurnId>(),
        "tool_id" => generator.subschema_for::<ToolId>(),
        "tool_host_id" => generator.subschema_for::<ToolHostId>(),
        "job_id" => generator.subschema_for::<JobId>(),
        "key_id" => generator.subschema_for::<ApiKeyId>(),
        other => panic!("path parameter `{other}` has no id type: add it here"),
    };
    schema.to_value()
}

fn path_params(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter_map(|seg| {
        seg.strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .map(|s| s.trim_start_matches('*'))
    })
}

/// A route pattern as OpenAPI writes it (`{*path}`, axum's catch-all, is `{path}`).
pub(super) fn contract_path(pattern: &str) -> String {
    pattern.replace("{*", "{")
}

impl Api {
    pub fn new() -> Self {
        let generator = SchemaSettings::draft2020_12()
            .with(|s| s.definitions_path = "#/components/schemas".into())
            .into_generator();
        let mut api = Self {
            router: Router::new(),
            paths: Map::new(),
            generator,
            rules: Rules::default(),
        };
        api.generator.subschema_for::<edith_types::Problem>();
        api
    }

    /// Adds the operation's route and contract.
    pub fn add(&mut self, op: Op, handler: MethodRouter<AppState>) {
        let entry = self
            .paths
            .entry(contract_path(op.path))
            .or_insert_with(|| json!({}));
        entry[op.method] = op.to_openapi(&mut self.generator);
        let method = Method::from_bytes(op.method.to_uppercase().as_bytes()).expect("a method");
        if op.on_owner {
            self.rules.on_owner.insert((op.path, method.clone()));
        }
        self.rules
            .access
            .entry(op.path)
            .or_default()
            .insert(method, op.access);
        let router = std::mem::take(&mut self.router);
        self.router = router.route(op.path, handler);
    }

    /// A route served outside the public contract (the console's files, `/metrics`, the MCP
    /// endpoint runtimes call), with the access rule of each of its methods. There is no way to
    /// add a route without a rule: a method the rule leaves out needs a key like an unknown
    /// route does.
    pub fn add_unlisted(
        &mut self,
        path: &'static str,
        access: &[(Method, Access)],
        handler: MethodRouter<AppState>,
    ) {
        let rules = self.rules.access.entry(path).or_default();
        for (method, rule) in access {
            rules.insert(method.clone(), *rule);
        }
        let router = std::mem::take(&mut self.router);
        self.router = router.route(path, handler);
    }

    pub fn finish(mut self) -> (Router<AppState>, Value, Rules) {
        let schemas = self.generator.take_definitions(true);
        let doc = json!({
            "openapi": "3.1.0",
            "info": {
                "title": "EDITH control plane",
                "version": env!("CARGO_PKG_VERSION"),
                "description": "Manage Hermes runtime instances, profiles, sessions, turns, tools and provisioning jobs.",
            },
            "paths": self.paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {"apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key. Each operation names the scope it needs in \
                        `x-edith-scope`: `read` < `write` < `admin`."
                }},
            },
        });
        (self.router, doc, self.rules)
    }
}
