"""Bounded input: read only regular files, at most a size limit; parse JSON with depth limits.

Everything skillsight-fast reads from disk goes through :func:`read_regular_file`, so a FIFO, a
device (``/dev/zero``), a socket or a symlink to one is refused instead of hanging the process or
filling its memory, and no more than ``limit + 1`` bytes are ever read (a file that grows past
its ``stat`` size is still cut). Every JSON document goes through :func:`load_json`, which turns
the failures Python's parser raises beyond ``JSONDecodeError`` (``RecursionError`` on deep
nesting, ``ValueError`` on a 5,000-digit integer) into the caller's error class, and refuses
documents nested deeper than ``max_depth``. Every YAML document goes through :func:`load_yaml`,
which refuses nesting deeper than ``max_depth`` before it builds anything, and a document whose
aliases would expand it by more than a fixed budget of nodes or characters (a "billion laughs"
of 20 lines names 9^9 strings) or that refers to itself. :func:`load_document` reads a file that
is either (JSON or YAML) through all of it.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillsight_fast.errors import SkillsightError

#: Characters of one text the encoder's tokenizer sees. The encoder keeps at most 256 tokens, and a
#: WordPiece token spans at most 100 characters (longer words become [UNK]); real text reaches 256
#: tokens within ~1,500 characters, so 32,768 leaves every real embedding unchanged while bounding
#: the tokenizer's memory (it keeps what it truncates: a 3.4 MB text cost ~1 GB).
MAX_ENCODE_CHARS = 32_768
#: Deepest JSON nesting accepted in index files, manifests and side files.
MAX_JSON_DEPTH = 64
#: Most digits of a JSON integer (Python refuses > 4,300 with a ValueError).
MAX_INT_DIGITS = 40


def read_regular_file(path: str | os.PathLike[str], limit: int, *, error: type[SkillsightError],
                      what: str = "file", private: bool = False, single_link: bool = False) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    The file is opened non-blocking (a FIFO never blocks the open), checked to be a regular file
    on the open descriptor (no race with a swap of the path), and read up to ``limit + 1`` bytes.

    Parameters
    ----------
    private : bool
        Also require that the file belongs to this user and that nobody else may read or write it
        (mode ``0600`` or stricter): a secret must come from a file only its user could have written.
    single_link : bool
        Refuse a file with more than one hard link (a hard link inside a served folder may name a
        file from anywhere on the same file system, and resolving paths cannot tell).

    Raises
    ------
    error
        Missing, unreadable, not a regular file, over the limit, or failing ``private``/``single_link``.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise error(f"{p}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p}: {what} is not a regular file (a FIFO, device or socket); refusing to read it")
        if st.st_size > limit:
            raise error(f"{p}: {st.st_size:,} bytes is over the {limit:,}-byte limit for {what}")
        if private and hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
            raise error(f"{p}: {what} must belong to this user and be readable by it only (mode 0600)")
        if single_link and st.st_nlink > 1:
            raise error(f"{p}: {what} has {st.st_nlink} hard links; refusing to read it")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            block = os.read(fd, min(remaining, 1 << 22))
            if not block:
                break
            chunks.append(block)
            remaining -= len(block)
    except OSError as exc:
        raise error(f"{p}: cannot read {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise error(f"{p}: over the {limit:,}-byte limit for {what} (the file grew while read)")
    return data


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` (following symlinks) is a regular file; never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"a number out of range ({text[:20]}...)")
    return value


def _depth(obj: Any, max_depth: int) -> bool:
    """True when ``obj`` nests at most ``max_depth`` containers deep (iterative: no recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, (dict, list)):
            if d > max_depth:
                return False
            values = node.values() if isinstance(node, dict) else node
            # JSON values are exactly these types: a flat list of 100k strings costs one C-level pass
            kinds = set(map(type, values))
            if dict in kinds or list in kinds:  # only containers go on the stack
                stack.extend((v, d + 1) for v in values if isinstance(v, (dict, list)))
    return True


