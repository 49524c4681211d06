import json, sys, statistics
def load(p):
    d = json.load(open(p))
    return {b["name"]: b["real_time"] * {"ns":1e-3,"us":1,"ms":1e3,"s":1e6}[b.get("time_unit","ns")]
            for b in d["benchmarks"] if b.get("run_type","iteration")=="iteration"}
b, a = load(sys.argv[1]), load(sys.argv[2])
ratios = []
print("| op | before µs | after µs | after/before |\n|---|---:|---:|---:|")
for k in b:
    if k in a:
        r = a[k]/b[k]; ratios.append(r)
        print(f"| {k} | {b[k]:.2f} | {a[k]:.2f} | {r:.3f} |")
print(f"\n{len(ratios)} ops; geometric mean after/before {statistics.geometric_mean(ratios):.3f}, "
      f"median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
only_b = sorted(set(b)-set(a)); only_a = sorted(set(a)-set(b))
if only_b: print("only before:", ", ".join(only_b))
if only_a: print("only after:", ", ".join(only_a))
