"""The prompt hook: put the skills that fit a prompt in front of the agent, or nothing at all.

``skillsight hook claude-code -i IDX`` is a Claude Code ``UserPromptSubmit`` command hook, and
``skillsight hook gemini -i IDX`` a Gemini CLI ``BeforeAgent`` one (the same stdin fields and the same
``hookSpecificOutput.additionalContext`` answer under that event's name; with nothing to add it prints
``{}``, since Gemini CLI parses a successful hook's stdout as JSON). Each host, its event and the
shape of its answer: :mod:`skillsight_fast.agents.hosts`; the options, defined once:
:mod:`skillsight_fast.agents.hook_options`. Claude Code runs it on every prompt with one JSON
object on stdin (``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``prompt``,
...); what it prints as
``{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": ...}}`` is added
to the model's context. The hook prints the skills that fit (name, path, one line of why: the
evidence), at most ``-k``, each at or above the index's abstention threshold (the one it derived at
build without labels, or ``calibration.json`` from ``calibrate``; ``--min-cosine`` /
``--no-abstain`` override it), or nothing when no skill fits.

It asks a warm server of the same index when one is running (the endpoint file written by
``serve --http`` or ``serve --mcp --endpoint``, see :mod:`skillsight_fast.agents.endpoint`) with a short
timeout, and otherwise searches in-process. It never blocks the prompt: the whole run has a time
budget, and on any error, timeout or bad input it prints nothing and exits 0 (exit code 2 would
block the user's prompt in Claude Code).

Everything here is standard library until the in-process fallback runs (the warm path does not
import ``urllib.request`` or ``http.client``: one socket, one request), so the warm path costs a Python start-up and one
loopback request.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

if TYPE_CHECKING:
    from skillsight_fast.agents.hosts.base import Host

logger = logging.getLogger(__name__)

#: The hook event answered when none is named (Claude Code's; each host names its own,
#: :attr:`skillsight_fast.agents.hosts.base.Host.event`).
EVENT = "UserPromptSubmit"
#: Prompt characters searched (the encoder reads only the first few hundred tokens anyway).
MAX_PROMPT_CHARS = 4000
#: Largest stdin read (bytes); a bigger payload is not a prompt we can use.
MAX_STDIN_BYTES = 1 << 20
#: Largest answer read from a warm server (bytes).
MAX_ANSWER_BYTES = 4 << 20
#: Longest description shown per hit (characters).
MAX_DESCRIPTION = 160
#: Longest skill name, location (path or URI) and evidence word shown per hit (characters).
MAX_NAME, MAX_WHERE, MAX_EVIDENCE_WORD = 80, 300, 40
#: Most evidence words shown per hit.
MAX_EVIDENCE = 6
#: Most hits put in the context, whatever the answer holds.
MAX_HITS = 20


def ask_server(index: str, task: str, k: int, timeout: float) -> dict[str, Any] | None:
    """The answer of a warm server of ``index`` (its own abstention rule, cut per hit), or None (none
    running, timeout or any error)."""
    from skillsight_fast.agents.endpoint import lookup

    record = lookup(index)  # None unless the record is this user's, private, and names a secret
    if record is None or timeout <= 0:
        return None
    try:
        out = post_json(record["url"], "/search", {"task": task, "k": k, "cut": "hit"}, timeout,
                        secret=record["secret"])
    except Exception as exc:  # noqa: BLE001 - any failure means: search in-process instead
        logger.info("warm server %s did not answer: %s", record["url"], exc)
        return None
    return out if isinstance(out, dict) and isinstance(out.get("hits"), list) else None


def post_json(url: str, path: str, payload: Any, timeout: float, *, secret: str | None = None) -> Any:
    """POST ``payload`` as JSON to a loopback ``http://host:port`` and return the decoded 200 answer.

    A minimal HTTP/1.1 client over one socket (``Connection: close``): ``urllib``/``http.client``
    would add about 30 ms of imports to every prompt, and the hook only ever talks to its own
    server on loopback. ``timeout`` bounds the whole exchange, not each read. With ``secret``
    (the endpoint record's), the request carries the token derived from it
    (:func:`skillsight_fast.agents.endpoint.hook_token`, never the secret) and a fresh nonce, and
    the answer must carry the server's proof (:func:`skillsight_fast.agents.endpoint.proof`), which
    only a holder of the secret can compute.

    Raises
    ------
    OSError, ValueError
        No connection, a timeout, a status other than 200, a missing or wrong proof, or a body
        that is not JSON.
    """
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname is None or parts.port is None:
        raise ValueError(f"not a http://host:port URL: {url!r}")
    body = json.dumps(payload).encode("utf-8")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    extra, nonce = "", ""
    if secret is not None:
        from skillsight_fast.agents.endpoint import NONCE_HEADER, hook_token

        nonce = os.urandom(16).hex()
        extra = f"Authorization: Bearer {hook_token(secret)}\r\n{NONCE_HEADER}: {nonce}\r\n"
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{parts.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n").encode("ascii")
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(head + body)
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no full answer from {url} within {timeout:g} s")
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise ValueError(f"answer from {url} over {MAX_ANSWER_BYTES} bytes")
    raw = b"".join(chunks)
    header, sep, data = raw.partition(b"\r\n\r\n")
    status = header.split(b"\r\n", 1)[0].split()
    if not sep or len(status) < 2 or status[1] != b"200":
        raise ValueError(f"{url} answered {header[:80]!r}")
    signed = None
    for line in header.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and int(value) != len(data):
            raise ValueError(f"truncated answer from {url} ({len(data)} of {int(value)} bytes)")
        if name.strip().lower() == b"x-skillsight-proof":
            signed = value.strip()
    if secret is not None:
        import hmac

        from skillsight_fast.agents.endpoint import proof

        if signed is None or not hmac.compare_digest(signed, proof(secret, nonce, data).encode("ascii")):
            raise ValueError(f"{url} did not prove that it serves this index; its answer is not used")
    return json.loads(data)


def search_here(index: str, task: str, k: int, min_cosine: float | None = None) -> dict[str, Any]:
    """Load the index and search in this process (the cold path).

    The rule: ``min_cosine`` when given (-inf: none), else the index's (``calibration.json``, else
    the one derived at build); the cut is per hit, so weak second and third hits are not injected.
    """
    from skillsight_fast.agents.find import find_skills
    from skillsight_fast.agents.live import skill_uri
    from skillsight_fast.engine.abstention import resolve_abstention
    from skillsight_fast.engine.index import SkillIndex

    idx = SkillIndex.load(index, mmap=True, verify=False)
    idx.engine = "numpy"  # one task in a fresh process: cheaper than Numba's start-up
    rule = resolve_abstention(index, min_cosine=min_cosine)
    answer = find_skills(idx, [task], k, abstention=rule, cut="hit")[0]
    out = answer.to_dict(digits=4)
    for hit in out["hits"]:
        hit["uri"] = skill_uri(hit["id"])
    return out


def _cut(value: Any, limit: int) -> str:
    """One line of at most ``limit`` characters from a string (anything else is no text): control
    characters become spaces, whitespace runs collapse, a longer text ends in "…"."""
    if not isinstance(value, str):
        return ""
    text = value[: 4 * limit]
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def format_context(answer: dict[str, Any]) -> str:
    """The text added to the agent's context: one line per skill, or "" when there is no hit.

    Whatever the answer came from (the index, a warm server), each field is cut to a fixed length
    (:data:`MAX_NAME`, :data:`MAX_WHERE`, :data:`MAX_DESCRIPTION`, :data:`MAX_EVIDENCE` words of
    :data:`MAX_EVIDENCE_WORD`), at most :data:`MAX_HITS` lines are written, and a line that the
    prompt-injection screen (:func:`skillsight_fast.library.screen.screen_text`) flags is left out.
    """
    hits = answer.get("hits") if isinstance(answer, dict) else None
    lines = []
    for hit in (hits if isinstance(hits, list) else [])[:MAX_HITS]:
        if not isinstance(hit, dict) or not isinstance(hit.get("id"), str):
            continue
        sid = _cut(hit["id"], MAX_WHERE)
        where = _cut(hit.get("path"), MAX_WHERE) or _cut(hit.get("uri"), MAX_WHERE) or f"skill id {sid}"
        raw = hit.get("evidence")
        words = raw[:MAX_EVIDENCE] if isinstance(raw, list) else []
        evidence = [w for w in (_cut(e, MAX_EVIDENCE_WORD) for e in words) if w]
        why = (f"the prompt's words {', '.join(evidence)} are distinctive in it" if evidence
               else "close in meaning to the prompt")
        desc = _cut(hit.get("description"), MAX_DESCRIPTION)
        line = f"- {_cut(hit.get('name'), MAX_NAME) or sid} ({where}): {why}" + (f". {desc}" if desc else "")
        if _screened(line):
            lines.append(line)
    if not lines:
        return ""
    return ("Skills from the local skill library that fit this prompt (skillsight, best first). If one "
            "applies, read its SKILL.md before starting:\n" + "\n".join(lines))


def _screened(line: str) -> bool:
    """True when the injection screen finds nothing in ``line`` (a flagged line is logged, not shown)."""
    from skillsight_fast.library.screen import screen_text

    found = screen_text(line)
    if found:
        logger.info("left out of the context (%s): %s", "; ".join(str(f) for f in found), line[:120])
    return not found


def prompt_of(payload: str, event: str = EVENT) -> str | None:
    """The prompt of a hook's stdin JSON for ``event``, trimmed, or None when there is nothing to search."""
    data = json.loads(payload)
    if not isinstance(data, dict):
        return None
    prompt = data.get("prompt")
    if data.get("hook_event_name", event) != event or not isinstance(prompt, str) or not prompt.strip():
        return None
    return prompt.strip()[:MAX_PROMPT_CHARS]


