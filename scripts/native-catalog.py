#!/usr/bin/env python3
"""Extracts the Hermes gateway's native catalog from an installed hermes-agent package.

Reads the package's sources (it never imports or runs them) and prints, as JSON:
- every JSON-RPC method registered in tui_gateway/server.py (`@method("…")` and
  `@_projects_method("…")`), with the params its handler reads, the keys of the result
  objects it builds where they are literal, the error codes it can answer, whether it runs on
  the worker pool (`_LONG_HANDLERS`), its scope and whether it is administrative;
- every event type the gateway emits;
- the hermes-agent version and a SHA-256 of the files read.

Scope: `profile` when the handler takes a `profile` param (it re-binds HERMES_HOME per call),
`session` when it reads `session_id` (it acts on a live session), `instance` otherwise.
`admin` is this project's classification (ADMIN below): methods that change the runtime's
configuration, credentials or installed components, or run commands outside a session.

Usage: native-catalog.py SITE_PACKAGES   (prints the catalog on stdout)
"""

import ast
import hashlib
import json
import sys
from pathlib import Path

ADMIN_PREFIXES = (
    "config.set", "reload.", "shell.exec", "cli.exec", "process.", "plugins.manage",
    "skills.manage", "skills.reload", "tools.configure", "model.save_key", "model.disconnect",
    "setup.", "billing.", "subscription.", "handoff.", "rollback.restore", "cron.manage",
    "browser.manage", "delegation.pause", "projects.create", "projects.update",
    "projects.delete", "projects.archive", "projects.add_folder", "projects.remove_folder",
    "projects.set_primary", "projects.set_active", "projects.record_repos", "learning.delete",
    "learning.edit", "pet.remove", "pet.select", "pet.rename", "pet.disable", "pet.generate",
    "pet.hatch", "voice.toggle",
)

METHOD_DECORATORS = {"method", "_projects_method"}


def decorated_name(fn):
    for dec in fn.decorator_list:
        if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name)
                and dec.func.id in METHOD_DECORATORS and dec.args
                and isinstance(dec.args[0], ast.Constant) and isinstance(dec.args[0].value, str)):
            return dec.args[0].value
    return None


def const_str(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class Reads(ast.NodeVisitor):
    """What one function does with its `params` argument, and what it answers."""

    def __init__(self, params_name, arg_names):
        self.params_name = params_name
        self.arg_names = arg_names
        self.keys = set()
        self.key_args = set()          # positions of args used as a key: params.get(arg)
        self.helper_calls = []         # (helper name, position of params, constant args)
        self.result_keys = set()
        self.has_literal_result = False
        self.codes = set()

    def is_params(self, node):
        return isinstance(node, ast.Name) and node.id == self.params_name

    def note_key(self, node):
        key = const_str(node)
        if key is not None:
            self.keys.add(key)
        elif isinstance(node, ast.Name) and node.id in self.arg_names:
            self.key_args.add(self.arg_names.index(node.id))

    def visit_Call(self, node):
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "get" and self.is_params(func.value)
                and node.args):
            self.note_key(node.args[0])
        if isinstance(func, ast.Name):
            if func.id == "_ok" and len(node.args) > 1 and isinstance(node.args[1], ast.Dict):
                self.has_literal_result = True
                self.result_keys.update(k for k in map(const_str, node.args[1].keys) if k)
            if func.id in ("_err", "_db_unavailable_error"):
                code = node.args[1] if func.id == "_err" and len(node.args) > 1 else None
                if isinstance(code, ast.Constant) and isinstance(code.value, int):
                    self.codes.add(code.value)
                for kw in node.keywords:
                    if kw.arg == "code" and isinstance(kw.value, ast.Constant):
                        self.codes.add(kw.value.value)
            for position, arg in enumerate(node.args):
                if self.is_params(arg):
                    constants = {i: const_str(a) for i, a in enumerate(node.args) if const_str(a)}
                    self.helper_calls.append((func.id, position, constants))
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if self.is_params(node.value):
            self.note_key(node.slice)
        self.generic_visit(node)

    def visit_Compare(self, node):
        if (len(node.ops) == 1 and isinstance(node.ops[0], ast.In)
                and self.is_params(node.comparators[0])):
            self.note_key(node.left)
        self.generic_visit(node)


