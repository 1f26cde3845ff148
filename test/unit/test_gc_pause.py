"""presk/gc_pause.py: no cyclic collection inside `paused()` (nested or not, the collector
is as it was after), and `tune_process` acts once in a process (the test session's
conftest has called it: a second call freezes nothing more)."""

from __future__ import annotations

import gc
import weakref

import pytest

from presk.gc_pause import YOUNG_THRESHOLD, paused, tune_process


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_no_collection_inside_and_the_collector_as_it_was_after() -> None:
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # only the outermost re-enables
    assert gc.isenabled()


def test_garbage_left_inside_is_collected_after() -> None:
    with paused():
        ref = weakref.ref(_Cycle())
        [_Cycle() for _ in range(3 * YOUNG_THRESHOLD)]  # past any threshold: no collection
        assert ref() is not None
    gc.collect()
    assert ref() is None


def test_an_error_inside_still_restores_the_collector() -> None:
    with pytest.raises(ValueError), paused():
        raise ValueError("inside")
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_tune_process_acts_once() -> None:
    frozen = gc.get_freeze_count()
    assert frozen > 0  # the session's own call (test/conftest.py)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    _Cycle()
    tune_process()
    assert gc.get_freeze_count() == frozen
