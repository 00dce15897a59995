"""The tools of one API request as a searchable catalogue: one index per distinct list of tools.

An adapter (:mod:`.claude_api`, :mod:`.openai_api`, ...) turns the tools a developer sends into
:class:`Entry` records (the tool as a :class:`~skillsight_fast.tools.catalog.Tool`, plus the
definition to hand back) and gives them to :meth:`ToolCatalog.use`. The catalogue keys the list by
the sha256 of what is indexed of each tool (id, title, description, input schema), the tool text
and the index configuration: the same list reuses its index, a changed one builds another (the
last few are kept, so alternating between two lists builds each once). The index is the tool
catalogue's (:func:`~skillsight_fast.tools.catalog.tool_index_config`: BM25 over every task token),
built with the same tool text as ``skillsight index --mcp`` and the proxy
(:func:`~skillsight_fast.tools.catalog.tool_skill`).

:meth:`ToolCatalog.search` is one call of :func:`skillsight_fast.agents.find.find_skills` on that
index, with the index's own label-free abstention cut per hit and no duplicate collapse (two tools
are two tools), as the tool-search proxy does; what the model wrote as a query first goes through
:func:`query_text`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillsight_fast.agents.find import INDEX_RULE, find_skills
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import QueryError, SkillFormatError
from skillsight_fast.tools.catalog import DEFAULT_TOOL_TEXT, Tool, tool_index_config, tool_skill

#: Longest query searched (characters); the encoder reads only the first few hundred tokens anyway.
MAX_QUERY_CHARS = 4000
#: Indexes kept per catalogue (distinct tool lists seen most recently).
CACHE_SIZE = 4
#: Most tools one catalogue indexes.
MAX_TOOLS = 100_000
#: Up to this many tools the index runs its NumPy stages (no Numba start-up; the proxy's rule).
NUMPY_ENGINE_MAX_TOOLS = 2000
#: What the search tool's ``query`` argument asks the model for.
QUERY_DESCRIPTION = ("What you need a tool for: the task in a few words or a sentence, or keywords. "
                     "A name pattern such as 'slack_.*|send_message' also works.")
#: The search tool's description (both APIs).
SEARCH_DESCRIPTION = (
    "Search the deferred tools for the ones that fit a task; the tools found become available to "
    "call. Describe what you need to do. Returns the best-fitting tools, best first, and none when "
    "no tool fits: then do without or search again with other words.")
#: JSON schema of the search tool's input (both APIs).
QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": QUERY_DESCRIPTION}},
    "required": ["query"],
    "additionalProperties": False,
}

_PATTERN_CHARS = frozenset("|*+?^$[](){}\\")
_FLAGS = re.compile(r"\(\?[a-zA-Z]+\)")
_CLASSES = re.compile(r"\\[bBwWsSdDAZz]|\[\^?[^\]]*\]|\{\d*,?\d*\}")
_ESCAPED = re.compile(r"\\(.)")
_SYNTAX = re.compile(r"[|*+?^$()\[\]{}.]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def query_text(query: Any) -> str:
    """The text searched for what a model wrote as a tool-search query.

    Natural language and keywords are searched as written (trimmed, at most
    :data:`MAX_QUERY_CHARS`). A query of one word holding regex syntax (``slack_.*``,
    ``(?i)weather|forecast``, ``^get_.+_data$``: what the APIs' own regex search takes) is read
    as the names it spells: the syntax is dropped, each fragment is kept and also split at ``_``,
    ``-``, ``.`` and camelCase, so ``get_.*_data`` searches ``get data``. A pattern with nothing
    left (``.*``) gives "" (no search: nothing to go on).

    Raises
    ------
    QueryError
        ``query`` is not a string.

    Examples
    --------
    >>> query_text("  find the weather in Paris ")
    'find the weather in Paris'
    >>> query_text("(?i)slack_.*|sendMessage")
    'slack sendMessage send Message'
    >>> query_text(".*")
    ''
    """
    if not isinstance(query, str):
        raise QueryError(f"the search query must be a string, got {type(query).__name__}")
    text = query.strip()[:MAX_QUERY_CHARS]
    if not text or any(c.isspace() for c in text) or not any(c in _PATTERN_CHARS for c in text):
        return text
    text = _FLAGS.sub(" ", text)
    text = _CLASSES.sub(" ", text)
    text = _ESCAPED.sub(r" \1 ", text)
    words: list[str] = []
    for fragment in _SYNTAX.sub(" ", text).split():
        fragment = fragment.strip("_-")
        if not fragment:
            continue
        parts = _CAMEL.sub(" ", re.sub(r"[_\-.]+", " ", fragment)).split()
        words.append(fragment)
        if parts != [fragment]:
            words.extend(parts)
    return " ".join(words)


@dataclass(frozen=True)
class Entry:
    """One searchable tool of a request.

    Attributes
    ----------
    tool : Tool
        What is indexed (``tool.id``, ``server/name``, is the index id).
    definition : Any
        What the adapter hands back for this tool (the developer's own definition).
    group : str
        The namespace or server the tool belongs to in the request ("" for a top-level tool).
    """

    tool: Tool
    definition: Any
    group: str = ""


def as_mapping(obj: Any) -> Mapping[str, Any]:
    """A tool in any of the SDKs' shapes as a mapping of its fields.

    Plain dicts and the SDKs' ``TypedDict`` params are taken as they are; pydantic models (MCP
    ``Tool``, the SDKs' response models) by ``model_dump(by_alias=True, exclude_none=True)``; any
    other object by its public attributes (``name``, ``description``, ``input_schema``,
    ``inputSchema``, ``parameters``, ``params_json_schema``, ``title``, ``defer_loading``, ``type``).
    """
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        out = dump(by_alias=True, exclude_none=True)
        if isinstance(out, Mapping):
            return out
    fields = ("type", "name", "title", "description", "input_schema", "inputSchema", "parameters",
              "params_json_schema", "defer_loading")
    out = {f: getattr(obj, f) for f in fields if getattr(obj, f, None) is not None}
    if "name" not in out:
        raise SkillFormatError(f"cannot read a tool from a {type(obj).__name__} (no name)")
    return out


def schema_of(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema of a tool's fields, under whichever key its API names it."""
    for key in ("input_schema", "inputSchema", "parameters", "params_json_schema"):
        value = fields.get(key)
        if isinstance(value, Mapping):
            return dict(value)
    return {}


def make_entry(fields: Mapping[str, Any], definition: Any, group: str = "", server: str = "tools") -> Entry:
    """An :class:`Entry` of a tool's fields (name, title, description, schema).

    Raises
    ------
    SkillFormatError
        The tool has no non-empty string name.
    """
    name = fields.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SkillFormatError(f"a tool needs a non-empty string 'name', got {name!r}")
    desc = fields.get("description")
    title = fields.get("title")
    tool = Tool(server=group or server, name=name, description=desc if isinstance(desc, str) else "",
                title=title if isinstance(title, str) else "", input_schema=schema_of(fields))
    return Entry(tool=tool, definition=definition, group=group)


def catalog_key(entries: Sequence[Entry], tool_text: str, config: Mapping[str, Any]) -> str:
    """sha256 (hex) of what shapes the index of ``entries``: each tool's id, title, description and
    input schema in order, the tool text and the index configuration."""
    rows = [[e.tool.id, e.tool.title, e.tool.description, e.tool.input_schema] for e in entries]
    blob = json.dumps({"tools": rows, "tool_text": tool_text, "config": dict(config)}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class ToolSet:
    """One request's tools: their index and the entries by index id (what :meth:`ToolCatalog.use`
    returns; two adapters sharing a catalogue share the index, each keeps its own definitions)."""

    catalog: ToolCatalog
    index: Any
    by_id: Mapping[str, Entry]

    def search(self, query: Any) -> list[Entry]:
        """:meth:`ToolCatalog.search` over these tools."""
        return self.catalog.search_in(self, query)


class ToolCatalog:
    """The index of the current list of tools, and the search a model's tool search gets.

    Parameters
    ----------
    k : int
        Most tools one search returns.
    encoder : Encoder, optional
        The document and task encoder; default: the bundled all-MiniLM-L6-v2, loaded at the first
        build and kept for every later one.
    config : IndexConfig, optional
        Passed through :func:`~skillsight_fast.tools.catalog.tool_index_config`.
    tool_text : str
        Which tool text is indexed (:data:`~skillsight_fast.tools.catalog.TOOL_TEXTS`).
    abstention : Abstention, ``"index"`` or None
        The threshold each tool must reach (default: the rule the index derived at build, without
        labels); None returns the ``k`` best whatever they score.
    cache_size : int
        Indexes of distinct tool lists kept (the most recently used).

    Attributes
    ----------
    builds : int
        How many indexes this catalogue has built (a benchmark checks it stays put while the
        tools stay the same).
    """

    def __init__(self, *, k: int = 5, encoder: Any = None, config: Any = None,
                 tool_text: str = DEFAULT_TOOL_TEXT, abstention: Abstention | str | None = INDEX_RULE,
                 cache_size: int = CACHE_SIZE) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise QueryError(f"k must be a positive integer, got {k!r}")
        self.k = k
        self.encoder = encoder
        self.config = tool_index_config(config)
        self.tool_text = tool_text
        self.abstention = abstention
        self.cache_size = max(1, int(cache_size))
        self.builds = 0
        self._config_dict = self.config.to_dict()
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._current: ToolSet | None = None
        self._lock = threading.Lock()

    def use(self, entries: Iterable[Entry]) -> ToolSet:
        """Make ``entries`` the searched tools and return them with their index (built only for a
        list not seen among the last :data:`CACHE_SIZE`).

        Raises
        ------
        SkillFormatError
            No tools, more than :data:`MAX_TOOLS`, or two tools with the same id.
        """
        entries = list(entries)
        if not entries:
            raise SkillFormatError("tool search needs at least one tool to search")
        if len(entries) > MAX_TOOLS:
            raise SkillFormatError(f"{len(entries):,} tools is over the {MAX_TOOLS:,} a catalogue indexes")
        by_id: dict[str, Entry] = {}
        for e in entries:
            if e.tool.id in by_id:
                raise SkillFormatError(f"two tools are named {e.tool.name!r}"
                                       + (f" in {e.group!r}" if e.group else ""))
            by_id[e.tool.id] = e
        key = catalog_key(entries, self.tool_text, self._config_dict)
        index = self._cache.get(key)
        if index is None:
            index = self._build(entries)
            self._cache[key] = index
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        self._current = ToolSet(self, index, by_id)  # the same tools may come as new definitions
        return self._current

    def _build(self, entries: Sequence[Entry]) -> Any:
        from skillsight_fast.engine.index import SkillIndex

        skills = [tool_skill(e.tool, self.tool_text) for e in entries]
        index = SkillIndex.build(skills, self.encoder, self.config)
        if self.encoder is None:
            self.encoder = index.encoder  # loaded once, shared by every later build
        if len(index) <= NUMPY_ENGINE_MAX_TOOLS:
            index.engine = "numpy"
        self.builds += 1
        return index

    @property
    def index(self) -> Any:
        """The index of the current tools (:meth:`use` sets them)."""
        if self._current is None:
            raise SkillFormatError("no tools yet: give the request's tools first")
        return self._current.index

    def search(self, query: Any) -> list[Entry]:
        """The tools of the last :meth:`use` that fit ``query`` (see :meth:`search_in`)."""
        if self._current is None:
            raise SkillFormatError("no tools yet: give the request's tools first")
        return self.search_in(self._current, query)

    def search_in(self, tools: ToolSet, query: Any) -> list[Entry]:
        """The tools of ``tools`` that fit ``query``, best first (empty when none reaches the
        threshold or the query has nothing to search, :func:`query_text`).

        Raises
        ------
        QueryError
            The query is not a string.
        """
        index, by_id = tools.index, tools.by_id
        text = query_text(query)
        if not text or not any(c.isprintable() and not c.isspace() for c in text):
            return []
        answer = find_skills(index, [text], min(self.k, len(index)), abstention=self.abstention,
                             lock=self._lock, collapse=False, cut="hit")[0]
        return [by_id[h.id] for h in answer.hits]


def field_of(obj: Any, name: str) -> Any:
    """A field of an SDK model or of a plain dict (None when absent)."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


class ClientToolSearch:
    """What a client-side tool search of any API keeps: the names passed through unsearched, the
    catalogue (its own, or one shared with another adapter) and the last request's tools."""

    def __init__(self, k: int, *, keep_loaded: Sequence[str], encoder: Any, config: Any, tool_text: str,
                 abstention: Abstention | str | None, catalog: ToolCatalog | None) -> None:
        self.keep_loaded = frozenset(keep_loaded)
        self.catalog = catalog if catalog is not None else ToolCatalog(
            k=k, encoder=encoder, config=config, tool_text=tool_text, abstention=abstention)
        #: The tools of the last request (``tools()``) and their index.
        self.toolset: ToolSet | None = None

    def _tools(self) -> ToolSet:
        if self.toolset is None:
            raise SkillFormatError("no tools yet: call tools() with the request's tools first")
        return self.toolset
