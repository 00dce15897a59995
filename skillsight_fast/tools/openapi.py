"""OpenAPI 3 operations as tools: each ``METHOD /path`` of a spec becomes one tool ``api/operation``.

A tool's fields, from the operation:

* ``name``: the ``operationId``, else ``method_path`` (``get_pets_id`` for ``GET /pets/{id}``);
* ``title``: the ``summary``; ``description``: the ``description`` (else the summary), then a last
  line ``HTTP: METHOD /path``;
* ``input_schema``: an object with one property per parameter (path, query, header and cookie
  parameters, the path item's and the operation's; each the parameter's schema plus its
  ``description`` and an ``x-in`` naming where it goes) and ``body`` for a request body (the
  schema of its ``application/json`` content, else of its first content type); ``required`` lists
  the required ones.

Local references (``#/components/...``) are resolved, a recursive schema is cut where it recurs;
references to other files are kept as they are. Swagger 2.0 files are refused with a message.

A spec is untrusted input: it is read by the bounded reader (:func:`skillsight_fast.limits.load_document`:
a regular file of at most :data:`MAX_SPEC_BYTES`, nesting at most :data:`MAX_SPEC_DEPTH`, YAML aliases
within a fixed expansion budget), only string summaries and descriptions are used (each cut to
:data:`MAX_TEXT_CHARS`), and one operation's resolved input schema holds at most
:data:`MAX_SCHEMA_NODES` values nested at most :data:`MAX_SCHEMA_DEPTH` deep (references that fan
out, a "billion laughs" through ``$ref``, are cut with a note).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillsight_fast.errors import SkillFormatError
from skillsight_fast.tools.catalog import Tool

#: The HTTP methods an OpenAPI path item can hold an operation for.
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
#: Largest spec file read (bytes).
MAX_SPEC_BYTES = 32 * 1024 * 1024
#: Deepest chain of references followed inside one schema.
MAX_REF_DEPTH = 12
#: Deepest nesting of objects and arrays read from a spec file.
MAX_SPEC_DEPTH = 100
#: Most values (objects, arrays, scalars) of one operation's resolved input schema.
MAX_SCHEMA_NODES = 20_000
#: Most values of all resolved input schemas of one spec together.
MAX_SPEC_SCHEMA_NODES = 2_000_000
#: Deepest nesting of one operation's resolved input schema (past it a note replaces the rest).
MAX_SCHEMA_DEPTH = 48
#: Longest summary or description kept (characters).
MAX_TEXT_CHARS = 16_384


def read_openapi(path: str | Path, name: str = "") -> list[Tool]:
    """The operations of an OpenAPI 3 file (JSON or YAML) as tools of the server ``name``.

    ``name`` defaults to the file's stem (``petstore`` for ``petstore.yaml``).

    Raises
    ------
    SkillFormatError
        The file cannot be read or parsed, is not OpenAPI 3, or has no operation.
    """
    from skillsight_fast.limits import load_document

    p = Path(path).expanduser()
    spec = load_document(p, MAX_SPEC_BYTES, error=SkillFormatError, what="OpenAPI spec",
                         max_depth=MAX_SPEC_DEPTH)
    return openapi_tools(spec, name or _slug(p.stem), source=str(p))


def _text(value: Any) -> str:
    """A summary or description: a string, whitespace collapsed and cut (anything else is no text)."""
    return " ".join(value[: 2 * MAX_TEXT_CHARS].split())[:MAX_TEXT_CHARS] if isinstance(value, str) else ""


def _slug(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_.-]+", "_", text)).strip("_") or "api"


def openapi_tools(spec: Any, server: str, *, source: str = "spec") -> list[Tool]:
    """The operations of a parsed OpenAPI 3 document as tools (see the module docstring)."""
    if not isinstance(spec, Mapping):
        raise SkillFormatError(f"{source}: an OpenAPI document is an object")
    version = str(spec.get("openapi", ""))
    if not version.startswith("3."):
        old = " (Swagger 2.0: convert it to OpenAPI 3 first)" if "swagger" in spec else ""
        raise SkillFormatError(f"{source}: not an OpenAPI 3 document{old}")
    paths = spec.get("paths")
    if not isinstance(paths, Mapping):
        raise SkillFormatError(f"{source}: has no 'paths' object")
    resolver = _Resolver(spec)
    tools: list[Tool] = []
    seen: set[str] = set()
    for route, item in paths.items():
        item = resolver.follow(item)
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters") or []
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, Mapping):
                continue
            op_id = op.get("operationId")
            name = _slug(str(op_id if isinstance(op_id, (str, int)) else f"{method}_{route}")[:200])
            base, n = name, 2
            while name in seen:
                name, n = f"{base}_{n}", n + 1
            seen.add(name)
            summary = _text(op.get("summary"))
            desc = _text(op.get("description")) or summary
            http = f"HTTP: {method.upper()} {str(route)[:1000]}"
            tools.append(Tool(server=server, name=name, title=summary,
                              description=f"{desc}\n{http}" if desc else http,
                              input_schema=_input_schema(resolver, [*shared, *(op.get("parameters") or [])],
                                                         op.get("requestBody"))))
    if not tools:
        raise SkillFormatError(f"{source}: has no operation")
    return tools


def _input_schema(resolver: _Resolver, params: list[Any], body: Any) -> dict[str, Any]:
    resolver.budget = MAX_SCHEMA_NODES
    props: dict[str, Any] = {}
    required: list[str] = []
    by_key: dict[tuple[str, str], Mapping[str, Any]] = {}
    for raw in params:  # operation parameters override path-item ones with the same name and place
        p = resolver.follow(raw)
        if isinstance(p, Mapping) and isinstance(p.get("name"), str):
            by_key[(p["name"], str(p.get("in", "query")))] = p
    for (name, where), p in by_key.items():
        schema = resolver.schema(p.get("schema"))
        if not schema and isinstance(p.get("content"), Mapping):
            schema = resolver.schema(_first_media(p["content"]))
        prop = dict(schema) if isinstance(schema, Mapping) else {}
        if _text(p.get("description")):
            prop["description"] = _text(p["description"])
        prop["x-in"] = where
        props[name] = prop
        if p.get("required") or where == "path":
            required.append(name)
    body = resolver.follow(body)
    if isinstance(body, Mapping) and isinstance(body.get("content"), Mapping):
        schema = resolver.schema(_first_media(body["content"]))
        prop = dict(schema) if isinstance(schema, Mapping) else {}
        if _text(body.get("description")):
            prop["description"] = _text(body["description"])
        prop["x-in"] = "body"
        key = "body" if "body" not in props else "request_body"
        props[key] = prop
        if body.get("required"):
            required.append(key)
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


def _first_media(content: Mapping[str, Any]) -> Any:
    media = content.get("application/json")
    if media is None:
        media = next((m for k, m in content.items() if "json" in k), None)
        if media is None:
            media = next(iter(content.values()), None)
    return media.get("schema") if isinstance(media, Mapping) else None


class _Resolver:
    """Follows ``#/...`` references of one document, cutting cycles, fan-out and depth."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = spec
        self.budget = MAX_SCHEMA_NODES  # reset per operation by _input_schema
        self.total = MAX_SPEC_SCHEMA_NODES

    def schema(self, node: Any) -> Any:
        """A copy of a schema with its local references resolved, within the node budgets
        (:data:`MAX_SCHEMA_NODES` per operation, :data:`MAX_SPEC_SCHEMA_NODES` per spec) and
        :data:`MAX_SCHEMA_DEPTH` levels; what is past them becomes a note."""
        return self._schema(node, (), 0)

    def lookup(self, ref: str) -> Any:
        node: Any = self.spec
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def follow(self, node: Any, depth: int = 0) -> Any:
        """``node`` itself, or what its (chain of) local ``$ref`` points at."""
        while isinstance(node, Mapping) and str(node.get("$ref", "")).startswith("#/"):
            if depth >= MAX_REF_DEPTH:
                return {}
            target = self.lookup(node["$ref"])
            if target is None:
                return node
            node, depth = target, depth + 1
        return node

    def _schema(self, node: Any, stack: tuple[str, ...], depth: int) -> Any:
        self.budget -= 1
        self.total -= 1
        if self.budget < 0 or self.total < 0 or depth >= MAX_SCHEMA_DEPTH:
            if isinstance(node, (Mapping, list)):
                return {"description": "(cut: schema too large or too deep)"}
            return None
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                if ref in stack or len(stack) >= MAX_REF_DEPTH:
                    return {"type": "object", "description": f"(recursive: {ref.rsplit('/', 1)[-1][:100]})"}
                target = self.lookup(ref)
                return node if target is None else self._schema(target, (*stack, ref), depth)
            return {str(k)[:200]: self._schema(v, stack, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [self._schema(v, stack, depth + 1) for v in node]
        if isinstance(node, str) and len(node) > MAX_TEXT_CHARS:
            return node[:MAX_TEXT_CHARS]
        return node


def parse_openapi_arg(value: str) -> tuple[str, str]:
    """An ``--openapi`` argument ``[NAME=]FILE`` as ``(name, file)`` (name empty when not given)."""
    head, sep, rest = value.partition("=")
    if sep and head and "/" not in head and "\\" not in head and not Path(value).exists():
        return head, rest
    return "", value
