"""Sentence encoders: registry of installed models, ONNX export, and the ONNX encoder."""

from skillsight_fast.models.encoder import OnnxEncoder, cache_root, load_encoder
from skillsight_fast.models.registry import DEFAULT_MODEL, MODELS, ModelSpec, find_model_dir

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "ModelSpec",
    "OnnxEncoder",
    "cache_root",
    "find_model_dir",
    "load_encoder",
]
