"""The query-encoder tiers of an index: which encoder turns a task into a vector, loaded when needed.

An index encodes its skills with one document encoder (the transformer, or a static table for the
``static`` tier) and its tasks with the tier's query encoder (docs/ENCODERS.md): the int8 copy of
the transformer, a static table mapped into its space (``static-mapped``), or the library's own
token table (``contextual``). :class:`QueryEncoders` holds both for one index, loads each on first
use under a lock, and checks it against the model the index records. The module-level functions
resolve a tier's model folder and build its tables at index time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.state import IndexState, SkillMeta
from skillsight_fast.errors import ModelMismatchError, SkillsightError
from skillsight_fast.library.skills import Skill
from skillsight_fast.types import Encoder

__all__ = ["QueryEncoders", "contextual_table_of", "gives_token_states", "load_static_query_encoder",
           "resolve_query_encoder"]


def gives_token_states(encoder: Encoder | None) -> bool:
    """Whether ``encoder`` (or the encoder a progress wrapper holds) gives the transformer's token
    states, what the table tiers are made of."""
    return getattr(getattr(encoder, "inner", encoder), "hidden_states", None) is not None


def resolve_query_encoder(config: IndexConfig, teacher: Encoder | None = None) -> IndexConfig:
    """The config with its static tier's model folder filled in (absolute path).

    ``static-mapped``: ``query_model`` is the static model (default: the one distilled from
    ``model``, made once in the cache); ``static``: ``model`` and ``query_model`` are both that
    folder. ``transformer`` configs are returned unchanged.
    """
    if config.encoder.query_encoder in ("transformer", "auto"):  # auto is settled by the build, which has the encoder
        return config
    from skillsight_fast.models.distill import resolve_static_model
    from skillsight_fast.models.static import is_static_model_dir

    if config.encoder.query_encoder == "static" and config.encoder.query_model is None and is_static_model_dir(config.encoder.model):
        folder = resolve_static_model(config.encoder.model, config.encoder.model)
    else:
        # distilling needs the bare ONNX encoder (not a wrapper such as a progress bar)
        folder = resolve_static_model(config.encoder.query_model, config.encoder.model,
                                      teacher=teacher if hasattr(teacher, "_run") else None)
    if config.encoder.query_encoder == "static":
        return config.replace(model=str(folder), query_model=str(folder))
    return config.replace(query_model=str(folder))


def load_static_query_encoder(config: IndexConfig) -> Encoder:
    from skillsight_fast.models.static import load_static_encoder

    if config.encoder.query_model is None:
        raise SkillsightError(f"the {config.encoder.query_encoder} tier needs config.encoder.query_model (a model2vec folder)")
    return load_static_encoder(config.encoder.query_model)


def contextual_table_of(skills: Sequence[Skill] | Sequence[SkillMeta], texts: Sequence[str] | None,
                        encoder: Encoder | None, tier: str = "contextual") -> tuple[np.ndarray, np.ndarray]:
    """The contextual tier's token table over the skills' texts (a pass of the transformer)."""
    from skillsight_fast.models.contextual import contextual_table, token_state_sums

    if texts is None:
        if not all(isinstance(s, Skill) for s in skills):
            raise SkillsightError("texts are needed to build the contextual token table from SkillMeta")
        texts = [s.text for s in skills]  # type: ignore[union-attr]
    if not gives_token_states(encoder):
        raise SkillsightError(f"the {tier} tier needs the transformer's token states: build it with "
                              "SkillIndex.build and the ONNX encoder (or pass query_table)")
    texts = list(texts)
    bar = getattr(encoder, "bar", None)  # a progress wrapper (skillsight_fast.progress.ProgressEncoder)
    if bar is None:
        return contextual_table(*token_state_sums(encoder, texts))
    with bar(len(texts), "contextual token table") as shown:
        return contextual_table(*token_state_sums(encoder, texts, progress=shown.update))



class QueryEncoders:
    """The document and query encoders of one index (shared by every view of the same state).

    Parameters
    ----------
    state : IndexState
        The index's state (its config, model record, dense bundle and statistics).
    encoder : Encoder, optional
        An attached document encoder (else loaded on first use from the index's model).
    query_encoder : Encoder, optional
        An attached query encoder (else the tier's, loaded on first use).
    """

    def __init__(self, state: IndexState, encoder: Encoder | None = None,
                 query_encoder: Encoder | None = None) -> None:
        self.state = state
        self._encoder = encoder
        self._query_encoder = query_encoder
        self._int8_tasks: bool | None = None  # see _int8_queries
        self._contextual: Any = None  # see contextual_encoder
        self._fallback: Encoder | None = None  # see fallback_encoder
        self._encoder_lock = threading.Lock()  # many threads may search before the encoder is loaded

    @property
    def attached(self) -> Encoder | None:
        """The document encoder if one is attached or loaded (never loads it)."""
        return self._encoder

    @property
    def attached_query(self) -> Encoder | None:
        """The tier's own query encoder if attached or loaded (never loads it)."""
        return self._query_encoder

    def reset_query(self) -> None:
        """Forget the loaded query encoder and the int8 decision (after the config changed)."""
        self._query_encoder = None
        self._int8_tasks = None

    def attach(self, encoder: Encoder | None, *, check: bool = True) -> None:
        """Attach a document encoder (``check=False``: skip the model check, for benchmarks that
        time another model on the same arrays); the int8 task encoder is decided again."""
        if check and encoder is not None:
            self._check_encoder(encoder)
        self._encoder = encoder
        self._fallback = None  # the cascade's transformer follows the attached encoder
        if self.state.dense.query_map is None:
            self._query_encoder = None
            self._int8_tasks = None

    def _model_name(self) -> str:
        """What :func:`~skillsight_fast.models.load_encoder` loads the index's document model by."""
        from skillsight_fast.models.registry import get_spec

        # a registry name, else the path the index was built with (e.g. a static model)
        return self.state.model.id if get_spec(self.state.model.id) or not self.state.config.encoder.model else self.state.config.encoder.model

    @property
    def encoder(self) -> Encoder:
        """The document encoder (the model the skills were encoded with), loaded on first use and
        checked against the index's model. Tasks go through :attr:`query_encoder`."""
        if self._encoder is None:
            with self._encoder_lock:
                if self._encoder is None:
                    from skillsight_fast.models import load_encoder

                    self._encoder = load_encoder(self._model_name(), int8=self.state.config.encoder.int8)
        encoder = self._encoder
        self._check_encoder(encoder)
        return encoder

    @encoder.setter
    def encoder(self, encoder: Encoder) -> None:
        self._check_encoder(encoder)
        self._encoder = encoder
        self._fallback = None
        if self.state.dense.query_map is None:
            self._query_encoder = None  # the int8 task encoder follows the attached encoder's settings
            self._int8_tasks = None

    def _int8_queries(self) -> bool:
        """Whether tasks need an int8 encoder other than the attached one (decided once per encoder)."""
        if self._int8_tasks is None:
            self._int8_tasks = self._decide_int8_queries()
        return self._int8_tasks

    def _decide_int8_queries(self) -> bool:
        if not self.state.config.encoder.query_int8:
            return False
        encoder = self._encoder
        if encoder is None:
            from skillsight_fast.models.static import is_static_model_dir

            return not is_static_model_dir(self._model_name())  # a static model has no int8 graph
        # an encoder that is not an ONNX graph of ours (a static model, a test's fake, a user's own)
        # encodes its own tasks; so does one that is already quantised
        path = getattr(encoder, "onnx_path", None)
        return path is not None and not getattr(encoder, "quantized", True)

    @property
    def fallback_encoder(self) -> Encoder:
        """The transformer that encodes the tasks a lookup tier's cascade sends on
        (``index.cascade``): the int8 graph of the index's document model, loaded on first
        use (a lookup-only search never loads onnxruntime); an attached encoder that is not one of
        our ONNX graphs (a test's or a user's own) encodes them itself. Checked against the model."""
        if self._fallback is None:
            with self._encoder_lock:
                if self._fallback is None:
                    attached = self._encoder
                    if attached is not None and getattr(attached, "onnx_path", None) is None:
                        self._fallback = attached
                    else:
                        self._fallback = self._load_int8_query_encoder()
        self._check_encoder(self._fallback)
        return self._fallback

    @fallback_encoder.setter
    def fallback_encoder(self, encoder: Encoder) -> None:
        self._check_encoder(encoder)
        self._fallback = encoder

    def _load_int8_query_encoder(self) -> Encoder:
        from skillsight_fast.models import load_encoder

        kwargs: dict[str, Any] = {}
        attached = self._encoder
        if attached is not None:  # same threads and batch as the encoder the caller attached
            kwargs = {"threads": getattr(attached, "threads", None), "batch_size": getattr(attached, "batch_size", 32)}
        return load_encoder(self._model_name(), int8=True, **kwargs)

    @property
    def query_encoder(self) -> Encoder:
        """What encodes the tasks (docs/ENCODERS.md): the static-mapped tier's static model (loaded
        on first use from ``config.encoder.query_model``, without onnxruntime); for a transformer index
        whose ``config.encoder.query_int8`` is on, the dynamically int8-quantised graph of its model
        (loaded on its own: the float32 document graph is not loaded for a search); else the
        document encoder."""
        if self.state.dense.query_map is None and not self._int8_queries():
            return self.encoder
        if self._query_encoder is None:
            with self._encoder_lock:
                if self._query_encoder is None:
                    if self.state.dense.query_map is not None:
                        self._query_encoder = load_static_query_encoder(self.state.config)
                    else:
                        self._query_encoder = self._load_int8_query_encoder()
        encoder = self._query_encoder
        if self.state.dense.query_map is None:
            self._check_encoder(encoder)
        else:
            self._check_query_encoder(encoder)
        return encoder

    @query_encoder.setter
    def query_encoder(self, encoder: Encoder) -> None:
        if self.state.dense.query_map is None:
            self._check_encoder(encoder)
        else:
            self._check_query_encoder(encoder)
        self._query_encoder = encoder

    def _check_query_encoder(self, encoder: Encoder) -> None:
        info, qmap = self.state.model, self.state.dense.query_map
        assert qmap is not None
        if info.query_checksum and encoder.checksum != info.query_checksum:
            raise ModelMismatchError(
                f"the index's query map was fitted for the static model {info.query_id!r} (checksum "
                f"{info.query_checksum[:12]}), but the query encoder is {encoder.model_id!r} (checksum "
                f"{encoder.checksum[:12]}); rebuild the index or use the same static model")
        if encoder.dim != qmap.shape[0] - 1:
            raise ModelMismatchError(f"query encoder dimension {encoder.dim} != the query map's {qmap.shape[0] - 1}")

    def _check_encoder(self, encoder: Encoder) -> None:
        if self.state.model.checksum and encoder.checksum != self.state.model.checksum:
            raise ModelMismatchError(
                f"the index was built with model {self.state.model.id!r} (checksum "
                f"{self.state.model.checksum[:12]}), but the encoder is {encoder.model_id!r} "
                f"(checksum {encoder.checksum[:12]}); rebuild the index or use the same model"
            )
        if encoder.dim != self.state.stats.dim:
            raise ModelMismatchError(f"encoder dimension {encoder.dim} != index dimension {self.state.stats.dim}")

    def contextual_encoder(self) -> Encoder:
        """The contextual tier's task encoder: the index's token table, tokenized by the static model
        (:attr:`query_encoder`), the static-mapped vector for a task with no known token."""
        static = self.query_encoder
        cached = self._contextual
        if cached is not None and cached.static is static:
            return cached
        from skillsight_fast.models.contextual import ContextualEncoder
        from skillsight_fast.models.registry import get_spec
        from skillsight_fast.models.static import apply_query_map

        qmap = self.state.dense.query_map
        assert qmap is not None and self.state.dense.query_table is not None and self.state.dense.query_table_ids is not None
        spec = get_spec(self.state.model.id)
        self._contextual = ContextualEncoder(
            static, self.state.dense.query_table_ids, self.state.dense.query_table,
            fallback=lambda texts: apply_query_map(static.encode(texts), qmap),
            max_length=spec.max_length if spec is not None else 256)
        return self._contextual