def answer_prompt(index: str, payload: str, *, k: int = 3, budget: float = 5.0, server_timeout: float = 0.5,
                  cold: bool = True, host: Host | None = None, min_cosine: float | None = None) -> str:
    """What the hook prints for one stdin payload ("" for nothing); raises on errors.

    Parameters
    ----------
    index : str
        The index folder.
    payload : str
        The hook's stdin (JSON).
    k : int
        Most skills listed.
    budget : float
        Seconds the whole answer may take; past it the answer is "".
    server_timeout : float
        Seconds a warm server gets before the hook searches in-process.
    cold : bool
        Search in-process when no warm server answers (False: only ask a server).
    host : Host, optional
        The host (default Claude Code): its prompt event is the one answered, and its
        :meth:`~skillsight_fast.agents.hosts.base.Host.hook_output` shapes the answer.
    min_cosine : float, optional
        A threshold of the hook's own (``--min-cosine``; -inf: ``--no-abstain``) instead of the
        index's; a warm server applies its own rule, so the hook then searches in-process.
    """
    from skillsight_fast.agents.hosts import HOSTS

    t0 = time.monotonic()
    host = host if host is not None else HOSTS["claude-code"]
    prompt = prompt_of(payload, host.event)
    if prompt is None:
        return ""
    answer = ask_server(index, prompt, k, min(server_timeout, budget)) if min_cosine is None else None
    if answer is None and cold:
        remaining = budget - (time.monotonic() - t0)
        box: list[Any] = []

        def run() -> None:
            try:
                box.append(search_here(index, prompt, k, min_cosine))
            except BaseException as exc:  # noqa: BLE001 - reported by the caller as "no answer"
                box.append(exc)

        worker = threading.Thread(target=run, name="skillsight-hook", daemon=True)
        worker.start()
        worker.join(max(remaining, 0.0))
        if not box:
            raise TimeoutError(f"no answer within the {budget:g} s budget")
        if isinstance(box[0], BaseException):
            raise box[0]
        answer = box[0]
    return host.hook_output(format_context(answer or {}))


