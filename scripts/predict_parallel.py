#!/usr/bin/env python3
"""predict_parallel.py: an epoch's time at N threads from a 1-thread profile
(docs/threads.md, "Parallel cost report"; Note [Parallel cost report] in
src/backends/cpu/threads.h).

    predict_parallel.py --trace T.json --threads N --wake-us W [--epoch 2]
                        [--epoch-seconds S] [--wake-from C]

The trace is a Chrome trace anvil's profiler wrote for a run on one thread
(`train_fashion_mnist --profile`, which spans each epoch's training as
`train epoch K`). Every piece of CPU work the backend may split (a
parallel_for, a GEMM, a convolution, a reorder) carries its width (the most
threads anvil's size rule gives it at the 45 µs reference wake) and its time.
At N threads with a wake cost of W µs (one region: wake, work, join):

    epoch(N) = serial + sum over pieces of (us / t + (W if t > 1 else 0))
    t        = min(N, floor(width * 45 / W)), or 1 where that is below 2
    serial   = epoch(1) - sum of the pieces' us

epoch(1) is the span's own length, or with --epoch-seconds S (an unprofiled
run's) S, every piece then scaled by S / the span: profiling slows a run (a
LeNet epoch 2.50 s profiled against 2.16 s, the pieces alone 2.40 s), so the
profile gives the shares of the epoch and the unprofiled run its length.
--wake-from C says W was not measured at N but extrapolated from C threads
(printed with the prediction). Prints one line of `key=value` fields.
--self-test checks the arithmetic."""
import argparse
import json
import math
import sys

REFERENCE_WAKE_US = 45.0  # kReferenceWakeUs (src/backends/cpu/wake_cost.h)
MIN_WAKE_US = 1.0  # kMinWakeUs
GRAIN_WAKE_FLOOR_US = 24.0  # kGrainWakeFloorUs, at 16 threads and more


def grain_wake_floor_us(threads):
    """grain_wake_floor_us (wake_cost.h): a measured wake sizes work as at
    least this, 24 µs at 16 threads, linear down to MIN_WAKE_US at 2."""
    return min(max(GRAIN_WAKE_FLOOR_US * (threads - 1) / 15.0, MIN_WAKE_US), GRAIN_WAKE_FLOOR_US)

# The passive wake anvil measured on the 16-core host (benchmarks/README.md,
# issue 31's third run): the shape a wake measured on fewer cores is scaled
# by, linear between the points and past the last.
HOST16_WAKE_US = [(2, 16.6), (4, 16.3), (8, 24.6), (16, 37.9)]


def host16_wake(n):
    pts = HOST16_WAKE_US
    if n <= pts[0][0]:
        return pts[0][1]
    for (a, wa), (b, wb) in zip(pts, pts[1:]):
        if n <= b:
            return wa + (wb - wa) * (n - a) / (b - a)
    (a, wa), (b, wb) = pts[-2], pts[-1]
    return wb + (wb - wa) * (n - b) / (b - a)


def extrapolate_wake(measured_us, measured_threads, threads):
    """The wake at `threads` from one measured at `measured_threads`, scaled
    by the 16-core host's curve."""
    return measured_us * host16_wake(threads) / host16_wake(measured_threads)


def team(width, threads, wake_us, floor_us=0.0):
    """anvil's team for a piece of `width` at `threads` threads and a wake of
    wake_us (parallel_for, gemm_threads: one thread below two shares), the
    work sized by at least floor_us of wake."""
    per_reference = width * REFERENCE_WAKE_US / max(wake_us, floor_us, MIN_WAKE_US)
    if threads < 2 or per_reference < 2:
        return 1
    return int(min(threads, math.floor(per_reference)))


def predict(pieces, epoch_us, threads, wake_us, floor_us=0.0):
    """pieces: (width, us) of a 1-thread run; epoch_us: its epoch. Returns a
    dict of the model's terms (µs); teams sized by at least floor_us of wake,
    each region costing wake_us."""
    work = sum(us for _, us in pieces)
    split = 0.0
    regions = 0
    team_sum = 0
    for width, us in pieces:
        t = team(width, threads, wake_us, floor_us)
        split += us / t
        if t > 1:
            regions += 1
            team_sum += t
    serial = epoch_us - work
    return {
        "serial_us": serial,
        "work_us": work,
        "work_at_n_us": split,
        "regions": regions,
        "mean_team": team_sum / regions if regions else 0.0,
        "wake_total_us": regions * wake_us,
        "predicted_us": serial + split + regions * wake_us,
    }


def rescale(pieces, span_us, epoch_us):
    """The pieces of a profiled epoch of span_us scaled to an unprofiled one
    of epoch_us: the profile's shares, the run's length."""
    return [(width, us * epoch_us / span_us) for width, us in pieces]


def epoch_pieces(trace, epoch):
    """The pieces inside `train epoch K` on its thread, and the span's µs."""
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("pid") == 0]
    name = f"train epoch {epoch}"
    window = [e for e in spans if e["name"] == name]
    if not window:
        raise SystemExit(f"predict_parallel: no span '{name}' in the trace (run with --profile, "
                         f"{epoch} epochs or more)")
    w = window[0]
    lo, hi = w["ts"], w["ts"] + w["dur"]
    pieces = []
    threads_seen = set()
    for e in spans:
        if e["tid"] != w["tid"] or e["ts"] < lo or e["ts"] > hi:
            continue
        for width, us, team_size, _region in e.get("args", {}).get("parallel", []):
            pieces.append((width, us))
            threads_seen.add(team_size)
    if threads_seen - {1}:
        raise SystemExit(f"predict_parallel: the profile ran pieces on teams of {sorted(threads_seen)}; "
                         "expected a 1-thread profile (OMP_NUM_THREADS=1)")
    return pieces, w["dur"]


