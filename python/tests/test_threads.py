"""Threads from Python (docs/threads.md): every op releases the GIL, so
these threads really run anvil at once. Ops from two threads, one model's
backward from several threads (exact integer sums: no gradient lost), and
autograd.grad from threads sharing inputs (no .grad touched). Threads meet
at barriers, never at sleeps."""

import threading

import numpy as np

import anvil
from anvil import nn

THREADS, STEPS = 4, 5


def ints(shape, salt, dev):
    """Small integers in f32: the sums below are exact in any order."""
    n = int(np.prod(shape))
    v = ((np.arange(n) * 7 + salt * 3) % 5 - 2).astype(np.float32).reshape(shape)
    return anvil.tensor(v, device=dev)


def on_threads(n, body):
    """body(t) on n threads that start together; re-raises the first error."""
    start = threading.Barrier(n)
    errors = []

    def run(t):
        try:
            start.wait()
            body(t)
        except BaseException as e:  # noqa: BLE001  (re-raised below, on the test's thread)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def make_model(dev):
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    model.to(dev)
    with anvil.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(ints(tuple(p.shape), 10 + i, dev))
    return model


def loss(model, t, s, dev):
    return (model(ints((2, 6), 100 * t + s, dev)) * ints((2, 3), 7 * t + s + 1, dev)).sum()


def grads(model):
    return [None if p.grad is None else p.grad.tolist() for p in model.parameters()]


def test_ops_from_two_threads(dev):
    results = {}

    def body(t):
        a = ints((8, 8), t, dev)
        for _ in range(STEPS):
            results[t] = (anvil.matmul(a, a) + t).relu().tolist()

    on_threads(2, body)
    for t in range(2):
        a = ((np.arange(64) * 7 + t * 3) % 5 - 2).astype(np.float32).reshape(8, 8)
        assert results[t] == np.maximum(a @ a + t, 0).tolist()


def test_shared_model_backward_from_threads(dev):
    """Hogwild: one model, no lock; every contribution reaches .grad."""
    model = make_model(dev)
    for t in range(THREADS):
        for s in range(STEPS):
            loss(model, t, s, dev).backward()
    want = grads(model)
    _clear(model)

    def body(t):
        for s in range(STEPS):
            loss(model, t, s, dev).backward()

    on_threads(THREADS, body)
    assert grads(model) == want


def test_autograd_grad_from_threads_sharing_inputs(dev):
    """autograd.grad returns gradients and touches no .grad, so threads that
    share inputs (and one running backward into them) see only their own."""
    model = make_model(dev)
    x = ints((2, 6), 3, dev)
    x.requires_grad_()

    def f(t):
        return (model(x) * float(t + 1)).sum()

    base_x, base_w = anvil.autograd.grad(f(0), [x, model[0].weight])
    assert x.grad is None
    assert all(p.grad is None for p in model.parameters()), "autograd.grad wrote a parameter's .grad"
    f(0).backward()
    one_step = x.grad.tolist()
    x.grad = None
    _clear(model)

    def body(t):
        for _ in range(STEPS):
            if t == THREADS:
                f(0).backward()
                continue
            gx, gw = anvil.autograd.grad(f(t), [x, model[0].weight])
            assert gx.tolist() == (np.array(base_x.tolist()) * (t + 1)).tolist()
            assert gw.tolist() == (np.array(base_w.tolist()) * (t + 1)).tolist()

    on_threads(THREADS + 1, body)
    assert x.grad.tolist() == (np.array(one_step) * STEPS).tolist(), "only the backward thread's steps accumulate"


def test_grad_mode_and_sync_guard_are_per_thread(dev):
    w = ints((3, 3), 1, dev)
    w.requires_grad_()
    step = threading.Barrier(2)
    seen = {}

    def a():
        with anvil.no_grad(), anvil.SyncGuard("error"):
            step.wait()  # 1: a's scopes are open
            step.wait()  # 2: b looked
            seen["a"] = (anvil.is_grad_enabled(), anvil.sync_debug_mode(), anvil.matmul(w, w).requires_grad)
        step.wait()  # 3

    def b():
        step.wait()  # 1
        seen["b"] = (anvil.is_grad_enabled(), anvil.sync_debug_mode(), anvil.matmul(w, w).requires_grad)
        step.wait()  # 2
        step.wait()  # 3

    on_threads(2, lambda t: (a if t == 0 else b)())
    assert seen["a"] == (False, anvil.SyncDebugMode.error, False)
    assert seen["b"] == (True, anvil.SyncDebugMode.off, True)
    assert anvil.sync_debug_mode() == anvil.SyncDebugMode.off


# The profiler from two Python threads is the profiler's own suite
# (test_profiler.py), where its thread safety is tested.


def _clear(model):
    for p in model.parameters():
        p.grad = None
