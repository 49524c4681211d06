"""anvil.profiler from Python: a training step's ops in the trace and the
table, record_function as a context manager and a decorator, ANVIL_PROFILE
for a whole Python program, and the sync sentinel (SyncGuard,
ImplicitSyncError, sync sites naming the Python line)."""

import json
import os
import subprocess
import sys

import pytest

import anvil
from anvil import nn
from anvil.profiler import profile, record_function


def train_step(net, opt, x, y):
    with record_function("train_step"):
        loss = nn.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss


def test_training_step_ops_in_trace_and_table(dev, tmp_path):
    anvil.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev)
    opt = anvil.optim.SGD(net.parameters(), lr=0.1)
    x, y = anvil.randn(5, 4, device=dev), anvil.tensor([0, 1, 2, 1, 0], device=dev)
    trace = tmp_path / "step.json"
    with profile(trace_path=str(trace)) as prof:
        train_step(net, opt, x, y)
    assert not anvil.profiler.enabled()
    expected = {"train_step", "linear", "addmm", "relu", "cross_entropy", "backward", "AddmmBackward", "SGD.step"}

    rows = {r.name: r for r in prof.key_averages()}
    assert expected <= set(rows), sorted(rows)
    assert rows["linear"].calls == 2 and rows["train_step"].calls == 1
    assert rows["train_step"].category == "user" and rows["SGD.step"].category == "optimizer"
    assert rows["AddmmBackward"].category == "backward"
    assert rows["train_step"].host_total_us >= rows["linear"].host_total_us > 0

    table = prof.key_averages().table(sort_by="host_total", row_limit=0)
    for name in expected:
        assert f"\n{name} " in table, (name, table)
    assert table.index("train_step") < table.index("SGD.step")  # the outermost span costs the most
    # torch.profiler's names for the columns sort the same table.
    assert prof.key_averages().table(sort_by="self_cpu_time_total") == prof.table(sort_by="host_self")
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="flops")
    shaped = {(r.name, r.shapes) for r in prof.key_averages(group_by_input_shape=True)}
    assert any(n == "addmm" and "[5, 4] f32" in s for n, s in shaped), shaped  # the first layer's input

    with open(trace) as f:  # written when the `with` ended
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    names = {e["name"] for e in spans}
    assert expected <= names, sorted(names)
    step = next(e for e in spans if e["name"] == "train_step")
    inside = [e for e in spans if e["name"] == "linear" and e["pid"] == step["pid"] and e["tid"] == step["tid"]]
    assert inside and all(step["ts"] <= e["ts"] <= step["ts"] + step["dur"] for e in inside)
    copy = tmp_path / "again.json"
    prof.export_chrome_trace(copy)
    assert json.loads(copy.read_text()) == json.loads(prof.trace_json())


def test_record_function_decorator_nests_the_ops(dev):
    @record_function("double_it")
    def double_it(t):
        return t * 2

    x = anvil.ones(3, device=dev)
    with profile() as prof:
        double_it(x)
        double_it(x)
        with record_function("outer"):
            double_it(x)
    rows = {r.name: r for r in prof.key_averages()}
    assert rows["double_it"].calls == 3 and rows["outer"].calls == 1
    events = prof.events()
    for e in (e for e in events if e.name == "mul"):
        parent = [p for p in events if p.name == "double_it" and p.depth == e.depth - 1 and p.thread == e.thread
                  and p.start_us <= e.start_us <= p.start_us + p.duration_us]
        assert parent, "each mul runs inside a double_it span"
    assert [e.depth for e in events if e.name == "double_it"] == [0, 0, 1]


def test_one_profile_at_a_time():
    with profile():
        with pytest.raises(anvil.ValueError, match="profile"):
            with profile():
                pass
    with profile() as again:  # the first one stopped: a new one may record
        anvil.ones(2) + 1
    assert "add" in {r.name for r in again.key_averages()}
    with pytest.raises(RuntimeError, match="not started"):
        profile().key_averages()


