"""What the solver's joint moves pair (presk/analysis/solver.py `conversion_links`,
presk/analysis/conversions.py `converted_reads`): on the residual stack
(test/fixtures/residual_stack.psk) at B = 4, each conversion a narrowing alone makes the
host run, by the decisions at its two ends — a narrowed weight widened for the product
that reads it, a call's result by the site its callee returns, a fused follower by its
group's root — while the narrowing reads the estimate charges stay at the carried value."""

from __future__ import annotations

import pytest

from presk.analysis import entry as E
from presk.analysis.conversions import input_sites, narrowing_reads
from presk.analysis.realization import Realization
from presk.analysis.solver import conversion_links, stored_values
from presk.pipeline import kernel_pipeline, load_core
from programs import ROOT

DIMS = {"B": 4}


@pytest.fixture(scope="module")
def stack():
    module, _ = load_core(str(ROOT / "test" / "fixtures" / "residual_stack.psk"))
    paths = {f.path for f in E.prepare(module, "loss", dict(DIMS)).fields}
    followers = stored_values(kernel_pipeline(module, "loss", DIMS,
                                              Realization(entry="loss")).kernel)[1]

    def links(**types: dict[str, str]) -> set[tuple[str, str]]:
        real = Realization(entry="loss", **types)
        realize = kernel_pipeline(module, "loss", DIMS, real).realize
        return conversion_links(realize, paths, input_sites(module, "loss"), followers)

    return module, paths, followers, links


def test_all_f64_converts_nothing(stack):
    assert stack[3]() == set()


def test_a_narrowed_weight_is_widened_for_the_product_that_reads_it(stack):
    assert stack[3](params={"blocks.up.w": "f32"}) == {("Linear.apply/%3", "blocks.up.w")}


def test_a_call_result_is_the_value_its_callee_returns(stack):
    # Linear.apply's result is its epilogue's: gelu reads up's, the residual add down's
    links = stack[3](sites={"Linear.apply/%5": "f32"})
    assert {("Block.apply/%4", "Linear.apply/%5"), ("Block.apply/%7", "Linear.apply/%5"),
            ("Linear.apply/%5", "blocks.up.b")} <= links
    assert not {v for _, v in links} & {"Block.apply/%3", "Block.apply/%6"}  # the calls


def test_a_follower_is_its_root_and_a_fold_result_its_body_s(stack):
    module, paths, followers, links = stack
    assert followers.get("loss/%5") == "loss/%6"
    assert ("loss/%6", "Block.apply/%7") in links(sites={"loss/%6": "f32"})
    # the estimate's narrowing reads still name the carried value the reader meets
    realize = kernel_pipeline(module, "loss", DIMS,
                              Realization(entry="loss", sites={"loss/%6": "f32"})).realize
    assert ("loss/%5", "loss/%4") in {(r.reader, r.value)
                                      for r in narrowing_reads(realize, paths)}
