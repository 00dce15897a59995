"""Progress on stderr for long CLI work (indexing, encoding), and an encoder wrapper.

On a terminal a bar is redrawn in place; elsewhere (a pipe, a log file, CI) a plain line is written
every :data:`LINE_EVERY` seconds once the work has run that long, so a short job writes nothing and
a long one is never silent. ``--quiet`` turns both off. No third-party dependency.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any, Self

import numpy as np

#: Texts per chunk when the wrapped encoder cannot report progress itself.
CHUNK = 256
#: Seconds between two progress lines when the stream is not a terminal.
LINE_EVERY = 5.0


def progress_enabled(quiet: bool = False, stream: IO[str] | None = None) -> bool:
    """True when a bar should be drawn: not quiet and ``stream`` (default stderr) is a TTY."""
    stream = stream if stream is not None else sys.stderr
    if quiet:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def still(what: str, every: float = LINE_EVERY - 1.0) -> Iterator[None]:
    """While the body runs, write ``still <what> (N s)…`` on stderr every ``every`` seconds (like the
    bar, straight to the stream: a library the body calls may reconfigure logging): a one-time step
    of several seconds is never silent. The default is a second under :data:`LINE_EVERY`: a busy
    process wakes the thread late."""
    done = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(f"still {what} ({time.monotonic() - t0:.0f} s)…\n")
                sys.stderr.flush()

    thread = threading.Thread(target=beat, name="skillsight-still", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()


def is_terminal(stream: IO[str] | None = None) -> bool:
    """True when ``stream`` (default stderr) is a terminal."""
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """``done/total [#####.....] pct rate`` redrawn in place at most ten times a second; or, with
    ``lines``, one plain line every :data:`LINE_EVERY` seconds (the first after that long).

    Parameters
    ----------
    total : int
        Units of work (texts, skills).
    desc : str
        Label in front of the bar.
    enabled : bool
        Draw at all (see :func:`progress_enabled`); a disabled bar only counts.
    stream : text stream, optional
        Default ``sys.stderr``.
    lines : bool
        Write whole lines at a slow pace instead of redrawing (for a stream that is not a terminal).

    Examples
    --------
    >>> with Progress(3, "encoding", enabled=False) as bar:
    ...     bar.update(3)
    >>> bar.done
    3
    """

    def __init__(self, total: int, desc: str = "", *, enabled: bool = True, stream: IO[str] | None = None,
                 lines: bool = False):
        self.total = max(int(total), 0)
        self.lines = lines
        self._wrote_line = False
        self._done_said = -1
        self.desc = desc
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self._t0 = time.perf_counter()
        self._last = 0.0

    def __enter__(self) -> Self:
        self._draw(force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        """Add ``n`` finished units and redraw if enough time passed."""
        self.done = min(self.done + int(n), self.total) if self.total else self.done + int(n)
        self._draw(force=self.done >= self.total)

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.lines:
            self._line(now, final=False)
            return
        if not force and now - self._last < 0.1:
            return
        self._last = now
        elapsed = max(now - self._t0, 1e-9)
        frac = self.done / self.total if self.total else 1.0
        width = 24
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        self.stream.write(f"\r{self.desc} {self.done}/{self.total} [{bar}] {frac * 100:5.1f}% "
                          f"{rate:,.0f}/s eta {eta:,.0f}s ")
        self.stream.flush()

    def _line(self, now: float, final: bool) -> None:
        # the first line once the work has run LINE_EVERY seconds; the closing one only after another
        since = now - (self._last if self._wrote_line else self._t0)
        if since < LINE_EVERY and not (final and self._wrote_line):
            return
        self._last, self._wrote_line, self._done_said = now, True, self.done
        elapsed = max(now - self._t0, 1e-9)
        rate = self.done / elapsed
        pct = f" ({self.done / self.total * 100:.0f}%)" if self.total else ""
        left = (self.total - self.done) / rate if rate > 0 and self.done < self.total else None
        eta = f", about {left:,.0f} s left" if left is not None else ""
        self.stream.write(f"{self.desc}: {self.done}/{self.total}{pct} in {elapsed:,.0f} s, "
                          f"{rate:,.1f}/s{eta}\n")
        self.stream.flush()

    def close(self) -> None:
        """Final redraw and newline (only when drawing); in line mode a last line if any was written."""
        if self.enabled and self.lines:
            if self._wrote_line and self._done_said != self.done:
                self._line(time.perf_counter(), final=True)
            self.enabled = False
        if self.enabled:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False


def _accepts_progress(fn: Any) -> bool:
    try:
        return "progress" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


class ProgressEncoder:
    """Wrap an encoder so each ``encode`` call draws a bar; otherwise behaves like the encoder.

    Encoders whose ``encode`` takes a ``progress`` callback (``OnnxEncoder``) report per batch;
    others are called on chunks of :data:`CHUNK` texts.
    """

    def __init__(self, encoder: Any, *, desc: str = "encoding", stream: IO[str] | None = None,
                 lines: bool | None = None) -> None:
        self.inner = encoder
        self.desc = desc
        self.stream = stream
        self.lines = (not is_terminal(stream)) if lines is None else lines

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def bar(self, total: int, desc: str) -> Progress:
        """A progress display of this wrapper's kind for other long work on the encoder (e.g. the
        contextual tier's pass over the library)."""
        return Progress(total, desc, enabled=True, stream=self.stream, lines=self.lines)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if len(texts) <= 1:
            return self.inner.encode(texts)
        with Progress(len(texts), self.desc, enabled=True, stream=self.stream, lines=self.lines) as bar:
            if _accepts_progress(self.inner.encode):
                return self.inner.encode(texts, progress=bar.update)
            parts = []
            for start in range(0, len(texts), CHUNK):
                chunk = texts[start : start + CHUNK]
                parts.append(self.inner.encode(chunk))
                bar.update(len(chunk))
            return np.concatenate(parts, axis=0)
