"""Acceptance of `presk solve` (issue 6, reference §6.3) on the classifier (test/precision_programs/classifier.psk): at budgets 1e-2 … 1e-8
the solver's realization, run through the kernel interpreter, is within the budget of
the MPFR reference at 128 bits (the other programs: test_solver_acceptance.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver_acceptance import (BUDGETS, budget_id, check_loose_budget_narrows_something,
                               check_measured_error_inside_the_budget)

PROGRAMS = [
    "test/precision_programs/classifier.psk",
]
pytestmark = pytest.mark.early(0.3)


@pytest.mark.slow
@pytest.mark.parametrize("budget", BUDGETS, ids=budget_id)
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: Path(p).stem)
def test_measured_error_inside_the_budget(path, budget):
    check_measured_error_inside_the_budget(path, budget)


@pytest.mark.slow
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: Path(p).stem)
def test_loose_budget_narrows_something(path):
    check_loose_budget_narrows_something(path)