def self_test():
    # Team sizes follow anvil's rule: width 4 at the reference wake is 4 threads.
    assert team(4.0, 16, 45.0) == 4
    assert team(4.0, 2, 45.0) == 2
    assert team(2.5, 16, 45.0) == 2, "whole shares only"
    assert team(1.9, 16, 45.0) == 1, "below two shares: the calling thread"
    assert team(1.0, 16, 22.5) == 2, "a cheaper wake splits smaller work"
    assert team(100.0, 1, 1.0) == 1
    assert team(1.0, 16, 4.0, grain_wake_floor_us(16)) == 1, "a measured 4 µs sizes work as 24 µs at 16 threads"
    assert team(1.0, 2, 4.0, grain_wake_floor_us(2)) == 2, "and as itself at 2"
    assert grain_wake_floor_us(2) == 1.6 and grain_wake_floor_us(64) == 24.0
    # One serial second, one piece of 8 ms at width 8 and one of 1 ms at width 1.
    r = predict([(8.0, 8000.0), (1.0, 1000.0)], 1_009_000.0, 4, 10.0)
    assert r["serial_us"] == 1_000_000.0
    # width 8 at a 10 µs wake: 36 shares, 4 threads; width 1: 4.5 shares, 4 threads.
    assert r["regions"] == 2 and r["mean_team"] == 4.0
    assert abs(r["predicted_us"] - (1_000_000.0 + 2000.0 + 250.0 + 20.0)) < 1e-6, r
    # A profiled epoch 25% longer than the unprofiled one: its pieces shrink with it.
    r = predict(rescale([(8.0, 1000.0)], 1250.0, 1000.0), 1000.0, 2, 10.0)
    assert r["work_us"] == 800.0 and r["serial_us"] == 200.0, r
    # At one thread nothing splits: the epoch itself.
    assert predict([(8.0, 8000.0)], 10_000.0, 1, 10.0)["predicted_us"] == 10_000.0
    # The extrapolated wake follows the 16-core host's curve from the measured point.
    assert abs(extrapolate_wake(10.0, 2, 16) - 10.0 * 37.9 / 16.6) < 1e-9
    assert abs(extrapolate_wake(10.0, 2, 2) - 10.0) < 1e-12
    assert abs(host16_wake(12) - (24.6 + 37.9) / 2) < 1e-9
    assert host16_wake(24) > 37.9
    trace = {"traceEvents": [
        {"ph": "X", "pid": 0, "tid": 0, "name": "train epoch 2", "ts": 100.0, "dur": 50.0},
        {"ph": "X", "pid": 0, "tid": 0, "name": "add", "ts": 110.0, "dur": 5.0,
         "args": {"parallel": [[3.0, 4.0, 1, 1]]}},
        {"ph": "X", "pid": 0, "tid": 0, "name": "add", "ts": 10.0, "dur": 5.0,
         "args": {"parallel": [[3.0, 4.0, 1, 1]]}},  # epoch 1: outside
        {"ph": "X", "pid": 0, "tid": 1, "name": "mul", "ts": 120.0, "dur": 5.0,
         "args": {"parallel": [[3.0, 4.0, 1, 1]]}},  # another thread
    ]}
    assert epoch_pieces(trace, 2) == ([(3.0, 4.0)], 50.0)
    print("predict_parallel: self-test ok")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trace")
    p.add_argument("--threads", type=int)
    p.add_argument("--wake-us", type=float)
    p.add_argument("--wake-from", type=int, default=0,
                   help="the thread count the wake was measured at, when it is extrapolated to --threads")
    p.add_argument("--epoch", type=int, default=2)
    p.add_argument("--epoch-seconds", type=float, default=0.0)
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args()
    if a.self_test:
        self_test()
        return
    if not a.trace or not a.threads or not a.wake_us:
        p.error("--trace, --threads and --wake-us are required")
    with open(a.trace) as f:
        trace = json.load(f)
    pieces, span_us = epoch_pieces(trace, a.epoch)
    epoch_us = a.epoch_seconds * 1e6 if a.epoch_seconds > 0 else span_us
    pieces = rescale(pieces, span_us, epoch_us)
    wake = a.wake_us
    if a.wake_from:
        wake = extrapolate_wake(a.wake_us, a.wake_from, a.threads)
    r = predict(pieces, epoch_us, a.threads, wake, grain_wake_floor_us(a.threads))
    fields = [
        f"predicted_s={r['predicted_us'] * 1e-6:.3f}",
        f"threads={a.threads}",
        f"epoch1_s={epoch_us * 1e-6:.3f}",
        f"profiled_epoch1_s={span_us * 1e-6:.3f}",
        f"serial_s={r['serial_us'] * 1e-6:.3f}",
        f"work_s={r['work_us'] * 1e-6:.3f}",
        f"work_at_n_s={r['work_at_n_us'] * 1e-6:.3f}",
        f"regions={r['regions']}",
        f"mean_team={r['mean_team']:.2f}",
        f"wake_us={wake:.1f}" + (f"(extrapolated_from_{a.wake_from}_threads_{a.wake_us:.1f}us)" if a.wake_from else
                                 "(measured)"),
        f"wakes_s={r['wake_total_us'] * 1e-6:.3f}",
        f"pieces={len(pieces)}",
    ]
    print(" ".join(fields))


if __name__ == "__main__":
    sys.exit(main())