def test_anvil_profile_env_profiles_a_python_program(tmp_path):
    trace = tmp_path / "whole.json"
    env = dict(os.environ, ANVIL_PROFILE=str(trace))
    code = "import anvil; x = anvil.ones(2, 3); (x + 1).exp().sum()"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    names = {e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"}
    assert {"add", "exp", "sum"} <= names, sorted(names)


def test_sync_guard_names_the_python_line(dev):
    x = anvil.ones(4, device=dev).sum()
    assert anvil.sync_debug_mode() == anvil.SyncDebugMode.off
    with anvil.SyncGuard("error"):
        assert anvil.sync_debug_mode() == anvil.SyncDebugMode.error
        assert x.cpu().item() == 4  # an explicit copy, then a CPU tensor: never flagged
        if dev.type == "cpu":
            assert x.item() == 4  # CPU tensors never sync
        else:
            line = sys._getframe().f_lineno + 2
            with pytest.raises(anvil.ImplicitSyncError, match="implicit host sync") as info:
                x.item()
            e = info.value
            assert isinstance(e, anvil.Error) and isinstance(e, RuntimeError)
            assert (e.api, e.file, e.line, e.function) == ("item", __file__, line, "test_sync_guard_names_the_python_line")
            with pytest.raises(anvil.ImplicitSyncError):
                x.tolist()
            with pytest.raises(anvil.ImplicitSyncError):
                repr(x)
    assert anvil.sync_debug_mode() == anvil.SyncDebugMode.off
    with pytest.raises(anvil.ValueError, match="'off', 'warn' or 'error'"):
        anvil.SyncGuard("loud")


def test_sync_sites_are_python_lines(dev):
    if dev.type == "cpu":
        pytest.skip("the CPU never waits: its sync report is empty")
    x = anvil.ones(8, device=dev)
    with profile() as prof:
        line = sys._getframe().f_lineno + 1
        (x * 3).sum().item()
        anvil.synchronize(dev)
    sites = {(s.api, s.file, s.line): s for s in prof.sync_sites()}
    item = sites[("item", __file__, line)]
    assert item.implicit and item.count == 1 and item.function == "test_sync_sites_are_python_lines"
    assert ("synchronize", __file__, line + 1) in sites and not sites[("synchronize", __file__, line + 1)].implicit
    assert f"{os.path.basename(__file__)}:{line}" in prof.sync_table()


def test_parallel_regions_per_op(tmp_path):
    """The CPU's parallel regions per op (docs/threads.md, "Parallel cost
    report"): a large exp enters one, a small add none; the trace carries
    the pieces scripts/predict_parallel.py reads."""
    big, small = anvil.randn(1 << 22), anvil.randn(100)
    trace = tmp_path / "parallel.json"
    with profile(trace_path=str(trace)) as prof:
        anvil.exp(big)
        small + small
    rows = {r.name: r for r in prof.key_averages()}
    assert rows["exp"].regions >= 1 and rows["exp"].threads >= 1
    assert 0 < rows["exp"].region_us <= rows["exp"].host_self_us + 1
    assert rows["add"].regions == 0 and rows["add"].threads == 0
    assert rows["add"].serial_us == rows["add"].host_self_us
    assert "Regions" in prof.table() and "Serial" in prof.table()
    exp_event = next(e for e in prof.events() if e.name == "exp")
    assert len(exp_event.parallel) == 1 and exp_event.parallel[0].width == 64.0 and exp_event.parallel[0].region
    with open(trace) as f:
        spans = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e["name"] == "exp"]
    width, us, threads, region = spans[0]["args"]["parallel"][0]
    assert width == 64 and us > 0 and threads >= 1 and region == 1


def test_conv_algorithms_per_direction(dev, tmp_path):
    # Note [Convolution algorithms]: each convolution's algorithm, math and
    # workspace, as conv_algorithms(), the table and the trace's args.
    anvil.manual_seed(0)
    conv = nn.Conv2d(8, 8, 3, padding=1).to(dev)
    x = anvil.randn(2, 8, 6, 6, device=dev).requires_grad_()
    trace = tmp_path / "conv.json"
    with profile(trace_path=str(trace)) as prof:
        conv(x).sum().backward()
    rows = prof.conv_algorithms()
    directions = {r.choice.direction: r for r in rows}
    assert "forward" in directions and "backward_data" in directions, rows
    forward = directions["forward"]
    assert forward.name == "conv2d" and forward.calls == 1
    assert forward.choice.algorithm and forward.choice.math == "f32"
    if forward.choice.algorithm == "im2col+gemm":  # the devices' path: the column matrix
        assert forward.choice.workspace_bytes == 2 * 8 * 3 * 3 * 6 * 6 * 4
    table = prof.conv_table()
    assert forward.choice.algorithm in table and "backward_data" in table, table
    in_trace = [a for e in json.loads(trace.read_text())["traceEvents"]
                for a in e.get("args", {}).get("algorithms", [])]
    assert sorted(a["direction"] for a in in_trace) == sorted(r.choice.direction for r in rows)
    assert any(e.algorithms for e in prof.events())
