"""Reading skill libraries: SKILL.md folder trees, JSONL files and dataset folders."""

from __future__ import annotations

import dataclasses
import gzip
import logging
import os
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillsight_fast.errors import DuplicateSkillError, EmptyLibraryError, SkillFormatError
from skillsight_fast.files import iter_lines, sha256_text
from skillsight_fast.limits import clean_text, load_json, read_regular_file

logger = logging.getLogger(__name__)

#: A SKILL.md larger than this is rejected (a real skill is a few to a few hundred KB).
MAX_SKILL_BYTES = 4 * 1024 * 1024
SKILL_FILE = "SKILL.md"

#: Front-matter keys read besides ``name`` and ``description``, by the field they fill (first
#: match wins for ``when_to_use``; list fields merge every key). Unknown keys are ignored.
FRONT_MATTER_KEYS: dict[str, tuple[str, ...]] = {
    "when_to_use": ("when_to_use", "when-to-use", "whenToUse"),
    "tags": ("tags", "metadata.tags", "keywords", "category", "metadata.category"),
    "triggers": ("triggers", "trigger", "metadata.triggers"),
    "examples": ("examples", "example_queries", "example-queries", "use-cases", "use_cases"),
}
#: At most this many items of a list field are kept, each cut to MAX_FIELD_CHARS.
MAX_FIELD_ITEMS = 32
MAX_FIELD_CHARS = 1024
#: A skill whose name is longer is skipped as broken (a real name is a few words; the Agent Skills
#: format allows 64 characters). Names are searched as tasks by the label-free abstention rule, so
#: one huge name would otherwise fail the build of the whole library.
MAX_NAME_CHARS = MAX_FIELD_CHARS


def check_name_length(name: str, source: str) -> None:
    """Raise SkillFormatError (naming ``source``) for a name over :data:`MAX_NAME_CHARS` characters."""
    if len(name) > MAX_NAME_CHARS:
        raise SkillFormatError(f"{source}: 'name' is {len(name):,} characters, over the {MAX_NAME_CHARS:,} "
                               "limit")


def namedesc_text(name: str, description: str) -> str:
    """The text of a skill's name + description vector (the ``text+namedesc`` document vector)."""
    return f"{name}\n{description}"


@dataclass(frozen=True)
class Skill:
    """One skill: the unit that is indexed and retrieved.

    Attributes
    ----------
    id : str
        Unique id: the folder's path relative to its library root, or the record's ``id``.
    name, description, body : str
        Front-matter fields and the Markdown body.
    path : str
        The SKILL.md file, or ``""`` for records read from JSONL.
    """

    id: str
    name: str
    description: str
    body: str
    path: str = ""
    tags: tuple[str, ...] = ()
    when_to_use: str = ""
    triggers: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()

    @property
    def hints(self) -> str:
        """The retrieval fields beyond name and description, one line each ("" when none).

        ``when_to_use``, then ``triggers`` and ``examples`` (``; ``-joined), then ``tags``.
        """
        lines = [self.when_to_use, "; ".join(self.triggers), "; ".join(self.examples),
                 ", ".join(self.tags)]
        return "\n".join(line for line in lines if line)

    @property
    def text(self) -> str:
        """The text that is embedded and analysed: name, description, the other retrieval fields
        (:attr:`hints`, only when the skill has any) and body."""
        hints = self.hints
        if hints:
            return f"{self.name}\n{self.description}\n{hints}\n{self.body}"
        return f"{self.name}\n{self.description}\n{self.body}"

    @property
    def sha256(self) -> str:
        """Content hash of the indexed text (used by incremental updates)."""
        return sha256_text(self.text)


@dataclass
class Problem:
    """A source that could not be read, and why."""

    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


@dataclass
class LoadReport:
    """The skills read from some sources, and the files skipped with their reason."""

    skills: list[Skill] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Absolute, resolved folders the SKILL.md files were read from (servers read files only below them).
    roots: list[str] = field(default_factory=list)


def parse_skill_md(text: str, *, source: str = "SKILL.md") -> tuple[str, str, str]:
    """Split a SKILL.md into (name, description, body) using a real YAML parser.

    :func:`parse_front_matter` keeps the whole mapping (:func:`front_matter_fields` reads the
    other retrieval fields from it).

    Raises
    ------
    SkillFormatError
        No front matter, unterminated front matter, invalid YAML, or a missing/non-string
        ``name`` or ``description``.

    Examples
    --------
    >>> parse_skill_md("---\\nname: pdf\\ndescription: Read PDFs.\\n---\\n# PDF\\n")
    ('pdf', 'Read PDFs.', '# PDF\\n')
    """
    meta, body = parse_front_matter(text, source=source)
    return meta["name"].strip(), " ".join(meta["description"].split()), body


