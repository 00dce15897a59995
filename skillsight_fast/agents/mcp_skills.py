"""MCP's Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``): ``skills/list`` and
``skills/get`` for the skills the MCP server already serves as ``skill://`` resources.

The extension binds Agent Skills to MCP resources: each file of a skill is a resource (here
``skill://<skill id>/<file>``, read with ``resources/read`` as before), and a server declaring the
extension under ``capabilities.extensions`` must answer two methods with *skill entries*::

    {"uri": "skill://<id>/SKILL.md",
     "frontmatter": {... the SKILL.md's YAML front matter, verbatim ...},
     "resources": [{"uri": ..., "digest": "sha256:<hex>", "size": <bytes>}, ...]}

* ``skills/list`` (paginated by ``cursor`` / ``nextCursor``) lists the entries of the skills that
  ``resources/list`` lists, in the same pages (the same opaque cursor of
  :meth:`~skillsight_fast.agents.service.SkillService.resources_page`; skills the index-time screen
  flagged are left out of both, and stay readable by URI);
* ``skills/get`` (``{"uri": ...}``) gives one skill's entry, or error -32602 for a URI that names
  no served skill's SKILL.md.

Both results carry ``resultType: "complete"`` and the cache hints ``ttlMs`` / ``cacheScope``.
The manifest is built from exactly what ``resources/read`` returns: the SKILL.md text served for
the skill (the file, or the text rebuilt from the index, :meth:`LiveIndex.skill_text`) and each
file of the skill's folder that :meth:`LiveIndex.skill_file` serves, so every digest verifies
against a read. A skill indexed from a record (no folder) has its SKILL.md alone. A folder over the
extension's limits (512 files, 16 MiB) cannot be listed completely and is published as
``"dynamic"``; so are files the reader refuses (over 1 MiB, links out of the folder) left out.

Where this stays short of the spec, and why: the spec asks the last segment of ``<skill-path>`` to
equal the skill's ``name``. Skill URIs here were fixed before the extension (``skill://<id>/...``,
ids being folder paths or dataset ids such as ``skillsbench:pdf``), and the resources already
served keep them; for a library of SKILL.md folders named as their skills, the two agree.

The installed MCP SDK (2.x) has no skills types; it does have SEP-2133 extensions
(``mcp.server.extension.Extension``: new request methods plus the capability entry), which
:func:`skills_extension` uses. ``build_mcp_server`` passes it to ``MCPServer(extensions=[...])``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import TYPE_CHECKING, Any

from skillsight_fast.agents.live import MAX_SKILL_FILE_BYTES, SCHEME, skill_uri
from skillsight_fast.errors import QueryError, SkillsightError
from skillsight_fast.library.skills import SKILL_FILE

if TYPE_CHECKING:
    from skillsight_fast.agents.live import LiveIndex

logger = logging.getLogger(__name__)

#: The extension's identifier (SEP-2133 ``capabilities.extensions`` key).
EXTENSION_ID = "io.modelcontextprotocol/skills"
#: Most files one skill entry lists (the extension's per-skill limit).
MAX_RESOURCES = 512
#: Most bytes one skill's files add up to (the extension's per-skill limit).
MAX_TOTAL_BYTES = 16 * 1024 * 1024
#: How long a host may treat an entry or a listing as current (milliseconds); ``serve --watch``
#: may swap the index at any time, so the hint is short.
TTL_MS = 60_000
#: The listing is one user's local library.
CACHE_SCOPE = "private"


def _resource(uri: str, data: bytes) -> dict[str, Any]:
    return {"uri": uri, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}


def frontmatter_of(text: str, name: str, description: str) -> dict[str, Any]:
    """The YAML front matter of a SKILL.md as a JSON object (values YAML gives that JSON has no type
    for, such as dates, as their text); ``name`` and ``description`` from the index when the text
    has none (a record's rebuilt text always has them)."""
    import yaml

    meta: Any = None
    if text.startswith("---"):
        head, sep, _ = text[3:].partition("\n---")
        if sep:
            try:
                meta = yaml.safe_load(head)
            except yaml.YAMLError:
                meta = None
    out = json.loads(json.dumps(meta, default=str)) if isinstance(meta, dict) else {}
    out.setdefault("name", name)
    out.setdefault("description", description)
    return out


def _folder_files(live: LiveIndex, sid: str) -> list[str] | None:
    """Relative paths of the files in a skill's folder (sorted; SKILL.md first), or None when the
    folder holds more than the extension's limits allow."""
    folder = live.folder(sid)
    if folder is None:
        return [SKILL_FILE]
    paths: list[str] = []
    total = 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for f in sorted(files):
            full = os.path.join(root, f)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            size = os.path.getsize(full)
            if size > MAX_SKILL_FILE_BYTES:
                continue  # the reader refuses it: not a file of the served skill
            rel = os.path.relpath(full, folder).replace(os.sep, "/")
            paths.append(rel)
            total += size
            if len(paths) > MAX_RESOURCES or total > MAX_TOTAL_BYTES:
                return None
    return [SKILL_FILE] + sorted(p for p in paths if p != SKILL_FILE)


def skill_entry(live: LiveIndex, skill_id: str) -> dict[str, Any]:
    """The extension's ``Skill`` entry of one indexed skill (see the module docstring).

    Raises
    ------
    UnknownSkillError
        No skill has this id, or its text is not available.
    """
    from skillsight_fast.agents.live import SkillFileError

    served = live.skill_text(skill_id)
    meta = live.index.skills[live.row(skill_id)]
    skill_md = str(served["text"]).encode("utf-8")
    entry: dict[str, Any] = {"uri": skill_uri(skill_id),
                             "frontmatter": frontmatter_of(served["text"], meta.name, meta.description)}
    files = _folder_files(live, skill_id)
    if files is None:
        entry["resources"] = "dynamic"
        return entry
    resources = [_resource(skill_uri(skill_id), skill_md)]
    for rel in files[1:]:
        try:
            data, _, _ = live.skill_file(skill_id, rel)
        except SkillFileError:
            continue  # refused by the reader (a hard link, a file gone): not served, not listed
        resources.append(_resource(skill_uri(skill_id, rel), data))
    entry["resources"] = resources
    return entry


def list_skills(service: Any, cursor: str | None = None) -> dict[str, Any]:
    """The ``skills/list`` result: the entries of one ``resources/list`` page and its cursor.

    Raises
    ------
    InvalidCursorError
        A cursor this server did not give, or one of an index version no longer served.
    """
    records, nxt = service.resources_page(cursor)
    live = service.live()
    skills = []
    for r in records:
        sid, _ = live.parse_uri(r["uri"])
        skills.append(skill_entry(live, sid))
    out: dict[str, Any] = {"resultType": "complete", "skills": skills, "ttlMs": TTL_MS, "cacheScope": CACHE_SCOPE}
    if nxt is not None:
        out["nextCursor"] = nxt
    return out


def get_skill(service: Any, uri: Any) -> dict[str, Any]:
    """The ``skills/get`` result for the URI of a served skill's SKILL.md.

    Raises
    ------
    UnknownSkillError
        ``uri`` is not a ``skill://`` URI of a served skill's SKILL.md.
    """
    from skillsight_fast.agents.live import UnknownSkillError

    if not isinstance(uri, str) or not uri.startswith(SCHEME):
        raise UnknownSkillError(f"skills/get needs the {SCHEME} URI of a skill's {SKILL_FILE}")
    live = service.live()
    sid, rel = live.parse_uri(uri)
    if rel != SKILL_FILE:
        raise UnknownSkillError(f"{uri[:200]!r} is a file of skill {sid!r}, not its {SKILL_FILE}")
    return {"resultType": "complete", "skill": skill_entry(live, sid), "ttlMs": TTL_MS,
            "cacheScope": CACHE_SCOPE}


def skills_extension(service: Any) -> Any:
    """The extension for ``MCPServer(extensions=[...])`` (mcp ≥ 2 with SEP-2133 extensions).

    Raises
    ------
    SkillsightError
        The installed MCP SDK has no extension API.
    """
    try:
        import anyio
        import mcp_types
        from mcp.server.extension import Extension, MethodBinding
        from mcp.shared.exceptions import MCPError
        from pydantic import ConfigDict
    except ImportError:
        raise SkillsightError("the MCP skills extension needs an MCP SDK with extensions (mcp>=2)") from None

    class ListSkillsParams(mcp_types.PaginatedRequestParams):  # type: ignore[misc,name-defined]
        """``skills/list`` params: an optional ``cursor``."""

    class GetSkillParams(mcp_types.RequestParams):  # type: ignore[misc,name-defined]
        """``skills/get`` params: the SKILL.md ``uri``."""

        model_config = ConfigDict(extra="allow")
        uri: str

    async def handle_list(ctx: Any, params: Any) -> dict[str, Any]:
        try:
            return await anyio.to_thread.run_sync(list_skills, service, getattr(params, "cursor", None))
        except QueryError as exc:  # a bad cursor
            raise MCPError(mcp_types.INVALID_PARAMS, str(exc)) from None

    async def handle_get(ctx: Any, params: Any) -> dict[str, Any]:
        try:
            return await anyio.to_thread.run_sync(get_skill, service, params.uri)
        except QueryError as exc:  # an unknown skill or URI
            raise MCPError(mcp_types.INVALID_PARAMS, str(exc)) from None

    class SkillsExtension(Extension):  # type: ignore[misc,valid-type]
        """``skills/list`` and ``skills/get`` over the served index (SEP-2640)."""

        identifier = EXTENSION_ID

        def methods(self) -> Any:
            return (MethodBinding("skills/list", ListSkillsParams, handle_list),
                    MethodBinding("skills/get", GetSkillParams, handle_get))

    return SkillsExtension()
