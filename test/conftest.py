"""What every test shares: native code compiled by the tests goes to one cache directory
of the session, never the user's ~/.cache/presk (subprocesses inherit it); and the order
the files are handed to `make test`'s two workers.

`pytest -n 2 --dist loadfile --no-loadscope-reorder` gives each worker a whole file at a
time, in the order collected: a file that takes minutes of CPU handed out last would run
alone at the end. A file marked `pytestmark = pytest.mark.early(w)` is moved to the front,
the largest `w` first (w: its CPU minutes in the last `--durations`, on a loaded machine —
only the order counts); every file keeps its own tests in their order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


def _weight(item: pytest.Item) -> float:
    mark = item.get_closest_marker("early")
    return float(mark.args[0]) if mark is not None and mark.args else 0.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `early` files first, heaviest first (a stable sort: files stay whole, in order)."""
    items.sort(key=lambda item: -_weight(item))


@pytest.fixture(scope="session", autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's native cache (PRESK_CACHE_DIR), enabled."""
    d = tmp_path_factory.mktemp("presk-native-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRESK_CACHE_DIR", str(d))
        mp.delenv("PRESK_CACHE", raising=False)
        yield d


@pytest.fixture(scope="session")
def program():
    """`program(name)`: a fresh copy of a tutorial program's (or a .psk file's) Core
    module, lowered once per session (test/programs.py)."""
    from programs import program as load
    return load
