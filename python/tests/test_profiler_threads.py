"""anvil.profiler from several Python threads (issue 42): two threads take turns
profiling (one profile records at a time, so the other's start raises
anvil.ValueError) while four threads run ops on the test device. Every trace
parses, the workers' ranges are in it, nothing recorded before a profile
started leaks into it, and nothing hangs: each thread must end by a deadline."""

import json
import threading
import time

import anvil
from anvil.profiler import profile, record_function

WORKERS = 4
PROFILES_PER_THREAD = 25
DEADLINE_S = 120


def test_profiles_from_two_threads_while_others_run_ops(dev):
    stop = threading.Event()
    errors = []
    ops = [0] * WORKERS

    def worker(i):
        try:
            a = anvil.ones(16, 16, device=dev) * (0.01 * (i + 1))
            b = anvil.ones(16, 16, device=dev)
            n = 0
            while not stop.is_set():
                with record_function("worker"):
                    c = ((a + b).exp() * a).matmul(b)
                    s = c.sum()
                    if n % 8 == 0:
                        s.item()  # a host sync on a device
                ops[i] += 1
                n += 1
        except BaseException as e:  # noqa: BLE001  (reported by the test below)
            errors.append(e)

    traces, refused = [], []

    def profiler(k):
        try:
            for r in range(PROFILES_PER_THREAD):
                try:
                    with profile() as prof:
                        time.sleep(0.001 * ((r + k) % 4))  # 0-3 ms
                except anvil.ValueError as e:  # the other thread's profile is recording
                    assert "already recording" in str(e), e
                    refused.append(k)
                    continue
                traces.append(json.loads(prof.trace_json()))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(WORKERS)]
    for t in workers:
        t.start()
    while sum(ops) < WORKERS:  # every worker has run once
        time.sleep(0.001)
    profilers = [threading.Thread(target=profiler, args=(k,), daemon=True) for k in range(2)]
    for t in profilers:
        t.start()
    deadline = time.monotonic() + DEADLINE_S
    for t in profilers:
        t.join(max(0.0, deadline - time.monotonic()))
    stop.set()
    for t in workers:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in profilers + workers if t.is_alive()]
    assert not hung, f"threads still running after {DEADLINE_S} s (a hang): {hung}"
    assert not errors, errors

    assert len(traces) + len(refused) == 2 * PROFILES_PER_THREAD
    assert len(traces) >= PROFILES_PER_THREAD  # the turns did not all collide
    worker_spans = 0
    for trace in traces:
        for e in trace["traceEvents"]:
            if e.get("ph") == "X" and e["pid"] == 0:
                assert e["ts"] >= 0 and e["dur"] >= 0, e  # begun inside this profile
                worker_spans += e["name"] == "worker"
    assert worker_spans > 0, "no profile saw the workers' ranges"
    assert not anvil.profiler.enabled()
