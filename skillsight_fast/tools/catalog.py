"""Tools as skills: the text a tool is indexed by, and the server configurations tools come from.

A tool (an MCP tool, an OpenAPI operation, a JSON function schema) becomes a
:class:`~skillsight_fast.library.skills.Skill` with the id ``server/tool``, ``name`` = the tool's name,
``description`` = its title and description, and ``body`` = the text of its parameters chosen by
``text`` (see :data:`TOOL_TEXTS`). The encoder and the analyzer see ``Skill.text``, i.e.
``name + "\\n" + description + "\\n" + body``:

=================  ============================================================================
``description``    no body: the tool's name, title and description only
``params``         plus one line per parameter, ``name (type): description``
``schema``         plus the whole input schema as indented JSON (the default: best skillsight
                   Hit@5 on bfcl and gorilla_hf, ``experiments/tool_text_variants.py``)
=================  ============================================================================
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from skillsight_fast.errors import SkillFormatError
from skillsight_fast.library.skills import Skill

#: The tool texts that can be indexed (``index --tool-text``).
TOOL_TEXTS = ("description", "params", "schema")
#: The tool text used when none is asked for.
DEFAULT_TOOL_TEXT = "schema"
#: Largest MCP server configuration file read (bytes).
MAX_CONFIG_BYTES = 4 << 20
#: Nesting depth of object parameters that the ``params`` text lists (``a.b.c``).
MAX_PARAM_DEPTH = 3


@dataclass(frozen=True)
class Tool:
    """One tool as a server lists it.

    Attributes
    ----------
    server : str
        The name of the server (or OpenAPI file) that owns the tool.
    name : str
        The tool's name on that server (what ``tools/call`` takes).
    description, title : str
    input_schema : dict
        JSON schema of the arguments.
    """

    server: str
    name: str
    description: str = ""
    title: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """``server/tool``: the id the tool is indexed under."""
        return f"{self.server}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        """The MCP tool shape: name, title, description, inputSchema (plus the owning server)."""
        return {"id": self.id, "server": self.server, "name": self.name, "title": self.title,
                "description": self.description, "inputSchema": self.input_schema}


def iter_params(schema: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, str, str]]:
    """``(name, type, description)`` of each property of a JSON schema, nested objects dotted.

    Examples
    --------
    >>> list(iter_params({"type": "object", "properties": {"tz": {"type": "string",
    ...     "description": "IANA name"}}}))
    [('tz', 'string', 'IANA name')]
    """
    if not isinstance(schema, Mapping) or depth >= MAX_PARAM_DEPTH:
        return
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return
    for name, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        kind = sub.get("type", "")
        if isinstance(kind, list):
            kind = "|".join(map(str, kind))
        desc = sub.get("description") or sub.get("title") or ""
        yield f"{prefix}{name}", str(kind), " ".join(str(desc).split())
        yield from iter_params(sub, f"{prefix}{name}.", depth + 1)
        items = sub.get("items")
        if isinstance(items, Mapping):
            yield from iter_params(items, f"{prefix}{name}[].", depth + 1)


def params_text(schema: Any) -> str:
    """One line per parameter: ``name (type): description``."""
    lines = []
    for name, kind, desc in iter_params(schema):
        head = f"{name} ({kind})" if kind else name
        lines.append(f"{head}: {desc}" if desc else head)
    return "\n".join(lines)


def tool_body(schema: Any, text: str = DEFAULT_TOOL_TEXT) -> str:
    """The body indexed for a tool's input schema under the tool text ``text``."""
    if text not in TOOL_TEXTS:
        raise SkillFormatError(f"unknown tool text {text!r} (expected one of {', '.join(TOOL_TEXTS)})")
    if text == "description" or not schema:
        return ""
    if text == "params":
        return params_text(schema)
    return json.dumps(schema, indent=1, ensure_ascii=False, sort_keys=True)


def tool_skill(tool: Tool, text: str = DEFAULT_TOOL_TEXT) -> Skill:
    """The Skill a tool is indexed as (id ``server/tool``; see the module docstring)."""
    desc = " ".join(tool.description.split())
    title = " ".join(tool.title.split())
    if title and title.lower() not in (tool.name.lower(), desc.lower()):
        desc = f"{title}. {desc}" if desc else title
    return Skill(id=tool.id, name=tool.name, description=desc, body=tool_body(tool.input_schema, text))


