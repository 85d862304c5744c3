"""``plot_curves``: a run's learning curves, or its eval series, as one PNG (for docs, and runs without TensorBoard).

The x-axis is wall time (minutes since the run's first logged scalar, from each event's ``wall_time`` field) where
the run logged to TensorBoard: the question these plots answer is how long a policy takes to learn, which is what
differs between backends and machines. A run that logged CSV files (``training.logger=csv``) kept no times, only
each scalar's env step, so its curves are drawn against env steps.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from unilab.apps.args import ArgumentParser, check_output

if TYPE_CHECKING:  # matplotlib loads when a plot is drawn, not with the module
    from matplotlib.axes import Axes

CURVES_NAME = "curves.png"
RETURN_TAG, LENGTH_TAG, RATE_TAG = "episode/episode_return", "episode/episode_length", "perf/tail_env_steps_per_sec"
REWARD_PREFIX = "episode/reward_"
# A walk on terrain logs its curriculum's level: the mean and spread over envs, and the mean of each terrain type.
LEVEL_PREFIX = "episode/curriculum_terrain_level_"
LEVEL_MEAN, LEVEL_SPREAD = f"{LEVEL_PREFIX}mean", f"{LEVEL_PREFIX}std"
PANELS = (
    (RETURN_TAG, "episode return"),
    (LENGTH_TAG, "episode length (steps)"),
    (RATE_TAG, "tail env steps / s"),
)


class CurvesError(ValueError):
    """A user-facing problem with the run directory (missing, no scalars in it, a malformed CSV file)."""


@dataclass(frozen=True)
class Scalars:
    """A run's scalars by tag as (x, value) lists sorted by x, and what x is: seconds of wall time (TensorBoard's
    events) or env steps (the CSV logger's files)."""

    by_tag: dict[str, tuple[list[float], list[float]]]
    wall_time: bool

    def axis(self, xs: list[float]) -> tuple[list[float], str]:
        """``xs`` as a plot's x values and their label: minutes since the first scalar, or millions of env steps."""
        if self.wall_time:
            start = min(times[0] for times, _ in self.by_tag.values() if times)
            return [(x - start) / 60.0 for x in xs], "wall time (min)"
        return [x / 1e6 for x in xs], "env steps (M)"


def read_scalars(run_dir: Path) -> Scalars:
    """Every scalar tag of the run: from its TensorBoard event files where it has any (a resumed run appends a second
    one to the same directory, and the accumulator merges them), else from its CSV files (``scalars/<tag>.csv``)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CurvesError(f"run directory not found: {run_dir}")
    if any(run_dir.glob("events.out.tfevents.*")):
        return Scalars(_event_scalars(run_dir), wall_time=True)
    tables = sorted((run_dir / "scalars").rglob("*.csv"))
    if not tables:
        raise CurvesError(f"no TensorBoard event files or CSV scalars (scalars/*.csv) in {run_dir}")
    return Scalars(
        {path.relative_to(run_dir / "scalars").with_suffix("").as_posix(): _csv_points(path) for path in tables},
        wall_time=False,
    )


def _event_scalars(run_dir: Path) -> dict[str, tuple[list[float], list[float]]]:
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})  # 0 keeps every point, not a sample
    events.Reload()
    out: dict[str, tuple[list[float], list[float]]] = {}
    for tag in events.Tags()[SCALARS]:
        points = sorted(events.Scalars(tag), key=lambda e: e.wall_time)
        out[tag] = ([p.wall_time for p in points], [p.value for p in points])
    return out


def _csv_points(path: Path) -> tuple[list[float], list[float]]:
    """One CSV logger file's (env step, value) rows, sorted by step; a row that is not two numbers is one line."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            step, value = (float(field) for field in line.split(","))
        except ValueError:
            raise CurvesError(f"{path}: line {number} is not 'step,value': {line[:60]!r}") from None
        rows.append((step, value))
    rows.sort()
    return [step for step, _ in rows], [value for _, value in rows]


def plot_run(run_dir: Path, out: Path | None = None) -> Path:
    """Plot return, length, throughput and reward terms vs wall time, and for a walk on terrain its curriculum's
    levels; returns the PNG path (default beside)."""
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on training machines
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    scalars = read_scalars(run_dir)
    if not scalars.by_tag:
        raise CurvesError(f"no scalars logged in {run_dir}")
    rewards = sorted(tag for tag in scalars.by_tag if tag.startswith(REWARD_PREFIX))
    _, xlabel = scalars.axis([])

    terrain = LEVEL_MEAN in scalars.by_tag
    fig, grid = plt.subplots(2, 3 if terrain else 2, figsize=(18 if terrain else 12, 8), constrained_layout=True)
    axes = grid[:, :2]
    for ax, (tag, label) in zip(axes.flat, PANELS, strict=False):
        if tag in scalars.by_tag:
            xs, values = scalars.by_tag[tag]
            ax.plot(scalars.axis(xs)[0], values)
        else:
            ax.text(0.5, 0.5, f"{tag} not logged", ha="center", va="center", transform=ax.transAxes)
        ax.set(title=label, xlabel=xlabel, ylabel=label)
        ax.grid(alpha=0.3)
    ax = axes.flat[3]
    for tag in rewards:
        xs, values = scalars.by_tag[tag]
        ax.plot(scalars.axis(xs)[0], values, label=tag[len(REWARD_PREFIX) :])
    if rewards:
        ax.legend(fontsize="x-small", ncol=2)
    else:
        ax.text(0.5, 0.5, "no reward terms logged", ha="center", va="center", transform=ax.transAxes)
    ax.set(title="reward terms (mean per env step)", xlabel=xlabel, ylabel="reward x dt")
    ax.grid(alpha=0.3)
    if terrain:
        _plot_levels(grid[0, 2], scalars, xlabel)
        grid[1, 2].axis("off")
    fig.suptitle(run_dir.name)

    target = Path(out) if out is not None else run_dir / CURVES_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return target


def _plot_levels(ax: Axes, scalars: Scalars, xlabel: str) -> None:
    """The terrain curriculum's mean row with its spread over envs shaded, and each terrain type's mean: whether the
    robots climb to the hardest rows, and which type holds them back."""
    xs, mean = scalars.by_tag[LEVEL_MEAN]
    x = scalars.axis(xs)[0]
    ax.plot(x, mean, color="black", linewidth=2, label="mean")
    if LEVEL_SPREAD in scalars.by_tag and scalars.by_tag[LEVEL_SPREAD][0] == xs:
        spread = scalars.by_tag[LEVEL_SPREAD][1]
        low, high = (
            [m - s for m, s in zip(mean, spread, strict=True)],
            [m + s for m, s in zip(mean, spread, strict=True)],
        )
        ax.fill_between(x, low, high, color="grey", alpha=0.25, label="spread (1 std)")
    for tag in sorted(tag for tag in scalars.by_tag if tag.startswith(LEVEL_PREFIX)):
        if tag not in (LEVEL_MEAN, LEVEL_SPREAD):
            type_xs, values = scalars.by_tag[tag]
            ax.plot(scalars.axis(type_xs)[0], values, linewidth=1, label=tag[len(LEVEL_PREFIX) :])
    ax.legend(fontsize="x-small")
    ax.set(title="terrain curriculum: row (0 easiest)", xlabel=xlabel, ylabel="row")
    ax.grid(alpha=0.3)


def read_series(path: Path) -> dict:
    """An ``eval_series*.json`` written by ``unilab eval`` on a checkpoint series; one line for anything else."""
    try:
        series = json.loads(Path(path).read_text())
        thresholds = series["thresholds"]
        results = sorted(series["results"], key=lambda result: result["train_wall_time_sec"])
        # A terrain suite judged with every env on its hardest row is another series than the spread one.
        suites = [result["suite"] + (" (hardest row)" if result.get("rows") == "hardest" else "") for result in results]
    except FileNotFoundError:
        raise CurvesError(f"eval series not found: {path}") from None
    except (ValueError, KeyError, TypeError):
        raise CurvesError(f"{path} is not an eval series written by unilab eval on several checkpoints") from None
    if not results:
        raise CurvesError(f"{path} holds no evaluated checkpoints")
    return {"suite": suites[0], "thresholds": thresholds, "results": results}


def series_labels(paths: list[Path], suites: list[str]) -> list[str]:
    """Each series' legend label: its suite, led by its file's folder where two series share a suite (a run's
    checkpoints and another form of the same policies, judged the same way)."""
    return [
        f"{Path(path).parent.name}: {suite}" if suites.count(suite) > 1 else suite
        for path, suite in zip(paths, suites, strict=True)
    ]


def plot_series(paths: list[Path], out: Path) -> Path:
    """The thresholded metrics of checkpoint series against training wall time, one line per file (per eval suite),
    the threshold dashed: how soon a policy gets there, and whether it stays."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [read_series(path) for path in paths]
    labels = series_labels(paths, [one["suite"] for one in series])
    metrics = list(series[0]["thresholds"])
    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4), constrained_layout=True, squeeze=False)
    for ax, metric in zip(axes.flat, metrics, strict=True):
        for one, label in zip(series, labels, strict=True):
            times = [result["train_wall_time_sec"] / 60.0 for result in one["results"]]
            ax.plot(times, [result[metric] for result in one["results"]], marker="o", label=label)
        op, bound = series[0]["thresholds"][metric]
        ax.axhline(bound, linestyle="--", color="grey", label=f"threshold ({op} {bound})")
        ax.set(title=metric, xlabel="wall time from train start (min)", ylabel=metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return Path(out)


def main(argv: list[str] | None = None) -> Path:
    """Command ``python scripts/plot_curves.py RUN_DIR [--out PNG]`` or ``--series FILE... --out PNG``."""
    parser = ArgumentParser(prog="plot_curves", description=__doc__.splitlines()[0])
    parser.add_argument(
        "run_dir", type=Path, nargs="?", help="run directory written by train (events.out.tfevents.* or scalars/*.csv)"
    )
    parser.add_argument(
        "--series", type=Path, nargs="+", default=None, help="eval_series*.json files to plot instead (one per suite)"
    )
    parser.add_argument("--out", type=Path, default=None, help=f"PNG path (default: RUN_DIR/{CURVES_NAME})")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if (args.run_dir is None) == (args.series is None):
        parser.error("give a run directory or --series, not both or neither")
    if args.series is not None and args.out is None:
        parser.error("--series needs --out")
    check_output(parser.prog, args.out, "--out", ".png")
    try:
        path = plot_run(args.run_dir, args.out) if args.series is None else plot_series(args.series, args.out)
    except CurvesError as exc:
        parser.error(str(exc))
    print(f"curves: {path}")
    return path
