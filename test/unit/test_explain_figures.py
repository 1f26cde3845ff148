"""presk/explain/figures.py: every picture from plain data, deterministic bytes, the alt
text's figures checked against numpy, and no picture (a reason) when there is no data."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from presk.explain import figures as F

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_two_runs_give_identical_bytes_whatever_the_users_style",
}


SENS = [F.SiteSensitivity("Tower.apply/%2", 6.2814), F.SiteSensitivity("Block.apply/%6", 2.5041),
        F.SiteSensitivity("RMSNorm.apply/%10", 2.4077, 1.330e-7),
        F.SiteSensitivity("loss/%6", 1.0, 2.024e-7), F.SiteSensitivity("loss/%7", 1.0, 7.6e-17),
        F.SiteSensitivity("RMSNorm.apply/%5", 1.1466, 0.0),
        F.SiteSensitivity("blocks.proj.w", 2.970, 7.394e-8),
        F.SiteSensitivity("Block.apply/%2", 0.53272)]
LIVE = [F.LiveOp(f"Block.apply/%{k % 9}", b)
        for k, b in enumerate([32, 64, 96, 128, 64, 192, 160, 192, 64, 32, 16, 8])]
TYPES = [F.SiteType("RMSNorm.apply/%3", "f32", "RMSNorm.apply"),
         F.SiteType("RMSNorm.apply/%5", "f64", "RMSNorm.apply"),
         F.SiteType("loss/%2", "f64", "loss", "carried"),
         F.SiteType("loss/%6", "f32", "loss", "follows loss/%7"),
         F.SiteType("θ.blocks.norm.γ", "bf16", "parameters")]
RNG = np.random.default_rng(7)
PRED = 10.0 ** RNG.uniform(-7, -5, 9)
TIMES = [F.KernelTime(f"k{i}", float(p), float(p * r))
         for i, (p, r) in enumerate(zip(PRED, RNG.uniform(0.8, 1.3, 9)))]
LOSSES = [F.LossStep(i + 1, i // 10, float(2 * 0.95 ** i * r))
          for i, r in enumerate(RNG.uniform(0.7, 1.3, 45))]


def draw_all(d) -> dict[str, F.Picture]:
    d.mkdir(parents=True, exist_ok=True)
    return {"sens": F.sensitivities(SENS, 2.104e-3, str(d / "sens.png")),
            "live": F.live_bytes(LIVE, 504, str(d / "live.png")),
            "types": F.types(TYPES, str(d / "types.png")),
            "times": F.kernel_times(TIMES, 0.1, str(d / "times.png")),
            "loss": F.loss_curve(LOSSES, str(d / "loss.png"))}


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    out, at = [], 8
    while at < len(data):
        (n,) = struct.unpack(">I", data[at:at + 4])
        out.append((data[at + 4:at + 8], data[at + 8:at + 8 + n]))
        at += 12 + n
    return out


def size(path: str) -> tuple[int, int]:
    kind, body = chunks(open(path, "rb").read())[0]
    assert kind == b"IHDR"
    return struct.unpack(">II", body[:8])


def pixels(path: str) -> np.ndarray:
    return (matplotlib.image.imread(path)[:, :, :3] * 255).round().astype(int)


def has_colour(path: str, hex_colour: str, at_least: int = 20) -> bool:
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(pixels(path) - rgb).sum(axis=2) <= 24).sum()) >= at_least


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> dict[str, F.Picture]:
    """Every picture once, with any warning an error (a glyph missing from the font)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return draw_all(tmp_path_factory.mktemp("drawn"))


def test_every_picture_is_a_png_of_the_fixed_size_without_varying_metadata(drawn):
    tmp_path = Path(drawn["sens"].path).parent
    for name, pic in drawn.items():
        assert isinstance(pic, F.Drawn), name
        kinds = [k for k, _ in chunks(open(pic.path, "rb").read())]
        assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
        texts = [body for k, body in chunks(open(pic.path, "rb").read())
                 if k in (b"tEXt", b"iTXt", b"zTXt", b"tIME")]
        assert not any(b"Software" in t or b"matplotlib" in t for t in texts), name
        assert b"tIME" not in kinds
        assert "\n" not in pic.alt and pic.alt
        assert pic.markdown("pictures/x.png") == f"![{pic.alt}](pictures/x.png)"
    assert size(str(tmp_path / "sens.png")) == (700, round((0.9 + 0.17 * len(SENS)) * 100))
    assert size(str(tmp_path / "live.png")) == (700, 300)
    assert size(str(tmp_path / "loss.png")) == (700, 320)


def test_two_runs_give_identical_bytes_whatever_the_users_style(drawn, tmp_path):
    first = {k: open(p.path, "rb").read() for k, p in drawn.items()}
    with matplotlib.rc_context({"font.size": 23, "lines.linewidth": 9, "axes.grid": False}):
        second = {k: open(p.path, "rb").read() for k, p in draw_all(tmp_path / "b").items()}
    assert first == second
    assert matplotlib.rcParams["font.size"] != 23  # the style was given back
    # a fresh interpreter with another hash seed draws the same bytes
    code = ("import pathlib, sys; sys.path.insert(0, sys.argv[1]); import test_explain_figures"
            " as t; t.draw_all(pathlib.Path(sys.argv[2]))")
    env = dict(os.environ, PYTHONHASHSEED="12345", MPLBACKEND="Agg")
    subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__),
                    str(tmp_path / "c")], check=True, env=env)
    third = {k: (tmp_path / "c" / f"{k}.png").read_bytes() for k in first}
    assert first == third


