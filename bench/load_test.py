"""Bounded load test of ``skillsight serve --http`` over loopback.

Starts the HTTP server (Starlette on uvicorn, :mod:`skillsight_fast.agents.http`) in-process on
127.0.0.1 (a free port), then sends a fixed number of
``POST /search`` requests (plus a few ``GET /skill/<id>``) from N client threads, each with its own
keep-alive connection, and reports throughput, p50/p99/max latency and the error count. It stops
at the request count or the time limit, whichever comes first.

    python bench/load_test.py                       # synthetic 2,000-skill library, hashing encoder
    python bench/load_test.py --requests 2000 --threads 8 --seconds 60
    python bench/load_test.py --index path/to/index # a real index with its real model

``run_load_test`` is also called by tests/agents/test_server_hardening.py (a 200-request version).
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

WORDS = ("pdf merge split pages tables csv clean columns docker deploy image git rebase branch stl mesh "  # noqa: SIM905 - a word list
         "volume email draft reply sql join postgres resize png thumbnails pytest fixtures scrape html "
         "links calendar invoice translate french audio transcribe video subtitles chart plot").split()


def queries(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) for _ in range(n)]


def synthetic_service(n_skills: int = 2000, seed: int = 0) -> Any:
    """A SkillService over a synthetic library, encoded with the test hashing encoder."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
    from fakes import HashEncoder

    from skillsight_fast import SkillIndex
    from skillsight_fast.agents.service import SkillService
    from skillsight_fast.library.skills import Skill

    rng = np.random.default_rng(seed)
    skills = [Skill(f"skill-{i}", f"skill {i}", "Helps with " + " ".join(rng.choice(WORDS, 3)) + ".",
                    "Use this skill when the user asks. " + " ".join(rng.choice(WORDS, 40)))
              for i in range(n_skills)]
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="skillsight-load-")) / "idx"
    SkillIndex.build(skills, HashEncoder(dim=128)).save(directory)  # with texts.jsonl for GET /skill
    return SkillService(directory, index=SkillIndex.load(directory, encoder=HashEncoder(dim=128)))


def run_load_test(service: Any, *, requests: int = 2000, threads: int = 8, seconds: float = 60.0,
                  k: int = 5, skill_every: int = 20) -> dict[str, Any]:
    """Serve ``service`` on loopback and hammer it; returns the measured numbers.

    Every ``skill_every``-th request is a ``GET /skill/<id>`` of the previous top hit; the rest are
    ``POST /search``. A request counts as an error unless it returns 200 with a JSON body.
    """
    from skillsight_fast.agents.http import make_http_server

    service.warm()
    server = make_http_server(service, "127.0.0.1", 0)
    server_thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    server_thread.start()
    host, port = server.server_address[:2]
    texts = queries(requests)
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []
    counter = iter(range(requests))
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(t: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        last_id = None
        try:
            while time.perf_counter() < deadline:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                t0 = time.perf_counter()
                try:
                    if skill_every and i % skill_every == 0 and last_id is not None:
                        conn.request("GET", f"/skill/{last_id}")
                    else:
                        body = json.dumps({"task": texts[i], "k": k})
                        conn.request("POST", "/search", body=body,
                                     headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    payload = json.loads(resp.read())
                    if resp.status != 200:
                        raise RuntimeError(f"HTTP {resp.status}: {payload}")
                    if payload.get("hits"):
                        last_id = payload["hits"][0]["id"]
                except Exception as exc:  # noqa: BLE001 - every failure is an error to report
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    conn.close()
                    conn = http.client.HTTPConnection(host, port, timeout=30)
                    continue
                latencies[t].append(time.perf_counter() - t0)
        finally:
            conn.close()

    start = time.perf_counter()
    workers = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    server.shutdown()
    server.server_close()
    server_thread.join(5)
    lat = np.array([x for per in latencies for x in per]) * 1000.0
    done = int(lat.size)
    return {
        "requests": done, "planned": requests, "threads": threads, "errors": len(errors),
        "first_errors": errors[:3], "seconds": round(wall, 3), "time_limit": seconds,
        "throughput_rps": round(done / wall, 1) if wall > 0 else 0.0,
        "p50_ms": round(float(np.percentile(lat, 50)), 3) if done else None,
        "p99_ms": round(float(np.percentile(lat, 99)), 3) if done else None,
        "max_ms": round(float(lat.max()), 3) if done else None,
        "n_skills": len(service.index), "cpu": platform.processor() or platform.machine(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0, help="time limit")
    parser.add_argument("--skills", type=int, default=2000, help="size of the synthetic library")
    parser.add_argument("--index", help="serve this index (with its real model) instead")
    parser.add_argument("-k", type=int, default=5)
    args = parser.parse_args(argv)
    if args.index:
        from skillsight_fast.agents.service import SkillService

        service = SkillService(args.index)
    else:
        service = synthetic_service(args.skills)
    try:
        report = run_load_test(service, requests=args.requests, threads=args.threads, seconds=args.seconds,
                               k=args.k)
    finally:
        if not args.index:
            import shutil

            shutil.rmtree(service.directory.parent, ignore_errors=True)
    print(json.dumps(report, indent=2))
    return 0 if report["errors"] == 0 and report["requests"] == report["planned"] else 1


if __name__ == "__main__":
    sys.exit(main())
