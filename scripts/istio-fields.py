#!/usr/bin/env python3
"""Lists every spec field Istio's CRDs declare, for tests/library/istio_fields.rs.

Usage: scripts/istio-fields.py CRD_YAML > tests/fixtures/istio-fields.tsv

CRD_YAML is Istio's generated CRD bundle of the release Rudder follows (in istio/istio,
`manifests/charts/base/files/crd-all.gen.yaml` at the release tag). Each output line is one leaf
field of one served version: kind, version, path, JSON type, and for string enums the first value.
Paths use `.` between fields, `[]` for a list item and `{}` for a map value.
"""

import sys

import yaml


def leaves(schema, path):
    """Yields (path, type, enum) for every leaf under `schema`."""
    kind = schema.get("type")
    props = schema.get("properties")
    if props:
        for name, sub in sorted(props.items()):
            yield from leaves(sub, f"{path}.{name}" if path else name)
        return
    if kind == "array" and "items" in schema:
        yield from leaves(schema["items"], f"{path}[]")
        return
    extra = schema.get("additionalProperties")
    if kind == "object" and isinstance(extra, dict) and extra:
        yield from leaves(extra, f"{path}{{}}")
        return
    if schema.get("x-kubernetes-int-or-string"):
        kind = "int-or-string"
    if schema.get("x-kubernetes-preserve-unknown-fields") and not kind:
        kind = "any"
    enum = schema.get("enum") or []
    yield path, kind or "any", str(enum[0]) if enum else ""


def main():
    with open(sys.argv[1]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "CustomResourceDefinition"]
    rows = []
    for crd in docs:
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if not version.get("served", False):
                continue
            spec = version["schema"]["openAPIV3Schema"]["properties"].get("spec")
            if not spec:
                continue
            for path, typ, enum in leaves(spec, ""):
                rows.append((kind, version["name"], path, typ, enum))
    for row in sorted(rows):
        print("\t".join(row))


if __name__ == "__main__":
    main()
