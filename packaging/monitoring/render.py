#!/usr/bin/env python3
"""Renders the dashboard's panels from a Prometheus server's HTTP API into a PNG: a stand-in
for a Grafana screenshot where Grafana cannot be installed. Each panel is the same query as in
dashboard.json ($job and $instance as `.*`, $__rate_interval as 30s) over the last minutes.

    python3 packaging/monitoring/render.py http://127.0.0.1:9090 10 dashboard.png

Needs matplotlib (`pip install matplotlib`).
"""

import json
import os
import sys
import time
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dashboard  # noqa: E402


def query_range(server, expr, start, end, step):
    expr = expr.replace('"$job"', '".*"').replace('"$instance"', '".*"').replace("$__rate_interval", "30s")
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{server}/api/v1/query_range?{params}", timeout=30) as answer:
        return json.load(answer)["data"]["result"]


def legend(template, labels):
    text = template
    for key, value in labels.items():
        text = text.replace("{{" + key + "}}", value)
    while "{{" in text:
        text = text[: text.index("{{")] + text[text.index("}}") + 2 :]
    return text.strip() or "value"


def main(server, minutes, out):
    end = time.time()
    start, step = end - minutes * 60, max(2, minutes * 60 // 200)
    panels = [(row, p) for row, items in dashboard.ROWS for p in items]
    columns = 3
    rows = (len(panels) + columns - 1) // columns
    plt.style.use("dark_background")
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 3.2 * rows))
    fig.suptitle(f"kube-controller-manager (dashboard.json's queries, Prometheus, last {minutes} min)", fontsize=15)
    for ax, (row, (title, unit, targets, _)) in zip(axes.flat, panels):
        ax.set_title(title + (" as uptime, min" if unit == "dateTimeAsIso" else ""), fontsize=9, loc="left")
        lines = []
        for expr, template in targets:
            for result in query_range(server, expr, start, end, step):
                xs = [(float(t) - end) / 60 for t, _ in result["values"]]
                ys = [float(v) for _, v in result["values"]]
                if unit == "dateTimeAsIso":
                    # A start time as the uptime in minutes, which a plot shows better.
                    ys = [(float(t) - y / 1000) / 60 for (t, _), y in zip(result["values"], ys)]
                ys = [0.0 if y != y else y for y in ys]  # NaN (no observations) as 0
                lines.append((max(ys, default=0), xs, ys, legend(template, result["metric"])[:40]))
        # The eight busiest series, as a legend can show.
        for _, xs, ys, label in sorted(lines, key=lambda line: -line[0])[:8]:
            ax.plot(xs, ys, linewidth=1.2, label=label)
        if lines:
            ax.legend(fontsize=6, loc="upper left", ncol=2)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        ax.set_xlabel("minutes", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.2)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(out, dpi=70)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
