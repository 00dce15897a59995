"""Write SKILL.md folders for tests (shared by the library, engine and agents tests)."""

from __future__ import annotations

from pathlib import Path


def write_skill(root: Path, rel: str, name: str = "demo", description: str = "Does a thing.",
                body: str = "# Body\n", raw: str | bytes | None = None) -> Path:
    """Write ``root/rel/SKILL.md`` (front matter from ``name`` and ``description``, or ``raw`` as is)."""
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    text = raw if raw is not None else f"---\nname: {name}\ndescription: {description}\n---\n{body}"
    (folder / "SKILL.md").write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return folder / "SKILL.md"
