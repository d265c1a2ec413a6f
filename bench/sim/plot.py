#!/usr/bin/env python3
"""SVG plot of a muster_sim --series --json file: GPU allocation over time per policy (top; the
legend adds the share of GPU+NIC pods placed where they can be aligned) and racks spanned per gang
vs the fewest possible, by gang size (bottom). Standard library only.

  bench/sim/plot.py sim.json out.svg [--title TEXT]
"""
import json
import sys

COLORS = {"muster": "#1f77b4", "first-fit": "#ff7f0e", "best-fit": "#2ca02c", "min": "#444"}
BUCKETS = ["2-8", "9-16", "17-64", "65-256", ">256"]


def main():
    data = json.load(open(sys.argv[1]))
    out_path = sys.argv[2]
    title = sys.argv[sys.argv.index("--title") + 1] if "--title" in sys.argv else "muster_sim"
    res = data["results"]
    W, H = 960, 700
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
         '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{title}</text>']
    # Top: allocation over time.
    x0, y0, w, h = 70, 50, W - 110, 260
    tmax = max((s[0] for r in res for s in r.get("allocation_series", [])), default=1) or 1
    o.append(f'<text x="{x0 + w / 2}" y="{y0 - 6}" text-anchor="middle" font-size="13">GPU allocation over time (higher is better); mean in legend</text>')
    for i in range(0, 11, 2):
        y = y0 + h - h * i / 10
        o.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + w}" y2="{y}" stroke="#ddd"/>')
        o.append(f'<text x="{x0 - 5}" y="{y + 4}" text-anchor="end" font-size="11">{i * 10}%</text>')
    for i in range(6):
        x = x0 + w * i / 5
        o.append(f'<text x="{x}" y="{y0 + h + 15}" text-anchor="middle" font-size="11">{tmax * i / 5 / 3600:.0f} h</text>')
    o.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#333"/>')
    for k, r in enumerate(res):
        pts = " ".join(f"{x0 + w * t / tmax:.1f},{y0 + h - h * a:.1f}" for t, a, _ in r.get("allocation_series", []))
        c = COLORS.get(r["policy"], "#999")
        o.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="1.5" opacity="0.85"/>')
        o.append(f'<rect x="{x0 + 10 + k * 295}" y="{y0 + h + 28}" width="12" height="12" fill="{c}"/>')
        o.append(f'<text x="{x0 + 26 + k * 295}" y="{y0 + h + 39}" font-size="12">{r["policy"]}: mean {100 * r["allocation_mean"]:.1f}%, fragmentation {100 * r["fragmentation_mean"]:.1f}%</text>')
    # GPU+NIC pods placed where an aligned allocation exists (older files have no such keys).
    if any(r.get("gpu_nic_pods") for r in res):
        shares = ", ".join(f'{r["policy"]} {100 * r["gpu_nic_pcie_share"]:.1f} / {100 * r["gpu_nic_aligned_share"]:.1f}%' for r in res)
        o.append(f'<text x="{x0 + 10}" y="{y0 + h + 60}" font-size="12">GPU+NIC pods where alignable (PCIe switch / switch or NUMA node): {shares}</text>')
    # Bottom: racks spanned by gang size, bars per policy plus the minimum.
    x0, y0, w, h = 70, 400, W - 110, 230
    buckets = [b for b in BUCKETS if b in res[0]["by_size"] and res[0]["by_size"][b]["placed"]]
    vals = {(b, r["policy"]): r["by_size"][b]["leaf_spanned_mean"] for r in res for b in buckets}
    mins = {b: res[0]["by_size"][b]["leaf_min_mean"] for b in buckets}
    top = max(list(vals.values()) + [1]) * 1.12
    o.append(f'<text x="{x0 + w / 2}" y="{y0 - 6}" text-anchor="middle" font-size="13">Racks (leaf switches) spanned per gang, mean, by gang size (lower is better; black tick: fewest possible)</text>')
    o.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#333"/>')
    for i in range(5):
        v = top * i / 4
        y = y0 + h - h * i / 4
        o.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + w}" y2="{y}" stroke="#eee"/>')
        o.append(f'<text x="{x0 - 5}" y="{y + 4}" text-anchor="end" font-size="11">{v:.0f}</text>')
    gw = w / max(1, len(buckets))
    bw = gw * 0.8 / len(res)
    for gi, b in enumerate(buckets):
        gx = x0 + gi * gw + gw * 0.1
        for si, r in enumerate(res):
            v = vals[(b, r["policy"])]
            bh = h * v / top
            o.append(f'<rect x="{gx + si * bw:.1f}" y="{y0 + h - bh:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" fill="{COLORS.get(r["policy"], "#999")}"><title>{r["policy"]} {b}: {v:.2f}</title></rect>')
            o.append(f'<text x="{gx + si * bw + bw / 2:.1f}" y="{y0 + h - bh - 3:.1f}" text-anchor="middle" font-size="10">{v:.1f}</text>')
        ym = y0 + h - h * mins[b] / top
        o.append(f'<line x1="{gx:.1f}" y1="{ym:.1f}" x2="{gx + gw * 0.8:.1f}" y2="{ym:.1f}" stroke="black" stroke-width="2"/>')
        o.append(f'<text x="{x0 + gi * gw + gw / 2:.1f}" y="{y0 + h + 15}" text-anchor="middle" font-size="11">gangs of {b} pods</text>')
    o.append(f'<text x="{x0}" y="{H - 12}" font-size="10" fill="#555">{data["workload"][:170]}</text>')
    o.append("</svg>")
    open(out_path, "w").write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
