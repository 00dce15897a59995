"""Progress on stderr: a bar on a terminal, a plain line every few seconds elsewhere, nothing for short
work."""

from __future__ import annotations

import io

import numpy as np

from skillsight_fast import progress
from skillsight_fast.progress import Progress, ProgressEncoder


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_line_mode_writes_a_line_every_few_seconds_and_a_closing_one(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress.time, "perf_counter", clock)
    out = io.StringIO()
    with Progress(100, "encoding 100 skills", stream=out, lines=True) as bar:
        for _ in range(10):
            clock.now += 1.0  # 10 updates, one second apart: lines at 5 s and 10 s
            bar.update(5)
        clock.now += 2.0
        bar.update(50)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 3, lines
    assert lines[0].startswith("encoding 100 skills: 25/100 (25%) in 5 s") and "s left" in lines[0]
    assert lines[-1].startswith("encoding 100 skills: 100/100 (100%) in 12 s")


def test_line_mode_says_nothing_for_work_shorter_than_the_interval(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress.time, "perf_counter", clock)
    out = io.StringIO()
    with Progress(10, "encoding", stream=out, lines=True) as bar:
        clock.now += progress.LINE_EVERY - 0.5
        bar.update(10)
    assert out.getvalue() == ""


def test_the_encoder_wrapper_picks_lines_when_the_stream_is_not_a_terminal():
    class Enc:
        dim = 2

        def encode(self, texts):
            return np.zeros((len(texts), 2), np.float32)

    wrapped = ProgressEncoder(Enc(), stream=io.StringIO())
    assert wrapped.lines is True
    assert wrapped.encode(["a", "b", "c"]).shape == (3, 2)
    assert wrapped.bar(3, "table").lines is True


def test_still_writes_a_line_while_a_slow_step_runs_and_stops_after(capsys):
    import time as real_time

    with progress.still("exporting the encoder", every=0.2):
        real_time.sleep(0.5)
    err = capsys.readouterr().err
    assert err.count("still exporting the encoder (") >= 1
    real_time.sleep(0.4)
    assert capsys.readouterr().err == ""  # the thread ended with the block