def load_json(data: str | bytes, *, error: type[SkillsightError], what: str, max_depth: int = MAX_JSON_DEPTH,
              allow_constants: bool = False, parse_float: Callable[[str], Any] | None = None) -> Any:
    """Parse one JSON document or raise ``error("<what>: ...")`` (never another exception).

    Parameters
    ----------
    data : str or bytes
        UTF-8 bytes (a leading BOM is dropped) or text.
    error : SkillsightError subclass
    what : str
        Where the document came from, for the message.
    max_depth : int
        Deepest nesting of objects and arrays accepted.
    allow_constants : bool
        Accept ``NaN``/``Infinity`` and overflowing floats (the manifest stores an infinite
        Otsu threshold); otherwise they are refused.
    parse_float : callable, optional
        Called with the text of each JSON number that has a fraction or exponent, instead of the
        finite-float check (a rewriter that must keep ``1e400`` as written).
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise error(f"{what}: not valid UTF-8 (byte {exc.start})") from None
    text = text.removeprefix("\ufeff")
    hooks: dict[str, Callable[[str], Any]] = {"parse_int": _parse_int}
    if not allow_constants:
        hooks["parse_float"] = _parse_float
        hooks["parse_constant"] = _refuse_constant
    if parse_float is not None:
        hooks["parse_float"] = parse_float
    try:
        obj = json.loads(text, **hooks)  # type: ignore[arg-type]
    except (ValueError, TypeError, RecursionError) as exc:
        raise _json_error(exc, error, what, with_line=True) from None
    if not _depth(obj, max_depth):
        raise error(f"{what}: JSON nested deeper than {max_depth} levels")
    return obj


def _json_error(exc: Exception, error: type[SkillsightError], where: str, *,
                with_line: bool = False) -> SkillsightError:
    """The one-line error for a JSON parse failure at ``where``."""
    if isinstance(exc, json.JSONDecodeError):
        return error(f"{where}: invalid JSON ({exc.msg}{f', line {exc.lineno}' if with_line else ''})")
    if isinstance(exc, RecursionError):
        return error(f"{where}: JSON nested too deeply")
    return error(f"{where}: invalid JSON ({str(exc)[:80]})")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed here")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (they cannot be encoded as UTF-8)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def load_json_lines(lines: list[str], *, error: type[SkillsightError], what: str) -> list[Any]:
    """One JSON value per non-empty line (JSONL), each parsed as :func:`load_json` would but without
    its depth walk: callers check that every value is flat (a string, or an object of strings)."""
    out: list[Any] = []
    decode = json.JSONDecoder(parse_int=_parse_int, parse_constant=_refuse_constant).decode  # one decoder
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            out.append(decode(line))
        except (ValueError, TypeError, RecursionError) as exc:
            raise _json_error(exc, error, f"{what}:{i + 1}") from None
    return out


#: Deepest nesting of mappings and sequences accepted in a YAML document.
MAX_YAML_DEPTH = 100
#: Most nodes that aliases may add to a YAML document when expanded (beyond the nodes it spells out).
MAX_YAML_ALIAS_NODES = 100_000
#: Most scalar characters that aliases may add to a YAML document when expanded.
MAX_YAML_ALIAS_CHARS = 1 << 24


def read_text(path: str | os.PathLike[str], limit: int, *, error: type[SkillsightError], what: str = "file",
              **checks: bool) -> str:
    """A regular UTF-8 text file of at most ``limit`` bytes (see :func:`read_regular_file`), BOM dropped."""
    raw = read_regular_file(path, limit, error=error, what=what, **checks)
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None


def _yaml_loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml_depth(text: str, max_depth: int, error: type[SkillsightError], what: str) -> None:
    """Refuse ``text`` if its events nest deeper than ``max_depth`` (the event stream is flat: no
    recursion, so a 100,000-deep document is refused in one pass instead of overflowing a stack)."""
    import yaml

    depth = 0
    starts = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    ends = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    for event in yaml.parse(text, Loader=_yaml_loader()):
        if isinstance(event, starts):
            depth += 1
            if depth > max_depth:
                raise error(f"{what}: YAML nested deeper than {max_depth} levels")
        elif isinstance(event, ends):
            depth -= 1


def _yaml_expansion(root: Any, error: type[SkillsightError], what: str, max_nodes: int,
                    max_chars: int) -> None:
    """Refuse a composed YAML node graph whose aliases expand it past the budgets, or that holds a cycle.

    Each node's expanded size (nodes, scalar characters) is computed once (post-order, iterative);
    a node reached through several aliases counts once per use, as a consumer walking the loaded
    data would meet it.
    """
    import yaml

    size: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    graph_nodes = graph_chars = 0
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            n, c = 1, 0
            for child in _children(node):
                cn, cc = size[id(child)]
                n, c = n + cn, c + cc
            if isinstance(node, yaml.ScalarNode):
                c = len(node.value)
            graph_nodes += 1
            graph_chars += c if isinstance(node, yaml.ScalarNode) else 0
            size[key] = (min(n, 1 << 62), min(c, 1 << 62))
            continue
        if key in size:
            continue
        if key in on_path:
            raise error(f"{what}: a YAML alias refers to a node that contains it (recursive document)")
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise error(f"{what}: a YAML alias refers to a node that contains it (recursive document)")
            if id(child) not in size:
                stack.append((child, False))
    total_nodes, total_chars = size[id(root)]
    if total_nodes - graph_nodes > max_nodes or total_chars - graph_chars > max_chars:
        raise error(f"{what}: YAML aliases expand the document past {max_nodes:,} nodes or {max_chars:,} "
                    f"characters (it spells out {graph_nodes:,} nodes; a \"billion laughs\"?)")


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        if value and isinstance(value[0], tuple):  # a mapping: (key, value) pairs
            return [n for pair in value for n in pair]
        return value
    return []


def load_yaml(text: str, *, error: type[SkillsightError], what: str, max_depth: int = MAX_YAML_DEPTH,
              max_alias_nodes: int = MAX_YAML_ALIAS_NODES, max_alias_chars: int = MAX_YAML_ALIAS_CHARS,
              line_offset: int = 0, label: str = "invalid YAML",
              hint: Callable[[Exception], str] | None = None) -> Any:
    """Parse one YAML document (safe tags only) or raise ``error("<what>: ...")``, never another exception.

    Three passes, each bounded: the event stream is checked for nesting deeper than ``max_depth``;
    the node graph is composed (aliases stay shared) and its expanded size is checked against the
    alias budgets (a cycle is refused); only then are Python objects built.

    Parameters
    ----------
    line_offset : int
        Added to the line numbers of parse errors (the front matter of a SKILL.md starts on line 2).
    label : str
        Says what failed in the message of a parse error (``<what>: <label> (line N)``).
    hint : callable, optional
        Given the parser's exception, returns text added to that message (advice on a common slip).
    """
    import yaml

    try:
        _yaml_depth(text, max_depth, error, what)
        loader = _yaml_loader()(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _yaml_expansion(node, error, what, max_alias_nodes, max_alias_chars)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1 + line_offset})" if mark is not None else ""
        raise error(f"{what}: {label}{where}{hint(exc) if hint is not None else ''}") from None
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:  # `date: 2001-13-01`, ...
        raise error(f"{what}: {label} ({type(exc).__name__}: {str(exc)[:80]})") from None


def load_document(path: str | os.PathLike[str], limit: int, *, error: type[SkillsightError], what: str,
                  max_depth: int = MAX_JSON_DEPTH, **checks: bool) -> Any:
    """A JSON or YAML file (JSON when its first character opens an object or array), read and parsed
    within the bounds of :func:`read_regular_file`, :func:`load_json` and :func:`load_yaml`."""
    text = read_text(path, limit, error=error, what=what, **checks)
    if text.lstrip().startswith(("{", "[")):
        return load_json(text, error=error, what=f"{path}", max_depth=max_depth)
    return load_yaml(text, error=error, what=f"{path}", max_depth=max_depth)
