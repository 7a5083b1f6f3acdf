"""Draws the latency-vs-offered-load picture of the serving benchmark's open-loop sweep.

    .venv/bin/python bench/plot_latency.py [SWEEP_JSON] [--out docs/latency_vs_load.png]

SWEEP_JSON is ``bench/.cache/latency_sweep.json`` (written by ``bench/serving_bench.py``; the
default) or a ``serving_bench.py --json`` file, whose ``sweep`` entry is used. Two panels, p50 and
p99 latency (log scale) against the offered rate, one curve per batching mode; points where the
server could not keep up (saturated: fewer requests sent or answered than offered) are drawn
hollow. Also prints, per batching mode, from which offered rate its latency is below the
unbatched one's. matplotlib is a bench-only dependency (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SWEEP = ROOT / "bench" / ".cache" / "latency_sweep.json"
DEFAULT_OUT = ROOT / "docs" / "latency_vs_load.png"
STYLE = {"off": ("#444444", "o", "batching off"),
         "fixed": ("#1f77b4", "s", "fixed timeout"),
         "adaptive": ("#d62728", "^", "adaptive window")}


def points(sweep: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    entry = sweep["modes"].get(mode, {})
    return [p for p in entry.get("points", []) if "failed" not in p]


def crossings(sweep: dict[str, Any]) -> list[str]:
    """For each batching mode: the lowest offered rate from which its p50 (p99) stays below
    batching off's at every rate both measured, or where off could no longer keep up."""
    off = {round(p["offered_rps"]): p for p in points(sweep, "off")}
    lines = []
    for mode in (m for m in sweep["modes"] if m != "off"):
        mine = {round(p["offered_rps"]): p for p in points(sweep, mode)}
        for key in ("p50_ms", "p99_ms"):
            rates = sorted(mine)
            below = [r for r in rates
                     if r not in off or off[r]["saturated"] or mine[r][key] < off[r][key]]
            # the first rate from which every later rate is below as well
            start = None
            for r in reversed(rates):
                if r in below:
                    start = r
                else:
                    break
            what = key.split("_")[0]
            if start is None:
                lines.append(f"{mode}: {what} above batching off at every rate measured")
            elif start == rates[0]:
                lines.append(f"{mode}: {what} at or below batching off from the lightest rate "
                             f"({start}/s)")
            else:
                lines.append(f"{mode}: {what} below batching off from {start} req/s offered")
    return lines


def draw(sweep: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for ax, key, title in ((axes[0], "p50_ms", "p50"), (axes[1], "p99_ms", "p99")):
        for mode in sweep["modes"]:
            data = points(sweep, mode)
            if not data:
                continue
            color, marker, label = STYLE.get(mode, ("#2ca02c", "D", mode))
            xs = [p["offered_rps"] for p in data]
            ys = [p[key] for p in data]
            ax.plot(xs, ys, color=color, label=label, linewidth=1.6)
            for p, x, y in zip(data, xs, ys):
                ax.plot([x], [y], marker=marker, color=color, markersize=6,
                        markerfacecolor="white" if p["saturated"] else color)
        ax.set_yscale("log")
        ax.set_title(f"{title} latency")
        ax.set_xlabel("offered load (requests/s, open loop)")
        ax.set_ylabel("ms")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(loc="upper left")
    fig.suptitle(f"{sweep['model']} over REST, batch-1 requests "
                 "(hollow: saturated, fewer sent or answered than offered)", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path, nargs="?", default=DEFAULT_SWEEP)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    data = json.loads(args.sweep.read_text())
    sweep = data.get("sweep", data) if "modes" not in data else data
    if not sweep or not any(points(sweep, m) for m in sweep.get("modes", {})):
        print(f"{args.sweep}: no sweep points to draw", file=sys.stderr)
        return 1
    draw(sweep, args.out)
    print(f"wrote {args.out}")
    for line in crossings(sweep):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
