"""Dense candidate scans: how the index finds the K documents nearest a background-removed query.

Three scans, one contract: ``scan.candidates(q_perp, depth)`` returns ``(ids int64 (n, depth),
scores float32 (n, depth))``, best first, padded with -1 / -inf, where ``scores`` are the exact
float32 inner products ``q⊥ · d⊥`` of the returned documents. Everything after the candidate stage
(lexical scoring, fusion, evidence) is the same whichever scan found the candidates.

==========  =========================================================================================
``exact``   float32 scan of the whole background-removed matrix (the default below
            :data:`AUTO_INT8_FROM` skills). Exact.
``int8``    scan of an int8 copy of the matrix (one scale per row, a quarter of the bytes), keeping
            ``oversample × depth`` survivors whose exact float32 scores decide the top ``depth``
            (:mod:`skillsight_fast.kernels.compressed`). Approximate only in which survivors it keeps.
``binary``  1-bit sign codes (d / 8 bytes per row) ranked by Hamming distance; the
            ``rerank_factor × depth`` nearest are scored by the int8 codes and the int8 scan's
            survivors re-scored in float32 (:mod:`skillsight_fast.kernels.binary`). The ``auto``
            scan from :data:`AUTO_INT8_FROM` skills. Approximate in which rows it keeps.
``ivf``     faiss ``IndexIVFFlat`` over the background-removed matrix: k-means cells, a query visits
            the ``nprobe`` nearest cells. Scores are exact for what it finds; recall depends on
            ``nprobe / nlist``. Needs faiss (the ``large`` extra).
==========  =========================================================================================

``auto`` (:func:`resolve_scan`) picks ``exact`` below :data:`AUTO_INT8_FROM` skills, ``binary`` from
there, and ``ivf`` from :data:`AUTO_IVF_FROM`; the measurements behind the thresholds are in
docs/LARGE.md. Each scan saves its own arrays (``.npy``, checksummed by :mod:`skillsight_fast.engine.io`)
and files (the IVF structure, written by ``faiss.write_index``; never pickle).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from skillsight_fast.config import FLAT_SCAN_KEYS, SCAN_CHOICES
from skillsight_fast.errors import IndexFormatError, SkillsightError, install_hint

logger = logging.getLogger(__name__)

#: ``auto`` switches from the exact float32 scan to the binary scan (sign codes in front of the
#: int8 scan) at this many skills. Below it the float32 scan of one query is under ~15 ms on one
#: core (docs/SPEED.md: 7.6 ms of scoring at 100k); at 1M the binary scan finds the candidates in
#: ~8 ms against ~58 ms for int8 and ~60 ms exact, keeping the exact fused top-10
#: (experiments/binary_prefilter_scan.py). The name stays: int8 was the scan picked here before.
AUTO_INT8_FROM = 200_000
#: ``auto`` switches to the IVF candidate stage at this many skills, where the int8 scan, linear
#: in the library size, passes ~60 ms per query (it takes ~30 ms at 1M, docs/LARGE.md).
AUTO_IVF_FROM = 2_000_000
#: Survivors per candidate kept by the int8 scan for exact re-scoring.
INT8_OVERSAMPLE = 4
#: Hamming-nearest rows the binary scan scores with the int8 codes, per candidate asked for: the
#: smallest multiplier in {8, 16, 32, 64, 128} that kept >= 0.999 of the exact scan's fused top-10
#: on every shared dataset and the synthetic 26k / 100k / 1M (experiments/binary_prefilter_scan.py).
BINARY_RERANK = 128
#: IVF cells: ``round(IVF_CELLS_PER_SQRT · √N)``, at most N / IVF_MIN_POINTS_PER_CELL.
IVF_CELLS_PER_SQRT = 4.0
#: faiss warns when k-means has fewer than 39 training points per centroid.
IVF_MIN_POINTS_PER_CELL = 39
#: k-means trains on at most this many points per cell (a uniform seeded sample).
IVF_TRAIN_POINTS_PER_CELL = 64
#: k-means iterations (faiss default 25; 10 is enough for a candidate stage and 2.5x cheaper).
IVF_TRAIN_ITERATIONS = 10
#: Cells visited per query, with a floor of IVF_MIN_NPROBE (docs/LARGE.md).
IVF_NPROBE = 64
IVF_MIN_NPROBE = 8
#: When the default would visit more than this share of the cells, it visits all of them: the scan
#: then costs at most 1/share of the visit it replaces and loses nothing (small libraries, where a
#: few coarse cells split real neighbours apart).
IVF_FULL_VISIT_SHARE = 0.5
#: An update reuses the trained IVF cells while the library stays within this factor of the size
#: they were trained on (re-adding every vector is one assignment pass; re-training is k-means).
IVF_RETRAIN_FACTOR = 2.0


@dataclass(frozen=True)
class ScanParam:
    """One parameter a scan type reads from ``IndexConfig.scan`` (its ``params``), declared by the type.

    ``skillsight index`` and ``skillsight rescan`` get one flag ``--<name>`` per declared parameter
    (:data:`SCAN_PARAMS`); ``info`` shows what the built scan recorded (:meth:`Scan.params`).

    Attributes
    ----------
    name : str
        The parameter's name in ``ScanConfig.params`` and its flag (``--name``).
    default : str
        The default in words, for the flag's help (None given = the scan decides, e.g. by size).
    help : str
        What it sets.
    metavar : str
        The flag's value placeholder.
    type : type
        Its type (every parameter so far is a positive integer).
    """

    name: str
    default: str
    help: str
    metavar: str = "N"
    type: type = int

    @property
    def flat_key(self) -> str:
        """The parameter's key in a flat manifest config (``skillsight_fast.config.FLAT_SCAN_KEYS``)."""
        return next(key for key, name in FLAT_SCAN_KEYS.items() if name == self.name)


