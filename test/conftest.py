"""What every unit test shares: native code compiled by the tests goes to one cache
directory of the session, never the user's ~/.cache/presk (subprocesses inherit it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


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
