"""Lints and renders a chart with Helm's own Go library (PyPI helm-python-sdk), offline.

usage: helm_chart.py CHART_DIR NAMESPACE VALUES_JSON
prints {"lint": <report>, "manifests": {template: text}, "crds": [{"name", "data"}]}
"""
import json
import sys

import helm_python as helm


def main() -> None:
    chart_dir, namespace, values_json = sys.argv[1], sys.argv[2], sys.argv[3]
    values = json.loads(values_json)
    report = helm.lint(chart_dir, values, strict=True, namespace=namespace)
    chart = helm.Chart.load(chart_dir)
    manifests = chart.render(values, name="rudder", namespace=namespace, is_install=True)
    print(json.dumps({"lint": report, "manifests": manifests, "crds": chart.crds}))


if __name__ == "__main__":
    main()
