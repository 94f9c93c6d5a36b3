"""The figures of deploy/bench-follower-read.sh: one run's from its files, its printed line, the summary.

    bench_follower_read_report.py run MODE ROUND LEADER LEADER_AFTER STORED CONSUME_LAUNCH DIR G1 G1' G2 G2' G3 G3'
    bench_follower_read_report.py line JSON
    bench_follower_read_report.py summary RUNS_JSONL

`run` reads DIR/produce.json, produce.err (the 100 ms reports), consume.json, consume.err and
samples.jsonl (deploy/bench-follower-read.sh's sampler) and prints one JSON object: the send rate
inside the window (see the script's header), the whole run's figures, the catch-up, the messages
each replica served (G before and after) and each process's cores and each core's busy share in
the window.
"""

import json
import os
import statistics
import sys
from datetime import datetime

WARM_UP_S = 1.0
REPORT_S = 0.1


def reports(path, key):
    """(end time, rate) of each interval line of a `bench` run (`Current Time: ... | KEY: N | ...`)."""
    out = []
    for line in open(path, errors="replace"):
        fields = dict(f.split(": ", 1) for f in line.strip().split(" | ") if ": " in f)
        if "Current Time" in fields and key in fields:
            t = datetime.strptime(fields["Current Time"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((t, float(fields[key])))
    return out


def in_window(samples, start, end):
    """The first sample at or after start and the last at or before end."""
    inside = [s for s in samples if start <= s["t"] <= end]
    return (inside[0], inside[-1]) if len(inside) >= 2 else (None, None)


def run(argv):
    mode, rnd, lead, lead_after, stored, launch, d = argv[:7]
    g = list(map(int, argv[7:13]))
    p = json.load(open(os.path.join(d, "produce.json")))
    sends = reports(os.path.join(d, "produce.err"), "Send TPS")
    r = {"mode": mode, "round": int(rnd), "leader": f"n{lead}", "leader_after": f"n{lead_after}",
         "whole_tps": p["tps"], "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"], "failed": p["failed"],
         "served": {f"n{i + 1}": g[2 * i + 1] - g[2 * i] for i in range(3)}}
    if mode in ("alone", "hog"):
        start, end = sends[0][0] - REPORT_S + WARM_UP_S, sends[-1][0]
    else:
        c = json.load(open(os.path.join(d, "consume.json")))
        if c["received"] < int(stored):
            sys.exit(f"the catch-up ended with {c['received']} of {stored} messages")
        first = next(t for t, n in reports(os.path.join(d, "consume.err"), "Consume TPS") if n > 0)
        start, end = first - REPORT_S, float(launch) + c["elapsed_s"]
        r.update(catchup_tps=c["tps"], catchup_s=c["elapsed_s"], received=c["received"])
    r["window_s"] = end - start
    inside = [n for t, n in sends if start <= t - REPORT_S / 2 <= end]
    r["send_tps"] = statistics.mean(inside) if inside else None
    samples = [json.loads(l) for l in open(os.path.join(d, "samples.jsonl"))]
    a, b = in_window(samples, start, end)
    if a is not None:
        dt = b["t"] - a["t"]
        r["cores"] = {k: (b["ticks"][k] - a["ticks"][k]) / 100 / dt for k in b["ticks"] if k in a["ticks"]}
        r["busy"] = {k: (b["cores"][k] - a["cores"][k]) / 100 / dt for k in b["cores"]}
        r["disk_read_mb"] = {k: (b["io"][k] - a["io"][k]) / 1e6 for k in b.get("io", {}) if k in a.get("io", {})}
        if r["send_tps"]:
            r["leader_us_per_sent"] = r["cores"][r["leader"]] * 1e6 / r["send_tps"]
    print(json.dumps(r))


def line(r):
    lead = r["leader"]
    roles = [lead] + sorted(k for k in ("n1", "n2", "n3") if k != lead)
    name = lambda k: f"{k}(L)" if k == lead else k
    send = f"{r['send_tps']:,.0f}" if r["send_tps"] is not None else "-"
    out = (f"round {r['round']} {r['mode']:<5} sends {send} msg/s in {r['window_s']:.1f} s "
           f"(whole run {r['whole_tps']:,.0f}, p50/p99 {r['p50_ms']:.1f}/{r['p99_ms']:.1f} ms, failed {r['failed']})")
    if "catchup_tps" in r:
        out += f" | catch-up {r['catchup_tps']:,.0f} msg/s ({r['catchup_s']:.1f} s)"
    out += " | served " + " ".join(f"{name(k)} {r['served'][k]:,}" for k in roles)
    if "cores" in r:
        procs = roles + [k for k in ("namesrv", "producer", "consumer") if k in r["cores"]]
        out += " | cores " + " ".join(f"{name(k)} {r['cores'][k]:.2f}" for k in procs if k in r["cores"])
        out += " | busy " + " ".join(f"{k} {v:.2f}" for k, v in sorted(r["busy"].items()))
    if r.get("disk_read_mb"):
        out += " | disk reads MB " + " ".join(f"{name(k)} {r['disk_read_mb'][k]:.0f}" for k in roles + ["producer", "consumer"] if k in r["disk_read_mb"])
    if "leader_us_per_sent" in r:
        out += f" | leader {r['leader_us_per_sent']:.1f} us per message sent"
    if r["leader_after"] != lead:
        out += f" | LEADER MOVED to {r['leader_after']}"
    print(out, flush=True)


def summary(path):
    runs = [json.loads(l) for l in open(path)]
    modes = list(dict.fromkeys(r["mode"] for r in runs))
    by = {}
    for r in runs:
        by.setdefault(r["round"], {})[r["mode"]] = r
    print("== summary: send msg/s in the window (its ratio to the same round's sends alone); catch-up msg/s")

    def show(name, get):
        base = get("alone", "send_tps")
        parts = [f"alone {base:,.0f}"]
        for m in modes[1:]:
            v = get(m, "send_tps")
            part = f"{m} {v:,.0f} ({v / base:.3f})"
            if m != "hog":
                part += f", catch-up {get(m, 'catchup_tps'):,.0f}"
            parts.append(part)
        print(f"{name}: " + "; ".join(parts))

    for rnd, m in sorted(by.items()):
        show(f"round {rnd}", lambda mode, k: m[mode][k])
    show("means", lambda mode, k: statistics.mean(r[k] for r in runs if r["mode"] == mode))
    for m in modes[1:]:
        ratios = [by[rnd][m]["send_tps"] / by[rnd]["alone"]["send_tps"] for rnd in sorted(by)]
        print(f"{m}/alone per round: " + ", ".join(f"{x:.3f}" for x in ratios)
              + f" (min {min(ratios):.3f}, median {statistics.median(ratios):.3f})")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "run":
        run(sys.argv[2:])
    elif what == "line":
        line(json.loads(sys.argv[2]))
    elif what == "summary":
        summary(sys.argv[2])
    else:
        sys.exit(f"unknown command {what}")
