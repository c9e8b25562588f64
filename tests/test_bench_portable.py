"""bench/portable.py's figures: a step's CPU rate only where the step's own CPU can be told from the
start-up's, and the verdict on the goal from what was measured."""

import pytest

from bench.portable import step_rates


def test_a_long_step_is_judged_by_its_own_cpu_as_well_as_the_wall_clock():
    # 1,000,000 rows: 60 s of wall, 40 s of CPU of which 3 s are the start-up.
    rate, cpu_rate, verdict = step_rates(1_000_000, 60.0, 40.0, 3.0, 20_000)
    assert rate == pytest.approx(16_667, rel=1e-3)
    assert cpu_rate == pytest.approx(1_000_000 / 37.0)
    assert verdict == "ok"  # one free core would reach the goal, though the wall clock did not


@pytest.mark.parametrize("cpu", [2.1, 2.9, 3.5])
def test_a_step_within_its_start_up_gets_no_cpu_rate_and_is_judged_by_the_wall_clock(cpu):
    # 20,000 rows exported in 2.1 s of wall, with 2.9 s of CPU measured for the start-up alone: the
    # difference is noise (it was 20,000,000 rows a second, and "ok", before).
    rate, cpu_rate, verdict = step_rates(20_000, 2.1, cpu, 2.9, 50_000)
    assert cpu_rate is None
    assert rate == pytest.approx(9_524, rel=1e-3)
    assert verdict == "BELOW GOAL"


def test_a_wall_rate_over_the_goal_is_ok_without_a_cpu_rate():
    assert step_rates(20_000, 0.5, 3.0, 2.9, 20_000) == (40_000.0, None, "ok")
