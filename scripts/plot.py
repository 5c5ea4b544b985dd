#!/usr/bin/env python3
"""Draws rudder-loadgen results (`--json`) as an SVG: push convergence p99 and daemon RSS against
the number of proxies, one line per mesh shape.

    scripts/plot.py OUT.svg RESULT.json...

No third-party packages: the SVG is written by hand, so CI and a fresh machine can run it.
"""
import json
import math
import sys
from collections import defaultdict

WIDTH, HEIGHT, MARGIN = 420, 300, 55
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def shape(r):
    scope = "scoped" if r.get("sidecar_scope") else "unscoped"
    kind = "realistic" if r.get("realistic") else "ServiceEntries"
    return f"{r['services']} services, {scope}, {kind}"


def ticks(top):
    """Round tick values (steps of 1, 2 or 5 times a power of ten) from 0 to at least `top`."""
    base = 10 ** math.floor(math.log10(top / 5)) if top > 0 else 1
    step = next(m * base for m in (1, 2, 5, 10) if top / (m * base) <= 5)
    n = math.ceil(top / step)
    return [i * step for i in range(n + 1)]


def panel(x0, title, ylabel, series):
    """One chart at horizontal offset x0; series: {label: [(proxies, value)]}."""
    points = [p for s in series.values() for p in s]
    if not points:
        return ""
    xmax = max(p[0] for p in points) * 1.05
    yt = ticks(max(p[1] for p in points) or 1)
    ymax = yt[-1]
    w, h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def at(x, y):
        return x0 + MARGIN + x / xmax * w, MARGIN + h - y / ymax * h

    out = [f'<text x="{x0 + WIDTH / 2}" y="20" text-anchor="middle" font-weight="bold">{title}</text>']
    out.append(f'<rect x="{x0 + MARGIN}" y="{MARGIN}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
    for y in yt:
        _, py = at(0, y)
        out.append(f'<line x1="{x0 + MARGIN}" y1="{py}" x2="{x0 + MARGIN + w}" y2="{py}" stroke="#eee"/>')
        out.append(f'<text x="{x0 + MARGIN - 5}" y="{py + 4}" text-anchor="end" font-size="10">{y:g}</text>')
    for x in ticks(xmax)[:-1]:
        px, _ = at(x, 0)
        out.append(f'<text x="{px}" y="{MARGIN + h + 15}" text-anchor="middle" font-size="10">{x:g}</text>')
    out.append(f'<text x="{x0 + WIDTH / 2}" y="{HEIGHT - 12}" text-anchor="middle" font-size="11">proxies</text>')
    out.append(
        f'<text x="{x0 + 14}" y="{MARGIN + h / 2}" text-anchor="middle" font-size="11" '
        f'transform="rotate(-90 {x0 + 14} {MARGIN + h / 2})">{ylabel}</text>'
    )
    for i, (label, pts) in enumerate(sorted(series.items())):
        colour = COLOURS[i % len(COLOURS)]
        pts = sorted(pts)
        path = " ".join(f"{at(x, y)[0]:.1f},{at(x, y)[1]:.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            px, py = at(x, y)
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{x0 + MARGIN + 6}" y="{MARGIN + 14 + 13 * i}" font-size="10" fill="{colour}">{label}</text>')
    return "\n".join(out)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    results = []
    for path in sys.argv[2:]:
        with open(path) as f:
            r = json.load(f)
        if r.get("mode") == "rudder":
            results.append(r)
    latency, memory = defaultdict(list), defaultdict(list)
    for r in results:
        s = shape(r)
        latency[f"full, {s}"].append((r["proxies"], r["full_push_from_push_start"]["p99_ms"]))
        latency[f"endpoint, {s}"].append((r["proxies"], r["endpoint_push_from_push_start"]["p99_ms"]))
        memory[s].append((r["proxies"], r["daemon_rss_mib"]))
    body = panel(0, "push convergence p99, from push start", "ms", latency)
    body += panel(WIDTH, "daemon RSS", "MiB", memory)
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n{body}\n</svg>\n'
    )
    with open(sys.argv[1], "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
