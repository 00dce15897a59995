"""The fan-out of a sharded search: one call to many shard actors, with bounded waits and recovery.

:class:`FanOut` is what :class:`~skillsight_fast.cluster.index.ShardedIndex` inherits to call its shards:
a round of a search asks every shard at once (:meth:`FanOut._call`); a Ray shard opened from its
folder that died or does not answer is re-opened on its restarted actor and asked again
(:meth:`FanOut._recover`), within :data:`CALL_TIMEOUT_S` / :data:`RESTART_TIMEOUT_S`; with
``partial_after_s`` set, a shard still not back after that budget is left out of the search, which
answers from the others and names it (:meth:`FanOut._call_partial`, :meth:`FanOut._searching`).
Never a hang: every wait is bounded.

The class holds no state of its own: it reads the index's ``remote``, ``shards``, ``version``,
``ranges``, ``layout``, ``partial_after_s``, ``recoveries`` and ``_search`` (a ``threading.local``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillsight_fast.cluster.shard import _lost_version
from skillsight_fast.errors import SkillsightError

logger = logging.getLogger(__name__)

#: Seconds a search waits for a shard's answer before it re-opens the shard and asks again.
CALL_TIMEOUT_S = 30.0
#: Seconds a lost shard gets to be restarted by Ray and to re-open its folder.
RESTART_TIMEOUT_S = 60.0
#: Seconds between attempts to reach a shard actor Ray is restarting.
RESTART_POLL_S = 0.5
#: Seconds a round of a search of shard folders waits for a shard (including re-opening it on its
#: restarted actor) before it answers from the other shards, flagged partial
#: (:attr:`ShardedIndex.partial_after_s`; a search has two or three rounds).
PARTIAL_AFTER_S = 10.0


class ShardUnavailableError(SkillsightError):
    """A shard did not answer, even after it was re-opened on its restarted actor."""


class FanOut:
    """Calls to the shards of a sharded index (see the module docstring)."""

    remote: bool
    shards: list[Any]
    version: int
    ranges: list[tuple[int, int]]
    layout: Path | None
    partial_after_s: float | None
    recoveries: list[dict[str, Any]]
    _search: Any

    def _call(self, method: str, per_shard: Sequence[tuple[tuple[Any, ...], int]]) -> list[Any]:
        """Call ``method(*args)`` on the shards ``(args, shard index)`` at once; results in order.

        Ray shards opened from their folders (:meth:`from_layout`) recover from a lost actor: a call
        that fails because its actor died (Ray restarts it, empty) or that does not answer within
        :data:`CALL_TIMEOUT_S` re-opens that shard's folder on the restarted actor and is made once
        more; a shard that still fails raises :class:`ShardUnavailableError` (one line), never a hang."""
        if self.remote:
            import ray

            missing = getattr(self._search, "missing", None)
            if missing is not None:  # a shard already missing from this search is not asked again
                per_shard = [(args, s) for args, s in per_shard if s not in missing]
            calls = [self.shards[s].call.remote(self.version, method, *args) for args, s in per_shard]
            if self.layout is None:
                return list(ray.get(calls))
            if self.partial_after_s is not None and missing is not None:
                return self._call_partial(ray, calls, method, per_shard, missing)
            try:
                return list(ray.get(calls, timeout=CALL_TIMEOUT_S))
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError, ray.exceptions.GetTimeoutError):
                return [self._recover(ray, ref, method, args, s) for ref, (args, s) in zip(calls, per_shard)]
        return [self.shards[s].call(self.version, method, *args) for args, s in per_shard]

    def _call_partial(self, ray: Any, calls: list[Any], method: str,
                      per_shard: Sequence[tuple[tuple[Any, ...], int]], missing: set[int]) -> list[Any]:
        """The answers of ``calls`` within :attr:`partial_after_s`: a shard that failed or is late is
        re-opened within what is left of it, and when it is still not back its answer is None and it
        joins ``missing``: the search answers from the other shards and asks it nothing more (so a
        search waits at most its rounds' budgets)."""
        deadline = time.monotonic() + float(self.partial_after_s or 0.0)
        ready, _ = ray.wait(calls, num_returns=len(calls), timeout=max(0.0, deadline - time.monotonic()))
        if not ready and calls:  # no shard in time: a slow machine, not a lost shard (an answer from none
            deadline = time.monotonic() + CALL_TIMEOUT_S  # is no answer), so they get a call's timeout
            ray.wait(calls, num_returns=len(calls), timeout=CALL_TIMEOUT_S)
        out: list[Any] = []
        for ref, (args, s) in zip(calls, per_shard):
            try:
                out.append(ray.get(ref, timeout=0))
                continue
            except ray.exceptions.RayTaskError as exc:
                if isinstance(getattr(exc, "cause", None), SkillsightError) and not _lost_version(exc):
                    raise exc.cause from None
                first = type(exc).__name__
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
                first = type(exc).__name__
            try:
                out.append(self._recover(ray, None, method, args, s, deadline=deadline, first=first))
            except ShardUnavailableError as exc:
                logger.warning("%s; answering from the other shards", exc)
                missing.add(s)
                out.append(None)
        return out

    def _searching(self) -> Any:
        """Context of one search: collects the shards that did not answer within the budget."""
        import contextlib

        @contextlib.contextmanager
        def scope() -> Any:
            outer = getattr(self._search, "missing", None)
            if outer is not None:  # nested (a deeper search inside one): the outer scope collects
                yield outer
                return
            self._search.missing = set()
            try:
                yield self._search.missing
            finally:
                self._search.missing = None

        return scope()

    def _recover(self, ray: Any, ref: Any, method: str, args: tuple[Any, ...], s: int, *,
                 deadline: float | None = None, first: str = "") -> Any:
        """The answer of ``ref`` (one shard's call; None: it already failed with ``first``), or, when it
        failed, the same call again after the shard's folder is re-opened on its (restarted) actor,
        all before ``deadline`` (default: :data:`RESTART_TIMEOUT_S` from now)."""
        if ref is not None:
            try:
                return ray.get(ref, timeout=CALL_TIMEOUT_S)
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError,
                    ray.exceptions.GetTimeoutError) as exc:
                first = type(exc).__name__
        assert self.layout is not None
        t0 = time.monotonic()
        call_timeout = CALL_TIMEOUT_S if deadline is None else max(0.1, deadline - t0)
        deadline = t0 + RESTART_TIMEOUT_S if deadline is None else deadline
        folder = self._folder_of(s)
        start = self.ranges[s][0]
        while True:  # while Ray restarts the actor, calls fail at once (ActorUnavailableError): retry until the deadline
            try:
                ray.get(self.shards[s].open_folder.remote(self.version, *folder, start),
                        timeout=max(0.1, deadline - time.monotonic()))
                out = ray.get(self.shards[s].call.remote(self.version, method, *args),
                              timeout=max(0.1, min(call_timeout, deadline - time.monotonic())))
                break
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError,
                    ray.exceptions.GetTimeoutError) as exc:
                if isinstance(exc, ray.exceptions.RayActorError) and time.monotonic() < deadline:
                    time.sleep(RESTART_POLL_S)
                    continue
                raise ShardUnavailableError(f"shard {s} ({folder[0]}) did not answer after a restart "
                                            f"({first}, then {type(exc).__name__})") from None
        self.recoveries.append({"shard": s, "cause": first, "seconds": round(time.monotonic() - t0, 3)})
        logger.warning("shard %d re-opened after %s in %.2f s", s, first, time.monotonic() - t0)
        return out

    def _folder_of(self, s: int) -> tuple[str, str]:
        """(shard folder, shared part) of shard ``s`` (:meth:`from_layout`)."""
        from skillsight_fast.cluster.layout import read_layout, shard_folder_name

        assert self.layout is not None
        plan = read_layout(self.layout)
        name = plan["shards"][s]["folder"] if s < len(plan["shards"]) else shard_folder_name(s)
        return str(self.layout / name), str(self.layout / plan["shared"])
