#!/usr/bin/env python3
"""Extracts the Hermes Desktop REST routes this project binds from an installed hermes-agent.

Reads the package's sources (it never imports or runs them) and prints, as JSON, for each
route in BOUND: its method and path, the handler's path and query parameters (name, type,
whether required, default), the fields of its JSON body (from the pydantic model the handler
takes), and whether it is public (reachable without the session token); plus the
hermes-agent version and a SHA-256 of the files read.

BOUND is this project's choice: which routes the SDK's `HermesDesktop` binds, the operation
name each gets (`<resource>_<verb>`, as in the control-plane contract) and its group (what
`capabilities()` reports). Everything else is read from the sources.

Usage: desktop-routes.py SITE_PACKAGES   (prints the routes on stdout)
"""

import ast
import hashlib
import importlib.metadata
import json
import sys
from pathlib import Path

SERVER = "hermes_cli/web_server.py"
PUBLIC_PATHS = "hermes_cli/dashboard_auth/public_paths.py"

BOUND = [
    # (group, operation, method, path)
    ("status", "status_get", "GET", "/api/status"),
    ("sessions", "session_list", "GET", "/api/sessions"),
    ("sessions", "session_search", "GET", "/api/sessions/search"),
    ("sessions", "session_get", "GET", "/api/sessions/{session_id}"),
    ("sessions", "session_messages", "GET", "/api/sessions/{session_id}/messages"),
    ("sessions", "session_update", "PATCH", "/api/sessions/{session_id}"),
    ("sessions", "session_delete", "DELETE", "/api/sessions/{session_id}"),
    ("profiles", "profile_list", "GET", "/api/profiles"),
    ("profiles", "profile_active", "GET", "/api/profiles/active"),
    ("profiles", "profile_create", "POST", "/api/profiles"),
    ("profiles", "profile_rename", "PATCH", "/api/profiles/{name}"),
    ("profiles", "profile_delete", "DELETE", "/api/profiles/{name}"),
    ("cron", "cron_job_list", "GET", "/api/cron/jobs"),
    ("cron", "cron_job_create", "POST", "/api/cron/jobs"),
    ("cron", "cron_job_get", "GET", "/api/cron/jobs/{job_id}"),
    ("cron", "cron_job_update", "PUT", "/api/cron/jobs/{job_id}"),
    ("cron", "cron_job_delete", "DELETE", "/api/cron/jobs/{job_id}"),
    ("cron", "cron_job_pause", "POST", "/api/cron/jobs/{job_id}/pause"),
    ("cron", "cron_job_resume", "POST", "/api/cron/jobs/{job_id}/resume"),
    ("cron", "cron_job_trigger", "POST", "/api/cron/jobs/{job_id}/trigger"),
    ("cron", "cron_job_runs", "GET", "/api/cron/jobs/{job_id}/runs"),
    ("skills", "skill_list", "GET", "/api/skills"),
    ("skills", "skill_toggle", "PUT", "/api/skills/toggle"),
    ("toolsets", "toolset_list", "GET", "/api/tools/toolsets"),
    ("toolsets", "toolset_update", "PUT", "/api/tools/toolsets/{name}"),
    ("config", "config_get", "GET", "/api/config"),
    ("config", "config_update", "PUT", "/api/config"),
    ("config", "config_schema", "GET", "/api/config/schema"),
    ("fs", "fs_list", "GET", "/api/fs/list"),
    ("fs", "fs_read_text", "GET", "/api/fs/read-text"),
    ("fs", "fs_write_text", "POST", "/api/fs/write-text"),
    ("git", "git_status", "GET", "/api/git/status"),
    ("git", "git_branches", "GET", "/api/git/branches"),
    ("plugins", "plugin_list", "GET", "/api/dashboard/plugins"),
    ("mcp_catalog", "mcp_catalog_list", "GET", "/api/mcp/catalog"),
]

