"""Reading a JSON artifact as every command takes one: `@path`, a path, or the JSON text;
and writing any file a user owns atomically (`write_atomic`).

Each kind (realization, envelope, checkpoint, …) checks its fields itself (`expect` for
one field's JSON type); what they share is where the text comes from and the one-line
errors when it cannot be read: no such file, not JSON, nested deeper than MAX_DEPTH, a
number beyond float64 or a non-finite one (JSON has none: NaN, Infinity are refused
unless the kind writes them, as a checkpoint's loss).
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import tempfile
from typing import Any

MAX_DEPTH = 64  # an artifact's JSON nests a few levels; deeper is not one of ours


def read_json(spec: str, kind: str, error: type[Exception],
              nonfinite: bool = False) -> tuple[object, str]:
    """The parsed JSON of an artifact of `kind`, and how to name where it came from.

    Raises `error` with one line: no such file, a directory, unreadable, not JSON, nested
    too deeply, a number that is not a finite float64 (NaN and Infinity allowed only with
    `nonfinite`)."""
    text, where = _text(spec, kind, error)
    return parse_json(text, where, error, nonfinite), where


def parse_json(text: str, where: str, error: type[Exception], nonfinite: bool = False):
    """`text` as JSON, under the rules of `read_json`."""
    def constant(name: str) -> float:
        if not nonfinite:
            raise error(f"{where}: holds {name}, which is not a JSON number")
        return float(name.replace("Infinity", "inf"))

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise error(f"{where}: the number {text[:24]} is beyond float64")
        return value
    try:
        data = json.loads(text, parse_constant=constant, parse_float=number)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column "
                    f"{exc.colno})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise error(f"{where}: not JSON ({exc})") from None
    if _depth(data) > MAX_DEPTH:
        raise error(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    return data


def _depth(data: object) -> int:
    deepest, todo = 0, [(data, 1)]
    while todo:
        value, d = todo.pop()
        deepest = max(deepest, d)
        if d > MAX_DEPTH:
            break
        if isinstance(value, dict):
            todo += [(v, d + 1) for v in value.values()]
        elif isinstance(value, list):
            todo += [(v, d + 1) for v in value]
    return deepest


KINDS: dict[str, tuple[type, ...] | str] = {
    "natural": "natural", "string": (str,), "object": (dict,), "list": (list,),
    "number": (int, float), "boolean": (bool,)}


def expect(data: dict, name: str, kind: str, where: str, error: type[Exception]) -> Any:
    """`data[name]` when it is a JSON value of `kind` (`natural`, `string`, `object`,
    `list`, `number`, `boolean`); else `error`, one line naming the field and what it is."""
    if name not in data:
        raise error(f"{where}: no \"{name}\" field")
    value = data[name]
    want = KINDS[kind]
    if want == "natural":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    else:
        ok = isinstance(value, want) and (kind == "boolean" or not isinstance(value, bool))
    if not ok:
        raise error(f"{where}: \"{name}\" is {json.dumps(value)[:40]}, not a "
                    f"{'natural number' if kind == 'natural' else kind}")
    return value


def _text(spec: str, kind: str, error: type[Exception]) -> tuple[str, str]:
    stripped = spec.strip()
    if stripped.startswith("{"):
        return stripped, f"the inline {kind}"
    path = spec[1:] if spec.startswith("@") else spec
    if os.path.isdir(path):
        raise error(f"{path}: is a directory, not {'an' if kind[0] in 'aeiou' else 'a'} "
                    f"{kind} file")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read ({exc})") from None


_KINDS = [(stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a fifo"),
          (stat.S_ISSOCK, "a socket")]


def check_output(path: str | os.PathLike[str]) -> None:
    """Refuse (OSError, its strerror one clause) an output place that is neither a regular
    file (a symbolic link to one included) nor a new name in a writable directory: a rename
    over /dev/full, a fifo or a socket would replace the node with a regular file."""
    path = os.fspath(path)
    if not path:
        raise OSError(errno.ENOENT, "an empty file name", path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise OSError(errno.ENOENT, f"no directory {directory}", path) from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise OSError(errno.EACCES, f"the directory {directory} is not writable",
                          path) from None
        return
    except OSError as exc:  # a loop of links, a name too long, a component not a folder
        raise OSError(exc.errno, exc.strerror, path) from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
        raise OSError(errno.EEXIST, f"is {kind}, not a regular file: refused, left as it "
                      "is", path)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644) -> None:
    """Write a file atomically: a temporary file beside it, then a rename over it, so that
    a reader sees the old file or the new one, never half of one (text as UTF-8). The file
    gets `mode` (mkstemp's 0600 would hide it from other users). The place is checked
    (`check_output`) before the temporary file is made and again just before the rename.
    Raises OSError."""
    path = os.fspath(path)
    check_output(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".presk-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, mode)
        check_output(path)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json(path: str, data: object, error: type[Exception], allow_nan: bool = True) -> None:
    """Write an artifact atomically (`write_atomic`). Raises `error` with one line when
    the place cannot be written."""
    text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=allow_nan) + "\n"
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise error(f"{path}: cannot write ({exc.strerror or exc})") from None


def check_format(data: object, where: str, fmt: str, kind: str, fields: set[str],
                 error: type[Exception]) -> dict:
    """The artifact's JSON object, once its `format` is `fmt` (`presk-<kind>/<n>`) and it
    holds no field outside `fields`: a wrong kind or version is refused by name."""
    article = "an" if kind[0] in "aeiou" else "a"
    if not isinstance(data, dict):
        raise error(f"{where}: {article} {kind} is a JSON object, not {type(data).__name__}")
    found = data.get("format")
    if not isinstance(found, str):
        raise error(f"{where}: no \"format\" field (expected \"{fmt}\")")
    found_kind, _, version = found.partition("/")
    if found_kind != fmt.split("/")[0]:
        raise error(f"{where}: is a {found} artifact, not {article} {kind} (\"{fmt}\")")
    if version != fmt.split("/")[1]:
        raise error(f"{where}: {kind} format version {version or '?'} is not supported "
                    f"(this presk reads \"{fmt}\")")
    if unknown := sorted(set(data) - fields):
        raise error(f"{where}: unknown field \"{unknown[0]}\"")
    return data
