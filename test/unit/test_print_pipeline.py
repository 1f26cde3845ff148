"""`presk … --print-pipeline` prints the passes the command runs, and `presk-opt -p` with
that text on the program's PSK-Core computes what the command computes (issue 13).

The Core text is `presk dump --stage core --format mlir`'s; each comparison is of the
whole printed module.
"""

from __future__ import annotations

import pytest

from presk.cli.main import main as presk
from presk.cli.opt import main as presk_opt
from presk.pipeline import PRESK_PASSES
from programs import AT_MIXED, TRAIN

RECORD = ["--entry", "loss", "--dim", "B=4"]


def out_of(capsys: pytest.CaptureFixture[str], tool, argv: list[str]) -> str:
    capsys.readouterr()
    assert tool(argv) in (0, None)
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def core_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    from presk.pipeline import load_core
    path = tmp_path_factory.mktemp("core") / "core.mlir"
    path.write_text(str(load_core(TRAIN)[0]) + "\n", encoding="utf-8")
    return str(path)


def opt(capsys, core_file: str, pipeline: str) -> str:
    return out_of(capsys, presk_opt, [core_file, "-p", pipeline])


@pytest.mark.parametrize("flags", [[], ["--grad"], ["--grad", "--realize", AT_MIXED],
                                   ["--no-fuse"], ["--realize", AT_MIXED, "--remat", "recompute",
                                                   "--grad"]])
def test_dump_kernel_is_presk_opt_of_its_pipeline(capsys, core_file, flags) -> None:
    dump = ["dump", TRAIN, "--stage", "kernel", *RECORD, *flags]
    pipeline = out_of(capsys, presk, [*dump, "--print-pipeline"]).strip()
    fused = "--no-fuse" not in flags
    assert pipeline.split(",")[-3 if fused else -2:] == [
        "convert-psk-realize-to-kernel", "psk-kernel-dedup",
        *(["psk-kernel-fuse-siblings"] if fused else [])]
    assert ("grad=true" in pipeline) == ("--grad" in flags)
    assert ("psk-fuse" in pipeline) == ("--no-fuse" not in flags)
    assert opt(capsys, core_file, pipeline).strip() == \
        out_of(capsys, presk, [*dump, "--format", "mlir"]).strip()


def test_dump_realize_and_vjp(capsys, core_file) -> None:
    for stage, extra in (("realize", RECORD + ["--realize", AT_MIXED]), ("vjp", ["--entry", "loss"])):
        dump = ["dump", TRAIN, "--stage", stage, *extra]
        pipeline = out_of(capsys, presk, [*dump, "--print-pipeline"]).strip()
        assert opt(capsys, core_file, pipeline).strip() == \
            out_of(capsys, presk, [*dump, "--format", "mlir"]).strip()


def test_run_native_names_registered_passes_down_to_llvm(capsys, core_file) -> None:
    from presk.cli.opt import PreskOptMain
    pipeline = out_of(capsys, presk, ["run", TRAIN, *RECORD, "--grad",
                                      "--print-pipeline"]).strip()
    kernel = out_of(capsys, presk, ["dump", TRAIN, "--stage", "kernel", *RECORD, "--grad",
                                    "--print-pipeline"]).strip()
    assert pipeline.startswith(kernel + ",")
    # the kernel stage's passes, then the residual copies forwarded, the shared
    # conversions, the inputs read only in f32 passed so, the split and the lowering to
    # std (whose options — where a tile's packed operands live — are this machine's:
    # printed when not default)
    names = [p.partition("{")[0] for p in pipeline.split(",")]
    assert names[kernel.count(",") + 1:][:5] == [
        "psk-kernel-forward-copies", "psk-kernel-share-converts", "psk-kernel-hoist-input-converts", "psk-kernel-split",
        "convert-psk-kernel-to-std"]
    registered = PreskOptMain(args=[]).available_passes
    assert all(n in registered for n in names), names
    assert set(PRESK_PASSES) >= {n for n in names if n.startswith(("psk-", "convert-psk"))}
    from xdsl.parser import Parser
    main = PreskOptMain(args=[])
    module = Parser(main.ctx, opt(capsys, core_file, pipeline)).parse_module()
    dialects = {op.name.partition(".")[0] for op in module.walk()}
    assert dialects == {"builtin", "llvm"}, dialects


def test_interpreted_and_pytorch(capsys) -> None:
    assert out_of(capsys, presk, ["run", TRAIN, *RECORD, "--engine", "f64",
                                  "--print-pipeline"]) == "psk-differentiate\n"
    assert out_of(capsys, presk, ["run", TRAIN, *RECORD, "--engine", "mpfr", "--grad",
                                  "--print-pipeline"]) == 'psk-differentiate{entries="loss"}\n'
    assert out_of(capsys, presk, ["export", TRAIN, "--target", "pytorch", "-o", "unused",
                                  "--print-pipeline"]) == "\n"
    c = out_of(capsys, presk, ["export", TRAIN, "--target", "c", *RECORD, "-o", "unused",
                               "--print-pipeline"])
    assert c == out_of(capsys, presk, ["run", TRAIN, *RECORD, "--print-pipeline"])


def test_flags_are_checked_before_printing(capsys) -> None:
    assert presk(["dump", TRAIN, "--stage", "kernel", "--print-pipeline"]) == 2
    assert "--print-pipeline needs --entry" in capsys.readouterr().err
    assert presk(["run", TRAIN, *RECORD[:2], "--dim", "B=x", "--print-pipeline"]) == 2
    assert "expected NAME=N" in capsys.readouterr().err
    assert presk(["run", TRAIN, *RECORD, "--engine", "f64", "--time",
                  "--print-pipeline"]) == 2
