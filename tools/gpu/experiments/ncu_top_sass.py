#!/usr/bin/env python3
# Scratch helper (session 34): the top SASS instructions by warp-stall samples from
# `ncu -i REPORT --page source --csv --print-source sass` (stdin), or with --stalls, the stall
# reasons per issued instruction from `ncu -i REPORT --page raw --csv`.
import csv
import sys

rows = list(csv.reader(sys.stdin))
def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0
if "--stalls" in sys.argv:
    head, vals = rows[0], rows[-1]
    out = [(num(v), h) for h, v in zip(head, vals)
           if "issue_stalled" in h and h.endswith("_per_warp_active.pct")]
    for v, h in sorted(out, reverse=True)[:14]:
        print(f"{v:7.2f}  {h}")
    sys.exit(0)
head = None
for i, r in enumerate(rows):
    if any("Sampling" in c for c in r):
        head, body = r, rows[i + 1:]
        break
if head is None:
    print("no sampling column; header candidates:", rows[:3])
    sys.exit(1)
col = next(j for j, c in enumerate(head) if "Sampling" in c and "All" in c)
src = next((j for j, c in enumerate(head) if c.strip() in ("Source", "# Source")), 1)
tot = sum(num(r[col]) for r in body if len(r) > col)
print(f"total samples {tot:.0f}")
for r in sorted((r for r in body if len(r) > col), key=lambda r: -num(r[col]))[:30]:
    print(f"{num(r[col]):7.0f} {100 * num(r[col]) / max(tot, 1):5.1f}%  {r[src][:100]}")
