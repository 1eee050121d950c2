"""cgself.py FILE REQUESTS [TOP]: self cost per request by function from a callgrind dump
(uncompressed names). Cost lines after a calls= line are inclusive costs of the call and are
skipped."""
import sys, collections
f, n = sys.argv[1], int(sys.argv[2])
events = None; fn = None; self_cost = collections.defaultdict(lambda: [0]*9); skip = False
for line in open(f, errors="replace"):
    if line.startswith("events:"):
        events = line.split()[1:]
    elif line.startswith("fn="):
        fn = line[3:].strip()
    elif line.startswith("calls="):
        skip = True
    elif line[:1].isdigit() or line[:1] in "+-*":
        parts = line.split()
        if skip:
            skip = False
            continue
        vals = [int(x) for x in parts[1:]]
        c = self_cost[fn]
        for i, v in enumerate(vals):
            c[i] += v
tot = [sum(c[i] for c in self_cost.values()) for i in range(len(events))]
print("total: " + "  ".join("%s %.1f" % (e, t / n) for e, t in zip(events, tot)))
for name, c in sorted(self_cost.items(), key=lambda kv: -kv[1][0])[:int(sys.argv[3]) if len(sys.argv) > 3 else 25]:
    d = dict(zip(events, c))
    print("%7.1f Ir %5.2f D1mr %5.2f D1mw  %s" % (d["Ir"]/n, d.get("D1mr",0)/n, d.get("D1mw",0)/n, name[:70]))
