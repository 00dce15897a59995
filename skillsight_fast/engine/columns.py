"""Strings stored as arrays: one UTF-8 blob and its int64 offsets, both ``.npy`` (format version 3).

A million skill records parsed from JSON lines cost seconds at every load; the same strings as one
``uint8`` blob with ``offsets[i]:offsets[i + 1]`` per string load in microseconds (memory-mapped or
read in one call) and are decoded only when a string is used. :class:`StringColumn` is such a column
as a read-only sequence of ``str``; :class:`SkillTable` the skill records
(:class:`~skillsight_fast.engine.state.SkillMeta`) over one interleaved column, with the permutation that
sorts the ids (an id is found by bisection, no dictionary of a million ids is built);
:class:`FlagList` the injection-scan flags, empty for every row the manifest does not name.

The checks that make these safe to index (offsets from 0 to the blob's length, never decreasing;
the id permutation a permutation that sorts the ids strictly, so ids are distinct) are in
:mod:`skillsight_fast.engine.validate`; the UTF-8 of each string is checked when it is decoded (a bad byte
raises :class:`~skillsight_fast.errors.IndexFormatError`), and of the whole blob with the checksums.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np

from skillsight_fast.errors import IndexFormatError

#: The fields of a skill record, in the order they are interleaved in the skills column; ``tags`` is
#: stored as a JSON list of strings ("" when the skill has none).
SKILL_FIELDS = ("id", "name", "description", "path", "sha256", "when_to_use", "tags")
_NF = len(SKILL_FIELDS)


def name_key(name: str) -> str:
    """What two skill names must share to be the same skill: case, spaces, ``-`` and ``_`` ignored.

    Examples
    --------
    >>> name_key("PDF Tools") == name_key("pdf-tools") == name_key("pdf_tools")
    True
    """
    return "".join(filter(str.isalnum, name.casefold()))


def name_groups(names: Iterable[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows sharing a :func:`name_key` with another row, as arrays: ``group_of`` int64 (n,)
    (-1: a name no other row has, or an empty key), ``ptr`` int64 (G + 1,) and ``rows`` int64 (m,),
    the rows of group g being ``rows[ptr[g]:ptr[g + 1]]`` in increasing order."""
    everything: dict[str, list[int]] = {}
    n = 0
    for j, name in enumerate(names):
        everything.setdefault(name_key(name), []).append(j)
        n = j + 1
    groups = [rows for key, rows in everything.items() if key and len(rows) > 1]
    group_of = np.full(n, -1, np.int64)
    ptr = np.zeros(len(groups) + 1, np.int64)
    if groups:
        np.cumsum([len(g) for g in groups], out=ptr[1:])
    rows = np.fromiter((j for g in groups for j in g), np.int64, int(ptr[-1]))
    for g, members in enumerate(groups):
        group_of[members] = g
    return group_of, ptr, rows


