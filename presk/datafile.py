"""The data-stream format `.psk.d`: a text header, then samples as raw little-endian reals.

A file is a UTF-8 header of `key: value` lines that starts with the line `presk-data/1`
and ends with the line `end`, then `count` samples, each its tensors flattened row-major
one after the other (docs/data.md is the reference). The header names the sample's Presk
type (`sample: (ℝ[model: 4], ℝ[model: 4])`), the element type (`dtype: f64` or `f32`) and
the number of samples (`count: 256`).

Readers stream: `read_header` reads only the header, and `iter_samples` reads a bounded
chunk at a time, so a file larger than memory can feed a training run. Writers are atomic:
a temporary file in the target's directory, renamed over the target when complete.

The sample type is Presk source text and belongs to the frontend's type parser. Callers
that have parsed it pass the tensor shapes (`shapes`); `shapes_from_type_text` is a
regex fallback for concrete tensor and tuple types, enough for the `presk data` tool.

Pure Python and numpy: the frontend, the trainer and `presk data` use it without xDSL.
numpy is imported by the functions that read or write samples, not for the header:
`presk check` reads a training run's header without paying for numpy.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import shutil
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Sequence, TypeAlias

from .analysis.artifact import check_output

if TYPE_CHECKING:
    import numpy as np

MAGIC = "presk-data/1"
END = "end"
DTYPES: Mapping[str, str] = {"f64": "<f8", "f32": "<f4"}
"""The element types a file may hold, and their numpy little-endian spelling."""
ITEMSIZE: Mapping[str, int] = {"f64": 8, "f32": 4}

REQUIRED_KEYS = ("sample", "dtype", "count")
MAX_HEADER_BYTES = 1 << 16
"""A header longer than this is not a header: stop before reading a binary file whole."""

DEFAULT_CHUNK_BYTES = 1 << 20
"""How many bytes of samples `iter_samples` reads at once (at least one sample)."""

Shape = tuple[int, ...]
Sample: TypeAlias = "tuple[np.ndarray, ...]"
SamplesInput: TypeAlias = "np.ndarray | Sequence[np.ndarray] | Iterable[object]"


class DataFileError(Exception):
    """A data file that cannot be read or written as asked; the message says why, once."""


@dataclass(frozen=True)
class Header:
    """What a data file's header says, and where its samples start."""

    path: str
    sample: str
    """The sample's Presk type, as written (`(ℝ[model: 4], ℝ[model: 4])`)."""
    dtype: str
    """`f64` or `f32`."""
    count: int
    data_offset: int
    """The byte offset of the first sample: the length of the header."""
    sample_bytes: int
    shapes: tuple[Shape, ...]
    """The shapes of one sample's tensors, in the order they are stored."""
    description: str | None = None
    lines: Mapping[str, int] = field(default_factory=dict)
    """The 1-based line of each key in the header (and of `end`), for error messages."""
    extra: Mapping[str, str] = field(default_factory=dict)
    """Keys this reader does not know, kept so that a tool can show them."""

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def numpy_dtype(self) -> np.dtype:
        import numpy as np
        return np.dtype(DTYPES[self.dtype])

    def where(self, key: str) -> str:
        """`path:line` of a header key, for an error message."""
        line = self.lines.get(key)
        return f"{self.path}:{line}" if line is not None else self.path


# ---------------------------------------------------------------------------------------
# Sample types and shapes

_IDENT = r"[^\W\d]\w*"
_TENSOR = re.compile(r"\s*[ℝR]\s*\[([^\[\]]*)\]\s*")
_AXIS = re.compile(rf"\s*(?:({_IDENT})\s*:\s*)?(\S+?)\s*")


def shapes_from_type_text(text: str) -> list[Shape]:
    """The tensor shapes of a concrete sample type: `ℝ[model: 4]`, `R[4, 3]`, `(ℝ[a: 4], R[4])`

    A regex fallback for the `presk data` tool, not the language's type parser: it reads
    one tensor type or a flat tuple of them, with named or unnamed axes of literal size.
    Symbolic sizes, `...`, nested tuples and anything else raise DataFileError.
    """
    body = text.strip()
    if body.startswith("(") and body.endswith(")"):
        parts = _split_top_level(body[1:-1], text)
    else:
        parts = [body]
    return [_tensor_shape(part, text) for part in parts]