def analyse(fn, params_position):
    args = [a.arg for a in fn.args.args]
    name = args[params_position] if params_position < len(args) else "params"
    reads = Reads(name, args)
    for statement in fn.body:
        reads.visit(statement)
    return reads


def method_facts(fn, functions):
    """Params, result keys and codes of a handler, following helpers it passes `params` to."""
    reads = analyse(fn, 1)
    keys, codes = set(reads.keys), set(reads.codes)
    seen = set()
    pending = list(reads.helper_calls)
    while pending:
        helper, position, constants = pending.pop()
        if helper in seen or helper not in functions:
            continue
        seen.add(helper)
        helper_reads = analyse(functions[helper], position)
        keys |= helper_reads.keys
        codes |= helper_reads.codes
        keys |= {constants[i] for i in helper_reads.key_args if i in constants}
        pending.extend(helper_reads.helper_calls)
    result = sorted(reads.result_keys) if reads.has_literal_result else None
    return sorted(keys), result, sorted(codes)


def long_handlers(tree):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_LONG_HANDLERS" for t in node.targets)):
            return {v for v in map(const_str, ast.walk(node.value)) if v}
    return set()


def emitted_events(trees):
    events = set()
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else (
                node.func.attr if isinstance(node.func, ast.Attribute) else None)
            if name in ("_emit", "emit", "_block") and const_str(node.args[0]):
                event = const_str(node.args[0])
                if event.replace(".", "").replace("_", "").isalnum() and event.islower():
                    events.add(event)
            if name == "_emit_approval_request":
                events.add("approval.request")
        # The first frame of every connection is written directly, not through _emit.
        if any(const_str(n) == "gateway.ready" for n in ast.walk(tree)):
            events.add("gateway.ready")
    return sorted(events)


def version_of(site_packages):
    for dist in sorted(site_packages.glob("hermes_agent-*.dist-info")):
        for line in (dist / "METADATA").read_text().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise SystemExit("hermes-agent is not installed in " + str(site_packages))


def scope_of(params):
    if "profile" in params:
        return "profile"
    if "session_id" in params:
        return "session"
    return "instance"


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    site_packages = Path(sys.argv[1])
    gateway = site_packages / "tui_gateway"
    files = sorted(p for p in gateway.glob("*.py"))
    digest = hashlib.sha256()
    trees = {}
    for path in files:
        source = path.read_bytes()
        digest.update(path.name.encode() + b"\0" + source + b"\0")
        trees[path.name] = ast.parse(source)
    server = trees["server.py"]
    functions = {n.name: n for n in server.body if isinstance(n, ast.FunctionDef)}
    pooled = long_handlers(server)
    methods = []
    for node in server.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        name = decorated_name(node)
        if name is None:
            continue
        params, result, codes = method_facts(node, functions)
        methods.append({
            "name": name,
            "params": params,
            "result_keys": result,
            "error_codes": codes,
            "scope": scope_of(params),
            "admin": name.startswith(ADMIN_PREFIXES),
            "pooled": name in pooled,
        })
    methods.sort(key=lambda m: m["name"])
    catalog = {
        "hermes_agent_version": version_of(site_packages),
        "source": {
            "files": ["tui_gateway/" + p.name for p in files],
            "sha256": digest.hexdigest(),
        },
        "error_codes": {
            "-32700": "parse error", "-32600": "invalid request", "-32601": "unknown method",
            "-32602": "invalid params", "-32000": "handler error", "-32603": "dispatch crash",
            "4001": "live session not found", "4006": "session_id required",
            "4007": "stored session not found", "4009": "busy / no pending request",
            "4090": "active-session limit",
        },
        "methods": methods,
        "events": emitted_events(trees.values()),
    }
    json.dump(catalog, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
