import re, sys, statistics
def rows(p):
    out=[]; head=None
    for line in open(p):
        if not line.startswith("|") or line.startswith("|--") or line.startswith("| case"): continue
        c=[x.strip() for x in line.strip().strip("|").split("|")]
        name=c[0]
        if not name.startswith("vs") and not c[0].startswith(" "): pass
        out.append((c[0], c[1], c[4]))
    return out
def val(s):
    m=re.match(r"([\d.]+)\s*(\S+)", s); 
    return (float(m.group(1)), m.group(2)) if m else (None,None)
b, a = rows(sys.argv[1]), rows(sys.argv[2])
print("| case | anvil before | anvil after | after/before (speed) | ratio to peer before | after |\n|---|---:|---:|---:|---:|---:|")
sp=[]; case=""
for (nb, vb, rb), (na, va, ra) in zip(b, a):
    assert nb==na, (nb,na)
    if not nb.startswith(("vs","mm_out","equal","add_out","LibTorch")): case=nb
    x, u = val(vb); y, _ = val(va)
    if x is None or y is None: continue
    speed = (y/x) if u.endswith("/s") else (x/y)
    label = nb if nb==case else f"{case} — {nb}"
    if nb==case or nb.startswith(("mm_out","add_out","equal")):
        sp.append(speed)
        print(f"| {label} | {vb} | {va} | {speed:.2f} | {rb} | {ra} |")
print(f"\n{len(sp)} anvil rows; speed after/before: geometric mean {statistics.geometric_mean(sp):.3f}, median {statistics.median(sp):.3f}, min {min(sp):.2f}, max {max(sp):.2f}")
