"""What every test shares: native code compiled by the tests goes to one cache directory
of the session, never the user's ~/.cache/presk (subprocesses inherit it); and the order
the files are handed to `make test`'s two workers.

`pytest -n 2 --dist loadfile --no-loadscope-reorder` gives each worker a whole file at a
time, in the order collected: a file that takes minutes of CPU handed out last would run
alone at the end. A file marked `pytestmark = pytest.mark.early(w)` is moved to the front,
the largest `w` first (w: its CPU minutes in the last `--durations`, on a loaded machine —
only the order counts); every file keeps its own tests in their order.

`PRESK_TEST_CPU=path` writes the CPU seconds (user+sys, this process and the subprocesses
it waited for: os.times) of each test file's tests, their count and the part spent in
`slow` tests, as JSON `{file: {"cpu": s, "tests": n, "slow_cpu": s, "top": [[test, s]..]}}`.
Under xdist each worker sends its own sums to the controller, which merges and writes
them; `python test/cpu_table.py path` prints the table, heaviest first. It counts, too,
the native cache's hits and stores (compiles) made in the test processes themselves (a
subprocess's are not seen): both workers share one cache directory (`cache_dir`).

After collection, each test process is set up as the commands set up theirs
(presk/gc_pause.py `tune_process`): the modules and tests collected are frozen out of the
cyclic collector's walks, and its youngest generation is collected less often."""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

_CPU_ENV = "PRESK_TEST_CPU"
_TOP = 3  # the heaviest tests kept per file


def _cpu_now() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class _CpuReport:
    """Per-file sums of the CPU each test's protocol (setup, call, teardown) took."""

    def __init__(self) -> None:
        self.files: dict[str, dict] = {}
        self.current = "(outside any test)"

    def row(self, path: str) -> dict:
        return self.files.setdefault(path, {"cpu": 0.0, "tests": 0, "slow_cpu": 0.0,
                                            "top": [], "cache_hits": 0, "cache_stores": 0})

    def count(self, what: str) -> None:
        self.row(self.current)[what] += 1

    def add(self, item: pytest.Item, seconds: float) -> None:
        path = item.nodeid.split("::", 1)[0]
        row = self.row(path)
        row["cpu"] += seconds
        row["tests"] += 1
        if item.get_closest_marker("slow") is not None:
            row["slow_cpu"] += seconds
        row["top"] = sorted(row["top"] + [[item.nodeid.split("::", 1)[-1], seconds]],
                            key=lambda t: -t[1])[:_TOP]

    def merge(self, other: dict[str, dict]) -> None:
        for path, theirs in other.items():
            mine = self.row(path)
            for k in ("cpu", "tests", "slow_cpu", "cache_hits", "cache_stores"):
                mine[k] += theirs[k]
            mine["top"] = sorted(mine["top"] + theirs["top"], key=lambda t: -t[1])[:_TOP]


def _count_cache(report: _CpuReport) -> None:
    """Counts NativeCache hits and stores into the report (this process only)."""
    from presk.runtime.cache import NativeCache
    load, store = NativeCache.load, NativeCache.store

    def counted_load(self, key):
        hit = load(self, key)
        if hit is not None:
            report.count("cache_hits")
        return hit

    def counted_store(self, key, object_code, entries):
        report.count("cache_stores")
        return store(self, key, object_code, entries)

    NativeCache.load, NativeCache.store = counted_load, counted_store


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(_CPU_ENV):
        config.stash[_cpu_key] = report = _CpuReport()
        _count_cache(report)


_cpu_key = pytest.StashKey[_CpuReport]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    report = item.config.stash.get(_cpu_key, None)
    if report is not None:
        report.current = item.nodeid.split("::", 1)[0]
    start = _cpu_now()
    yield
    if report is not None:
        report.add(item, _cpu_now() - start)


def pytest_collection_finish(session: pytest.Session) -> None:
    from presk.gc_pause import tune_process
    tune_process()


def pytest_testnodedown(node, error) -> None:  # xdist's controller: a worker's sums
    report = node.config.stash.get(_cpu_key, None)
    if report is not None:
        report.merge(node.workeroutput.get("presk_cpu", {}))


def pytest_sessionfinish(session: pytest.Session) -> None:
    report = session.config.stash.get(_cpu_key, None)
    if report is None:
        return
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller writes
        workeroutput["presk_cpu"] = report.files
        return
    out = {path: {**row, "cpu": round(row["cpu"], 2), "slow_cpu": round(row["slow_cpu"], 2),
                  "top": [[n, round(s, 2)] for n, s in row["top"]]}
           for path, row in report.files.items()}
    Path(os.environ[_CPU_ENV]).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


def _weight(item: pytest.Item) -> float:
    mark = item.get_closest_marker("early")
    return float(mark.args[0]) if mark is not None and mark.args else 0.0


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the marks below must be seen
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The cases a module names in `SLOW_CASES` are marked `slow` (a combination of several
    parametrize decorators has no single `pytest.param` to mark); then the `early` files
    first, heaviest first (a stable sort: files stay whole, in order)."""
    names: dict[Any, set[str]] = {}
    for item in items:
        module = getattr(item, "module", None)
        names.setdefault(module, set()).add(item.name)
        if item.name in getattr(module, "SLOW_CASES", ()):
            item.add_marker(pytest.mark.slow)
    if not config.option.keyword and not any("::" in a for a in config.args):
        _check_slow_cases(names)  # whole modules collected: every name must be there
    items.sort(key=lambda item: -_weight(item))


def _check_slow_cases(names: dict[Any, set[str]]) -> None:
    """A `SLOW_CASES` that names no collected case, or that the module does not define
    (written inside a string, say), would leave its cases in `make test-fast` silently."""
    for module, collected in names.items():
        if module is None:
            continue
        slow = getattr(module, "SLOW_CASES", None)
        if slow is None and "\nSLOW_CASES = {" in Path(module.__file__).read_text():
            raise pytest.UsageError(f"{module.__name__}: SLOW_CASES is not a module variable")
        if unknown := sorted(set(slow or ()) - collected):
            raise pytest.UsageError(f"{module.__name__}: SLOW_CASES names no case {unknown}")


def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the whole session: under xdist, in the temporary directory
    the workers' own ones are made in (the controller's, this session's only), so that a
    program one worker compiled the other loads. Safe with two writers: an entry is
    written beside and renamed, its manifest last (presk/runtime/cache.py), and the pool's
    library too (presk/runtime/pool.py)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        d = tmp_path_factory.getbasetemp().parent / "presk-native-cache"
        d.mkdir(exist_ok=True)
        return d
    return tmp_path_factory.mktemp("presk-native-cache")


@pytest.fixture(scope="session", autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's native cache (PRESK_CACHE_DIR), enabled."""
    d = _session_cache(tmp_path_factory)
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
