"""Lints and renders a chart with Helm's own Go library (PyPI helm-python-sdk), offline.

usage: helm_chart.py CHART_DIR NAMESPACE VALUES_JSON
prints {"lint": <report>, "manifests": {template: text}, "crds": [{"name", "data"}],
        "invalid": [what Kubernetes' own schemas (kubernetes-validate, strict) refuse]}
"""
import json
import sys

import helm_python as helm
import kubernetes_validate
import yaml

# The Kubernetes version whose schemas every rendered object must satisfy.
KUBERNETES = "1.33.0"


def invalid_objects(manifests):
    """Every rendered object Kubernetes' own OpenAPI schemas refuse, with why."""
    out = []
    for template, text in manifests.items():
        if template.endswith("NOTES.txt"):
            continue
        for obj in yaml.safe_load_all(text):
            if not isinstance(obj, dict):
                continue
            try:
                kubernetes_validate.validate(obj, KUBERNETES, strict=True)
            except Exception as err:  # the library raises one class per kind of refusal
                out.append(f"{template} {obj.get('kind')}/{obj.get('metadata', {}).get('name')}: {err}")
    return out


def main() -> None:
    chart_dir, namespace, values_json = sys.argv[1], sys.argv[2], sys.argv[3]
    values = json.loads(values_json)
    report = helm.lint(chart_dir, values, strict=True, namespace=namespace)
    chart = helm.Chart.load(chart_dir)
    manifests = chart.render(values, name="rudder", namespace=namespace, is_install=True)
    print(json.dumps({"lint": report, "manifests": manifests, "crds": chart.crds,
                      "invalid": invalid_objects(manifests)}))


if __name__ == "__main__":
    main()
