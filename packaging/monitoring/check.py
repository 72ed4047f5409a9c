#!/usr/bin/env python3
"""Checks that every metric the dashboard and the alert rules query is in each given scrape.

    python3 packaging/monitoring/check.py UPSTREAM_SCRAPE.txt OURS_SCRAPE.txt

A scrape is a `/metrics` answer (Prometheus text format). `up` is Prometheus' own and is
skipped. Exits 1, naming what is missing where, when a metric is absent from a scrape.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dashboard  # noqa: E402

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
            "bool", "offset", "le", "inf", "nan"}
PROMETHEUS_OWN = {"up"}


def metric_names(expr):
    """The metric names of a PromQL expression: identifiers that are no function, keyword or label."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)              # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)                        # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                       # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        rest = expr[match.end():].lstrip()
        name = match.group(0)
        if rest.startswith("(") or name.lower() in KEYWORDS or name in PROMETHEUS_OWN or name.startswith("$"):
            continue
        if expr[max(0, match.start() - 1)] == "$":
            continue
        names.add(name)
    return names


def queries():
    exprs = list(dashboard.queries())
    with open(os.path.join(HERE, "alerts.yaml")) as f:
        exprs += rule_exprs(f.read())
    return exprs


def rule_exprs(text):
    """The `expr:` values of a rules file, one line or a `|` block (no YAML library needed)."""
    exprs, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        key, _, value = line.strip().partition(":")
        if key != "expr":
            continue
        if value.strip() != "|":
            exprs.append(value.strip())
            continue
        indent = len(line) - len(line.lstrip())
        block = []
        for following in lines[i + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            block.append(following.strip())
        exprs.append(" ".join(block))
    return exprs


def samples(path):
    """The sample names of a scrape."""
    with open(path) as f:
        return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in f if line.strip() and not line.startswith("#")}


def main(paths):
    wanted = set().union(*(metric_names(e) for e in queries()))
    missing = []
    for path in paths:
        have = samples(path)
        missing += [f"{name} is not in {path}" for name in sorted(wanted - have)]
    for line in missing:
        print(line)
    print(f"{len(wanted)} metric names checked in {len(paths)} scrapes: {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
