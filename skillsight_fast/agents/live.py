"""One version of a served index: the index, its skill texts and its abstention rule, as one object.

A server holds exactly one :class:`LiveIndex` at a time and replaces it with a single reference
assignment (atomic in Python), so a request that took the live index at its start sees one version
of the index, the texts and the calibration to its end, even while ``serve --watch`` swaps a new
version in. Skills are addressed as MCP resources under the ``skill://`` scheme of the
Skills-over-MCP draft (SEP-2640): ``skill://<skill id>/SKILL.md`` for a skill and
``skill://<skill id>/<relative path>`` for a file in its folder.
"""

from __future__ import annotations

import mimetypes
import os
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from skillsight_fast.engine.columns import rows_by_id
from skillsight_fast.errors import QueryError
from skillsight_fast.library.skills import MAX_SKILL_BYTES, SKILL_FILE

if TYPE_CHECKING:
    from skillsight_fast.engine.abstention import Abstention
    from skillsight_fast.engine.index import SkillIndex

#: URI scheme of skill resources (Skills-over-MCP draft).
SCHEME = "skill://"
#: Largest supporting file (scripts/, references/, ...) that get_skill or a resource read returns.
MAX_SKILL_FILE_BYTES = 1024 * 1024
#: Longest ``skill://`` URI parsed (characters); a longer one is refused before any work.
MAX_URI_CHARS = 8192


class UnknownSkillError(QueryError):
    """get_skill was asked for an id that is not in the index."""


class SkillFileError(QueryError):
    """A file inside a skill folder was asked for by a path that is not allowed or not there."""


def skill_uri(skill_id: str, file: str = SKILL_FILE) -> str:
    """``skill://<id>/<file>``, each id segment percent-encoded (ids may hold ``:`` or ``@``).

    Examples
    --------
    >>> skill_uri("pdf")
    'skill://pdf/SKILL.md'
    >>> skill_uri("skillsbench:pdf@merge", "scripts/run.py")
    'skill://skillsbench%3Apdf%40merge/scripts/run.py'
    """
    sid = "/".join(quote(part, safe="") for part in skill_id.split("/"))
    return f"{SCHEME}{sid}/{quote(file, safe='/')}"


