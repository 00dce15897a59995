"""Test doubles that are real enough to exercise the engine: a deterministic hashing encoder."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from skillsight_fast.library.skills import Skill


class HashEncoder:
    """Bag-of-words hashing encoder: similar texts get similar unit vectors, no model needed."""

    def __init__(self, dim: int = 64, model_id: str = "hash-test", checksum: str = "hash0"):
        self.dim = dim
        self.model_id = model_id
        self.checksum = checksum
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", text.lower())[:300]:
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 20) & 1 else -1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(n > 0, n, 1)


BOILER = "Use this skill when the user asks. ## Usage Run the command. ## Examples See below. "

TOPICS = {
    "pdf-tools": "pdf merge split pages extract tables text from pdf documents",
    "csv-clean": "csv clean columns dedupe rows spreadsheet data cleaning pandas",
    "docker-deploy": "docker container image build deploy compose kubernetes",
    "git-helper": "git commit branch rebase merge conflicts history",
    "mesh-analysis": "stl mesh volume connected component triangles 3d printing mass",
    "email-writer": "email draft reply tone polite outreach inbox",
    "sql-query": "sql query database join index postgres tables",
    "image-resize": "image resize crop png jpeg thumbnails pillow",
    "unit-tests": "pytest unit tests coverage fixtures mocking",
    "web-scraper": "scrape html pages requests beautifulsoup crawl links",
}


def toy_skills(n_extra: int = 0, seed: int = 0) -> list[Skill]:
    """Ten topical skills with shared boilerplate, plus ``n_extra`` random distractors."""
    rng = np.random.default_rng(seed)
    skills = [
        Skill(id=name, name=name, description=f"Helps with {words.split()[0]} tasks.",
              body=BOILER + words + " " + BOILER)
        for name, words in TOPICS.items()
    ]
    vocab = " ".join(TOPICS.values()).split()
    for i in range(n_extra):
        words = " ".join(rng.choice(vocab, size=8))
        skills.append(Skill(id=f"extra-{i}", name=f"extra {i}", description="Generic helper.",
                            body=BOILER + words))
    return skills