def _split_top_level(inner: str, text: str) -> list[str]:
    """Split a tuple's inside at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    if parts and not parts[-1].strip() and len(parts) > 1:
        parts.pop()  # `(ℝ[4],)`: a one-tensor tuple's trailing comma
    if not all(p.strip() for p in parts):
        raise DataFileError(f"sample type `{text}` has an empty element")
    return parts


def _tensor_shape(part: str, text: str) -> Shape:
    m = _TENSOR.fullmatch(part)
    if m is None:
        raise DataFileError(
            f"sample type `{text}`: `{part.strip()}` is not a tensor type like ℝ[model: 4]")
    axes = m.group(1).strip()
    if not axes:
        return ()
    return tuple(_axis_size(a, text) for a in axes.split(","))


def _axis_size(axis: str, text: str) -> int:
    m = _AXIS.fullmatch(axis)
    size = m.group(2) if m else axis.strip()
    if not size.isdigit() or not size.isascii():
        raise DataFileError(
            f"sample type `{text}`: axis `{axis.strip()}` has no literal size; "
            "a data file's sample needs concrete sizes")
    return int(size)


def sample_elements(shapes: Sequence[Shape]) -> int:
    """The number of reals in one sample."""
    return sum(math.prod(s) for s in shapes)


def _checked_shapes(shapes: Sequence[Sequence[int]], where: str) -> tuple[Shape, ...]:
    """Shapes as tuples, refusing what would make a sample hold no bytes."""
    out = tuple(tuple(int(n) for n in s) for s in shapes)
    if not out:
        raise DataFileError(f"{where}: a sample needs at least one tensor")
    if any(n < 1 for s in out for n in s):
        raise DataFileError(f"{where}: every axis of a sample needs a size of at least 1")
    return out


def _itemsize(dtype: str, where: str) -> int:
    """The bytes of one real of `dtype`, refusing a dtype the format does not have."""
    if dtype not in DTYPES:
        known = ", ".join(DTYPES)
        raise DataFileError(f"{where}: unknown dtype `{dtype}`: a data file holds {known}")
    return ITEMSIZE[dtype]


# ---------------------------------------------------------------------------------------
# Reading the header

_KEY_VALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):[ \t]*(.*)")


def read_header(path: str | os.PathLike[str],
                shapes: Sequence[Sequence[int]] | None = None) -> Header:
    """Read and check a data file's header, and check its size against `count`.

    `shapes` are the sample's tensor shapes as the caller's type parser read them from the
    header's `sample:`; without them the regex fallback `shapes_from_type_text` reads it.
    Reads the header only, never the samples.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            fields, lines, offset = _read_header_lines(f, name)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise DataFileError(f"{name}: cannot read: {e.strerror or e}") from None
    header = _build_header(name, fields, lines, offset, shapes)
    _check_size(header, size)
    return header


def _read_header_lines(f: IO[bytes], name: str) -> tuple[dict[str, str], dict[str, int], int]:
    """The header's keys, their line numbers, and the offset just after `end`."""
    first = f.readline(len(MAGIC) + 2)
    if first.rstrip(b"\r\n") != MAGIC.encode():
        raise DataFileError(_bad_magic(first, name))
    fields: dict[str, str] = {}
    lines: dict[str, int] = {}
    number = 1
    while True:
        raw = f.readline(MAX_HEADER_BYTES)
        number += 1
        if not raw.endswith(b"\n") or f.tell() > MAX_HEADER_BYTES:
            raise DataFileError(f"{name}: the header has no `{END}` line "
                                f"(it must end within {MAX_HEADER_BYTES} bytes)")
        line = _decode(raw, name, number)
        if line == END:
            lines[END] = number
            return fields, lines, f.tell()
        key, value = _key_value(line, name, number)
        if key in fields:
            raise DataFileError(f"{name}:{number}: `{key}` is set twice "
                                f"(first on line {lines[key]})")
        fields[key], lines[key] = value, number