def encode_strings(strings: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(blob uint8 (bytes,), offsets int64 (n + 1,))`` of ``strings`` encoded as UTF-8."""
    parts = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(parts) + 1, np.int64)
    if parts:
        np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)), out=offsets[1:])
    return np.frombuffer(b"".join(parts), np.uint8).copy(), offsets


def row_index(i: int, n: int, what: str = "row") -> int:
    """``i`` as a row of a sequence of ``n`` items (negative ``i`` counts from the end); IndexError
    ``"<what> <i> out of range"`` when there is no such row."""
    j = int(i)
    if j < 0:
        j += n
    if not 0 <= j < n:
        raise IndexError(f"{what} {i} out of range")
    return j


def same_items(items: Sequence[Any], n: int, other: object) -> bool:
    """``items == other`` for a read-only sequence of ``n`` items: equal to any non-string sequence
    with the same items (NotImplemented for anything else)."""
    if isinstance(other, Sequence) and not isinstance(other, str):
        return len(other) == n and all(a == b for a, b in zip(items, other))
    return NotImplemented


class StringColumn(Sequence[str]):
    """A read-only sequence of strings over a UTF-8 blob and its offsets (see the module docstring).

    Parameters
    ----------
    blob : uint8 (bytes,)
    offsets : int64 (n + 1,)
        Checked by :func:`skillsight_fast.engine.validate.check_string_offsets` before a column is built
        from a loaded index.
    name : str
        What the column holds (for error messages).
    """

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, name: str = "strings") -> None:
        self.blob = blob
        self.offsets = offsets
        # a plain ndarray view of the (possibly memory-mapped) offsets: np.memmap's Python-level
        # __getitem__ costs ~1 µs per item, and a query's vocabulary bisection reads hundreds
        self._offsets = np.asarray(offsets)
        self.name = name
        self._view = memoryview(np.ascontiguousarray(blob).reshape(-1)).cast("B") if blob.size else memoryview(b"")
        self._n = int(offsets.shape[0]) - 1

    @classmethod
    def of(cls, strings: Iterable[str], name: str = "strings") -> StringColumn:
        """A column holding ``strings`` (in memory)."""
        return cls(*encode_strings(strings), name=name)

    def __len__(self) -> int:
        return self._n

    def raw(self, i: int) -> bytes:
        """The UTF-8 bytes of string ``i``."""
        return self._view[int(self._offsets[i]) : int(self._offsets[i + 1])].tobytes()

    def _decode(self, i: int) -> str:
        try:
            return self.raw(i).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IndexFormatError(f"{self.name}: string {i} is not valid UTF-8 (byte {exc.start})") from None

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._decode(j) for j in range(*i.indices(self._n))]
        return self._decode(row_index(i, self._n, f"{self.name}: index"))

    def __iter__(self) -> Iterator[str]:
        for j in range(self._n):
            yield self._decode(j)

    def __eq__(self, other: object) -> bool:
        return same_items(self, self._n, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StringColumn({self.name!r}, {self._n} strings, {self.blob.size:,} bytes)"

    def bisect(self, value: str, order: np.ndarray | None = None) -> int:
        """Position of ``value`` in this column sorted by ``order`` (the identity when None), or -1.

        Strings compare as their UTF-8 bytes, which is the order of their code points (Python's).
        """
        key = value.encode("utf-8", "surrogatepass")
        lo, hi = 0, self._n
        while lo < hi:
            mid = (lo + hi) // 2
            row = int(order[mid]) if order is not None else mid
            if self.raw(row) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < self._n:
            row = int(order[lo]) if order is not None else lo
            if self.raw(row) == key:
                return row
        return -1

    def decode_all(self) -> None:
        """Decode every string once (raises IndexFormatError at the first that is not UTF-8)."""
        try:
            bytes(self._view).decode("utf-8")
        except UnicodeDecodeError:
            for j in range(self._n):
                self._decode(j)
            raise  # pragma: no cover - a bad byte lies inside some string, found above


class SortedTerms(Mapping[str, int]):
    """term -> id over a sorted :class:`StringColumn` (the vocabulary), by bisection: what
    :attr:`~skillsight_fast.engine.lexicon.Lexicon.term_ids` is for a loaded index, without a dictionary
    of every term."""

    def __init__(self, vocab: StringColumn) -> None:
        self.vocab = vocab

    def get(self, term: str, default: Any = None) -> Any:  # type: ignore[override]
        j = self.vocab.bisect(term) if isinstance(term, str) else -1
        return default if j < 0 else j

    def __getitem__(self, term: str) -> int:
        j = self.get(term, -1)
        if j < 0:
            raise KeyError(term)
        return int(j)

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.vocab.bisect(term) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)


class SkillTable(Sequence[Any]):
    """The skill records of a loaded index as a sequence of :class:`~skillsight_fast.engine.state.SkillMeta`,
    decoded row by row from one :class:`StringColumn` (:data:`SKILL_FIELDS` interleaved per row).

    Parameters
    ----------
    column : StringColumn
        ``len(SKILL_FIELDS) * n`` strings.
    id_order : int64 (n,)
        The rows sorted by id (checked by :func:`skillsight_fast.engine.validate.check_sorted_strings`).
    """

    def __init__(self, column: StringColumn, id_order: np.ndarray,
                 groups: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None, *, record: Any = None) -> None:
        if len(column) % _NF:
            raise IndexFormatError(f"{column.name}: {len(column)} strings is not {_NF} fields per skill")
        self.column = column
        self.id_order = id_order
        self._n = len(column) // _NF
        #: (group_of, ptr, rows) of :func:`name_groups`, stored with the index (None: not stored).
        self.groups = groups
        #: The record type built per row (:class:`~skillsight_fast.engine.state.SkillMeta`, passed in by
        #: the caller: this module imports nothing of the engine).
        self.record = record

    def same_name(self, row: int) -> list[int]:
        """The rows whose name has the same :func:`name_key` as ``row``'s ([] when none), from the
        stored groups (computed here when the table has none)."""
        if self.groups is None:
            self.groups = name_groups(self.field(j, "name") for j in range(self._n))
        group_of, ptr, rows = self.groups
        g = int(group_of[row])
        if g < 0:
            return []
        if g + 1 >= ptr.shape[0]:
            raise IndexFormatError(f"skill_name_group: row {row} names group {g} of {ptr.shape[0] - 1} (damaged index)")
        out = rows[int(ptr[g]) : int(ptr[g + 1])].tolist()
        if any(not 0 <= j < self._n for j in out):
            raise IndexFormatError(f"skill_name_group_rows: a row out of range in group {g} (damaged index)")
        return out

    @classmethod
    def of(cls, metas: Sequence[Any], record: Any = None) -> SkillTable:
        """A table of ``metas`` (in memory; what :mod:`skillsight_fast.engine.io` saves); rows are built as
        ``record`` (default: the type of the first of ``metas``)."""
        column = StringColumn.of((string for m in metas for string in _fields(m)), name="skill strings")
        keys = [m.id.encode("utf-8") for m in metas]
        order = np.asarray(sorted(range(len(keys)), key=keys.__getitem__), np.int64).reshape(-1)
        return cls(column, order, name_groups(m.name for m in metas),
                   record=record or (type(metas[0]) if len(metas) else None))

    def __len__(self) -> int:
        return self._n

    def field(self, i: int, name: str) -> str:
        """One field of row ``i`` (no record built)."""
        return self.column[i * _NF + SKILL_FIELDS.index(name)]

    def fields(self, rows: Sequence[int], name: str) -> list[str]:
        """One field of each of ``rows`` (no record built; the offsets are gathered in one step, so
        a few hundred rows cost what a few do)."""
        idx = np.asarray(rows, np.int64).reshape(-1)
        if idx.size == 0:
            return []
        if idx.min() < 0 or idx.max() >= self._n:
            raise IndexError(f"skill rows out of range 0..{self._n - 1}")
        col = self.column
        idx = idx * _NF + SKILL_FIELDS.index(name)
        offsets = col._offsets
        view = col._view
        out = []
        for i, a, b in zip(idx.tolist(), offsets[idx].tolist(), offsets[idx + 1].tolist()):
            try:
                out.append(view[a:b].tobytes().decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise IndexFormatError(f"{col.name}: string {i} is not valid UTF-8 (byte {exc.start})") from None
        return out

    def _meta(self, i: int) -> Any:
        base = i * _NF
        sid, name, desc, path, sha, when, tags = (self.column._decode(base + f) for f in range(_NF))
        return self.record(sid, name, desc, path, sha, _parse_tags(tags, self.column.name, i), when)

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self._meta(j) for j in range(*i.indices(self._n))]
        return self._meta(row_index(i, self._n, "skill row"))

    def __iter__(self) -> Iterator[Any]:
        for j in range(self._n):
            yield self._meta(j)

    def __eq__(self, other: object) -> bool:
        return same_items(self, self._n, other)

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[Any]) -> list[Any]:
        return [*self, *other]

    def __repr__(self) -> str:
        return f"SkillTable({self._n} skills)"

    def row_of(self, skill_id: str) -> int:
        """Row of ``skill_id``, -1 when no skill has it (bisection over the sorted ids)."""
        if not isinstance(skill_id, str):
            return -1
        key = skill_id.encode("utf-8", "surrogatepass")
        order, col, n = self.id_order, self.column, self._n

        def row(pos: int) -> int:
            r = int(order[pos])
            if not 0 <= r < n:
                raise IndexFormatError(f"skill_id_order: entry {pos} is row {r} of {n} (damaged index)")
            return r

        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if col.raw(row(mid) * _NF) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < n and col.raw(row(lo) * _NF) == key:
            return row(lo)
        return -1


class RowsById(Mapping[str, int]):
    """skill id -> row of a :class:`SkillTable` as a read-only mapping (bisection, no dictionary)."""

    def __init__(self, table: SkillTable) -> None:
        self.table = table

    def get(self, skill_id: str, default: Any = None) -> Any:  # type: ignore[override]
        j = self.table.row_of(skill_id)
        return default if j < 0 else j

    def __getitem__(self, skill_id: str) -> int:
        j = self.table.row_of(skill_id)
        if j < 0:
            raise KeyError(skill_id)
        return j

    def __contains__(self, skill_id: object) -> bool:
        return isinstance(skill_id, str) and self.table.row_of(skill_id) >= 0

    def __iter__(self) -> Iterator[str]:
        return (self.table.field(j, "id") for j in range(len(self.table)))

    def __len__(self) -> int:
        return len(self.table)


def rows_by_id(skills: Sequence[Any]) -> Mapping[str, int]:
    """skill id -> row: by bisection over a :class:`SkillTable`, else a dictionary of the list."""
    if isinstance(skills, SkillTable):
        return RowsById(skills)
    return {m.id: j for j, m in enumerate(skills)}


def record_fields(metas: Sequence[Any], rows: Sequence[int], name: str) -> list[str]:
    """One string field (of :data:`SKILL_FIELDS`) of each of ``rows`` of an index's records: read as a
    column from a loaded index's :class:`SkillTable`, record by record from a list."""
    if isinstance(metas, SkillTable):
        return metas.fields(rows, name)
    return [getattr(metas[r], name) for r in rows]


class FlagList(Sequence[list[str]]):
    """Per skill the injection-scan reasons (``[]`` when clean), from the manifest's flagged rows only;
    ``mask`` is bool (n,) of the flagged rows."""

    def __init__(self, n: int, flagged: Mapping[int, list[str]]) -> None:
        self._n = n
        self._flagged = {int(k): list(v) for k, v in flagged.items() if v}
        self.mask = np.zeros(n, bool)
        if self._flagged:
            self.mask[np.fromiter(self._flagged, np.int64, len(self._flagged))] = True

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        return list(self._flagged.get(row_index(i, self._n, "flag row"), []))

    def __iter__(self) -> Iterator[list[str]]:
        for j in range(self._n):
            yield list(self._flagged.get(j, []))

    def __eq__(self, other: object) -> bool:
        return same_items(self, self._n, other)

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[list[str]]) -> list[list[str]]:
        return [*self, *other]


def flagged_mask(flags: Sequence[Sequence[str]] | None, n: int) -> np.ndarray:
    """bool (n,): the rows with injection-scan reasons."""
    if isinstance(flags, FlagList):
        return flags.mask
    ok = np.zeros(n, bool)
    for j, f in enumerate(list(flags or [])[:n]):
        if f:
            ok[j] = True
    return ok


def _fields(meta: Any) -> tuple[str, ...]:
    tags = tuple(getattr(meta, "tags", ()))
    return (meta.id, meta.name, meta.description, meta.path, meta.sha256, getattr(meta, "when_to_use", ""),
            json.dumps(list(tags), ensure_ascii=False) if tags else "")


def _parse_tags(raw: str, where: str, row: int) -> tuple[str, ...]:
    if not raw:
        return ()
    try:
        tags = json.loads(raw)
    except ValueError:
        tags = None
    if not isinstance(tags, list) or not all(type(t) is str for t in tags):
        raise IndexFormatError(f"{where}: row {row}: 'tags' is not a JSON list of strings")
    return tuple(tags)