def tool_index_config(config: Any = None) -> Any:
    """The index configuration of a catalogue of tools: ``config`` (default ``IndexConfig()``) with
    the BM25 side scoring every known task token (``lexical_evidence="all"``).

    Tool schemas put content words among the generic tokens T_g (bfcl: "address", "artist"), so
    tasks keep few evidence tokens; over every token BM25 is not significantly worse than the best
    of dense, BM25 and RRF on R@10, nDCG@10, R@50 and Completeness@10 on bfcl, metatool and
    gorilla_hf, where today's evidence tokens trail RRF on bfcl (docs/TOOLS.md,
    experiments/bm25_evidence_without_generic_mask.py). Skill libraries keep Q' (skillsbench R@10
    -2.6 [-6.3, -0.5] otherwise). A ``lexical_evidence`` already set is kept.
    """
    from skillsight_fast.config import IndexConfig

    config = IndexConfig() if config is None else config
    return config if config.scoring.lexical_evidence is not None else config.replace(lexical_evidence="all")


# ---------------------------------------------------------------------- server configurations


@dataclass(frozen=True)
class ServerConfig:
    """How to reach one MCP server: a stdio command line, or a streamable-HTTP URL.

    Attributes
    ----------
    name : str
        The server's name in tool ids (``name/tool``); empty = the name the server reports.
    command : str
    args : tuple of str
    env : dict
        Extra environment variables for a stdio server.
    url : str
        A streamable-HTTP endpoint (then ``command`` is empty).
    """

    name: str = ""
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""

    def describe(self) -> str:
        """The command line or URL, for messages."""
        return self.url or shlex.join([self.command, *self.args])


def parse_server_arg(value: str) -> ServerConfig:
    """A ``--mcp`` argument: ``"COMMAND ARGS..."``, an ``http://`` URL, either prefixed ``NAME=``.

    Examples
    --------
    >>> parse_server_arg("time=uvx mcp-server-time --local-timezone UTC")
    ... # doctest: +NORMALIZE_WHITESPACE
    ServerConfig(name='time', command='uvx', args=('mcp-server-time', '--local-timezone', 'UTC'),
                 env={}, url='')
    """
    name = ""
    head, sep, rest = value.partition("=")
    if sep and head and " " not in head and "/" not in head and ":" not in head:
        name, value = head, rest
    value = value.strip()
    if value.startswith(("http://", "https://")):
        return ServerConfig(name=_check_name(name) if name else "", url=value)
    try:
        parts = shlex.split(value)
    except ValueError as exc:
        raise SkillFormatError(f"--mcp {value!r}: cannot split the command line ({exc})") from None
    if not parts:
        raise SkillFormatError("--mcp needs a command line or a URL")
    return ServerConfig(name=_check_name(name) if name else "", command=parts[0], args=tuple(parts[1:]))


def _check_name(name: str) -> str:
    if not name or "/" in name or name != name.strip():
        raise SkillFormatError(f"server name {name!r} must be non-empty, without '/' or surrounding spaces")
    return name


def parse_mcp_config(obj: Any, *, source: str = "config") -> list[ServerConfig]:
    """Servers of a host's ``{"mcpServers": {name: {"command", "args", "env"} | {"url"}}}`` block.

    Raises
    ------
    SkillFormatError
        The block is missing or an entry has neither a command nor a URL.
    """
    if not isinstance(obj, Mapping) or not isinstance(obj.get("mcpServers"), Mapping):
        raise SkillFormatError(f"{source}: needs an object {{\"mcpServers\": {{name: {{...}}}}}}")
    out = []
    for name, entry in obj["mcpServers"].items():
        where = f"{source}: mcpServers.{name}"
        if not isinstance(entry, Mapping):
            raise SkillFormatError(f"{where} must be an object")
        _check_name(str(name))
        if entry.get("disabled") is True:
            continue
        url, command = entry.get("url"), entry.get("command")
        args, env = entry.get("args", []), entry.get("env", {}) or {}
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise SkillFormatError(f"{where}.args must be a list of strings")
        if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
            raise SkillFormatError(f"{where}.env must map names to strings")
        if isinstance(url, str) and url:
            out.append(ServerConfig(name=str(name), url=url))
        elif isinstance(command, str) and command:
            out.append(ServerConfig(name=str(name), command=command, args=tuple(args), env=dict(env)))
        else:
            raise SkillFormatError(f"{where} needs a 'command' (stdio) or a 'url' (streamable HTTP)")
    if not out:
        raise SkillFormatError(f"{source}: mcpServers names no server")
    return out


def read_mcp_config(path: str) -> list[ServerConfig]:
    """Read a JSON file holding an ``mcpServers`` block (see :func:`parse_mcp_config`)."""
    from pathlib import Path

    from skillsight_fast.limits import load_json, read_text

    p = Path(path).expanduser()
    # the bounded reader: a FIFO or device is refused, size and nesting are limited
    obj = load_json(read_text(p, MAX_CONFIG_BYTES, error=SkillFormatError, what="MCP server configuration"),
                    error=SkillFormatError, what=str(p))
    return parse_mcp_config(obj, source=str(p))
