"""The "GPUs" chapter of Dive into Deep Learning in Python, block by block as
the chapter's PyTorch code, with anvil's names; it prints what the C++
walkthrough (examples/use_gpu.cpp) prints, value for value (the Python test
python/tests/test_examples.py compares the two).

    POCL_DEVICES="pthread pthread" ANVIL_OPENCL_CPU=1 python examples/python/use_gpu.py
"""

import os
import sys
import tempfile

import anvil
from anvil import nn


def section(title):
    print(f"\n## {title}")


def show(code, value):
    """Prints `code` and then what it evaluates to, like a notebook cell."""
    print(f"{code}\n  -> {fmt(value)}")


def fmt(value):
    # As the C++ walkthrough prints them: devices as cpu / opencl:0, lists in
    # brackets, booleans in lower case.
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fallback_note(i):
    why = anvil.try_gpu_reason(i)
    return f"   (falls back to cpu: {why})" if why else ""


def main():
    print(f"anvil {anvil.__version__} — the GPUs chapter")
    print("(the chapter's `!nvidia-smi` is `anvil-smi`: every device anvil can see)")

    section("Computing devices")
    # torch.device('cpu'), torch.device('cuda'), torch.device('cuda:1')
    show('Device("cpu"), Device("cuda"), Device("cuda:1")',
         ", ".join(str(d) for d in (anvil.device("cpu"), anvil.device("cuda"), anvil.device("cuda:1"))))
    show("all_devices()", anvil.all_devices())
    for kind in (anvil.DeviceType.cuda, anvil.DeviceType.opencl):
        why = anvil.device_unavailable_reason(kind)
        line = f"device_count({kind.name}) -> {anvil.device_count(kind)}"
        print(line + (f"   ({why})" if why else ""))
    # torch.cuda.device_count()
    show("gpu_count()", anvil.gpu_count())
    # The chapter's try_gpu(i) and try_all_gpus(), built in, saying why they fell back.
    print(f"try_gpu() -> {anvil.try_gpu()}{fallback_note(0)}")
    print(f"try_gpu(10) -> {anvil.try_gpu(10)}{fallback_note(10)}")
    show("try_all_gpus()", anvil.try_all_gpus())

    section("Tensors and GPUs")
    x = anvil.tensor([1.0, 2.0, 3.0])
    show("x = tensor({1, 2, 3}); x.device()", x.device)

    # Storage on the GPU: X = torch.ones(2, 3, device=try_gpu())
    X = anvil.ones(2, 3, device=anvil.try_gpu())
    show("X = ones({2, 3}, try_gpu())", X)
    anvil.manual_seed(0)
    Y = anvil.rand(2, 3, device=anvil.try_gpu(1))
    print(f"Y = rand({{2, 3}}, try_gpu(1)){fallback_note(1)}\n  -> {Y}")

    # Copying: X + Y across devices raises before any work is queued.
    print(f"X + Y   (X on {X.device}, Y on {Y.device})")
    if X.device != Y.device:
        try:
            bad = X + Y
            print(f"  -> no error: {bad}")
            return 1
        except anvil.DeviceMismatchError as e:
            print(f"  -> DeviceMismatch: {e}")
    else:
        print(f"  -> {X + Y}\n  (one device only, so X and Y share it and no mismatch can arise here;"
              " with two devices this line throws DeviceMismatch)")

    # Z = X.cuda(1)
    Z = X.to(Y.device)
    show("Z = X.to(try_gpu(1)); X", X)
    show("Z", Z)
    show("Y + Z", Y + Z)
    # Z.cuda(1) is Z: to() returns the tensor itself when it is already there.
    show("Z.to(try_gpu(1)).is_same(Z)", Z.to(anvil.try_gpu(1)).is_same(Z))

    d0 = anvil.try_gpu()
    y = x.copy_to(d0)
    z = x.to(d0)
    show("y = x.copy_to(try_gpu())", y)
    show("z = x.to(try_gpu())", z)
    show("y.to(try_gpu()).is_same(y)", y.to(d0).is_same(y))
    show("y.copy_to(try_gpu()).is_same(y)", y.copy_to(d0).is_same(y))

    r = (z + 2).exp() * y
    show("(z + 2).exp() * y", r)

    # Copies and host waits are what cost: the ledger counts them.
    with anvil.ledger() as printed:
        print(f"printing r again: {r}")
    print("what that print cost (ledger):\n" + str(printed.report()), end="")

    section("Neural networks and GPUs")
    anvil.manual_seed(0)
    # net = nn.Sequential(nn.Linear(3, 1)); net = net.to(device=try_gpu())
    net = nn.Sequential(nn.Linear(3, 1))
    net = net.to(device=anvil.try_gpu())
    print("nn::Sequential net{nn::Linear(3, 1)}; net.to(try_gpu());")
    out = net(X)
    show("net(X)", out)
    show("net(X).grad_fn_name()", out.grad_fn)
    # net[0].weight.data.device
    show("net[0].weight().device()", net[0].weight.data.device)

    section("Exercise: reading and writing model parameters on the device")
    path = os.path.join(tempfile.gettempdir(), f"anvil_use_gpu_{os.getpid()}.safetensors")
    net.save(path)
    restored = nn.Sequential(nn.Linear(3, 1))
    restored.load(path, anvil.try_gpu())
    os.remove(path)
    show("net.save(path); restored.load(path, try_gpu()); restored[0].weight().device()",
         restored[0].weight.device)
    show("restored(X) equals net(X)", (restored(X) == out).sum().item() == out.numel())

    print("\nThe other exercises: anvil-bench matmul | sync-log | two-devices")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except anvil.Error as e:
        print(f"use_gpu: {e}", file=sys.stderr)
        sys.exit(1)
