"""Print the per-file CPU report that `PRESK_TEST_CPU=path pytest ...` wrote
(test/conftest.py), heaviest file first: CPU seconds, tests, the part in `slow` tests,
the native cache's hits and stores in the test processes, and the heaviest test of the
file.

    python test/cpu_table.py cpu.json [--top N]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def table(report: dict[str, dict], top: int | None = None) -> str:
    rows = sorted(report.items(), key=lambda kv: -kv[1]["cpu"])
    total = sum(r["cpu"] for _, r in rows)
    slow = sum(r["slow_cpu"] for _, r in rows)
    hits = sum(r.get("cache_hits", 0) for _, r in rows)
    stores = sum(r.get("cache_stores", 0) for _, r in rows)
    lines = [f"{'cpu s':>8} {'slow s':>8} {'tests':>5} {'hit/store':>9}  file  "
             "(heaviest test s)"]
    for path, r in rows[:top]:
        heavy = f"  ({r['top'][0][0]} {r['top'][0][1]:.1f})" if r["top"] else ""
        cache = f"{r.get('cache_hits', 0)}/{r.get('cache_stores', 0)}"
        lines.append(f"{r['cpu']:8.1f} {r['slow_cpu']:8.1f} {r['tests']:5d} {cache:>9}  "
                     f"{path}{heavy}")
    lines.append(f"{total:8.1f} {slow:8.1f} {sum(r['tests'] for _, r in rows):5d} "
                 f"{f'{hits}/{stores}':>9}  all {len(rows)} files")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--top", type=int, default=None, help="only the N heaviest files")
    args = ap.parse_args()
    print(table(json.loads(args.report.read_text()), args.top))


if __name__ == "__main__":
    main()
