#!/usr/bin/env python3
"""Writes Rudder's variants of Istio's control-plane dashboards into charts/rudder/files/.

Istio's "Istio Control Plane" and "Istio Performance" dashboards read istiod's Go runtime series
(goroutines, heap, GC); Rudder has no Go runtime, so a third of their panels stay empty. These
variants keep the same sections and questions, with every query on a series Rudder exports
(docs/metrics.md lists each, and which Go series it stands for). The mesh, service and workload
dashboards read the proxies' series and need no variant.

Usage: scripts/dashboards.py          write the files
       scripts/dashboards.py --check  exit 1 if a file differs from what this script writes
"""

import json
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parent.parent / "charts" / "rudder" / "files"
ISTIOD = '{app="istiod"}'
RATE = "[$__rate_interval]"


class Board:
    """A dashboard laid out in rows of two half-width panels."""

    def __init__(self, title, uid, description):
        self.title, self.uid, self.description = title, uid, description
        self.panels, self.y, self.x = [], 0, 0

    def row(self, title):
        if self.x:
            self.y, self.x = self.y + 8, 0
        self.panels.append({"type": "row", "title": title, "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def panel(self, title, unit, targets, description="", kind="timeseries"):
        self.panels.append({
            "type": kind,
            "title": title,
            "description": description,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "gridPos": {"h": 8, "w": 12, "x": self.x, "y": self.y},
            "targets": [{"expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i)}
                        for i, (expr, legend) in enumerate(targets)],
        })
        self.x = 12 - self.x
        if self.x == 0:
            self.y += 8

    def json(self):
        for i, p in enumerate(self.panels, start=1):
            p["id"] = i
        return {
            "title": self.title,
            "uid": self.uid,
            "description": self.description,
            "tags": ["rudder", "istio"],
            "timezone": "browser",
            "schemaVersion": 39,
            "version": 1,
            "refresh": "15s",
            "time": {"from": "now-30m", "to": "now"},
            "editable": False,
            "graphTooltip": 1,
            "templating": {"list": [{"name": "datasource", "type": "datasource",
                                     "query": "prometheus", "label": "Data source", "current": {}}]},
            "panels": self.panels,
        }


def quantiles(histogram):
    """The p99 and p50 of an istiod histogram, as targets."""
    return [(f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{ISTIOD}{RATE})))", name)
            for q, name in [("0.99", "p99"), ("0.5", "p50")]]


def control_plane():
    b = Board("Istio Control Plane (Rudder)", "rudder-istio-control-plane",
              "Istio's control-plane dashboard for a Rudder control plane: the runtime panels read "
              "Rudder's async runtime and allocator instead of Go's.")
    b.row("Deployed Versions")
    b.panel("Control plane versions", "short",
            [('sum by (tag) (istio_build{app="istiod", component="pilot"})', "Istio {{tag}}"),
             (f"sum by (version) (rudder_build_info{ISTIOD})", "Rudder {{version}}")])
    b.row("Resource Usage")
    b.panel("Memory", "bytes",
            [(f"sum by (pod) (process_resident_memory_bytes{ISTIOD})", "resident {{pod}}"),
             (f"sum by (pod) (rudder_allocator_committed_bytes{ISTIOD})", "heap {{pod}}")],
            "Resident memory, and what the allocator holds for the heap (Go's heap panels).")
    b.panel("Peak heap", "bytes",
            [(f"sum by (pod) (rudder_allocator_peak_committed_bytes{ISTIOD})", "{{pod}}")],
            "The most the allocator has held: where Go's allocation panels show pressure.")
    b.panel("CPU", "percentunit",
            [(f"sum by (pod) (rate(process_cpu_seconds_total{ISTIOD}{RATE}))", "{{pod}}")])
    b.panel("Tasks", "short",
            [(f"sum by (pod) (rudder_runtime_alive_tasks{ISTIOD})", "{{pod}}")],
            "Tasks alive in the async runtime: what the Goroutines panel counts for istiod.")
    b.row("Push Information")
    b.panel("XDS pushes", "ops",
            [(f"sum by (type) (irate(pilot_xds_pushes_total{ISTIOD}{RATE}))", "{{type}}")])
    b.panel("Events", "ops",
            [(f"sum by (kind, event) (rate(rudder_config_events_total{ISTIOD}{RATE}))", "{{kind}} {{event}}"),
             (f"sum by (type) (rate(pilot_push_triggers_total{ISTIOD}{RATE}))", "push {{type}}")],
            "Config changes applied (files and Kubernetes alike) and what triggered pushes.")
    b.panel("Connections", "short", [(f"sum (pilot_xds{ISTIOD})", "XDS connections")])
    b.panel("Push errors", "short",
            [(f"sum by (type) (pilot_total_xds_rejects{ISTIOD})", "rejected {{type}}"),
             (f"sum (pilot_total_xds_internal_errors{ISTIOD})", "internal errors")])
    b.panel("Push time", "s", quantiles("pilot_xds_push_time"))
    b.panel("Push size", "bytes", quantiles("pilot_xds_config_size_bytes"))
    b.row("Webhooks")
    b.panel("Validation", "ops",
            [(f"sum (rate(galley_validation_passed_total{ISTIOD}{RATE}))", "passed"),
             (f"sum (rate(galley_validation_failed_total{ISTIOD}{RATE}))", "failed")])
    b.panel("Sidecar injection", "ops",
            [(f"sum (rate(sidecar_injection_requests_total{ISTIOD}{RATE}))", "requests"),
             (f"sum (rate(sidecar_injection_success_total{ISTIOD}{RATE}))", "injected")])
    return b


def performance():
    b = Board("Istio Performance (Rudder)", "rudder-istio-performance",
              "Istio's performance dashboard's control-plane panels for a Rudder control plane.")
    b.row("Control plane")
    b.panel("Memory", "bytes",
            [(f"process_virtual_memory_bytes{ISTIOD}", "virtual {{pod}}"),
             (f"process_resident_memory_bytes{ISTIOD}", "resident {{pod}}"),
             (f"rudder_allocator_committed_bytes{ISTIOD}", "heap {{pod}}"),
             (f"rudder_allocator_peak_committed_bytes{ISTIOD}", "peak heap {{pod}}")])
    b.panel("vCPU", "short",
            [(f"irate(process_cpu_seconds_total{ISTIOD}{RATE})", "{{pod}}")])
    b.panel("Disk", "short", [(f"process_open_fds{ISTIOD}", "open files {{pod}}")])
    b.panel("Tasks", "short",
            [(f"rudder_runtime_alive_tasks{ISTIOD}", "alive {{pod}}"),
             (f"rudder_runtime_global_queue_depth{ISTIOD}", "queued {{pod}}"),
             (f"rudder_runtime_workers{ISTIOD}", "workers {{pod}}")],
            "The async runtime: alive tasks (Go's goroutines), tasks waiting for a worker, workers.")
    b.panel("Threads", "short", [(f"process_threads{ISTIOD}", "{{pod}}")])
    return b


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for board, name in [(control_plane(), "rudder-istio-control-plane-dashboard.json"),
                        (performance(), "rudder-istio-performance-dashboard.json")]:
        text = json.dumps(board.json(), indent=2, sort_keys=True) + "\n"
        path = OUT / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        sys.exit(f"out of date (run scripts/dashboards.py): {', '.join(stale)}")


if __name__ == "__main__":
    main()
