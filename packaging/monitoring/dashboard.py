#!/usr/bin/env python3
"""Writes dashboard.json, the Grafana dashboard for kube-controller-manager, beside this file.

Every query uses only metric names that upstream's v1.33 binary and this one both expose
(check.py verifies that against a scrape of each), so the dashboard serves either.
Run: python3 packaging/monitoring/dashboard.py
"""

import json
import os

RATE = "$__rate_interval"
SEL = 'job=~"$job", instance=~"$instance"'

# (title, unit, [(expr, legend)], width); panels flow left to right, 24 columns a row.
ROWS = [
    ("Leader election", [
        ("Leader (leader_election_master_status)", "none",
         [(f"leader_election_master_status{{{SEL}}}", "{{instance}} {{name}}")], 12),
        ("Process starts (process_start_time_seconds)", "dateTimeAsIso",
         [(f"process_start_time_seconds{{{SEL}}} * 1000", "{{instance}}")], 12),
    ]),
    ("Work queues (by queue name: one or more per controller)", [
        ("Depth (workqueue_depth)", "none",
         [(f"sum by (name) (workqueue_depth{{{SEL}}})", "{{name}}")], 8),
        ("Adds per second (workqueue_adds_total)", "ops",
         [(f"sum by (name) (rate(workqueue_adds_total{{{SEL}}}[{RATE}]))", "{{name}}")], 8),
        ("Retries per second (workqueue_retries_total)", "ops",
         [(f"sum by (name) (rate(workqueue_retries_total{{{SEL}}}[{RATE}]))", "{{name}}")], 8),
        ("Queue wait p99 (workqueue_queue_duration_seconds)", "s",
         [(f"histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{{{SEL}}}[{RATE}])))",
           "{{name}}")], 8),
        ("Work duration p99 (workqueue_work_duration_seconds)", "s",
         [(f"histogram_quantile(0.99, sum by (name, le) (rate(workqueue_work_duration_seconds_bucket{{{SEL}}}[{RATE}])))",
           "{{name}}")], 8),
        ("Longest running worker (workqueue_longest_running_processor_seconds)", "s",
         [(f"max by (name) (workqueue_longest_running_processor_seconds{{{SEL}}})", "{{name}}")], 8),
    ]),
    ("API requests (rest_client_*: labelled by method/verb, code and host, not by controller)", [
        ("Requests per second by method and code (rest_client_requests_total)", "reqps",
         [(f"sum by (method, code) (rate(rest_client_requests_total{{{SEL}}}[{RATE}]))", "{{method}} {{code}}")], 12),
        ("Request latency p99 by verb (rest_client_request_duration_seconds)", "s",
         [(f"histogram_quantile(0.99, sum by (verb, le) (rate(rest_client_request_duration_seconds_bucket{{{SEL}}}[{RATE}])))",
           "{{verb}}")], 12),
    ]),
    ("Node health (node lifecycle controller)", [
        ("Zone health, % Ready (node_collector_zone_health)", "percent",
         [(f"node_collector_zone_health{{{SEL}}}", "{{zone}}")], 8),
        ("Nodes and unhealthy nodes (node_collector_zone_size, node_collector_unhealthy_nodes_in_zone)", "none",
         [(f"node_collector_zone_size{{{SEL}}}", "size {{zone}}"),
          (f"node_collector_unhealthy_nodes_in_zone{{{SEL}}}", "unhealthy {{zone}}")], 8),
        ("Evictions per second (node_collector_evictions_total)", "ops",
         [(f"sum by (zone) (rate(node_collector_evictions_total{{{SEL}}}[{RATE}]))", "{{zone}}")], 8),
    ]),
    ("Process", [
        ("Resident memory (process_resident_memory_bytes)", "bytes",
         [(f"process_resident_memory_bytes{{{SEL}}}", "{{instance}}")], 8),
        ("CPU (process_cpu_seconds_total)", "percentunit",
         [(f"rate(process_cpu_seconds_total{{{SEL}}}[{RATE}])", "{{instance}}")], 8),
        ("Open file descriptors (process_open_fds)", "none",
         [(f"process_open_fds{{{SEL}}}", "{{instance}}")], 8),
    ]),
]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def variable(name, query):
    return {
        "name": name, "label": name, "type": "query", "datasource": DATASOURCE,
        "query": {"query": query, "refId": name}, "definition": query,
        "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }


def panels():
    out, y, next_id = [], 0, 1
    for title, row in ROWS:
        out.append({"type": "row", "title": title, "id": next_id, "collapsed": False,
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        next_id, y, x = next_id + 1, y + 1, 0
        for panel_title, unit, targets, width in row:
            if x + width > 24:
                x, y = 0, y + 8
            out.append({
                "type": "timeseries", "title": panel_title, "id": next_id, "datasource": DATASOURCE,
                "gridPos": {"h": 8, "w": width, "x": x, "y": y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                            "tooltip": {"mode": "multi", "sort": "desc"}},
                "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr,
                             "legendFormat": legend} for i, (expr, legend) in enumerate(targets)],
            })
            next_id, x = next_id + 1, x + width
        y += 8
    return out


def dashboard():
    return {
        "title": "kube-controller-manager",
        "uid": "kube-controller-manager",
        "description": "Work queues, API requests, leader election, node health and the process of "
                       "kube-controller-manager (upstream's or the Rust one: the same metric names).",
        "tags": ["kubernetes", "kube-controller-manager"],
        "schemaVersion": 39,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            variable("job", "label_values(leader_election_master_status, job)"),
            variable("instance", 'label_values(leader_election_master_status{job=~"$job"}, instance)'),
        ]},
        "panels": panels(),
    }


def queries():
    """Every query expression of the dashboard, for check.py."""
    return [expr for _, row in ROWS for _, _, targets, _ in row for expr, _ in targets]


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboard.json")
    with open(path, "w") as f:
        json.dump(dashboard(), f, indent=2)
        f.write("\n")
    print(f"wrote {path}")
