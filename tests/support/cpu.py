"""What the machine's CPU changes in the numbers the tests expect.

onnxruntime runs the int8 task encoder's ``MatMulInteger`` (unsigned activations × signed weights) with
``vpdpbusd`` where the CPU has VNNI (AVX-512 VNNI or AVX-VNNI): exact int32 sums. Without it (AVX2, or
AVX-512 without VNNI) it uses ``vpmaddubsw``, whose int16 pair sums saturate, so the same task gets a
slightly different vector: up to ~0.03 on a cosine, enough to swap near-tied hits. Expected answers of
the int8 encoder are therefore kept per kind of CPU.
"""

from __future__ import annotations

from pathlib import Path


def int8_exact() -> bool:
    """Whether onnxruntime's int8 products run exact here (the CPU has VNNI)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return bool({"avx512_vnni", "avx_vnni"} & flags)
    return False


def expected_here(path: Path) -> Path:
    """``path`` (expected answers recorded on a CPU without VNNI), or its ``.vnni.json`` twin (the same
    answers recorded by the same code on a CPU with VNNI) when this CPU has VNNI."""
    if not int8_exact():
        return path
    twin = path.with_name(path.name.removesuffix(".json") + ".vnni.json")
    if not twin.is_file():
        raise FileNotFoundError(f"{twin}: no expected answers recorded on a CPU with VNNI")
    return twin