def _decode(raw: bytes, name: str, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\n").rstrip("\r")
    except UnicodeDecodeError:
        raise DataFileError(f"{name}:{number}: the header is not UTF-8 text") from None


def _bad_magic(first: bytes, name: str) -> str:
    if first.startswith(b"presk-data/"):
        version = first.decode("utf-8", "replace").strip()
        return f"{name}: format `{version}` is not supported: this reader reads `{MAGIC}`"
    return f"{name}: not a Presk data file: it does not start with the line `{MAGIC}`"


def _key_value(line: str, name: str, number: int) -> tuple[str, str]:
    m = _KEY_VALUE.fullmatch(line)
    if m is None:
        raise DataFileError(f"{name}:{number}: not a `key: value` line: `{line}`")
    return m.group(1), (m.group(2) or "").strip()


def _build_header(name: str, fields: dict[str, str], lines: dict[str, int], offset: int,
                  shapes: Sequence[Sequence[int]] | None) -> Header:
    for key in REQUIRED_KEYS:
        if key not in fields:
            raise DataFileError(f"{name}:{lines[END]}: the header lacks `{key}:`")
    dtype = fields["dtype"]
    itemsize = _itemsize(dtype, f"{name}:{lines['dtype']}")
    count_text = fields["count"]
    if not (count_text.isascii() and count_text.isdigit()):
        raise DataFileError(f"{name}:{lines['count']}: count `{count_text}` "
                            "is not a natural number")
    where = f"{name}:{lines['sample']}"
    if shapes is None:
        try:
            shapes = shapes_from_type_text(fields["sample"])
        except DataFileError as e:
            raise DataFileError(f"{where}: {e}") from None
    checked = _checked_shapes(shapes, where)
    known = set(REQUIRED_KEYS) | {"description"}
    return Header(
        path=name, sample=fields["sample"], dtype=dtype, count=int(count_text),
        data_offset=offset, sample_bytes=sample_elements(checked) * itemsize,
        shapes=checked, description=fields.get("description"), lines=dict(lines),
        extra={k: v for k, v in fields.items() if k not in known})


def _check_size(header: Header, size: int) -> None:
    """The data after the header must hold exactly `count` samples."""
    have = size - header.data_offset
    want = header.count * header.sample_bytes
    if have == want:
        return
    whole, part = divmod(have, header.sample_bytes)
    if part and have < want:
        raise DataFileError(
            f"{header.path}: the file is truncated: it ends {part} bytes into sample {whole} "
            f"of the {header.count} its header promises ({header.sample_bytes} bytes each)")
    detail = f"its {have} bytes of data hold {whole} samples of {header.sample_bytes} bytes"
    if part:
        detail += f" and {part} bytes more"
    raise DataFileError(f"{header.where('count')}: count {header.count} disagrees with "
                        f"the file's size: {detail}")


# ---------------------------------------------------------------------------------------
# Reading samples

def iter_samples(path: str | os.PathLike[str], header: Header,
                 shapes: Sequence[Sequence[int]] | None = None, *, start: int = 0,
                 stop: int | None = None,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[Sample]:
    """Yield samples `start` to `stop` (default: all), each a tuple of arrays, one a tensor.

    Reads lazily, at most `chunk_bytes` (and at least one sample) at a time, so it streams
    a file of any size. The arrays have the file's dtype and are views into the chunk
    they were read with; they stay valid after the iterator moves on.
    """
    shapes = _shapes_for(header, shapes)
    stop = header.count if stop is None else min(stop, header.count)
    per_chunk = max(1, chunk_bytes // header.sample_bytes)
    with _open_data(path, header) as f:
        f.seek(header.data_offset + start * header.sample_bytes)
        for first in range(start, stop, per_chunk):
            rows = _read_rows(f, header, first, min(per_chunk, stop - first))
            for row in rows:
                yield _split(row, shapes)


def read_samples(path: str | os.PathLike[str], header: Header, indices: Sequence[int],
                 shapes: Sequence[Sequence[int]] | None = None) -> Sample:
    """The samples at `indices` as one batch: each tensor with a leading axis of samples.

    For shuffled batches: one seek and one read per sample, nothing else of the file.
    """
    import numpy as np
    shapes = _shapes_for(header, shapes)
    out = [np.empty((len(indices),) + s, header.numpy_dtype) for s in shapes]
    with _open_data(path, header) as f:
        for k, i in enumerate(indices):
            if not 0 <= i < header.count:
                raise DataFileError(f"{header.path}: sample {i} is outside 0..{header.count - 1}")
            f.seek(header.data_offset + i * header.sample_bytes)
            for t, part in zip(out, _split(_read_rows(f, header, i, 1)[0], shapes)):
                t[k] = part
    return tuple(out)


def _shapes_for(header: Header, shapes: Sequence[Sequence[int]] | None) -> tuple[Shape, ...]:
    """The caller's shapes if given, checked against the header's sample size."""
    if shapes is None:
        return header.shapes
    checked = _checked_shapes(shapes, header.where("sample"))
    size = sample_elements(checked) * header.itemsize
    if size != header.sample_bytes:
        raise DataFileError(f"{header.where('sample')}: shapes {list(checked)} make samples "
                            f"of {size} bytes, the header's type {header.sample_bytes}")
    return checked


def _open_data(path: str | os.PathLike[str], header: Header) -> IO[bytes]:
    try:
        return open(path, "rb")
    except OSError as e:
        raise DataFileError(f"{header.path}: cannot read: {e.strerror or e}") from None


def _read_rows(f: IO[bytes], header: Header, first: int, n: int) -> np.ndarray:
    """Read `n` samples as an (n, reals-per-sample) array, refusing a short read."""
    import numpy as np
    width = header.sample_bytes // header.itemsize
    rows = np.empty((n, width), header.numpy_dtype)
    got = f.readinto(memoryview(rows).cast("B"))  # type: ignore[attr-defined]
    if got != rows.nbytes:
        # The file shrank after read_header checked it: say where it now ends.
        raise DataFileError(f"{header.path}: the file is truncated: it ends "
                            f"{got % header.sample_bytes} bytes into sample "
                            f"{first + got // header.sample_bytes} of {header.count}")
    return rows


def _split(row: np.ndarray, shapes: Sequence[Shape]) -> Sample:
    """One flat sample row as its tensors, in order, each reshaped row-major."""
    parts, at = [], 0
    for shape in shapes:
        n = math.prod(shape)
        parts.append(row[at:at + n].reshape(shape))
        at += n
    return tuple(parts)


# ---------------------------------------------------------------------------------------
# Writing

def write_stream(path: str | os.PathLike[str], sample_type_text: str,
                 shapes: Sequence[Sequence[int]], samples: SamplesInput,
                 dtype: str = "f64", description: str | None = None) -> Header:
    """Write a data file atomically and return its header.

    `samples` is either the data by tensor (one array per tensor of the sample, each with
    a leading axis of samples; a single array when the sample is one tensor) or an
    iterable of samples (each a tuple of arrays, or one array when the sample is one
    tensor). An iterable is consumed once and streamed: its length need not be known.
    """
    import numpy as np
    name = os.fspath(path)
    _itemsize(dtype, name)
    np_dtype = np.dtype(DTYPES[dtype])
    checked = _checked_shapes(shapes, name)
    _check_type_text(sample_type_text, checked, name)
    for key, value in (("sample", sample_type_text), ("description", description or "")):
        if "\n" in value or "\r" in value:
            raise DataFileError(f"{name}: the {key} must be one line")
    columns = _as_columns(samples, checked)
    chunks = _column_chunks(columns, np_dtype) if columns is not None else \
        _sample_chunks(samples, checked, np_dtype, name)  # type: ignore[arg-type]
    count = len(columns[0]) if columns is not None else None

    def header_text(n: int) -> bytes:
        return _header_text(sample_type_text, dtype, n, description)

    _write_atomically(name, header_text, chunks, count)
    return read_header(name, checked)


def _check_type_text(text: str, shapes: tuple[Shape, ...], name: str) -> None:
    """When the fallback can read the type, it must agree with the caller's shapes."""
    try:
        read = tuple(shapes_from_type_text(text))
    except DataFileError:
        return  # a type the fallback does not read: the caller's parser vouches for it
    if read != shapes:
        raise DataFileError(f"{name}: sample type `{text}` has shapes {list(read)}, "
                            f"not the shapes given, {list(shapes)}")


def _header_text(sample: str, dtype: str, count: int, description: str | None) -> bytes:
    lines = [MAGIC, f"sample: {sample}", f"dtype: {dtype}", f"count: {count}"]
    if description:
        lines.append(f"description: {description}")
    lines.append(END)
    return ("\n".join(lines) + "\n").encode("utf-8")


def _as_columns(samples: SamplesInput, shapes: tuple[Shape, ...]) -> list[np.ndarray] | None:
    """The data by tensor, if `samples` is in that form; None for an iterable of samples."""
    import numpy as np
    if isinstance(samples, np.ndarray):
        candidates: list[object] = [samples]
    elif isinstance(samples, (tuple, list)) and len(samples) == len(shapes):
        candidates = list(samples)
    else:
        return None
    if not all(isinstance(a, np.ndarray) and a.shape[1:] == s and a.ndim == len(s) + 1
               for a, s in zip(candidates, shapes)):
        return None
    columns = [np.asarray(a) for a in candidates]
    if len({len(a) for a in columns}) != 1:
        raise DataFileError("the arrays of a sample's tensors hold different numbers of samples")
    return columns


def _column_chunks(columns: list[np.ndarray], dtype: np.dtype,
                   rows: int = 4096) -> Iterator[np.ndarray]:
    """(k, reals-per-sample) blocks of the data by tensor, a bounded number of rows each."""
    import numpy as np
    for first in range(0, len(columns[0]), rows):
        block = [c[first:first + rows] for c in columns]
        flat = [b.reshape(len(b), -1) for b in block]
        yield np.concatenate(flat, axis=1).astype(dtype, copy=False)


def _sample_chunks(samples: Iterable[object], shapes: tuple[Shape, ...], dtype: np.dtype,
                   name: str, rows: int = 4096) -> Iterator[np.ndarray]:
    """(k, reals-per-sample) blocks of an iterable of samples, checking each one's shapes."""
    import numpy as np
    block: list[np.ndarray] = []
    for i, sample in enumerate(samples):
        parts = (sample,) if len(shapes) == 1 and not isinstance(sample, (tuple, list)) \
            else tuple(sample)  # type: ignore[arg-type]
        block.append(_flat_sample(parts, shapes, name, i))
        if len(block) == rows:
            yield np.stack(block).astype(dtype, copy=False)
            block = []
    if block:
        yield np.stack(block).astype(dtype, copy=False)


def _flat_sample(parts: tuple[object, ...], shapes: tuple[Shape, ...], name: str,
                 index: int) -> np.ndarray:
    import numpy as np
    if len(parts) != len(shapes):
        raise DataFileError(f"{name}: sample {index} has {len(parts)} tensors, "
                            f"the sample type {len(shapes)}")
    arrays = [np.asarray(p, dtype=np.float64) for p in parts]
    for a, s in zip(arrays, shapes):
        if a.shape != s:
            raise DataFileError(f"{name}: sample {index} has a tensor of shape {a.shape}, "
                                f"the sample type {s}")
    return np.concatenate([a.reshape(-1) for a in arrays])


def _write_atomically(name: str, header_text: Callable[[int], bytes],
                      chunks: Iterator[np.ndarray], count: int | None) -> None:
    """Write header and chunks to a temporary file beside `name`, then rename it over.

    When the count is not known in advance (an iterable), the samples go to a second
    temporary file first and are copied after the header once they are counted.
    """
    directory = os.path.dirname(os.path.abspath(name))
    temps: list[str] = []
    try:
        check_output(name)  # a device, fifo or directory is never replaced
        final = _temp_path(directory, name, temps)
        with open(final, "wb") as out:
            if count is not None:
                out.write(header_text(count))
                written = _write_chunks(out, chunks)
                assert written == count  # the columns were counted before writing
            else:
                with open(_temp_path(directory, name, temps), "w+b") as data:
                    written = _write_chunks(data, chunks)
                    out.write(header_text(written))
                    data.seek(0)
                    shutil.copyfileobj(data, out, DEFAULT_CHUNK_BYTES)
            out.flush()
            os.fsync(out.fileno())
        check_output(name)
        os.replace(final, name)
        temps.remove(final)
    except OSError as e:
        raise DataFileError(f"{name}: cannot write: {e.strerror or e}") from None
    finally:
        for t in temps:
            _remove_quietly(t)


def _temp_path(directory: str, name: str, temps: list[str]) -> str:
    """A new empty file beside `name`, created with mode 0o666 so that the umask applies
    (mkstemp's 0o600 would leave the renamed data file unreadable to others)."""
    while True:
        path = os.path.join(directory, f".{os.path.basename(name)}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        temps.append(path)
        return path


def _write_chunks(f: IO[bytes], chunks: Iterator[np.ndarray]) -> int:
    """Write each block's bytes little-endian, row-major; return the number of samples."""
    n = 0
    for block in chunks:
        f.write(block.tobytes())  # C order: row-major, whatever the block's strides
        n += len(block)
    return n


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
