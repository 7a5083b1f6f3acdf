"""TensorFlow Serving's Prometheus text format (``prometheus_exporter.cc``), as pure functions.

* ``# TYPE <name> counter|gauge|histogram``, no HELP lines;
* a metric name is its monitoring path with every character outside ``[a-zA-Z0-9_]`` replaced by
  ``:`` (``/tensorflow/serving/request_count`` → ``:tensorflow:serving:request_count``), and a
  leading digit gets a ``_``; label names keep ``[a-zA-Z0-9_]`` only;
* counters keep that name, with no ``_total`` (prometheus_client's exposition would append one;
  its parser reads this form as a counter and reports the sample as ``<name>_total``);
* histograms: cumulative ``_bucket{...,le="<bound>"}`` lines ending ``le="+Inf"``, then ``_sum``
  and ``_count``.

Label values escape ``\\`` and ``"`` as upstream, and a newline as ``\\n`` (which upstream leaves
raw and which would break a line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from serving.metrics.buckets import cumulative
from serving.metrics.store import Family, Histogram, HistogramValue, Labels

_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(path: str) -> str:
    name = _NOT_NAME.sub(":", path)
    return f"_{name}" if name[:1].isdigit() else name


def label_name(name: str) -> str:
    return _NOT_NAME.sub("", name)


def escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    """Integers as integers (upstream's counters are int64), everything else as Go would."""
    if value == int(value) and abs(value) < 2**63:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: Labels, extra: str = "") -> str:
    parts = [f'{label_name(n)}="{escape_value(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _histogram_lines(
    name: str, names: Sequence[str], bounds: Sequence[float], labels: Labels, value: HistogramValue
) -> list[str]:
    counts = cumulative(value.counts)
    lines = []
    for i, bound in enumerate([*map(number, bounds), "+Inf"]):
        le = 'le="' + bound + '"'
        lines.append(f"{name}_bucket{_labels(names, labels, le)} {counts[i]}")
    lines.append(f"{name}_sum{_labels(names, labels)} {number(value.sum)}")
    lines.append(f"{name}_count{_labels(names, labels)} {value.count}")
    return lines


def render(families: Iterable[Family]) -> str:
    """The text of ``families``, in the given order, label sets sorted; families with no value
    yet are left out (as upstream: a cell exists once something recorded into it)."""
    out: list[str] = []
    for family in families:
        name = metric_name(family.path)
        if isinstance(family, Histogram):
            cells = family.values()
            if not cells:
                continue
            out.append(f"# TYPE {name} histogram")
            for labels in sorted(cells):
                out.extend(
                    _histogram_lines(name, family.labels, family.bounds, labels, cells[labels])
                )
            continue
        values = family.values()
        if not values:
            continue
        out.append(f"# TYPE {name} {family.kind}")
        for labels in sorted(values):
            out.append(f"{name}{_labels(family.labels, labels)} {number(values[labels])}")
    return "".join(line + "\n" for line in out)