@dataclass(frozen=True, eq=False)
class LiveIndex:
    """An index with everything read from its folder at the same time (one version).

    Attributes
    ----------
    index : SkillIndex
    abstention : Abstention or None
        The rule applied to its searches (from the same folder's ``calibration.json``, or explicit).
    directory : Path
        The index folder it was loaded from.
    version : int
        Counts the versions a server has served (0 = the one it started with).
    """

    index: SkillIndex
    abstention: Abstention | None
    directory: Path
    version: int = 0
    row_of: dict[str, int] = field(default_factory=dict)
    _bodies: list[str] | None = None

    @classmethod
    def of(cls, index: SkillIndex, abstention: Abstention | None, directory: str | os.PathLike[str], *,
           version: int = 0) -> LiveIndex:
        """Wrap a loaded index and read its stored skill bodies now.

        The bodies are read with the index, pinned to the ``texts.jsonl`` digest the index was
        loaded with (``SkillIndex.texts_sha256``): a later ``update`` replacing the folder, or a
        watcher writing the next version, can never make one live index mix two versions.
        """
        from skillsight_fast.engine.io import read_bodies

        directory = Path(directory).expanduser()
        stored = index.state.bodies
        if stored is None:  # a format-3 index carries its bodies' column, opened with the index
            stored = getattr(getattr(index, "state", None), "stored_texts", None)
        bodies = stored if stored is not None else read_bodies(directory, index.state.texts_sha256)
        if bodies is not None and len(bodies) != len(index):
            bodies = None
        return cls(index=index, abstention=abstention, directory=directory, version=version,
                   row_of=rows_by_id(index.skills), _bodies=bodies)  # type: ignore[arg-type]

    def with_abstention(self, abstention: Abstention | None) -> LiveIndex:
        """The same version with another abstention rule."""
        return LiveIndex(self.index, abstention, self.directory, self.version, self.row_of, self._bodies)

    def bodies(self) -> list[str] | None:
        """The stored skill bodies (``texts.jsonl``, read with the index), or None when it has none."""
        return self._bodies

    # ------------------------------------------------------------------ lookups
    def row(self, skill_id: Any) -> int:
        """Row of a skill id; UnknownSkillError when there is none."""
        if not isinstance(skill_id, str) or skill_id not in self.row_of:
            raise UnknownSkillError(f"unknown skill id {skill_id!r}")
        return self.row_of[skill_id]

    def roots(self) -> list[str]:
        """The library folders the index records (``skillsight index`` records them; may be empty)."""
        return list(self.index.state.roots or [])

    def folder(self, skill_id: str) -> Path | None:
        """The folder of a skill read from a SKILL.md file (None for JSONL/dataset records, and for
        a recorded path that is relative or, resolved, no longer under an indexed root)."""
        meta = self.index.skills[self.row(skill_id)]
        if not meta.path or Path(meta.path).name != SKILL_FILE or not Path(meta.path).is_absolute():
            return None
        folder = Path(meta.path).parent
        if not _under_roots(os.path.realpath(folder), self.roots()):
            return None
        return folder

    def parse_uri(self, uri: str) -> tuple[str, str]:
        """``(skill id, relative file path)`` of a ``skill://`` URI of this live index.

        The id is the longest leading run of path segments that names an indexed skill (ids are
        relative folder paths, so they may hold ``/`` themselves).

        Raises
        ------
        UnknownSkillError
            Not a skill URI, or no indexed skill matches it.
        """
        if not isinstance(uri, str) or not uri.startswith(SCHEME):
            raise UnknownSkillError(f"not a {SCHEME} URI: {str(uri)[:200]!r}")
        if len(uri) > MAX_URI_CHARS:
            raise UnknownSkillError(f"a {SCHEME} URI of {len(uri):,} characters is over the "
                                    f"{MAX_URI_CHARS:,} limit")
        parts = uri[len(SCHEME):].split("?", 1)[0].split("#", 1)[0].split("/")
        # only as many leading segments as the deepest id has are tried (linear in the URI's length)
        for cut in range(min(len(parts) - 1, self._id_depth), 0, -1):
            sid = "/".join(unquote(p) for p in parts[:cut])
            if sid in self.row_of:
                return sid, unquote("/".join(parts[cut:]))
        raise UnknownSkillError(f"no indexed skill has the URI {uri[:200]!r}")

    @cached_property
    def _id_depth(self) -> int:
        """Most ``/``-separated segments of an indexed skill id."""
        return 1 + max((sid.count("/") for sid in self.row_of), default=0)

    def resources(self) -> list[dict[str, Any]]:
        """One resource record (uri, name, description, mimeType) per indexed skill's SKILL.md.

        Skills the index-time injection scan flagged (``index.flags``) are left out of the listing,
        as :func:`~skillsight_fast.agents.find.find_skills` leaves them out of its hits (a host may show
        the listing to its model); they stay readable by their URI, like ``get_skill`` by id.
        """
        flags = list(self.index.state.flags or [])
        flags += [[]] * (len(self.index.skills) - len(flags))
        return [{"uri": skill_uri(m.id), "name": m.name, "description": m.description,
                 "mimeType": "text/markdown"} for m, f in zip(self.index.skills, flags) if not f]

    def resources_page(self, start: int, limit: int) -> tuple[list[dict[str, Any]], int | None]:
        """The :meth:`resources` records of rows ``start..``, at most ``limit`` of them, and the row the
        next page starts at (None after the last listed skill): one page of ``resources/list``, in
        row order, without walking the rows of the other pages.
        """
        skills = self.index.skills
        flags = self.index.state.flags or []
        n = len(skills)

        def listed(row: int) -> bool:
            return row >= len(flags) or not flags[row]

        out: list[dict[str, Any]] = []
        row = max(0, int(start))
        while row < n and len(out) < limit:
            if listed(row):
                m = skills[row]
                out.append({"uri": skill_uri(m.id), "name": m.name, "description": m.description,
                            "mimeType": "text/markdown"})
            row += 1
        while row < n and not listed(row):  # no page of nothing but flagged skills at the end
            row += 1
        return out, (row if row < n else None)

    # ------------------------------------------------------------------ texts
    def skill_text(self, skill_id: Any) -> dict[str, Any]:
        """The SKILL.md text of an indexed skill (``{id, name, path, uri, source, text}``).

        The file at the path recorded in the index is read (never a path from the request), and
        only while it is under an indexed root and still holds the indexed text
        (:func:`read_indexed_skill_md`); otherwise (JSONL/dataset skills, a file gone, edited or
        replaced by a symlink) the text is rebuilt from the stored name, description and body and
        ``source`` says ``"index"``.
        """
        row = self.row(skill_id)
        meta = self.index.skills[row]
        text = read_indexed_skill_md(meta.path, meta.sha256, self.roots()) if meta.path else None
        source = "file"
        if text is None:
            bodies = self.bodies()
            if bodies is None:
                raise UnknownSkillError(f"the text of skill {skill_id!r} is not available "
                                        "(no readable SKILL.md and the index stores no texts)")
            text = front_matter(meta.name, meta.description) + bodies[row]
            source = "index"
        return {"id": meta.id, "name": meta.name, "path": meta.path, "uri": skill_uri(meta.id),
                "source": source, "text": text}

    def skill_file(self, skill_id: Any, relpath: Any) -> tuple[bytes, str, Path]:
        """The bytes, MIME type and real path of a file inside a skill's folder.

        ``relpath`` is relative to the folder that holds the skill's SKILL.md, with ``/``
        separators. It may not be absolute, contain ``..`` or empty segments, or resolve (through
        symlinks) to anything outside that folder; neither it nor the path it resolves to may have a
        segment starting with ``.`` (``.env``, ``.git/config``: a skill's files are never hidden
        ones); only regular files that everyone may read (mode ``o+r``: an owner-only file is
        private, whoever asks) and of at most :data:`MAX_SKILL_FILE_BYTES` are read, with a single
        link.

        Raises
        ------
        UnknownSkillError
            No skill has this id.
        SkillFileError
            The path is not allowed, the skill has no folder, or the file is not there.
        """
        self.row(skill_id)
        folder = self.folder(skill_id)
        if folder is None:
            raise SkillFileError(f"skill {skill_id!r} has no folder to read files from (indexed from a record, "
                                 "or its folder is no longer under an indexed root)")
        rel = check_relative_path(relpath)
        try:
            root = folder.resolve(strict=True)
            target = (root / rel).resolve(strict=True)
        except (OSError, RuntimeError):
            raise SkillFileError(f"skill {skill_id!r} has no file {relpath!r}") from None
        if not target.is_relative_to(root) or target == root:
            raise SkillFileError(f"{relpath!r} leaves the folder of skill {skill_id!r}")
        if any(part.startswith(".") for part in (*PurePosixPath(rel).parts, *target.relative_to(root).parts)):
            raise SkillFileError(f"{relpath!r} is a hidden file or folder of skill {skill_id!r}; "
                                 "hidden files are never served")
        try:
            mode = target.stat().st_mode
        except OSError:
            raise SkillFileError(f"skill {skill_id!r} has no file {relpath!r}") from None
        if not mode & stat.S_IROTH:
            raise SkillFileError(f"file {relpath!r} of skill {skill_id!r} is not readable by everyone; "
                                 "private files are never served")
        from skillsight_fast.limits import read_regular_file

        # the bounded reader: a regular file within the limit, and one with a single link (a hard
        # link in the folder may name any file of the same file system: resolving cannot tell)
        data = read_regular_file(target, MAX_SKILL_FILE_BYTES, error=SkillFileError,
                                 what=f"file {relpath!r} of skill {skill_id!r}", single_link=True)
        return data, mime_type(rel), target


