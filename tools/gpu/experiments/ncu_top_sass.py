#!/usr/bin/env python3
# Top SASS instructions by warp-stall samples from `ncu -i REPORT --page source --csv
# --print-source sass` on stdin (scratch helper for the PLE-tail experiment, session 34).
import csv
import sys

rows = list(csv.reader(sys.stdin))
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
addr = next((j for j, c in enumerate(head) if "Address" in c), 0)
def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0
tot = sum(num(r[col]) for r in body if len(r) > col)
print(f"total samples {tot:.0f}")
for r in sorted((r for r in body if len(r) > col), key=lambda r: -num(r[col]))[:30]:
    print(f"{num(r[col]):7.0f} {100 * num(r[col]) / max(tot, 1):5.1f}%  {r[addr]:>8}  {r[src][:90]}")
