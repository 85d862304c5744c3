"""The verdict's intervals: a rate judged over few envs says when the envs were too few to judge it."""

from __future__ import annotations

import pytest

from unilab.apps.verdicts import meets_thresholds, rate_intervals, unsettled, verdict_line
from unilab.core.proportions import rate_interval


@pytest.mark.parametrize(
    ("rate", "n", "low", "high"),
    [
        # Wilson's score interval at z = 1.96, worked by hand from (p + z^2/2n) / (1 + z^2/n) and
        # z sqrt(p (1 - p) / n + z^2 / 4n^2) / (1 + z^2/n):
        (0.03, 100, 0.01025, 0.08452),  # 3 of 100: centre 0.04742, half 0.03713
        (0.048, 1000, 0.03639, 0.06307),
        (0.065, 1000, 0.05132, 0.08201),
        (0.0, 1000, 0.0, 0.00383),  # none of 1000: z^2 / (n + z^2)
        (1.0, 10, 0.72247, 1.0),
    ],
)
def test_the_interval_of_a_rate_is_wilson_s(rate: float, n: int, low: float, high: float) -> None:
    assert rate_interval(rate, n) == pytest.approx((low, high), abs=1e-5)


def test_no_envs_judge_nothing() -> None:
    assert rate_interval(0.0, 0) == (0.0, 1.0)


def pit(fall_rate: float, robots: int) -> dict:
    """A rough walk's summary judged at its hardest row, ``robots`` on it, tracking well."""
    result = {"task": "go1_walk_rough", "fall_rate": fall_rate, "lin_vel_error": 0.25, "judged_envs": robots}
    result["intervals"] = rate_intervals("go1_walk_rough", result)
    result["unsettled"] = unsettled("go1_walk_rough", result)
    return result


def test_a_verdict_near_its_bound_is_unsettled_and_one_clear_of_it_is_not() -> None:
    # The Go1's pit: 3 % of 100 robots passes but cannot tell itself from 8 %; on 1000, 4.8 % passes unsettled and
    # 6.5 % fails clear of the bound.
    few, near, over, clean = pit(0.03, 100), pit(0.048, 1000), pit(0.065, 1000), pit(0.0, 1000)
    assert [meets_thresholds("go1_walk_rough", r) for r in (few, near, over, clean)] == [True, True, False, True]
    assert few["unsettled"] == near["unsettled"] == ["fall_rate"]
    assert over["unsettled"] == clean["unsettled"] == []
    assert list(near["intervals"]) == ["fall_rate"]  # the velocity error is a mean, not a share: no interval
    line = verdict_line(near)
    assert line.startswith("  verdict: PASS (fall_rate 0.0480, 95 % 0.036-0.063 over 1000 envs (needs <= 0.05)")
    assert line.endswith("; unsettled: fall_rate within its interval of the bound, judge on more envs")
    assert "unsettled" not in verdict_line(over) and verdict_line(over).startswith("  verdict: FAIL")


def test_tracking_judges_its_survival_the_same_way() -> None:
    result = {"task": "g1_motion_tracking", "survival_rate": 0.92, "body_pos_error": 0.05, "judged_envs": 50}
    # 46 of 50 clips' robots through: centre 0.89003, half 0.07842
    (low, high) = rate_intervals("g1_motion_tracking", result)["survival_rate"]
    assert (low, high) == pytest.approx((0.81162, 0.96845), abs=1e-5)
    assert unsettled("g1_motion_tracking", {**result, "intervals": {"survival_rate": [low, high]}}) == ["survival_rate"]


def test_a_series_says_whether_its_first_pass_was_settled(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unilab.apps import eval as eval_app

    figures = {1: pit(0.08, 1000), 2: pit(0.048, 1000), 3: pit(0.0, 1000)}

    def evaluate(path, onnx, **kwargs):
        iteration = int(path.stem.removeprefix("model_"))
        result = figures[iteration]
        return {
            **result,
            "checkpoint": str(path),
            "iteration": iteration,
            "train_wall_time_sec": 10.0 * iteration,
            "meets_thresholds": meets_thresholds("go1_walk_rough", result),
        }

    monkeypatch.setattr(eval_app, "evaluate", evaluate)
    series = eval_app.evaluate_series([tmp_path / f"model_{i}.pt" for i in (3, 1, 2)], out=tmp_path)
    assert series["first_meeting_thresholds"] == {
        "checkpoint": str(tmp_path / "model_2.pt"),
        "iteration": 2,
        "train_wall_time_sec": 20.0,
        "unsettled": ["fall_rate"],
    }
