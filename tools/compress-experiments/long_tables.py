#!/usr/bin/env python3
"""long_tables — the tables of docs/compression.md's long runs, from the runs.jsonl that
scripts/run_compression_long.sh writes (one JSON line per run, with a "name" ending in -sSEED).

Runs that differ only in the seed form one setting: its loss is the mean over the seeds, with
the standard deviation when there are several. Bytes are per worker per token a worker trained
on, and as a fraction of synchronous fp32 data parallelism's ring all-reduce every step."""
import json
import re
import statistics
import sys

BUDGETS = [(10, "1/10"), (100, "1/100"), (1000, "1/1000"), (10000, "1/10000")]


def load(path):
    groups = {}
    for line in open(path):
        r = json.loads(line)
        m = re.match(r"(.*)-s(\d+)$", r["name"])
        key = m.group(1) if m else r["name"]
        groups.setdefault(key, []).append(r)
    return groups


def describe(runs):
    r = runs[0]
    if r["experiment"] == "dp":
        return "sync", "-", f"{r['codec'] if r['codec'] != 'none' else 'fp32'} gradients", "-"
    outer = ("average" if r["outer_lr"] == 1 and r["outer_momentum"] == 0
             else f"Nesterov {r['outer_lr']:g}/{r['outer_momentum']:g}")
    codec = "fp32" if r["codec"] == "none" else r["codec"]
    if r["ef"]:
        codec += " + EF"
    stream = "-" if r.get("fragments", 1) == 1 else f"{r['fragments']} frag, delay {r['overlap']}"
    return outer, str(r["H"]), codec, stream


def stats(runs):
    vals = [r["final_val_loss"] for r in runs]
    if any(v is None or r.get("diverged") for v, r in zip(vals, runs)):
        return None, None, len(vals)
    sd = statistics.stdev(vals) if len(vals) > 1 else None
    return statistics.mean(vals), sd, len(vals)


def fmt_loss(mean, sd, n):
    if mean is None:
        return "diverged"
    return f"{mean:.4f} ± {sd:.4f} (n={n})" if sd is not None else f"{mean:.4f}"


def frac(runs):
    return runs[0]["fraction_of_fp32_sync"]


def fmt_frac(f):
    x = 1 / f
    return "1" if f > 0.5 else f"1/{x:.4g}" if x < 1000 else f"1/{x:,.0f}"


def main():
    groups = load(sys.argv[1])
    rows, solo = [], None
    for key, runs in groups.items():
        if runs[0]["workers"] == 1:  # a control without traffic, on a quarter of the tokens
            solo = stats(runs)
            continue
        mean, sd, n = stats(runs)
        rows.append(dict(key=key, runs=runs, mean=mean, sd=sd, n=n, frac=frac(runs),
                         bpt=runs[0]["bytes_per_worker_per_token"]))
    rows.sort(key=lambda x: (-x["frac"], x["mean"] if x["mean"] is not None else 1e9))
    sync = next((x for x in rows if x["key"] == "sync-fp32"), None)
    base = sync["mean"] if sync else None

    def rel(x):
        if base is None or x["mean"] is None:
            return "-"
        return f"{100 * (x['mean'] - base) / base:+.1f}%"

    r0 = rows[0]["runs"][0]
    print(f"Model {r0['model']}, {r0['workers']} workers, {r0['steps']} steps, "
          f"{r0['tokens']:,.0f} tokens per run; final validation loss (nats/byte).\n")
    print("### All settings\n")
    print("| setting | outer step | H | pseudo-gradient | streaming | final val loss | vs sync | "
          "bytes/worker/token | of fp32 sync |")
    print("|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        o, h, c, s = describe(x["runs"])
        print(f"| {x['key']} | {o} | {h} | {c} | {s} | {fmt_loss(x['mean'], x['sd'], x['n'])} | "
              f"{rel(x)} | {x['bpt']:.3g} | {fmt_frac(x['frac'])} |")

    if solo:
        print(f"\nControl: one worker alone (a quarter of the tokens, no traffic): "
              f"{fmt_loss(*solo)}.")
    print("\n### Pareto front (no setting has both fewer bytes and a lower loss)\n")
    print("| setting | final val loss | vs sync | of fp32 sync |")
    print("|---|---|---|---|")
    front, best = [], None
    for x in sorted((x for x in rows if x["mean"] is not None), key=lambda x: (x["frac"], x["mean"])):
        if best is None or x["mean"] < best:
            front.append(x)
            best = x["mean"]
    for x in reversed(front):
        print(f"| {x['key']} | {fmt_loss(x['mean'], x['sd'], x['n'])} | {rel(x)} | {fmt_frac(x['frac'])} |")

    print("\n### Best setting at each byte budget\n")
    print("| budget (of fp32 sync) | best setting | final val loss | vs sync | bytes used |")
    print("|---|---|---|---|---|")
    for d, label in BUDGETS:
        cand = [x for x in rows if x["mean"] is not None and x["frac"] <= 1.0 / d]
        if not cand:
            print(f"| {label} | none run | - | - | - |")
            continue
        x = min(cand, key=lambda x: x["mean"])
        print(f"| {label} | {x['key']} | {fmt_loss(x['mean'], x['sd'], x['n'])} | {rel(x)} | "
              f"{fmt_frac(x['frac'])} |")

    curved = [x for x in rows if "val_curve" in x["runs"][0]]
    if sync and "val_curve" in sync["runs"][0]:
        steps = [p[0] for p in sync["runs"][0]["val_curve"]]
        pick = [s for i, s in enumerate(steps) if i % 2 == 1 or s == steps[-1]]
        ref = {p[0]: p[1] for p in sync["runs"][0]["val_curve"]}
        print("\n### Validation loss over the run (seed 1; DiLoCo: the replicas' mean), "
              "and its gap to sync\n")
        print("| setting | " + " | ".join(f"step {s}" for s in pick) + " |")
        print("|---|" + "---|" * len(pick))
        # The front, plus DiLoCo at H = 100 with fp32 pseudo-gradients under both outer steps.
        names = ["sync-fp32"] + [x["key"] for x in front if x["key"] != "sync-fp32"]
        names += [k for k in ("dl-H100-lr0.7-m0.9-fp32", "dl-H100-lr1-m0-fp32") if k not in names]
        for key in names:
            x = next(x for x in curved if x["key"] == key) if any(x["key"] == key for x in curved) else None
            if x is None:
                continue
            r = next((r for r in x["runs"] if r["seed"] == 1), x["runs"][0])
            c = {p[0]: p[1] for p in r["val_curve"]}
            cells = []
            for s in pick:
                if s not in c or c[s] is None:
                    cells.append("-")
                elif key == "sync-fp32":
                    cells.append(f"{c[s]:.3f}")
                else:
                    cells.append(f"{c[s]:.3f} ({100 * (c[s] - ref[s]) / ref[s]:+.1f}%)")
            print(f"| {key} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
