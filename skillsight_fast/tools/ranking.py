"""The tool proxy's ranking side: the index over the upstream servers' tools and the tools a
``search_tools`` answer lists.

:class:`ToolRanking` builds the index of every listed tool (``server/tool``,
:func:`~skillsight_fast.tools.catalog.tool_skill`), encoding only tool texts it has not seen, and
shapes a search's hits into tool records (each passes the injection screen or is withheld).

Index cache: every index built is saved under ``index_cache`` (default ``<user cache>/skillsight-fast/proxy``)
in a folder named by :func:`tool_list_key`, the sha256 of the canonical JSON of the tool list
(every ``server/tool`` with its title, description and input schema), the tool text, the index
configuration and the encoder. A restarted proxy whose servers list the same tools loads that index
instead of encoding them again; any change of a tool, a server name or the model gives another key.
At most :data:`INDEX_CACHE_KEEP` folders are kept (least recently used removed); an unreadable or
unwritable cache only costs the encoding. The cache also remembers the last index of each set of
server configurations (``servers-<sha256>`` points at its folder, which holds the tool records in
``tools.json``), so a restart answers from it while its servers start (:meth:`ToolRanking.remembered`).
Catalogues of at most :data:`NUMPY_ENGINE_MAX_TOOLS` tools are searched by the NumPy stages (same
ids and order as the kernels, no Numba start-up).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.agents.find import find_skills
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import SkillsightError
from skillsight_fast.tools import guard
from skillsight_fast.tools.catalog import ServerConfig, Tool, tool_skill
from skillsight_fast.tools.mcp_source import tool_of
from skillsight_fast.tools.upstream import detail, tool_schema

logger = logging.getLogger(__name__)

#: Index folders kept in the proxy's index cache (least recently used removed beyond this).
INDEX_CACHE_KEEP = 16
#: Version of the cache key's layout (bumped when the key's content changes).
INDEX_CACHE_FORMAT = 1
#: Tool catalogues up to this size are searched with the NumPy stages (engine ``numpy``): for a few
#: hundred tools they answer as fast as the kernels and spare a restarted proxy the Numba start-up.
NUMPY_ENGINE_MAX_TOOLS = 2000
#: The tool records stored with each cached index (what a search returns before the servers list).
_TOOLS_FILE = "tools.json"


def tool_list_key(tools: Sequence[Tool], *, tool_text: str, config: dict[str, Any], model_id: str,
                  model_checksum: str) -> str:
    """sha256 (hex) of the canonical JSON of a tool list and of what shapes its index.

    The list is sorted by ``server/tool``; each tool contributes its id, title, description and
    input schema, so any change of one of them (or of the tool text, the index configuration or
    the encoder) gives another key.
    """
    import hashlib

    rows = sorted([t.id, t.title, t.description, t.input_schema] for t in tools)
    blob = json.dumps({"format": INDEX_CACHE_FORMAT, "tool_text": tool_text, "config": config,
                       "model": [model_id, model_checksum], "tools": rows},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def default_index_cache() -> Any:
    """``<user cache>/skillsight-fast/proxy`` (see :func:`skillsight_fast.models.cache_root`)."""
    from skillsight_fast.models import cache_root

    return cache_root() / "proxy"



class ToolRanking:
    """The index over the upstream tools, its on-disk cache, and the tool records of an answer.

    Parameters
    ----------
    configs : sequence of ServerConfig
        The proxied servers (what the remembered index of this set of servers is keyed by).
    tool_text : str
        Which tool text is indexed (see :mod:`skillsight_fast.tools.catalog`).
    index_cache : Path or None
        Folder of saved tool indexes (None: no cache).
    pins : sequence of str
        Pinned ``server/tool`` ids (part of the remembered index's key).
    abstain : bool
        Whether answers use the index's derived abstention rule (a cached index without one is not used).
    encoder : Encoder, optional
        The encoder; the proxy sets :attr:`encoder` (or :attr:`encoder_error`) once it is loaded.

    Attributes
    ----------
    index : SkillIndex or None
        The current index; :attr:`entries` maps each of its ids to (upstream, SDK tool).
    index_from_cache : bool
        Whether the last index came from the index cache.
    """

    def __init__(self, configs: Sequence[ServerConfig], *, tool_text: str, index_cache: Path | None,
                 pins: Sequence[str] = (), abstain: bool = True, encoder: Any = None) -> None:
        self.configs = list(configs)
        self.tool_text = tool_text
        self.index_cache = index_cache
        self.pins = list(pins)
        self.abstain = abstain
        self.encoder = encoder
        self.encoder_error = ""
        self.index: Any = None
        self.entries: dict[str, tuple[Any, Any]] = {}
        self.index_from_cache = False
        self.preloaded_folder: Any = None
        self._query_encoder: Any = None  # shared by every index built (loaded once)
        self._vectors: dict[str, np.ndarray] = {}  # tool text -> embedding (re-index encodes new texts only)

    def costly_servers(self, entries: dict[str, tuple[Any, Any]], limit: int) -> set[str]:
        """The servers of ``entries`` with more than ``limit`` tool texts not encoded yet."""
        new: dict[str, int] = {}
        for up, t in entries.values():
            if tool_skill(tool_of(up.name, t), self.tool_text).text not in self._vectors:
                new[up.name] = new.get(up.name, 0) + 1
        return {name for name, n in new.items() if n > limit}

    def build(self, entries: dict[str, tuple[Any, Any]]) -> Any:
        """The index of ``entries`` (``server/tool`` -> (upstream, SDK tool)): the remembered one when the
        live lists match it, a cached one of the same tools, or a new one (only new tool texts are
        encoded), saved into the cache."""
        from skillsight_fast.engine.index import SkillIndex
        from skillsight_fast.tools.catalog import tool_index_config

        config = tool_index_config()
        tools = [tool_of(up.name, t) for up, t in entries.values()]
        skills = [tool_skill(t, self.tool_text) for t in tools]
        folder = None
        ident = self.model_ident()
        if self.index_cache is not None and ident is not None:
            key = tool_list_key(tools, tool_text=self.tool_text, config=config.to_dict(),
                                model_id=ident[0], model_checksum=ident[1])
            folder = self.index_cache / key[:32]
            if folder == self.preloaded_folder and self.index is not None:
                self.index_from_cache = True  # the remembered index is the live lists' one
                return self.index
            index = self._load_cached(folder, skills)
            if index is not None:
                self._remember(folder)
                return self.prepare(index)
        self.index_from_cache = False
        if self.encoder is None:
            raise SkillsightError(f"tool search is unavailable: the encoder could not be loaded "
                                  f"({self.encoder_error or 'unknown error'})")
        texts = [s.text for s in skills]
        new = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if new:
            self._vectors.update(zip(new, self.encoder.encode(new)))
        embeddings = np.stack([self._vectors[t] for t in texts]).astype(np.float32)
        if len(self._vectors) > 2 * max(len(texts), guard.MAX_TOOLS_PER_SERVER):
            # texts of tools no longer listed (a server whose list keeps changing): keep this build's
            self._vectors = {t: self._vectors[t] for t in texts}
        index = SkillIndex.from_embeddings(skills, embeddings, config, model_id=self.encoder.model_id,
                                           model_checksum=self.encoder.checksum, encoder=self.encoder)
        if folder is not None:
            self._save_cached(index, folder, tools)
        return self.prepare(index)

    def model_ident(self) -> tuple[str, str] | None:
        """(model id, checksum) of the encoder the proxy indexes with, known without loading a
        registry model; None if it is unknown until loaded."""
        if self.encoder is not None:
            return str(self.encoder.model_id), str(self.encoder.checksum)
        from skillsight_fast.config import IndexConfig
        from skillsight_fast.models.registry import get_spec

        spec = get_spec(IndexConfig().encoder.model)
        return (spec.name, spec.sha256) if spec is not None else None

    def _servers_pointer(self) -> Any:
        """The cache file naming the last index of this set of servers (configs, pins, tool text)."""
        import hashlib

        rows = sorted([c.name, c.command, list(c.args), sorted(c.env.items()), c.url] for c in self.configs)
        blob = json.dumps({"format": INDEX_CACHE_FORMAT, "servers": rows, "pins": sorted(self.pins),
                           "tool_text": self.tool_text}, sort_keys=True, default=str)
        return self.index_cache / f"servers-{hashlib.sha256(blob.encode()).hexdigest()[:32]}"

    def _remember(self, folder: Any) -> None:
        """Point this set of servers at ``folder`` (the index of their current tool lists)."""
        from skillsight_fast.files import atomic_write_bytes

        try:
            atomic_write_bytes(self._servers_pointer(), folder.name.encode())
        except OSError as exc:
            logger.warning("tool proxy: cannot write %s (%s)", self._servers_pointer(), detail(exc))

    def prepare(self, index: Any) -> Any:
        """Engine, shared task encoder and a warm-up search, so the first real search is quick."""
        if len(index) <= NUMPY_ENGINE_MAX_TOOLS:
            index.engine = "numpy"
        if self._query_encoder is not None:
            index.encoders.query_encoder = self._query_encoder
        else:
            self._query_encoder = index.encoders.query_encoder
        find_skills(index, ["warm up"], 1, collapse=False)
        return index

    def remembered(self, upstreams: dict[str, Any]) -> tuple[Any, Any, dict[str, tuple[Any, Any]]] | None:
        """(folder, index, entries) of the index last built for these servers (``upstreams`` by
        name), or None: none, another model, or tools of a server not configured now."""
        from types import SimpleNamespace

        from skillsight_fast.engine.index import SkillIndex

        ident = self.model_ident()
        pointer = self._servers_pointer()
        if ident is None or not pointer.is_file():
            return None
        folder = self.index_cache / pointer.read_text(encoding="utf-8").strip()
        if not (folder / "manifest.json").is_file() or not (folder / _TOOLS_FILE).is_file():
            return None
        index = SkillIndex.load(folder, encoder=self.encoder)
        if ((index.state.model.id, index.state.model.checksum) != ident
                or (self.abstain and index.state.abstention is None)):
            return None  # another model, or saved before indexes derived their abstention rule
        entries: dict[str, tuple[Any, Any]] = {}
        for rec in json.loads((folder / _TOOLS_FILE).read_text(encoding="utf-8")):
            up = upstreams.get(rec["server"])
            if up is None:
                return None
            entries[f"{up.name}/{rec['name']}"] = (up, SimpleNamespace(
                name=rec["name"], title=rec.get("title", ""), description=rec.get("description", ""),
                inputSchema=rec.get("inputSchema", {})))
        if list(entries) != index.ids:
            return None
        return folder, self.prepare(index), entries

    def _load_cached(self, folder: Any, skills: list[Any]) -> Any:
        """The index saved in ``folder`` if it holds exactly the tools ``skills``, else None."""
        import os

        from skillsight_fast.engine.index import SkillIndex

        if not (folder / "manifest.json").is_file():
            return None
        try:
            index = SkillIndex.load(folder, encoder=self.encoder)
            if index.ids != [sk.id for sk in skills]:
                raise SkillsightError("its tools differ from the listed ones")
            if self.abstain and index.state.abstention is None:
                raise SkillsightError("saved before indexes derived their abstention rule")
            os.utime(folder)  # least recently used is removed first
        except (OSError, SkillsightError) as exc:
            logger.warning("tool proxy: not using the cached index %s (%s)", folder, detail(exc))
            return None
        # a later re-index (a server's tools changed) encodes only new texts
        self._vectors.update(zip((sk.text for sk in skills), np.asarray(index.dense.embeddings)))
        self.index_from_cache = True
        logger.info("tool proxy: loaded the index of %d tools from %s", len(index), folder)
        return index

    def _save_cached(self, index: Any, folder: Any, tools: Sequence[Tool]) -> None:
        """Save ``index`` (and the tool records) into the cache, point this set of servers at it, and
        drop the least recently used folders beyond the limit."""
        import shutil

        records = [{"server": t.server, "name": t.name, "title": t.title, "description": t.description,
                    "inputSchema": t.input_schema} for t in tools]
        try:
            index.save(folder, extra_files={_TOOLS_FILE: json.dumps(records, ensure_ascii=False).encode()})
            self._remember(folder)
            kept = sorted((p for p in folder.parent.iterdir() if (p / "manifest.json").is_file()),
                          key=lambda p: p.stat().st_mtime, reverse=True)
            for old in kept[INDEX_CACHE_KEEP:]:
                shutil.rmtree(old, ignore_errors=True)
            for pointer in folder.parent.glob("servers-*"):  # pointers to removed indexes
                target = (folder.parent / pointer.read_text(encoding="utf-8").strip()
                          if pointer.is_file() else None)
                if target is not None and not target.is_dir():
                    pointer.unlink(missing_ok=True)
        except (OSError, SkillsightError) as exc:
            logger.warning("tool proxy: cannot save the index into %s (%s)", folder, detail(exc))

    def answer(self, task: str, k: int, abstention: Abstention | None, lock: Any) -> dict[str, Any]:
        """``{tools: [...], withheld?: [...]}``: the current index's hits for ``task`` as tool records.

        Each tool has ``name`` (``server/tool``), ``server``, ``title``, ``description``,
        ``inputSchema``, ``score`` and ``evidence``; a tool whose texts the injection screen flags
        is named in ``withheld`` instead. Two servers' tools of one name are two results.
        """
        out: dict[str, Any] = {"tools": []}
        index, entries = self.index, self.entries
        if index is None:
            return out
        # collapse=False: two servers' tools of one name are different tools, not copies;
        # cut per hit: a weak second or third tool is not put in front of the model
        answer = find_skills(index, [task], k, abstention=abstention, lock=lock, collapse=False, cut="hit")[0]
        from skillsight_fast.library.screen import screen_text

        for hit in answer.hits:
            up, t = entries[hit.id]
            title = _bounded(getattr(t, "title", None), guard.MAX_TITLE_CHARS)
            desc = _bounded(getattr(t, "description", None), guard.MAX_DESCRIPTION_CHARS)
            found = screen_text(f"{hit.id}\n{title}\n{desc}")
            if found:  # what reaches the agent passes the injection screen
                out.setdefault("withheld", []).append({"name": hit.id[:200],
                                                       "reasons": [f.rule for f in found]})
                continue
            out["tools"].append({
                "name": hit.id, "server": up.name, "title": title, "description": desc,
                "inputSchema": tool_schema(t), "score": round(hit.score, 4), "evidence": hit.evidence})
        return out


def _bounded(value: Any, limit: int) -> str:
    """A tool text for search results: a string cut to ``limit`` characters (anything else is "")."""
    if not isinstance(value, str):
        return ""
    return value if len(value) <= limit else value[: limit - 1] + "…"