def parse_front_matter(text: str, *, source: str = "SKILL.md") -> tuple[dict[str, Any], str]:
    """The front matter of a SKILL.md (a mapping with non-empty string ``name`` and
    ``description``) and its body.

    Raises
    ------
    SkillFormatError
        As :func:`parse_skill_md`.
    """
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError(f"{source}: no YAML front matter (the file must start with '---')")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise SkillFormatError(f"{source}: front matter is not closed by a '---' line")
    from skillsight_fast.limits import load_yaml

    def hint(exc: Exception) -> str:
        mark = getattr(exc, "problem_mark", None)
        if "mapping values are not allowed" in str(getattr(exc, "problem", "")) and mark is not None:
            key = lines[1 + mark.line].split(":", 1)[0].strip() if 1 + mark.line < end else ""
            return (f": a ': ' inside an unquoted value; quote the value, e.g. {key or 'description'}: "
                    "\"...: ...\"")
        return ""

    # the bounded YAML reader: nesting and alias expansion within fixed budgets, one-line errors
    meta = load_yaml("".join(lines[1:end]), error=SkillFormatError, what=source, line_offset=1,
                     label="invalid YAML in front matter", hint=hint)
    if not isinstance(meta, dict):
        raise SkillFormatError(f"{source}: front matter is not a mapping of keys to values")
    for key in ("name", "description"):
        value = meta.get(key)
        if not isinstance(value, str) or not value.strip():
            raise SkillFormatError(f"{source}: front matter needs a non-empty string '{key}'")
    check_name_length(meta["name"].strip(), source)
    return meta, "".join(lines[end + 1 :])


def _strings(value: Any, split: bool = False) -> list[str]:
    """A front-matter value as a list of one-line strings (``split``: a string is comma-separated)."""
    if isinstance(value, str):
        items: list[Any] = value.split(",") if split else [value]
    elif isinstance(value, list):
        items = value
    else:
        return []
    out = []
    for item in items[:MAX_FIELD_ITEMS]:
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            item = str(item)
        if isinstance(item, str):
            one = clean_text(" ".join(item.split()))[:MAX_FIELD_CHARS]
            if one:
                out.append(one)
    return out


def _lookup(meta: dict[str, Any], key: str) -> Any:
    """``meta[key]``, where ``a.b`` reads ``meta["a"]["b"]``."""
    value: Any = meta
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def front_matter_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """The retrieval fields of a parsed front matter (:data:`FRONT_MATTER_KEYS`), as
    :class:`Skill` keyword arguments; values of the wrong type are ignored.

    Examples
    --------
    >>> front_matter_fields({"tags": "pdf, documents", "when_to_use": "When a PDF is given.",
    ...                      "metadata": {"triggers": ["merge pdf"]}, "risk": "low"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'tags': ('pdf', 'documents'), 'when_to_use': 'When a PDF is given.', 'triggers': ('merge pdf',),
     'examples': ()}
    """
    out: dict[str, Any] = {}
    for field_name, keys in FRONT_MATTER_KEYS.items():
        if field_name == "when_to_use":
            text = next((v for v in (_lookup(meta, k) for k in keys) if isinstance(v, str) and v.strip()), "")
            out[field_name] = clean_text(" ".join(text.split()))[: 4 * MAX_FIELD_CHARS]
            continue
        seen: dict[str, None] = {}
        for key in keys:
            for item in _strings(_lookup(meta, key), split=field_name == "tags"):
                seen.setdefault(item, None)
        out[field_name] = tuple(seen)[:MAX_FIELD_ITEMS]
    return {"tags": out["tags"], "when_to_use": out["when_to_use"], "triggers": out["triggers"],
            "examples": out["examples"]}


