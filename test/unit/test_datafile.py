"""The data-stream format (presk/datafile.py) and `presk data` (presk/cli/data_cmd.py)."""

from __future__ import annotations

import argparse
import io
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from presk import datafile
from presk.cli import data_cmd
from presk.datafile import (DataFileError, iter_samples, read_header, read_samples,
                            shapes_from_type_text, write_stream)

PAIR = "(ℝ[model: 4], ℝ[model: 4])"
PAIR_SHAPES = [(4,), (4,)]


def _pairs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal((n, 4))
    return x, 2 * x + 1


def _header_bytes(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


def _error(path: Path) -> str:
    with pytest.raises(DataFileError) as e:
        read_header(path)
    return str(e.value)


# --- round trips -----------------------------------------------------------------------

def test_round_trip_by_tensor(tmp_path: Path) -> None:
    x, y = _pairs(10)
    path = tmp_path / "pairs.psk.d"
    written = write_stream(path, PAIR, PAIR_SHAPES, (x, y), description="y = 2x + 1")
    header = read_header(path)
    assert header == written
    assert (header.sample, header.dtype, header.count) == (PAIR, "f64", 10)
    assert header.description == "y = 2x + 1"
    assert header.sample_bytes == 8 * 8
    assert header.shapes == ((4,), (4,))
    assert header.data_offset + 10 * 64 == path.stat().st_size
    samples = list(iter_samples(path, header, PAIR_SHAPES))
    np.testing.assert_array_equal(np.stack([s[0] for s in samples]), x)
    np.testing.assert_array_equal(np.stack([s[1] for s in samples]), y)


def test_bytes_are_little_endian_row_major_after_end(tmp_path: Path) -> None:
    a = np.arange(6, dtype=np.float64).reshape(1, 2, 3)
    b = np.array([[10.0]])
    path = tmp_path / "m.psk.d"
    write_stream(path, "(ℝ[2, 3], ℝ[1])", [(2, 3), (1,)], (a, b))
    raw = path.read_bytes()
    head = _header_bytes("presk-data/1", "sample: (ℝ[2, 3], ℝ[1])", "dtype: f64",
                         "count: 1", "end")
    assert raw[:len(head)] == head
    assert raw[len(head):] == struct.pack("<7d", 0, 1, 2, 3, 4, 5, 10)


def test_round_trip_f32_from_an_iterator_of_unknown_length(tmp_path: Path) -> None:
    x, y = _pairs(9000)  # more than one write block of 4096 samples
    path = tmp_path / "pairs.psk.d"
    header = write_stream(path, PAIR, PAIR_SHAPES, (s for s in zip(x, y)), dtype="f32")
    assert (header.dtype, header.count, header.sample_bytes) == ("f32", 9000, 32)
    got = list(iter_samples(path, header, chunk_bytes=100))
    assert got[0][0].dtype == np.float32
    np.testing.assert_array_equal(np.stack([s[1] for s in got]), y.astype(np.float32))
    assert [p.name for p in tmp_path.iterdir()] == ["pairs.psk.d"]  # no temporary left


def test_one_tensor_samples_and_random_access(tmp_path: Path) -> None:
    data = np.random.default_rng(1).standard_normal((7, 2, 3))
    path = tmp_path / "m.psk.d"
    header = write_stream(path, "R[2, 3]", [(2, 3)], data)
    (batch,) = read_samples(path, header, [5, 0, 5])
    np.testing.assert_array_equal(batch, data[[5, 0, 5]])
    middle = [s[0] for s in iter_samples(path, header, start=2, stop=4)]
    np.testing.assert_array_equal(np.stack(middle), data[2:4])
    with pytest.raises(DataFileError, match="sample 7 is outside 0..6"):
        read_samples(path, header, [7])


def test_iter_samples_refuses_shapes_that_disagree_with_the_header(tmp_path: Path) -> None:
    path = tmp_path / "pairs.psk.d"
    header = write_stream(path, PAIR, PAIR_SHAPES, _pairs(2))
    with pytest.raises(DataFileError, match="make samples of 72 bytes, the header's type 64"):
        next(iter_samples(path, header, [(4,), (5,)]))


def test_writer_refuses_samples_that_do_not_fit_the_type(tmp_path: Path) -> None:
    path = tmp_path / "bad.psk.d"
    with pytest.raises(DataFileError, match=r"sample 1 has a tensor of shape \(3,\)"):
        write_stream(path, PAIR, PAIR_SHAPES, [(np.zeros(4), np.zeros(4)),
                                               (np.zeros(4), np.zeros(3))])
    with pytest.raises(DataFileError, match="has shapes"):
        write_stream(path, "ℝ[model: 5]", [(4,)], np.zeros((2, 4)))
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_writer_replaces_an_existing_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "pairs.psk.d"
    write_stream(path, PAIR, PAIR_SHAPES, _pairs(50))
    write_stream(path, PAIR, PAIR_SHAPES, _pairs(3))
    assert read_header(path).count == 3


# --- streaming --------------------------------------------------------------------------

def test_first_samples_of_a_file_larger_than_memory_stream(tmp_path: Path) -> None:
    # A sparse file of 2^32 samples of 64 bytes: 256 GiB of zeros that occupy no disk.
    # Reading the header and three samples must not touch the rest.
    count = 1 << 32
    path = tmp_path / "huge.psk.d"
    head = _header_bytes("presk-data/1", f"sample: {PAIR}", "dtype: f64",
                         f"count: {count}", "end")
    with open(path, "wb") as f:
        f.write(head)
        f.write(struct.pack("<8d", *range(8)))
        f.truncate(len(head) + count * 64)
    try:
        # What was allocated, not how long it took (tests never assert a time): reading the
        # rest would allocate gigabytes; three samples and a header need kilobytes.
        tracemalloc.start()
        header = read_header(path)
        first = []
        for i, sample in enumerate(iter_samples(path, header)):
            first.append(sample)
            if i == 2:
                break
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 16 << 20, f"{peak} bytes allocated to read three samples"
    finally:
        path.unlink()  # pytest keeps its temporary folders: leave no giant file behind
    np.testing.assert_array_equal(first[0][1], [4, 5, 6, 7])
    np.testing.assert_array_equal(first[2][0], np.zeros(4))


class _CountingFile(io.FileIO):
    """A file that remembers how many bytes were read from it."""

    total = 0

    def readinto(self, b):  # type: ignore[override]
        n = super().readinto(b)
        _CountingFile.total += n or 0
        return n


def test_iteration_reads_one_chunk_at_a_time(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "pairs.psk.d"
    header = write_stream(path, PAIR, PAIR_SHAPES, _pairs(10_000))  # 640 000 bytes
    monkeypatch.setattr(datafile, "open", lambda p, mode: _CountingFile(p, "r"),
                        raising=False)
    _CountingFile.total = 0
    samples = iter_samples(path, header, chunk_bytes=64 * 100)
    for _ in range(3):
        next(samples)
    assert _CountingFile.total == 64 * 100
    samples.close()


# --- errors -----------------------------------------------------------------------------

def test_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "pairs.psk.d"
    write_stream(path, PAIR, PAIR_SHAPES, _pairs(4))
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 10)
    assert _error(path) == (f"{path}: the file is truncated: it ends 54 bytes into sample 3 "
                            "of the 4 its header promises (64 bytes each)")


def test_file_that_shrinks_while_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "pairs.psk.d"
    header = write_stream(path, PAIR, PAIR_SHAPES, _pairs(4))
    with open(path, "r+b") as f:
        f.truncate(header.data_offset + 64 * 2 + 8)
    with pytest.raises(DataFileError, match="truncated: it ends 8 bytes into sample 2 of 4"):
        list(iter_samples(path, header))


def test_count_that_disagrees_with_the_size(tmp_path: Path) -> None:
    path = tmp_path / "pairs.psk.d"
    write_stream(path, PAIR, PAIR_SHAPES, _pairs(4))
    path.write_bytes(path.read_bytes().replace(b"count: 4\n", b"count: 5\n"))
    assert _error(path) == (f"{path}:4: count 5 disagrees with the file's size: "
                            "its 256 bytes of data hold 4 samples of 64 bytes")
    path.write_bytes(path.read_bytes().replace(b"count: 5\n", b"count: 3\n"))
    assert "count 3 disagrees with the file's size" in _error(path)


@pytest.mark.parametrize("lines, message", [
    (["presk-data/2", "end"], "format `presk-data/2` is not supported: this reader reads "
                              "`presk-data/1`"),
    (["PK\x03\x04 zip"], "not a Presk data file: it does not start with the line "
                         "`presk-data/1`"),
    (["presk-data/1", f"sample: {PAIR}", "dtype: f64"], "the header has no `end` line"),
    (["presk-data/1", f"sample: {PAIR}", "count: 0", "end"], ":4: the header lacks `dtype:`"),
    (["presk-data/1", "sample = x", "end"], ":2: not a `key: value` line: `sample = x`"),
    (["presk-data/1", "count: 1", "count: 2", "end"], ":3: `count` is set twice "
                                                      "(first on line 2)"),
    (["presk-data/1", f"sample: {PAIR}", "dtype: f64", "count: -1", "end"],
     ":4: count `-1` is not a natural number"),
    (["presk-data/1", "sample: ℝ[batch: B]", "dtype: f64", "count: 0", "end"],
     ":2: sample type `ℝ[batch: B]`: axis `batch: B` has no literal size"),
])
def test_bad_header(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "bad.psk.d"
    path.write_bytes(_header_bytes(*lines))
    assert message in _error(path)


def test_unknown_dtype(tmp_path: Path) -> None:
    path = tmp_path / "bad.psk.d"
    path.write_bytes(_header_bytes("presk-data/1", f"sample: {PAIR}", "dtype: f16",
                                   "count: 0", "end"))
    assert _error(path) == f"{path}:3: unknown dtype `f16`: a data file holds f64, f32"
    with pytest.raises(DataFileError, match="unknown dtype `bf16`"):
        write_stream(path, PAIR, PAIR_SHAPES, _pairs(1), dtype="bf16")


def test_missing_file(tmp_path: Path) -> None:
    assert _error(tmp_path / "none.psk.d") == (f"{tmp_path / 'none.psk.d'}: cannot read: "
                                               "No such file or directory")


def test_unknown_keys_are_kept_and_crlf_is_read(tmp_path: Path) -> None:
    path = tmp_path / "extra.psk.d"
    path.write_bytes(b"presk-data/1\r\nsample: R[1]\r\nsource: hand\r\ndtype: f64\r\n"
                     b"count: 1\r\nend\r\n" + struct.pack("<d", 3.5))
    header = read_header(path)
    assert header.extra == {"source": "hand"}
    assert header.lines == {"sample": 2, "source": 3, "dtype": 4, "count": 5, "end": 6}
    assert next(iter_samples(path, header))[0].tolist() == [3.5]


# --- the fallback type reader -----------------------------------------------------------

@pytest.mark.parametrize("text, shapes", [
    ("ℝ[model: 4]", [(4,)]),
    ("R[4, 3]", [(4, 3)]),
    ("(ℝ[a: 4], ℝ[4])", [(4,), (4,)]),
    ("ℝ[]", [()]),
    ("( R[row: 2, col: 3] , ℝ[] )", [(2, 3), ()]),
])
def test_shapes_from_type_text(text: str, shapes: list[tuple[int, ...]]) -> None:
    assert shapes_from_type_text(text) == shapes


@pytest.mark.parametrize("text", ["ℝ[..., model: 4]", "ℝ[batch: B]", "f64",
                                  "((ℝ[4], ℝ[4]), ℝ[4])", "(ℝ[4], )x"])
def test_shapes_from_type_text_refuses(text: str) -> None:
    with pytest.raises(DataFileError, match="sample type"):
        shapes_from_type_text(text)


# --- presk data -------------------------------------------------------------------------

def _run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="presk")
    data_cmd.add_parser(parser.add_subparsers(dest="command", required=True))
    out, err = io.StringIO(), io.StringIO()
    code = data_cmd.run(parser.parse_args(["data", *argv]), out, err)
    return code, out.getvalue(), err.getvalue()


def test_data_linear_then_show(tmp_path: Path) -> None:
    path = tmp_path / "pairs.psk.d"
    code, out, _ = _run("linear", "-o", str(path), "--width", "3", "--count", "5",
                        "--slope", "-0.5", "--intercept", "2", "--seed", "7")
    assert code == 0 and "wrote 5 samples" in out
    header = read_header(path)
    assert header.sample == "(ℝ[model: 3], ℝ[model: 3])"
    assert header.description == "linear: y = -0.5·x + 2, x ~ standard normal, seed 7"
    x = np.random.default_rng(7).standard_normal((5, 3))
    got = list(iter_samples(path, header))
    np.testing.assert_array_equal(np.stack([s[0] for s in got]), x)
    np.testing.assert_allclose(np.stack([s[1] for s in got]), -0.5 * x + 2, rtol=0, atol=0)

    code, out, err = _run("show", str(path), "--head", "2")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:6] == ["presk-data/1", "sample: (ℝ[model: 3], ℝ[model: 3])", "dtype: f64",
                         "count: 5", "description: " + header.description, "end"]
    assert lines[6] == f"-- 5 samples of 48 bytes from byte {header.data_offset}; the first 2:"
    assert len(lines) == 9
    assert lines[7].startswith("[0] [")
    first_x = [float(v) for v in lines[7][5:].split("]")[0].split()]
    np.testing.assert_allclose(first_x, x[0], atol=5e-7)


def test_data_show_errors(tmp_path: Path) -> None:
    code, out, err = _run("show", str(tmp_path / "none.psk.d"))
    assert (code, out) == (2, "")
    assert err == f"presk data: error: {tmp_path / 'none.psk.d'}: cannot read: " \
                  "No such file or directory\n"
    bad = tmp_path / "bad.psk.d"
    bad.write_bytes(b"hello\n")
    code, _, err = _run("show", str(bad))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("presk data: error: ") and "not a Presk data file" in err


def test_tutorial_pairs_file_is_what_data_linear_writes(tmp_path: Path) -> None:
    committed = Path(__file__).resolve().parents[2] / "tutorial" / "data" / "pairs.psk.d"
    path = tmp_path / "pairs.psk.d"
    assert _run("linear", "-o", str(path), "--width", "4", "--count", "256",
                "--seed", "0")[0] == 0
    assert path.read_bytes() == committed.read_bytes()
    assert os.access(path, os.R_OK)