VERBS = {"get", "post", "put", "patch", "delete"}
# Handler parameters FastAPI fills from the request itself, not from the query string.
INJECTED = {"Request", "Response", "BackgroundTasks", "WebSocket"}
SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
           "dict": "object", "Dict": "object", "Any": "any"}


def type_of(node):
    """(type, nullable) of an annotation, in this contract's small vocabulary:
    string, integer, number, boolean, object, any, array<T>."""
    if node is None:
        return "any", False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "object", False          # a forward reference to another model
    if isinstance(node, ast.Name):
        return SCALARS.get(node.id, "object"), False
    if isinstance(node, ast.Subscript):
        outer = node.value.id if isinstance(node.value, ast.Name) else ast.unparse(node.value)
        inner = node.slice
        if outer == "Optional":
            return type_of(inner)[0], True
        if outer in ("List", "list"):
            return f"array<{type_of(inner)[0]}>", False
        if outer in ("Dict", "dict"):
            return "object", False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = node.left, node.right
        if isinstance(right, ast.Constant) and right.value is None:
            return type_of(left)[0], True
    raise SystemExit(f"unknown annotation: {ast.unparse(node)}")


def literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def field(name, annotation, default):
    kind, nullable = type_of(annotation)
    entry = {"name": name, "type": kind, "required": default is None}
    if default is not None:
        value = literal(default)
        nullable = nullable or value is None
        if value is not None:
            entry["default"] = value
    entry["nullable"] = nullable
    return entry


def models(tree):
    """The pydantic models of the module: name -> body fields."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "BaseModel" for b in node.bases):
            found[node.name] = [
                field(item.target.id, item.annotation, item.value)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            ]
    return found


def handlers(tree):
    """(method, path) -> the function registered for it with `@app.<verb>(path)`."""
    found = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:
            if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)
                    and isinstance(dec.func.value, ast.Name) and dec.func.value.id == "app"
                    and dec.func.attr in VERBS and dec.args
                    and isinstance(dec.args[0], ast.Constant)):
                found[(dec.func.attr.upper(), dec.args[0].value)] = node
    return found


def route(entry, fn, body_models, public):
    group, operation, method, path = entry
    args = fn.args.args
    defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
    path_names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    path_params, query, body = [], [], None
    for arg, default in zip(args, defaults):
        annotation = arg.annotation
        name = annotation.id if isinstance(annotation, ast.Name) else None
        if name in INJECTED:
            continue
        if name in body_models:
            body = {"model": name, "fields": body_models[name]}
        elif arg.arg in path_names:
            path_params.append(field(arg.arg, annotation, None))
        else:
            query.append(field(arg.arg, annotation, default))
    assert [p["name"] for p in path_params] == path_names, f"{path}: path params"
    return {
        "operation": operation, "group": group, "method": method, "path": path,
        "handler": fn.name, "public": path in public,
        "path_params": path_params, "query": query, "body": body,
    }


def public_paths(source):
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "PUBLIC_API_PATHS":
            call = node.value
            return {e.value for e in call.args[0].elts if isinstance(e, ast.Constant)}
    raise SystemExit("PUBLIC_API_PATHS not found")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    site = Path(sys.argv[1])
    sources = {name: (site / name).read_text() for name in (SERVER, PUBLIC_PATHS)}
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + sources[name].encode())
    tree = ast.parse(sources[SERVER])
    found = handlers(tree)
    body_models = models(tree)
    public = public_paths(sources[PUBLIC_PATHS])
    routes = []
    for entry in BOUND:
        key = (entry[2], entry[3])
        if key not in found:
            raise SystemExit(f"{entry[2]} {entry[3]} is not served by this hermes-agent")
        routes.append(route(entry, found[key], body_models, public))
    print(json.dumps({
        "hermes_agent_version": importlib.metadata.version("hermes-agent"),
        "source": {"files": sorted(sources), "sha256": digest.hexdigest()},
        "auth_header": "X-Hermes-Session-Token",
        "routes": routes,
    }, indent=2))



if __name__ == "__main__":
    main()
