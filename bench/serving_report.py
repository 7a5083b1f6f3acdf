"""Text tables for the serving benchmark: one per model, the issue's reference targets beside the
measured ratios, and the latency-vs-load sweep. Numbers only; never a verdict."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

HEAVY_MODEL = "mlp_wide"
SMALL_MODEL = "mlp"


def render(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """Columns padded to width; the first ``left`` columns left-aligned, the rest right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def _num(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def ceiling_for(cells: list[dict[str, Any]], cell: dict[str, Any]) -> dict[str, Any] | None:
    """The ceiling cell that a cell compares with: same model, transport (HTTP or gRPC) and
    concurrency. The v2 paths compare with the same ceilings: a bare server of the transport."""
    name = "asgi ceiling" if cell["transport"].startswith("rest") else "grpcio ceiling"
    for other in cells:
        if (other["server"] == name and other["model"] == cell["model"]
                and other["concurrency"] == cell["concurrency"] and "rps" in other):
            return other
    return None


def model_table(model: str, cells: list[dict[str, Any]]) -> str:
    header = ["server", "transport", "mode", "conc", "req/s", "p50 ms", "p99 ms",
              "CPU us/req", "x ceiling", "errors"]
    rows = []
    footnotes: list[str] = []
    failures = 0
    for cell in (c for c in cells if c["model"] == model):
        label = [cell["server"], cell["transport"], cell["mode"], str(cell["concurrency"])]
        if "failed" in cell:
            failures += 1
            footnotes.append(f"[{failures}] {cell['failed']}")
            footnotes += ["      " + line for line in cell.get("tail", "").splitlines()]
            rows.append([*label, "FAIL", "", "", "", "", f"see [{failures}]"])
            continue
        ceiling = ceiling_for(cells, cell)
        ratio = (cell["rps"] / ceiling["rps"]) if ceiling and ceiling["rps"] else None
        errors = ", ".join(f"{k} {v}" for k, v in cell["errors"].items())
        rows.append([*label, _num(cell["rps"]), _num(cell["p50_ms"], 2),
                     _num(cell["p99_ms"], 2), _num(cell["cpu_us_per_req"]),
                     _num(ratio, 2), errors])
    return "\n".join([render(header, rows, left=3), *footnotes])


def _find(cells: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for cell in cells:
        if all(cell.get(k) == v for k, v in match.items()) and "rps" in cell:
            return cell
    return None


def targets_table(cells: list[dict[str, Any]], concurrency: int) -> str:
    """The issue's targets next to this run's ratios, where both sides were measured."""
    header = ["target (issue 5)", "transport", "measured", "target"]
    rows = []
    c = concurrency
    for transport in ("rest", "grpc"):
        off = _find(cells, model=HEAVY_MODEL, server="graphserve", mode="off",
                    transport=transport, concurrency=c)
        for mode in ("fixed", "adaptive"):
            on = _find(cells, model=HEAVY_MODEL, server="graphserve", mode=mode,
                       transport=transport, concurrency=c)
            if off and on and off["rps"]:
                rows.append([f"{HEAVY_MODEL} c{c}: {mode} / off req/s", transport,
                             f"{on['rps'] / off['rps']:.2f}x", ">= 3x"])
                rows.append([f"{HEAVY_MODEL} c{c}: {mode} / off p99", transport,
                             f"{on['p99_ms'] / off['p99_ms']:.2f}x", "< 2x"])
    for mode in ("off", "fixed", "adaptive"):
        for transport, ceiling, goal in (("rest", "asgi ceiling", ">= 0.50"),
                                         ("grpc", "grpcio ceiling", ">= 0.80")):
            ours = _find(cells, model=SMALL_MODEL, server="graphserve", mode=mode,
                         transport=transport, concurrency=c)
            top = _find(cells, model=SMALL_MODEL, server=ceiling, transport=transport,
                        concurrency=c)
            if ours and top and top["rps"]:
                rows.append([f"{SMALL_MODEL} c{c}: graphserve {mode} / {ceiling} req/s",
                             transport, f"{ours['rps'] / top['rps']:.2f}", goal])
    if not rows:
        return ""
    return render(header, rows, left=2)


def sweep_table(sweep: dict[str, Any]) -> str:
    header = ["mode", "offered/s", "sent/s", "answered/s", "p50 ms", "p99 ms", "errors",
              "state"]
    rows = []
    for mode, entry in sweep["modes"].items():
        if "failed" in entry:
            rows.append([mode, "FAIL", "", "", "", "", entry["failed"][:60], ""])
            continue
        for point in entry["points"]:
            if "failed" in point:
                rows.append([mode, _num(point["offered_rps"]), "FAIL", "", "", "",
                             point["failed"][:60], ""])
                continue
            errors = ", ".join(f"{k} {v}" for k, v in point["errors"].items())
            rows.append([mode, _num(point["offered_rps"]), _num(point["sent_rps"]),
                         _num(point["rps"]), _num(point["p50_ms"], 2), _num(point["p99_ms"], 2),
                         errors, "saturated" if point["saturated"] else ""])
    return render(header, rows)