def read_skill_file(path: Path, skill_id: str) -> Skill:
    """Read and validate one SKILL.md file.

    Raises
    ------
    SkillFormatError
        Too large, binary, not UTF-8, or malformed front matter.
    """
    # a regular file only (a FIFO would hang, /dev/zero fill memory), and never more than the limit
    raw = read_regular_file(path, MAX_SKILL_BYTES, error=SkillFormatError, what="SKILL.md")
    if b"\x00" in raw:
        raise SkillFormatError(f"{path}: binary file (contains NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFormatError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    meta, body = parse_front_matter(text, source=str(path))
    return Skill(id=skill_id, name=meta["name"].strip(), description=" ".join(meta["description"].split()),
                 body=body, path=os.path.abspath(path), **front_matter_fields(meta))


def _walk_skill_files(root: Path) -> Iterator[Path]:
    """SKILL.md files below ``root``, following symlinks but never the same folder twice."""
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:  # symlink loop or a folder linked twice
            dirnames[:] = []
            continue
        seen.add(real)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") or d in (".claude", ".github"))
        if SKILL_FILE in filenames:
            yield Path(dirpath) / SKILL_FILE


def _links_outside(file: Path, root: Path) -> bool:
    """True when ``file`` is a symlink whose target lies outside both the library root and the
    folder holding the link (a linked skill *folder* is read; a linked SKILL.md must stay inside).
    A link to something that is not a regular file is left to the read, which refuses it as such."""
    if not file.is_symlink() or not os.path.isfile(file):
        return False
    target = os.path.realpath(file)
    inside = (os.path.realpath(root), os.path.realpath(file.parent))
    return not any(target.startswith(folder.rstrip(os.sep) + os.sep) for folder in inside)


def read_skill_tree(root: Path, report: LoadReport, *, strict: bool = False) -> None:
    """Append the skills of a folder tree to ``report``; broken files become problems, and so does
    a SKILL.md that is a symlink to a file outside the library (never read)."""
    for file in _walk_skill_files(root):
        rel = file.parent.relative_to(root).as_posix()
        skill_id = rel if rel != "." else root.resolve().name
        try:
            (skill_id + str(file)).encode("utf-8")
        except UnicodeEncodeError:  # checked now, not after encoding when the index is written
            report.problems.append(Problem(os.fsencode(file).decode("utf-8", "replace"),
                                           "folder name is not valid UTF-8"))
            continue
        if _links_outside(file, root):
            if strict:
                raise SkillFormatError(f"{file}: a symlink to a file outside the library (not read)")
            report.problems.append(Problem(str(file), "a symlink to a file outside the library (not read)"))
            continue
        try:
            report.skills.append(read_skill_file(file, skill_id))
        except SkillFormatError as exc:
            if strict:
                raise
            report.problems.append(Problem(str(file), str(exc).removeprefix(f"{file}: ")))


def read_jsonl(path: Path, report: LoadReport, *, strict: bool = False, skip_ids: Iterable[str] = ()) -> None:
    """Append the records ``{id, name, description, body}`` of a .jsonl / .jsonl.gz file.

    Optional keys are read as in a SKILL.md front matter (:data:`FRONT_MATTER_KEYS`: ``tags``,
    ``when_to_use``, ``triggers``, ``examples``, ...); other keys are ignored.
    """
    report.skills.extend(iter_jsonl_skills(path, report, strict=strict, skip_ids=skip_ids))


def iter_jsonl_skills(path: Path, report: LoadReport, *, strict: bool = False,
                      skip_ids: Iterable[str] = ()) -> Iterator[Skill]:
    """The records of a .jsonl / .jsonl.gz file, one at a time (see :func:`read_jsonl`).

    Broken records become problems in ``report`` (``report.skills`` is not touched).
    """
    skip = set(skip_ids)
    try:
        for lineno, line in iter_lines(path):  # a BOM must not eat the first record
            where = f"{path}:{lineno}"
            try:
                rec = load_json(line, error=SkillFormatError, what=where)
                if not isinstance(rec, dict):
                    raise SkillFormatError(f"{where}: not a JSON object")
                for key in ("id", "name"):
                    if not isinstance(rec.get(key), str) or not rec[key].strip():
                        raise SkillFormatError(f"{where}: needs a non-empty string '{key}'")
                for key in ("description", "body", "when_to_use"):
                    if not isinstance(rec.get(key, ""), str):
                        raise SkillFormatError(f"{where}: '{key}' must be a string")
                for key in ("tags", "triggers", "examples"):
                    if not isinstance(rec.get(key, []), (list, str)):
                        raise SkillFormatError(f"{where}: '{key}' must be a list of strings")
                if clean_text(rec["id"]) != rec["id"]:
                    raise SkillFormatError(f"{where}: 'id' holds a lone surrogate")
                check_name_length(rec["name"], where)
            except SkillFormatError as exc:
                msg = str(exc)
                if strict:
                    raise SkillFormatError(msg) from None
                report.problems.append(Problem(where, msg.removeprefix(f"{where}: ")))
                continue
            if rec["id"] in skip:
                continue
            # a record's "path" is not kept: a JSONL source must not point the server at a file
            yield Skill(rec["id"], clean_text(rec["name"]), clean_text(rec.get("description", "")),
                        clean_text(rec.get("body", "")), **front_matter_fields(rec))
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise SkillFormatError(f"{path}: cannot read ({exc})") from None


def is_dataset_folder(path: Path) -> bool:
    """A dataset folder in the shared format holds meta.json and corpus.jsonl.gz."""
    return (path / "meta.json").is_file() and (path / "corpus.jsonl.gz").is_file()


def iter_dataset_skills(path: Path, report: LoadReport, *, strict: bool = False) -> Iterator[Skill]:
    """A dataset's corpus, then its distractor pool minus the excluded ids, one skill at a time."""
    meta_path = path / "meta.json"
    meta = load_json(read_regular_file(meta_path, 1 << 24, error=SkillFormatError, what="meta.json"),
                     error=SkillFormatError, what=str(meta_path))
    if not isinstance(meta, dict):
        raise SkillFormatError(f"{meta_path}: not a JSON object")
    pool = meta.get("distractors")
    excluded = meta.get("excluded_pool_ids", [])
    if pool is not None and (not isinstance(pool, str) or "/" in pool or pool in ("", ".", "..")):
        raise SkillFormatError(f"{meta_path}: 'distractors' must be the name of a sibling folder")
    if not isinstance(excluded, list) or not all(isinstance(x, str) for x in excluded):
        raise SkillFormatError(f"{meta_path}: 'excluded_pool_ids' must be a list of strings")
    pool_dir = path.parent / pool if pool else None
    if pool_dir is not None and not is_dataset_folder(pool_dir):
        raise SkillFormatError(f"{path}: its distractor pool {pool!r} is not at {pool_dir}")
    yield from iter_jsonl_skills(path / "corpus.jsonl.gz", report, strict=strict)
    if pool_dir is not None:
        yield from iter_jsonl_skills(pool_dir / "corpus.jsonl.gz", report, strict=strict, skip_ids=excluded)


def load_skills(sources: Sequence[str | os.PathLike[str]], *, strict: bool = False) -> LoadReport:
    """Read skills from folder trees, JSONL files and dataset folders.

    Parameters
    ----------
    sources : paths
        Each a folder tree of SKILL.md files, a ``.jsonl``/``.jsonl.gz`` file, or a dataset folder.
    strict : bool
        Raise on the first broken file instead of skipping it.

    Returns
    -------
    LoadReport
        The skills in source order, and the problems met.

    Raises
    ------
    SkillFormatError
        A source does not exist or is unreadable (or any broken file, with ``strict``).
    DuplicateSkillError
        Two skills share an id.
    EmptyLibraryError
        No skill was found.
    """
    report = LoadReport()
    skills = list(iter_skills(sources, report, strict=strict))
    report.skills = skills
    return report


def iter_skills(sources: Sequence[str | os.PathLike[str]], report: LoadReport, *,
                strict: bool = False) -> Iterator[Skill]:
    """The skills of :func:`load_skills`, same order and ids, one at a time (the streaming build).

    Records of JSONL files and dataset folders are read as they are consumed; SKILL.md folder
    trees are read when the iteration starts (skills of different trees that share an id are
    renamed, :func:`prefix_colliding_tree_ids`, which needs every tree's ids). The folders read go
    into ``report.roots`` and the skipped files into ``report.problems``; ``report.skills`` is not
    touched. Raises what :func:`load_skills` raises, a duplicate id when its second copy is reached
    and an empty library at the end.
    """
    check_sources_do_not_overlap(sources)
    paths: list[Path] = []
    for src in sources:
        path = Path(src).expanduser()
        if not path.exists():
            raise SkillFormatError(f"{path}: no such file or folder")
        if not (path.is_dir() or path.name.endswith((".jsonl", ".jsonl.gz")) or path.name == SKILL_FILE):
            raise SkillFormatError(f"{path}: not a folder, a .jsonl(.gz) file or a SKILL.md")
        paths.append(path)
    tree_report = LoadReport(problems=report.problems)
    trees: list[tuple[Path, int, int]] = []  # (root, first, end) rows read from each folder tree
    spans: dict[int, tuple[int, int]] = {}
    for i, path in enumerate(paths):
        if path.is_dir() and not is_dataset_folder(path):
            start = len(tree_report.skills)
            report.roots.append(os.path.realpath(path))
            read_skill_tree(path, tree_report, strict=strict)
            trees.append((path, start, len(tree_report.skills)))
            spans[i] = trees[-1][1:]
        elif path.name == SKILL_FILE:
            report.roots.append(os.path.realpath(path.parent))
    prefix_colliding_tree_ids(tree_report, trees)
    seen: dict[str, str] = {}
    for i, path in enumerate(paths):
        if i in spans:
            a, b = spans[i]
            these: Iterable[Skill] = tree_report.skills[a:b]
        elif path.is_dir():
            these = iter_dataset_skills(path, report, strict=strict)
        elif path.name == SKILL_FILE:
            these = [read_skill_file(path, path.parent.resolve().name)]
        else:
            these = iter_jsonl_skills(path, report, strict=strict)
        for s in these:
            if s.id in seen:
                raise DuplicateSkillError(
                    f"duplicate skill id {s.id!r} ({seen[s.id] or 'record'} and {s.path or 'record'}); "
                    "ids must be unique across all sources"
                )
            seen[s.id] = s.path
            yield s
    if not seen:
        detail = (f" ({len(report.problems)} files skipped as broken; first: {report.problems[0]})"
                  if report.problems else "")
        raise EmptyLibraryError(f"no skills found in {', '.join(map(str, sources))}{detail}")


def check_sources_do_not_overlap(sources: Sequence[str | os.PathLike[str]]) -> None:
    """Refuse a source given twice, or one inside another (its skills would be indexed twice).

    Raises
    ------
    SkillFormatError
        Two sources resolve (symlinks followed) to the same path, or one lies inside the other.
    """
    seen: list[tuple[str, Path]] = []
    for src in sources:
        path = Path(src).expanduser()
        real = os.path.realpath(path)
        for other_real, other in seen:
            if real == other_real:
                raise SkillFormatError(f"{path} and {other} are the same source; give it once")
            inner, outer = (path, other) if real.startswith(os.path.join(other_real, "")) else (other, path)
            if real.startswith(os.path.join(other_real, "")) or other_real.startswith(os.path.join(real, "")):
                raise SkillFormatError(f"{inner} lies inside {outer}: its skills would be indexed twice; "
                                       "give only one of them")
        seen.append((real, path))


def root_labels(roots: Sequence[Path]) -> list[str]:
    """Short distinct labels for library roots: the shortest path suffixes that tell them apart.

    Examples
    --------
    >>> root_labels([Path("/home/a/.claude/skills"), Path("/repo/.github/skills")])
    ['.claude/skills', '.github/skills']
    """
    parts = [Path(os.path.abspath(r)).parts for r in roots]
    depth = 1
    while True:
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels) or depth >= max(len(p) for p in parts):
            return labels
        depth += 1


def prefix_colliding_tree_ids(report: LoadReport, trees: Sequence[tuple[Path, int, int]]) -> None:
    """Give skills of different folder trees that share an id the id ``<root label>:<id>``.

    Ids stay the plain relative paths unless two roots hold the same relative path; then every
    skill with that id (in each tree) is prefixed with its root's label (:func:`root_labels`),
    so adding a second library renames only the skills that collide.
    """
    if len(trees) < 2:
        return
    owners: dict[str, set[int]] = {}
    for t, (_, start, end) in enumerate(trees):
        for s in report.skills[start:end]:
            owners.setdefault(s.id, set()).add(t)
    colliding = {sid for sid, ts in owners.items() if len(ts) > 1}
    if not colliding:
        return
    labels = root_labels([root for root, _, _ in trees])
    for t, (_, start, end) in enumerate(trees):
        for i in range(start, end):
            s = report.skills[i]
            if s.id in colliding:
                report.skills[i] = dataclasses.replace(s, id=f"{labels[t]}:{s.id}")
    logger.info("prefixed %d skill ids that occur in several roots", len(colliding))