def check_relative_path(relpath: Any) -> str:
    """A safe relative POSIX path inside a skill folder, or SkillFileError."""
    if not isinstance(relpath, str) or not relpath.strip():
        raise SkillFileError("the file path must be a non-empty relative path such as 'scripts/run.py'")
    if "\\" in relpath or "\x00" in relpath:
        raise SkillFileError(f"invalid file path {relpath!r} (use '/' separators)")
    p = PurePosixPath(relpath)
    if p.is_absolute() or relpath.startswith("~"):
        raise SkillFileError(f"the file path must be relative to the skill folder, got {relpath!r}")
    if any(part in ("..", "") for part in relpath.split("/")) or relpath.startswith("./.."):
        raise SkillFileError(f"the file path may not contain '..' or empty segments, got {relpath!r}")
    return p.as_posix()


def mime_type(relpath: str) -> str:
    """MIME type of a skill file by its name (Markdown for .md)."""
    if relpath.lower().endswith((".md", ".markdown")):
        return "text/markdown"
    guess, _ = mimetypes.guess_type(relpath)
    if guess is None and relpath.lower().endswith((".py", ".sh", ".txt", ".toml", ".yaml", ".yml", ".cfg")):
        guess = "text/plain"
    return guess or "application/octet-stream"


def _under_roots(real: str, roots: list[str]) -> bool:
    """``real`` (a resolved path) is inside one of ``roots``; True when no roots are recorded."""
    return not roots or any(real.startswith(os.path.join(os.path.realpath(r), "")) for r in roots)


def read_indexed_skill_md(path: str, sha256: str, roots: list[str]) -> str | None:
    """The SKILL.md at ``path`` if it is still under an indexed root and still holds the indexed text.

    Anything else (a relative path from an old index, a JSONL record pointing elsewhere, a file
    replaced by a symlink to a private file, an edited file) gives None: the caller serves the
    indexed text instead and says so (``source: "index"``).
    """
    from skillsight_fast.errors import SkillFormatError
    from skillsight_fast.library.skills import read_skill_file

    p = Path(path)
    if p.name != SKILL_FILE or not p.is_absolute():
        return None
    real = os.path.realpath(p)
    # the roots the library was read from, when recorded (`skillsight index` records them; an index
    # built through the API may not: then the content check below is what protects)
    if not _under_roots(real, roots):
        return None
    try:
        skill = read_skill_file(Path(real), "served")
    except SkillFormatError:
        return None
    if skill.sha256 != sha256:
        return None
    try:
        return Path(real).read_text(encoding="utf-8") if len(skill.body) < MAX_SKILL_BYTES else None
    except (OSError, UnicodeDecodeError):
        return None


def front_matter(name: str, description: str) -> str:
    """YAML front matter with a skill's name and description."""
    import yaml

    meta = yaml.safe_dump({"name": name, "description": description}, sort_keys=False,
                          allow_unicode=True, width=100_000)
    return f"---\n{meta}---\n"