def test_sensitivities_alt_and_budget_line(tmp_path):
    pic = F.sensitivities(SENS, 2.104e-3, str(tmp_path / "s.png"))
    s = np.array([r.s for r in SENS])
    top, low = SENS[int(s.argmax())], SENS[int(s.argmin())]
    terms = sum(r.term for r in SENS if r.term is not None)
    assert pic.alt == (f"The sensitivity ‖∂L/∂v‖₁ of 8 sites, log scale: the largest "
                       f"6.281e0 at {top.site}, the smallest 5.327e-1 at {low.site}; beside "
                       f"it the terms of the estimate, {terms:.3e} in all, against the "
                       f"budget 2.104e-3").replace("e-0", "e-")
    assert has_colour(pic.path, F.BUDGET_COLOUR)
    # without terms (or without a budget): one panel, no budget line
    alone = F.sensitivities([F.SiteSensitivity(r.site, r.s) for r in SENS], 2.104e-3,
                            str(tmp_path / "alone.png"))
    assert "budget" not in alone.alt and not has_colour(alone.path, F.BUDGET_COLOUR)


def test_live_bytes_peak_and_needs_against_numpy(tmp_path):
    pic = F.live_bytes(LIVE, 504, str(tmp_path / "m.png"))
    live = np.array([op.live for op in LIVE])
    at = int(np.argmax(live))  # numpy's argmax is the first maximum too
    assert pic.alt == (f"Live bytes over the call's {len(LIVE)} operations: the peak "
                       f"{live.max()} bytes at operation {at + 1} ({LIVE[at].site}); with "
                       f"the inputs, 504 bytes, the call needs {504 + live.max()}")
    assert "operation 6 " in pic.alt and "needs 696" in pic.alt
    assert has_colour(pic.path, F.BUDGET_COLOUR)


def test_types_colour_each_type_used_and_no_other(tmp_path):
    pic = F.types(TYPES, str(tmp_path / "t.png"))
    assert pic.alt == "The realization's types at 5 stored values in 3 rows: 2 f64, 2 f32, 1 bf16"
    for t in ("f64", "f32", "bf16"):
        assert has_colour(pic.path, F.TYPE_COLOURS[t]), t
    assert not has_colour(pic.path, F.TYPE_COLOURS["f16"], at_least=1)
    odd = F.types([F.SiteType("f/%1", "posit16", "f"), F.SiteType("f/%2", "f64", "f")],
                  str(tmp_path / "odd.png"))
    assert odd.alt.endswith("1 f64, 1 posit16")


def test_kernel_times_ratio_and_band_against_numpy(tmp_path):
    rows = TIMES + [F.KernelTime("unmeasured", 1e-6, 0.0)]
    pic = F.kernel_times(rows, 0.1, str(tmp_path / "k.png"))
    q = np.array([r.measured / r.predicted for r in TIMES])
    inside = int((np.abs(q - 1) <= 0.1).sum())
    assert pic.alt == (f"Measured against predicted time of 9 kernels, log-log: the median "
                       f"ratio measured/predicted {np.median(q):.3g}, {inside} of 9 inside "
                       f"1 ± 0.1 (1 without both times left out)")


def test_loss_curve_epoch_means_against_numpy(tmp_path):
    pic = F.loss_curve(LOSSES, str(tmp_path / "l.png"))
    loss = np.array([r.loss for r in LOSSES])
    assert pic.alt.startswith("The loss over 45 steps in 5 epochs, log scale: ")
    assert pic.alt.endswith(f"the last epoch's mean {F._sci(loss[40:].mean())}")
    assert F._epoch_means(LOSSES) == ([10, 20, 30, 40, 45],
                                      [pytest.approx(loss[k:k + 10].mean()) for k in
                                       range(0, 45, 10)])
    odd = LOSSES[:5] + [F.LossStep(6, 0, float("nan")), F.LossStep(7, 0, -1.0)]
    lin = F.loss_curve(odd, str(tmp_path / "lin.png"))
    assert "log scale" not in lin.alt and lin.alt.endswith("(1 steps not finite, left out)")


@pytest.mark.parametrize("draw,reason", [
    (lambda p: F.sensitivities([], 1e-3, p), "no site has a sensitivity"),
    (lambda p: F.sensitivities([F.SiteSensitivity("f/%1", 0.0)], 1e-3, p),
     "no site has a positive sensitivity"),
    (lambda p: F.types([], p), "the realization holds no stored value"),
    (lambda p: F.kernel_times([], 0.1, p), "no kernel time was measured"),
    (lambda p: F.kernel_times([F.KernelTime("k", 1e-6, float("nan"))], 0.1, p),
     "no kernel has both a predicted and a measured time"),
    (lambda p: F.live_bytes([], 504, p), "the call runs no operation"),
    (lambda p: F.loss_curve([], p), "no training run has logged a step"),
    (lambda p: F.loss_curve([F.LossStep(1, 0, float("inf"))], p),
     "the training run logged no finite loss"),
])
def test_no_data_no_picture_but_a_reason(tmp_path, draw, reason):
    path = str(tmp_path / "x.png")
    pic = draw(path)
    assert pic == F.NotDrawn(reason)
    assert pic.markdown() == f"Not drawn: {reason}."
    assert not os.path.exists(path)