def resolve_scan(kind: str, n_docs: int) -> str:
    """The scan ``kind`` stands for at ``n_docs`` skills (``auto`` by size, else itself).

    Raises
    ------
    SkillsightError
        Unknown scan name.
    """
    if kind not in SCAN_CHOICES:
        raise SkillsightError(f"unknown scan {kind!r} (expected one of {', '.join(SCAN_CHOICES)})")
    if kind != "auto":
        return kind
    if n_docs >= AUTO_IVF_FROM:
        return "ivf"
    return "binary" if n_docs >= AUTO_INT8_FROM else "exact"


def ivf_nlist(n_docs: int) -> int:
    """Default number of IVF cells for ``n_docs`` documents: 4√N, at least 1, ≥ 39 points per cell."""
    if n_docs <= 0:
        return 1
    return int(max(1, min(round(IVF_CELLS_PER_SQRT * math.sqrt(n_docs)), n_docs // IVF_MIN_POINTS_PER_CELL)))


def ivf_nprobe(nlist: int) -> int:
    """Default cells visited per query: :data:`IVF_NPROBE` (at least IVF_MIN_NPROBE), or every cell
    when that would be more than :data:`IVF_FULL_VISIT_SHARE` of them."""
    nprobe = max(IVF_MIN_NPROBE, IVF_NPROBE)
    if nprobe > IVF_FULL_VISIT_SHARE * nlist:
        return int(max(1, nlist))
    return int(nprobe)


def _require_faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise SkillsightError(
            f"the ivf scan needs faiss: {install_hint('large')} (or use --scan exact / int8)"
        ) from None
    return faiss


def _param(config: Any, name: str) -> int | None:
    """The scan parameter ``name`` of an IndexConfig (None: not given, or no config)."""
    return None if config is None else config.scan.get(name)


def _empty(n: int, depth: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((n, max(depth, 1)), -1, np.int64), np.full((n, max(depth, 1)), -np.inf, np.float32)


class Scan:
    """Base of the candidate scans (see the module docstring for the contract).

    Attributes
    ----------
    kind : str
        ``exact``, ``int8`` or ``ivf``.
    ARRAYS : dict
        name → (dtype, ndim) of the ``.npy`` arrays the scan saves beside the index's own.
    FILES : tuple of str
        Other files the scan writes into the index folder.
    PARAMS : tuple of ScanParam
        The parameters of ``IndexConfig.scan`` the scan's :meth:`build` reads (the CLI's scan flags).
    """

    kind: ClassVar[str] = ""
    ARRAYS: ClassVar[dict[str, tuple[str, int]]] = {}
    FILES: ClassVar[tuple[str, ...]] = ()
    PARAMS: ClassVar[tuple[ScanParam, ...]] = ()

    def __init__(self, docs: np.ndarray) -> None:
        self.docs = docs  # the background-removed document matrix float32 (N, d), never written

    @property
    def n_docs(self) -> int:
        return int(self.docs.shape[0])

    def candidates(self, q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``depth`` documents of each query: (ids int64 (n, depth), exact scores float32)."""
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        """The scan's parameters, as recorded in the manifest (JSON)."""
        return {}

    def arrays(self) -> dict[str, np.ndarray]:
        """name → array saved as ``<name>.npy`` (dtypes and ndims in :attr:`ARRAYS`)."""
        return {}

    def write_files(self, folder: Path) -> list[str]:
        """Write the scan's non-array files into ``folder``; returns their names."""
        return []

    def describe(self) -> dict[str, Any]:
        """What ``skillsight info`` shows: the scan, its parameters and its size in bytes."""
        return {"scan": self.kind, **self.params(), "scan_bytes": self.nbytes()}

    def nbytes(self) -> int:
        """Bytes the scan holds beyond the float32 background-removed matrix."""
        return 0

    @classmethod
    def build(cls, docs: np.ndarray, *, config: Any = None, previous: Scan | None = None) -> Scan:
        """Build the scan over ``docs`` (``previous``: the scan of the index being updated)."""
        raise NotImplementedError

    @classmethod
    def restore(cls, docs: np.ndarray, params: dict[str, Any], arrays: dict[str, np.ndarray],
                directory: Path, *, mmap: bool = False) -> Scan:
        """Inverse of saving: the scan of a loaded index (IndexFormatError when inconsistent)."""
        raise NotImplementedError


class ExactScan(Scan):
    """Exact float32 inner-product scan of the whole matrix with top-K selection."""

    kind = "exact"

    def candidates(self, q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        from skillsight_fast.kernels import dense_topk

        if self.n_docs == 0:
            return _empty(q_perp.shape[0], 1)
        return dense_topk(q_perp, self.docs, min(depth, self.n_docs))

    @classmethod
    def build(cls, docs: np.ndarray, *, config: Any = None, previous: Scan | None = None) -> ExactScan:
        return cls(docs)

    @classmethod
    def restore(cls, docs: np.ndarray, params: dict[str, Any], arrays: dict[str, np.ndarray],
                directory: Path, *, mmap: bool = False) -> ExactScan:
        return cls(docs)


class Int8Scan(Scan):
    """int8 scan (per-row scale) keeping ``oversample × depth`` survivors, re-scored in float32.

    Parameters
    ----------
    docs : float32 (N, d)
        The background-removed matrix (read only for the survivors).
    codes, scales : int8 (N, d), float32 (N,)
        :func:`~skillsight_fast.kernels.compressed.quantize_int8` of ``docs``.
    oversample : int
    """

    kind = "int8"
    ARRAYS: ClassVar[dict[str, tuple[str, int]]] = {"scan_int8_codes": ("int8", 2),
                                                    "scan_int8_scales": ("float32", 1)}
    PARAMS: ClassVar[tuple[ScanParam, ...]] = (
        ScanParam("oversample", str(INT8_OVERSAMPLE), "int8, binary: survivors per candidate re-scored exactly",
                  metavar="F"),)

    def __init__(self, docs: np.ndarray, codes: np.ndarray, scales: np.ndarray,
                 oversample: int = INT8_OVERSAMPLE) -> None:
        super().__init__(docs)
        if codes.shape != docs.shape or scales.shape != (docs.shape[0],):
            raise IndexFormatError(f"int8 codes {codes.shape} / scales {scales.shape} do not match "
                                   f"the matrix {docs.shape}")
        if int(oversample) < 1:
            raise SkillsightError("int8 oversample must be >= 1")
        self.codes = codes
        self.scales = scales
        self.oversample = int(oversample)

    def candidates(self, q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        from skillsight_fast.kernels.compressed import dense_topk_int8

        if self.n_docs == 0:
            return _empty(q_perp.shape[0], 1)
        return dense_topk_int8(q_perp, self.codes, self.scales, min(depth, self.n_docs), docs=self.docs,
                               oversample=self.oversample)

    def params(self) -> dict[str, Any]:
        return {"oversample": self.oversample}

    def arrays(self) -> dict[str, np.ndarray]:
        return {"scan_int8_codes": self.codes, "scan_int8_scales": self.scales}

    def nbytes(self) -> int:
        return int(self.codes.nbytes + self.scales.nbytes)

    @classmethod
    def build(cls, docs: np.ndarray, *, config: Any = None, previous: Scan | None = None) -> Int8Scan:
        from skillsight_fast.kernels.compressed import quantize_int8

        oversample = _param(config, "oversample") or INT8_OVERSAMPLE
        codes, scales = quantize_int8(docs)
        return cls(docs, codes, scales, oversample)

    @classmethod
    def restore(cls, docs: np.ndarray, params: dict[str, Any], arrays: dict[str, np.ndarray],
                directory: Path, *, mmap: bool = False) -> Int8Scan:
        try:
            return cls(docs, arrays["scan_int8_codes"], arrays["scan_int8_scales"],
                       int(params.get("oversample", INT8_OVERSAMPLE)))
        except KeyError as exc:
            raise IndexFormatError(f"{directory}: the int8 scan's array {exc} is missing") from None


class BinaryScan(Int8Scan):
    """1-bit sign codes ranked by Hamming distance, the ``rerank`` nearest scored by the int8 codes,
    the int8 scan's ``oversample × depth`` survivors re-scored in float32
    (:mod:`skillsight_fast.kernels.binary`).

    Reads d / 8 bytes per skill per query instead of the int8 scan's d (48 MB instead of 384 MB at
    1M 384-dimensional skills), plus ``rerank`` int8 rows. Whenever the ``rerank`` Hamming-nearest
    rows hold the int8 scan's survivors, the answer is the int8 scan's exactly.

    Parameters
    ----------
    docs, codes, scales, oversample
        As :class:`Int8Scan` (the int8 arrays are shared with it on disk: same names).
    bits : uint64 (N, ceil(d / 64))
        :func:`~skillsight_fast.kernels.binary.pack_signs` of ``docs``.
    rerank_factor : int
        Rows scored by the int8 codes per candidate asked for: ``rerank = rerank_factor × depth``.
    """

    kind = "binary"
    ARRAYS: ClassVar[dict[str, tuple[str, int]]] = {**Int8Scan.ARRAYS, "scan_binary_bits": ("uint64", 2)}
    PARAMS: ClassVar[tuple[ScanParam, ...]] = (
        *Int8Scan.PARAMS,
        ScanParam("rerank", str(BINARY_RERANK), "binary: Hamming-nearest rows per candidate scored by the int8 codes",
                  metavar="F"))

    def __init__(self, docs: np.ndarray, codes: np.ndarray, scales: np.ndarray, bits: np.ndarray,
                 oversample: int = INT8_OVERSAMPLE, rerank_factor: int = BINARY_RERANK) -> None:
        super().__init__(docs, codes, scales, oversample)
        if bits.shape != (docs.shape[0], -(-docs.shape[1] // 64)):
            raise IndexFormatError(f"binary codes {bits.shape} do not match the matrix {docs.shape}")
        if int(rerank_factor) < 1:
            raise SkillsightError("binary rerank factor must be >= 1")
        self.bits = bits
        self.rerank_factor = int(rerank_factor)

    def candidates(self, q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        from skillsight_fast.kernels.binary import dense_topk_binary

        if self.n_docs == 0:
            return _empty(q_perp.shape[0], 1)
        k = min(depth, self.n_docs)
        return dense_topk_binary(q_perp, self.bits, self.codes, self.scales, self.docs, k,
                                 rerank=self.rerank_factor * k, oversample=self.oversample)

    def params(self) -> dict[str, Any]:
        return {"oversample": self.oversample, "rerank_factor": self.rerank_factor}

    def arrays(self) -> dict[str, np.ndarray]:
        return {**super().arrays(), "scan_binary_bits": self.bits}

    def nbytes(self) -> int:
        return int(super().nbytes() + self.bits.nbytes)

    @classmethod
    def build(cls, docs: np.ndarray, *, config: Any = None, previous: Scan | None = None,
              rerank_factor: int | None = None) -> BinaryScan:
        from skillsight_fast.kernels.binary import pack_signs
        from skillsight_fast.kernels.compressed import quantize_int8

        oversample = _param(config, "oversample") or INT8_OVERSAMPLE
        factor = rerank_factor or _param(config, "rerank") or BINARY_RERANK
        if isinstance(previous, Int8Scan) and previous.docs is docs:  # a rescan: the same matrix
            codes, scales = previous.codes, previous.scales
        else:
            codes, scales = quantize_int8(docs)
        return cls(docs, codes, scales, pack_signs(docs), oversample, factor)

    @classmethod
    def restore(cls, docs: np.ndarray, params: dict[str, Any], arrays: dict[str, np.ndarray],
                directory: Path, *, mmap: bool = False) -> BinaryScan:
        try:
            oversample = int(params.get("oversample", INT8_OVERSAMPLE))
            factor = int(params.get("rerank_factor", BINARY_RERANK))
        except (TypeError, ValueError):
            oversample = factor = 0
        if oversample < 1 or factor < 1:
            raise IndexFormatError(f"{directory}: the manifest's binary scan parameters are malformed "
                                   f"(oversample and rerank_factor must be integers >= 1)")
        try:
            return cls(docs, arrays["scan_int8_codes"], arrays["scan_int8_scales"], arrays["scan_binary_bits"],
                       oversample, factor)
        except KeyError as exc:
            raise IndexFormatError(f"{directory}: the binary scan's array {exc} is missing") from None


class IvfScan(Scan):
    """faiss ``IndexIVFFlat`` (inner product) over the background-removed matrix.

    Parameters
    ----------
    docs : float32 (N, d)
    ivf : faiss.IndexIVFFlat
        Trained, holding the N rows of ``docs`` with ids 0..N-1.
    nprobe : int
        Cells visited per query.
    trained_on : int
        Library size the cells were trained at (an update re-trains past IVF_RETRAIN_FACTOR).
    """

    kind = "ivf"
    FILES = ("scan_ivf.faiss",)
    PARAMS: ClassVar[tuple[ScanParam, ...]] = (
        ScanParam("nlist", "4 sqrt(N)", "ivf: cells"),
        ScanParam("nprobe", str(IVF_NPROBE), "ivf: cells visited per query"))

    def __init__(self, docs: np.ndarray, ivf: Any, nprobe: int, trained_on: int,
                 train_seconds: float | None = None) -> None:
        super().__init__(docs)
        if int(ivf.ntotal) != docs.shape[0] or int(ivf.d) != docs.shape[1]:
            raise IndexFormatError(f"the IVF structure holds {ivf.ntotal} vectors of dimension {ivf.d}, "
                                   f"the index {docs.shape[0]} of dimension {docs.shape[1]}")
        self.ivf = ivf
        self.nlist = int(ivf.nlist)
        self.nprobe = int(max(1, min(int(nprobe), self.nlist)))
        self.trained_on = int(trained_on)
        self.train_seconds = train_seconds

    def candidates(self, q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        if self.n_docs == 0:
            return _empty(q_perp.shape[0], 1)
        q = np.ascontiguousarray(q_perp, dtype=np.float32)
        params = self._search_params()
        scores, ids = self.ivf.search(q, min(depth, self.n_docs), params=params)
        ids = ids.astype(np.int64, copy=False)
        scores = np.where(ids >= 0, scores, -np.inf).astype(np.float32, copy=False)
        return ids, scores

    def _search_params(self) -> Any:
        import faiss

        return faiss.SearchParametersIVF(nprobe=self.nprobe)  # per call: thread-safe, no shared state

    def params(self) -> dict[str, Any]:
        return {"nlist": self.nlist, "nprobe": self.nprobe, "trained_on": self.trained_on,
                "metric": "inner_product", "faiss_index": "IndexIVFFlat"}

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["mean_docs_scanned"] = round(self.n_docs * self.nprobe / max(self.nlist, 1))
        return out

    def nbytes(self) -> int:
        return int(self.n_docs * self.docs.shape[1] * 4 + self.n_docs * 8 + self.nlist * self.docs.shape[1] * 4)

    def write_files(self, folder: Path) -> list[str]:
        faiss = _require_faiss()
        faiss.write_index(self.ivf, str(folder / self.FILES[0]))
        return list(self.FILES)

    @classmethod
    def build(cls, docs: np.ndarray, *, config: Any = None, previous: Scan | None = None) -> IvfScan:
        faiss = _require_faiss()
        n, d = docs.shape
        nlist = _param(config, "nlist") or ivf_nlist(n)
        nlist = int(max(1, min(nlist, max(n, 1))))
        nprobe = _param(config, "nprobe") or ivf_nprobe(nlist)
        seed = int(getattr(config, "seed", 0) or 0)
        x = np.ascontiguousarray(docs, dtype=np.float32)
        t0 = time.perf_counter()
        reuse = (isinstance(previous, IvfScan) and previous.ivf.d == d and previous.nlist == nlist
                 and n > 0 and 1 / IVF_RETRAIN_FACTOR <= n / max(previous.trained_on, 1) <= IVF_RETRAIN_FACTOR)
        if reuse:
            assert isinstance(previous, IvfScan)
            centroids = previous.ivf.quantizer.reconstruct_n(0, previous.nlist)
            quantizer = faiss.IndexFlatIP(d)
            quantizer.add(np.ascontiguousarray(centroids, np.float32))
            ivf = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
            ivf.is_trained = True
            trained_on = previous.trained_on
        else:
            quantizer = faiss.IndexFlatIP(d)
            ivf = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
            ivf.cp.niter = IVF_TRAIN_ITERATIONS
            ivf.cp.seed = seed
            ivf.cp.max_points_per_centroid = IVF_TRAIN_POINTS_PER_CELL
            if n:
                rng = np.random.default_rng(seed)
                m = min(n, IVF_TRAIN_POINTS_PER_CELL * nlist)
                sample = x if m == n else x[np.sort(rng.choice(n, m, replace=False))]
                ivf.train(sample)
            trained_on = n
        if n:
            chunk = 1 << 16
            for a in range(0, n, chunk):
                ivf.add(x[a : a + chunk])
        seconds = time.perf_counter() - t0
        logger.info("ivf scan: %d cells, nprobe %d, %s in %.1f s", nlist, nprobe,
                    "cells reused" if reuse else "trained", seconds)
        return cls(docs, ivf, nprobe, trained_on, seconds)

    @classmethod
    def restore(cls, docs: np.ndarray, params: dict[str, Any], arrays: dict[str, np.ndarray],
                directory: Path, *, mmap: bool = False) -> IvfScan:
        faiss = _require_faiss()
        path = directory / cls.FILES[0]
        if not path.is_file():
            raise IndexFormatError(f"{directory}: the ivf scan's file {path.name} is missing")
        try:
            ivf = faiss.read_index(str(path), faiss.IO_FLAG_MMAP if mmap else 0)
        except RuntimeError as exc:
            raise IndexFormatError(f"{path}: unreadable faiss index ({str(exc).splitlines()[0]})") from None
        if not isinstance(ivf, faiss.IndexIVFFlat) or ivf.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise IndexFormatError(f"{path}: not an inner-product IndexIVFFlat")
        try:
            nprobe, trained_on = int(params["nprobe"]), int(params["trained_on"])
        except (KeyError, TypeError, ValueError):
            raise IndexFormatError(f"{directory}: the manifest's ivf parameters are incomplete") from None
        return cls(docs, ivf, nprobe, trained_on)


SCAN_TYPES: dict[str, type[Scan]] = {"exact": ExactScan, "int8": Int8Scan, "binary": BinaryScan, "ivf": IvfScan}
#: The scan registry's parameters: name → declaration, each once, in the scan types' order (the CLI's scan
#: flags are made from it; ``IndexConfig.scan.params`` accepts these names).
SCAN_PARAMS: dict[str, ScanParam] = {p.name: p for t in SCAN_TYPES.values() for p in t.PARAMS}
#: Every array any scan saves (name → (dtype, ndim)).
SCAN_ARRAYS: dict[str, tuple[str, int]] = {k: v for t in SCAN_TYPES.values() for k, v in t.ARRAYS.items()}


def build_scan(kind: str, docs: np.ndarray, *, config: Any = None, previous: Scan | None = None) -> Scan:
    """Build the scan ``kind`` (``auto`` resolved by size) over the background-removed ``docs``; the scan
    reads its parameters (its :attr:`Scan.PARAMS`) from ``config.scan`` (an IndexConfig, or None)."""
    return SCAN_TYPES[resolve_scan(kind, int(docs.shape[0]))].build(docs, config=config, previous=previous)


def restore_scan(kind: str, docs: np.ndarray, params: dict[str, Any], arrays: dict[str, np.ndarray],
                 directory: Path, *, mmap: bool = False) -> Scan:
    """The saved scan ``kind`` of a loaded index."""
    if kind not in SCAN_TYPES:
        raise IndexFormatError(f"{directory}: unknown scan {kind!r} in the manifest")
    return SCAN_TYPES[kind].restore(docs, params, arrays, directory, mmap=mmap)