def print_help(stdout: TextIO) -> None:
    """The hook's options, as ``skillsight --help`` lists them (``skillsight_fast.cli.hooks``)."""
    import argparse

    from skillsight_fast.agents.hook_options import add_hook_args
    from skillsight_fast.agents.hosts import HOSTS

    p = argparse.ArgumentParser(prog="skillsight hook", description=__doc__.split("\n\n")[0])
    add_hook_args(p, HOSTS)
    stdout.write(p.format_help())


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None, *,
         hard_exit: bool = False) -> int:
    """``skillsight hook {claude-code,gemini} -i IDX [-k K] [--min-cosine C | --no-abstain] [--budget S]
    [--server-timeout S] [--no-cold]``.

    Always returns 0, whatever happens (bad arguments included); a failure is logged to stderr
    only with ``-v``. ``hard_exit`` (the command line) leaves the process at once with
    ``os._exit(0)``, so an in-process search still running past the budget cannot hold the prompt.
    ``-h``/``--help`` prints the options when stdin is a terminal (a person asking, not a host).
    """
    import argparse

    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    verbose = False
    nothing = ""
    args_list = list(argv) if argv is not None else sys.argv[1:]
    if any(a in ("-h", "--help") for a in args_list) and _is_terminal(stdin):
        try:
            print_help(stdout)
            stdout.flush()
        finally:
            if hard_exit:
                os._exit(0)
        return 0
    try:
        class Parser(argparse.ArgumentParser):
            def error(self, message: str) -> NoReturn:  # silent: never argparse's usage text and status 2
                raise ValueError(message)

        from skillsight_fast.agents.hook_options import add_hook_args
        from skillsight_fast.agents.hosts import HOSTS

        p = Parser(prog="skillsight hook", exit_on_error=False, add_help=False)
        add_hook_args(p, HOSTS)
        args = p.parse_args(args_list)
        min_cosine = float("-inf") if args.no_abstain else (
            None if args.min_cosine is None else _threshold(args.min_cosine))
        verbose = args.verbose
        host = HOSTS[args.host]
        nothing = host.nothing
        if verbose:
            logging.basicConfig(level=logging.INFO, format="skillsight hook: %(message)s", stream=sys.stderr)
        payload = stdin.read(MAX_STDIN_BYTES + 1)
        out = "" if len(payload) > MAX_STDIN_BYTES else answer_prompt(
            os.path.expanduser(args.index), payload, k=max(1, min(args.k, 20)), budget=args.budget,
            server_timeout=args.server_timeout, cold=not args.no_cold, host=host,
            min_cosine=min_cosine)
        if out:
            stdout.write(out + "\n")
            stdout.flush()
            nothing = ""
    except BaseException as exc:  # noqa: BLE001 - a hook must never break its host
        if verbose:
            print(f"skillsight hook: no answer ({type(exc).__name__}: {exc})", file=sys.stderr)
    if nothing:
        import contextlib

        with contextlib.suppress(OSError, ValueError):  # a closed stdout: nothing to say anyway
            stdout.write(nothing + "\n")
            stdout.flush()
    if hard_exit:
        try:
            stdout.flush()
        finally:
            os._exit(0)
    return 0


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _threshold(value: str) -> float:
    """``--min-cosine``: a number, or ``none``/``off`` (-inf: no threshold)."""
    from skillsight_fast.engine.abstention import parse_min_score

    return parse_min_score(value)


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:], hard_exit=True)
