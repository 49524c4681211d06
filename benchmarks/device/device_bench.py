"""./run device-bench (scripts/device-bench.sh runs this): the book's examples
on cuda:0 and on the CPU, anvil's (examples/) beside PyTorch's
(d2l_torch.py, run by torch_bench.py), side by side in one run, and one table.

Every figure is the time per epoch after the first (the first warms caches,
allocators, NVRTC and cuDNN up), the mean of epochs 2..N, the training loop
alone (the test accuracy after each epoch is not in it); the language model
gives tokens/s instead. "anvil's speed" is PyTorch's time / anvil's (> 1:
anvil is faster). Each child process runs under a timeout and the whole run
under --budget seconds, so that a hang cannot eat a GPU machine's loan; a row
that fails says "failed: <why>" and the rest still runs.

Then, for cuda:0 and for the CPU, the top ops of the slowest model (the
lowest anvil's speed): its example once more with --profile (issue 32's
profiler), its per-op table as the profiler prints it.

Writes <out>/device-bench.md (the table), <out>/device-bench.json (every
figure, command and epoch) and <out>/runs/ (each child's output, the
profiles' traces).
"""

import argparse
import csv
import glob
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# --- what runs --------------------------------------------------------------------------


class Config:
    """One model configuration: anvil's example with its flags beside
    torch_bench.py's model with the same sizes, each in its variants
    (default, notf32, bf16, channels_last)."""

    def __init__(self, key, label, example, anvil_args, torch_args, samples=0, bf16=False, lm=False, script=None,
                 channels_last=False):
        self.key, self.label, self.example = key, label, example
        self.script = script  # a Python example (REPO-relative) run instead of the C++ one
        self.anvil_args, self.torch_args = anvil_args, torch_args
        self.samples = samples  # training samples per epoch (to turn a rate into seconds)
        self.bf16, self.lm = bf16, lm
        self.channels_last = channels_last  # a row more: the model and batches channels-last on both sides


def fashion(model, train, test):
    a = ["--model", model, "--no-plot"]
    t = ["--model", model]
    if train:
        a += ["--train-samples", str(train)]
        t += ["--train-subset", str(train)]
    if test:
        a += ["--test-samples", str(test)]
        t += ["--test-subset", str(test)]
    return a, t


def vit(subset, resize):
    a = ["--subset", str(subset)] + (["--resize", str(resize)] if resize else [])
    t = ["--model", "vit", "--train-subset", str(subset), "--test-subset", str(subset)]
    return a, t + (["--resize", str(resize)] if resize else [])


def resnet(resize, train, test):
    a = ["--resize", str(resize), "--train-subset", str(train), "--test-subset", str(test)]
    t = ["--model", "resnet", "--train-subset", str(train), "--test-subset", str(test)]
    return a, t + (["--resize", str(resize)] if resize else [])


def lm(cell, max_tokens, corpus):
    a = ["--data", corpus] + (["--cell", cell] if cell != "gru" else [])
    t = ["--model", cell, "--corpus", corpus]
    if max_tokens > 0:
        a += ["--max-tokens", str(max_tokens)]
        t += ["--max-tokens", str(max_tokens)]
    return a, t


def configs(quick, device, corpus, has_lstm):
    """The rows. Sizes: the issues' tables (issue 30 on cuda:0, issue 31 on the
    CPU), cut where the whole command must fit 6 minutes; --quick: tiny."""
    rows = []

    def add(key, label, example, args, samples=0, bf16=False, is_lm=False, channels_last=False):
        rows.append(Config(key, label, example, args[0], args[1], samples, bf16, is_lm, channels_last=channels_last))

    if device == "cuda":
        q = quick
        n = 2048 if q else 60000
        add("mlp", "MLP (`train_fashion_mnist --model mlp`)", "train_fashion_mnist",
            fashion("mlp", 2048 if q else 0, 1024 if q else 0), n)
        add("lenet", "LeNet (`train_fashion_mnist --model lenet`)", "train_fashion_mnist",
            fashion("lenet", 2048 if q else 0, 1024 if q else 0), n)
        s = 1024 if q else 10240
        add("vit", "ViT 28×28 (`vit --subset %d`)" % s, "vit", vit(s, 0), s, bf16=True)
        s = 512 if q else 4096
        add("vit96", "ViT 96×96 (`vit --resize 96 --subset %d`)" % s, "vit", vit(s, 96), s)
        s, t = (512, 256) if q else (10240, 2048)
        add("resnet", "ResNet-18 28×28 (`resnet --resize 0 --train-subset %d`)" % s, "resnet", resnet(0, s, t), s,
            bf16=True, channels_last=True)
        s, t = (256, 256) if q else (2048, 1024)
        add("resnet96", "ResNet-18 96×96 (`resnet --train-subset %d`)" % s, "resnet", resnet(96, s, t), s, bf16=True,
            channels_last=True)
        m = 20000 if q else -1
        add("gru", "GRU language model (`rnn_language_model`)", "rnn_language_model", lm("gru", m, corpus), is_lm=True)
        if has_lstm:
            add("lstm", "LSTM language model (`rnn_language_model --cell lstm`)", "rnn_language_model",
                lm("lstm", m, corpus), is_lm=True)
    else:
        q = quick
        n = 2048 if q else 60000
        add("mlp", "MLP (`train_fashion_mnist --model mlp`)", "train_fashion_mnist",
            fashion("mlp", 2048 if q else 0, 512 if q else 0), n)
        n = 2048 if q else 20000
        add("lenet", "LeNet (`train_fashion_mnist --model lenet --train-samples %d`)" % n, "train_fashion_mnist",
            fashion("lenet", n, 512 if q else 2000), n)
        s = 256 if q else 2048
        add("vit", "ViT 28×28 (`vit --subset %d`)" % s, "vit", vit(s, 0), s)
        s, t = (32, 32) if q else (1024, 256)
        add("resnet", "ResNet-18 28×28 (`resnet --resize 0 --train-subset %d`)" % s, "resnet", resnet(0, s, t), s)
        m = 5000 if q else 40000
        add("gru", "GRU language model (`rnn_language_model --max-tokens %d`)" % m, "rnn_language_model",
            lm("gru", m, corpus), is_lm=True)
        if has_lstm:
            add("lstm", "LSTM language model (`--cell lstm --max-tokens %d`)" % m, "rnn_language_model",
                lm("lstm", m, corpus), is_lm=True)
    return rows


# --- children ---------------------------------------------------------------------------


class Budget:
    """The whole run's deadline; each child's timeout is its own cap or what
    is left, whichever is less."""

    def __init__(self, seconds):
        self.start = time.monotonic()
        self.seconds = seconds

    def left(self):
        return self.seconds - (time.monotonic() - self.start)

    def elapsed(self):
        return time.monotonic() - self.start


def run_child(cmd, env, log_prefix, cap, budget, cwd=REPO):
    """Runs cmd with stdout and stderr to <log_prefix>.out/.err under a timeout
    (its whole process group is killed at the end). Returns (rc or None on a
    timeout, stdout, reason-if-failed, seconds)."""
    timeout = min(cap, budget.left())
    if timeout < 3:
        return None, "", "skipped: the run's %.0f s budget is spent" % budget.seconds, 0.0
    t0 = time.monotonic()
    with open(log_prefix + ".out", "w") as out, open(log_prefix + ".err", "w") as err:
        out.write("$ %s\n" % " ".join(cmd))
        out.flush()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, cwd=cwd, start_new_session=True,
                             text=True, errors="replace")
        try:
            stdout, _ = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            stdout, _ = p.communicate()
            rc = None
        out.write(stdout)
    secs = time.monotonic() - t0
    if rc is None:
        return None, stdout, "timeout after %.0f s" % timeout, secs
    if rc != 0:
        return rc, stdout, "exit %d: %s" % (rc, last_line(log_prefix + ".err") or last_line(log_prefix + ".out")), secs
    return rc, stdout, None, secs


def last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [l.strip() for l in f.read().replace("\r", "\n").splitlines() if l.strip()]
        return lines[-1][:160] if lines else ""
    except OSError:
        return ""


def help_text(binary):
    try:
        return subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


# --- anvil's side -----------------------------------------------------------------------


def read_curve(out_dir, samples):
    """The example's curve CSV (each run writes one into its own folder):
    per epoch seconds, test accuracy, perplexity, tokens/s."""
    files = sorted(glob.glob(os.path.join(out_dir, "*_curve*.csv")))
    if not files:
        return None
    epochs = []
    with open(files[0]) as f:
        for row in csv.DictReader(f):
            e = {"epoch": int(float(row["epoch"]))}
            if "seconds" in row:
                e["seconds"] = float(row["seconds"])
            else:
                for rate in ("samples_per_s", "examples_per_s"):
                    if rate in row and samples:
                        e["seconds"] = samples / float(row[rate])
            for k in ("test_acc", "perplexity", "tokens_per_s", "train_loss"):
                if k in row:
                    e[k] = float(row[k])
            epochs.append(e)
    return epochs


def run_anvil(ctx, cfg, device, variant, extra_env, extra_args, cap):
    name = "%s-%s-anvil-%s" % (device, cfg.key, variant)
    out_dir = os.path.join(ctx.runs, name)
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ)
    if cfg.script:  # the Python package of this build, under the python3 that has PyTorch
        program = [ctx.python, os.path.join(REPO, cfg.script)]
        env["PYTHONPATH"] = os.path.abspath(os.path.join(ctx.bin, "python")) + os.pathsep + env.get("PYTHONPATH", "")
    else:
        program = [os.path.join(ctx.bin, "examples", cfg.example)]
    cmd = program + ["--device", "cuda:0" if device == "cuda" else "cpu", "--epochs", str(ctx.epochs[device]),
                     "--out-dir", out_dir] + cfg.anvil_args + extra_args
    env.update(extra_env)
    rc, _, why, secs = run_child(cmd, env, os.path.join(ctx.runs, name), cap, ctx.budget)
    result = {"command": " ".join(("%s=%s " % kv for kv in extra_env.items())) + " ".join(cmd), "wall_s": secs}
    epochs = read_curve(out_dir, cfg.samples)
    if epochs:
        result["epochs"] = epochs
    if why:
        result["error"] = why
    elif not epochs:
        result["error"] = "no curve written (see %s.out)" % name
    return result


# --- PyTorch's side ---------------------------------------------------------------------


class TorchJob:
    """One model on PyTorch's side, in its variants; the driver runs a
    section's jobs in one torch_bench.py process (one import of torch, one
    CUDA context: each process costs 7-10 s before its first epoch)."""

    def __init__(self, key, device, torch_args, variants, cap, epochs):
        self.key, self.device, self.variants, self.cap = key, device, variants, cap
        self.argv = ["--device", device, "--epochs", str(epochs), "--variants", ",".join(variants)] + torch_args


def run_torch_jobs(ctx, section, jobs):
    """Runs the jobs one after the other in torch_bench.py --jobs, reading its
    JSON lines as they come. A job that runs past its cap (the first also
    pays for importing torch) or takes the process down is failed, and the
    jobs after it start again in a new process. Returns {key: {variant:
    result}}; ctx.torch_info[device] gets the process's description."""
    results = {j.key: {} for j in jobs}
    if not ctx.python:
        for j in jobs:
            results[j.key] = {v: {"error": "no python3 with torch and numpy found"} for v in j.variants}
        return results
    pending = list(jobs)
    launch = 0
    while pending:
        launch += 1
        name = "%s-torch-%d" % (section, launch)
        jobs_file = os.path.join(ctx.runs, name + ".jobs.json")
        with open(jobs_file, "w") as f:
            json.dump([{"id": j.key, "argv": j.argv} for j in pending], f, indent=1)
        cmd = [ctx.python, os.path.join(HERE, "torch_bench.py"), "--data-dir", ctx.data_dir, "--corpus", ctx.corpus,
               "--jobs", jobs_file]
        if ctx.budget.left() < 3:
            for j in pending:
                results[j.key] = {v: {"error": "skipped: the run's %.0f s budget is spent" % ctx.budget.seconds}
                                  for v in j.variants}
            break
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        out = open(os.path.join(ctx.runs, name + ".out"), "w")
        err = open(os.path.join(ctx.runs, name + ".err"), "w")
        out.write("$ %s\n" % " ".join(cmd))
        out.flush()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, cwd=REPO, start_new_session=True,
                             text=True, errors="replace")
        lines = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(l) for l in p.stdout] + [lines.put(None)], daemon=True)
        reader.start()
        current, started, first = None, time.monotonic(), True
        deadline = started + 60 + pending[0].cap  # the first job also imports torch
        why = None
        while True:
            wait = min(deadline, time.monotonic() + max(ctx.budget.left(), 0)) - time.monotonic()
            try:
                line = lines.get(timeout=max(wait, 0.01))
            except queue.Empty:
                why = ("timeout after %.0f s" % (time.monotonic() - started)
                       if ctx.budget.left() > 0 else "skipped: the run's %.0f s budget is spent" % ctx.budget.seconds)
                os.killpg(p.pid, signal.SIGKILL)
                break
            if line is None:
                break
            out.write(line)
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if "info" in obj:
                ctx.torch_info.setdefault(pending[0].device, obj["info"])
            elif obj.get("start"):
                current = next(j for j in pending if j.key == obj["job"])
                started = time.monotonic()
                # The launch's first job keeps the deadline that covers
                # importing torch too.
                deadline = max(deadline, started + current.cap) if first else started + current.cap
                first = False
            elif obj.get("done"):
                pending.remove(current)
                log(ctx, "[%6.1f s] %s %s, PyTorch: %s  (%.0f s)" %
                    (ctx.budget.elapsed(), section, current.key, "; ".join(
                        "%s %s" % (v, fmt_fig(r, current.key in ("gru", "lstm")))
                        for v, r in results[current.key].items()), time.monotonic() - started))
                current = None
            elif "variant" in obj:
                obj["command"] = " ".join(cmd) + "  # job " + obj.get("job", "")
                results[obj.get("job", "")][obj["variant"]] = obj
        p.wait()
        reader.join(timeout=5)
        out.close()
        err.close()
        if not pending:
            break
        # The process stopped inside `current` (or before its first job):
        # that job is failed, the rest go on in a new process.
        failed = current or pending[0]
        why = why or "exit %s: %s" % (p.returncode, last_line(os.path.join(ctx.runs, name + ".err")))
        for v in failed.variants:
            results[failed.key].setdefault(v, {"error": why})
        pending.remove(failed)
        log(ctx, "[%6.1f s] %s %s, PyTorch: failed: %s" % (ctx.budget.elapsed(), section, failed.key, why))
    return results


# --- figures ----------------------------------------------------------------------------


def figure(result, is_lm):
    """(value, unit) after the first epoch: mean seconds per epoch, or for the
    language model the median tokens/s; None when the run failed."""
    if not result or "epochs" not in result or not result["epochs"]:
        return None
    epochs = result["epochs"]
    later = epochs[1:] if len(epochs) > 1 else epochs
    if is_lm:
        rates = [e["tokens_per_s"] for e in later if "tokens_per_s" in e]
        return statistics.median(rates) if rates else None
    secs = [e["seconds"] for e in later if "seconds" in e]
    return statistics.mean(secs) if secs else None


def quality(result, is_lm):
    if not result or not result.get("epochs"):
        return None
    last = result["epochs"][-1]
    return last.get("perplexity") if is_lm else last.get("test_acc")


def fmt_fig(result, is_lm, na=None):
    if na:
        return na
    if result is None:
        return "—"
    v = figure(result, is_lm)
    if v is None:
        return "failed: " + result.get("error", "no epochs")
    if is_lm:
        return "%.1fk tokens/s" % (v / 1000)
    return "%.3f s" % v if v < 10 else "%.1f s" % v


def speed(anvil, torch, is_lm):
    a, t = figure(anvil, is_lm), figure(torch, is_lm)
    if a is None or t is None or a <= 0 or t <= 0:
        return None
    return a / t if is_lm else t / a


def fmt_speed(s):
    return "—" if s is None else "%.2f×" % s


def fmt_quality(anvil, torch, is_lm):
    def one(r):
        q = quality(r, is_lm)
        if q is None:
            return "—"
        return "%.2f" % q if is_lm else "%.1f%%" % (100 * q)

    return "%s / %s" % (one(anvil), one(torch))


# --- the run ----------------------------------------------------------------------------


class Context:
    pass


def detect_anvil(ctx):
    """What this anvil build's examples offer: the TF32 switch (issue 30), an
    --amp flag on resnet and vit, rnn_language_model's --cell, --profile."""
    helps = {e: help_text(os.path.join(ctx.bin, "examples", e))
             for e in ("train_fashion_mnist", "resnet", "vit", "rnn_language_model")}
    found = {"help": {e: bool(h) for e, h in helps.items()}}
    found["lstm"] = "--cell" in helps["rnn_language_model"]
    found["amp"] = {e: ("--amp" in h) for e, h in helps.items()}
    found["channels_last"] = "--channels-last" in helps["resnet"]
    found["profile_flag"] = all("--profile" in h for h in helps.values() if h)
    found["tf32_off"] = anvil_tf32_off(ctx, helps)
    return found


# anvil's TF32 switches (include/anvil/backends.h), PyTorch's meaning and
# defaults: TF32 allowed in cuDNN's convolutions and RNNs, not in matmul.
# "TF32 off" turns the first off and pins the second to its default.
TF32_OFF = {"ANVIL_CUDNN_ALLOW_TF32": "0", "ANVIL_FLOAT32_MATMUL_PRECISION": "highest"}


def anvil_tf32_off(ctx, helps):
    """How to run anvil with TF32 off: --anvil-tf32-off VAR=VALUE[,VAR=VALUE]
    when given; else TF32_OFF when this build's libanvil reads those
    variables. None: the build has no switch (the column says n/a)."""
    if ctx.anvil_tf32_off:
        env = dict(kv.partition("=")[::2] for kv in ctx.anvil_tf32_off.split(","))
        return {"env": env, "args": [], "how": ctx.anvil_tf32_off}
    for lib in {os.path.realpath(p) for p in glob.glob(os.path.join(ctx.bin, "libanvil.so*"))}:
        try:
            with open(lib, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if all(var.encode() in data for var in TF32_OFF):
            return {"env": TF32_OFF, "args": [], "how": " ".join("%s=%s" % kv for kv in TF32_OFF.items())}
    return None


def gpu_section(ctx, found, results):
    rows = configs(ctx.quick, "cuda", ctx.corpus, found["lstm"])
    tf32 = found["tf32_off"]
    # A fresh machine compiles anvil's kernels with NVRTC in each model's
    # first epoch (cached on disk after): the caps leave room for that.
    cap = 150
    anvil = {}
    for cfg in rows:
        t0 = time.monotonic()
        anvil[cfg.key] = {"default": run_anvil(ctx, cfg, "cuda", "default", {}, [], cap)}
        if tf32:
            anvil[cfg.key]["notf32"] = run_anvil(ctx, cfg, "cuda", "notf32", tf32["env"], tf32["args"], cap)
        if cfg.bf16 and found["amp"].get(cfg.example):
            anvil[cfg.key]["bf16"] = run_anvil(ctx, cfg, "cuda", "bf16", {}, ["--amp", "bf16"], cap)
        if cfg.channels_last and found["channels_last"]:
            anvil[cfg.key]["channels_last"] = run_anvil(ctx, cfg, "cuda", "channels_last", {}, ["--channels-last"], cap)
        progress(ctx, "cuda", cfg, anvil[cfg.key], time.monotonic() - t0)
    # LeNet from Python (issue 40): the package in <bin>/python, built by
    # ./run gpu-pack for this machine's python3, beside the same PyTorch run.
    python_row = None
    if ctx.python and os.path.isdir(os.path.join(ctx.bin, "python", "anvil")):
        n = 2048 if ctx.quick else 0
        python_row = Config("lenet-python", "LeNet from Python (`examples/python/train_fashion_mnist.py`)", "",
                            ["--train-subset", str(n)] if n else [], [], 2048 if ctx.quick else 60000,
                            script="examples/python/train_fashion_mnist.py")
        t0 = time.monotonic()
        anvil[python_row.key] = {"default": run_anvil(ctx, python_row, "cuda", "default", {}, [], cap)}
        progress(ctx, "cuda", python_row, anvil[python_row.key], time.monotonic() - t0)
    jobs = [TorchJob(c.key, "cuda", c.torch_args, ["default", "notf32"] + (["bf16"] if c.bf16 else []) +
                     (["channels_last"] if c.channels_last else []), 120, ctx.epochs["cuda"]) for c in rows]
    torch = run_torch_jobs(ctx, "cuda", jobs)
    if python_row:
        rows.insert([c.key for c in rows].index("lenet") + 1, python_row)
        torch[python_row.key] = {"default": torch["lenet"].get("default", {"error": "no result"})}
    for cfg in rows:
        results.append({"section": "cuda", "key": cfg.key, "label": cfg.label, "lm": cfg.lm, "anvil": anvil[cfg.key],
                        "torch": torch[cfg.key], "wall_s": wall(anvil[cfg.key]) + wall(torch[cfg.key])})


def wall(variants):
    """A row's wall time: its anvil processes, or its PyTorch variants (model,
    epochs and evaluations; not the process's start)."""
    return sum(r.get("wall_s", r.get("variant_wall_s", 0.0)) for r in variants.values())


def cpu_section(ctx, found, results):
    """The CPU rows and LeNet's scaling curve (OMP_NUM_THREADS for anvil,
    torch.set_num_threads for PyTorch, 1/2/4/8/16 threads, those up to this
    machine's cores); PyTorch's side of both in one process."""
    rows = configs(ctx.quick, "cpu", ctx.corpus, found["lstm"])
    cap = 150 if ctx.quick else 60
    anvil = {}
    for cfg in rows:
        t0 = time.monotonic()
        anvil[cfg.key] = {"default": run_anvil(ctx, cfg, "cpu", "default", {}, [], cap)}
        progress(ctx, "cpu", cfg, anvil[cfg.key], time.monotonic() - t0)
    n, test = (1024, 256) if ctx.quick else (20000, 2000)
    threads = [t for t in (1, 2, 4, 8, 16) if t <= (os.cpu_count() or 1)]
    scfg = Config("lenet-scaling", "LeNet, %d images" % n, "train_fashion_mnist", *fashion("lenet", n, test),
                  samples=n)
    t0 = time.monotonic()
    scaling_anvil = {}
    for t in threads:
        scaling_anvil[str(t)] = run_anvil(ctx, scfg, "cpu", "threads%d" % t, {"OMP_NUM_THREADS": str(t)}, [], 60)
    log(ctx, "[%6.1f s] cpu scaling (%s), anvil at %s threads: %s  (%.0f s)" %
        (ctx.budget.elapsed(), scfg.label, "/".join(map(str, threads)), " ".join(
            fmt_fig(scaling_anvil[str(t)], False) for t in threads), time.monotonic() - t0))
    jobs = [TorchJob(c.key, "cpu", c.torch_args, ["default"], cap, ctx.epochs["cpu"]) for c in rows]
    jobs.append(TorchJob(scfg.key, "cpu", scfg.torch_args, ["threads=%d" % t for t in threads], 150,
                         ctx.epochs["cpu"]))
    torch = run_torch_jobs(ctx, "cpu", jobs)
    for cfg in rows:
        results.append({"section": "cpu", "key": cfg.key, "label": cfg.label, "lm": cfg.lm, "anvil": anvil[cfg.key],
                        "torch": torch[cfg.key], "wall_s": wall(anvil[cfg.key]) + wall(torch[cfg.key])})
    return {"label": scfg.label, "threads": threads, "anvil": scaling_anvil,
            "torch": {str(t): torch[scfg.key].get("threads=%d" % t, {"error": "no result"}) for t in threads}}


def profile_section(ctx, found, results, section):
    """The top ops of the slowest model of a section (the lowest anvil's speed
    at the defaults), from anvil's profiler (issue 32): that example runs once
    more, 2 epochs, with --profile FILE, which prints the profiler's per-op
    table at exit (profiler_table) and writes the Chrome trace beside it."""
    keys = {c.key for c in configs(ctx.quick, section, ctx.corpus, found["lstm"])}
    rows = [r for r in results if r["section"] == section and r["key"] in keys]  # the C++ examples'
    worst, worst_speed = None, None
    for r in rows:
        s = speed(r["anvil"].get("default"), r["torch"].get("default"), r["lm"])
        if s is not None and (worst_speed is None or s < worst_speed):
            worst, worst_speed = r, s
    if worst is None:
        return {"error": "no row finished on both sides, nothing to profile"}
    out = {"model": worst["key"], "label": worst["label"], "speed": worst_speed}
    if not found["profile_flag"]:
        out["error"] = "not available: this build's examples have no --profile flag (issue 32's profiler)"
        return out
    cfg = next(c for c in configs(ctx.quick, section, ctx.corpus, found["lstm"]) if c.key == worst["key"])
    name = "%s-%s-anvil-profile" % (section, cfg.key)
    out_dir = os.path.join(ctx.runs, name)
    os.makedirs(out_dir, exist_ok=True)
    trace = os.path.join(out_dir, "trace.json")
    cmd = [os.path.join(ctx.bin, "examples", cfg.example), "--device", "cuda:0" if section == "cuda" else "cpu",
           "--epochs", "2", "--out-dir", out_dir, "--profile", trace] + cfg.anvil_args
    t0 = time.monotonic()
    _, stdout, why, _ = run_child(cmd, dict(os.environ), os.path.join(ctx.runs, name), 90, ctx.budget)
    out["command"] = " ".join(cmd)
    out["wall_s"] = time.monotonic() - t0
    if why:
        out["error"] = "failed: " + why
    else:
        try:
            out["table"] = profiler_table(stdout)
        except ValueError as e:
            out["error"] = "failed: %s" % e
    log(ctx, "[%6.1f s] %s profile of %s: %s  (%.0f s)" %
        (ctx.budget.elapsed(), section, cfg.key, out.get("error", trace), out["wall_s"]))
    return out


def profiler_table(stdout):
    """The per-op table anvil's profiler prints itself at exit under --profile
    (anvil::profiler::profile_until_exit: the top ops by host time with their
    device time, then the host syncs by call site), cut from the example's
    output."""
    start = stdout.find("\nprofile: the top ")
    if start < 0:
        raise ValueError("the output has no profiler table")
    return stdout[start + 1:].rstrip()


def progress(ctx, section, cfg, variants, secs):
    log(ctx, "[%6.1f s] %s %s, anvil: %s  (%.0f s)" % (ctx.budget.elapsed(), section, cfg.key, "; ".join(
        "%s %s" % (v, fmt_fig(r, cfg.lm)) for v, r in variants.items()), secs))


def log(ctx, line):
    print(line, flush=True)


# --- the table --------------------------------------------------------------------------


def table(ctx, found, results, scaling, profiles):
    md = []
    w = md.append
    info = ctx.torch_info
    w("# ./run device-bench%s" % (" --quick" if ctx.quick else ""))
    w("")
    w("Time per epoch after the first (mean of epochs 2..%d on cuda:0, 2..%d on the CPU), the training loop alone; "
      "the language models in tokens/s. anvil's speed: PyTorch's time / anvil's (> 1: anvil faster). Accuracy: the "
      "final test accuracy (perplexity for the language models), anvil / PyTorch." %
      (ctx.epochs["cuda"], ctx.epochs["cpu"]))
    w("")
    w("Machine: %s; %d CPUs (%s); anvil from `%s`; PyTorch %s (`%s`)%s." %
      (info.get("cuda", {}).get("gpu", "no CUDA GPU"), os.cpu_count() or 0, cpu_model(),
       os.path.relpath(ctx.bin, REPO) if ctx.bin.startswith(REPO + os.sep) else ctx.bin,
       (info.get("cuda") or info.get("cpu") or {}).get("torch", "?"), ctx.python,
       (", CUDA %s, cuDNN %s" % (info["cuda"].get("cuda"), info["cuda"].get("cudnn")))
       if "gpu" in info.get("cuda", {}) else ""))
    w("")
    tf32 = found.get("tf32_off")
    na_tf32 = None if tf32 else "n/a"
    gpu = [r for r in results if r["section"] == "cuda"]
    if ctx.gpu_skipped:
        w("**cuda:0**: skipped: %s" % ctx.gpu_skipped)
        w("")
    elif gpu:
        w("## cuda:0")
        w("")
        w("| model (example) | anvil | anvil, TF32 off | PyTorch | PyTorch, TF32 off | anvil's speed | "
          "TF32 off | accuracy | wall |")
        w("|---|---|---|---|---|---|---|---|---|")
        for r in gpu:
            a, t, lm = r["anvil"], r["torch"], r["lm"]
            w("| %s | %s | %s | %s | %s | %s | %s | %s | %.0f s |" %
              (r["label"], fmt_fig(a.get("default"), lm), fmt_fig(a.get("notf32"), lm, na_tf32),
               fmt_fig(t.get("default"), lm), fmt_fig(t.get("notf32"), lm),
               fmt_speed(speed(a.get("default"), t.get("default"), lm)),
               fmt_speed(speed(a.get("notf32"), t.get("notf32"), lm)) if tf32 else "n/a",
               fmt_quality(a.get("default"), t.get("default"), lm), r["wall_s"]))
        for r in gpu:
            if "bf16" not in r["torch"]:
                continue
            a, t = r["anvil"], r["torch"]
            example = next(c for c in ("resnet", "vit") if r["key"].startswith(c))
            na = None if "bf16" in a else "n/a: `%s` has no --amp flag" % example
            w("| %s, bf16 autocast | %s | — | %s | — | %s | — | %s | |" %
              (r["label"], fmt_fig(a.get("bf16"), False, na), fmt_fig(t.get("bf16"), False),
               fmt_speed(speed(a.get("bf16"), t.get("bf16"), False)), fmt_quality(a.get("bf16"), t.get("bf16"),
                                                                                  False)))
        for r in gpu:
            if "channels_last" not in r["torch"]:
                continue
            a, t = r["anvil"], r["torch"]
            na = None if "channels_last" in a else "n/a: `resnet` has no --channels-last flag"
            w("| %s, channels-last | %s | — | %s | — | %s | — | %s | |" %
              (r["label"], fmt_fig(a.get("channels_last"), False, na), fmt_fig(t.get("channels_last"), False),
               fmt_speed(speed(a.get("channels_last"), t.get("channels_last"), False)),
               fmt_quality(a.get("channels_last"), t.get("channels_last"), False)))
        w("")
        if ctx.cudnn:
            w("anvil-smi: %s" % ctx.cudnn)
            w("")
        w("TF32 off: PyTorch with `torch.backends.cudnn.allow_tf32 = False` and "
          "`torch.backends.cuda.matmul.allow_tf32 = False`; anvil %s. bf16 rows: the forward pass under autocast "
          "(PyTorch: `torch.autocast(\"cuda\", dtype=torch.bfloat16)`). channels-last rows: the model and each batch "
          "NHWC in memory (anvil: `resnet --channels-last`; PyTorch: `torch.channels_last`)." %
          ("with `%s`" % tf32["how"] if tf32 else "n/a (this build has no TF32 switch)"))
        w("")
    cpu = [r for r in results if r["section"] == "cpu"]
    if cpu:
        w("## CPU (`--device cpu`, both at their defaults: anvil's threads, PyTorch's %s)" %
          info.get("cpu", {}).get("threads", "?"))
        w("")
        w("| model (example) | anvil | PyTorch | anvil's speed | accuracy | wall |")
        w("|---|---|---|---|---|---|")
        for r in cpu:
            a, t, lm = r["anvil"].get("default"), r["torch"].get("default"), r["lm"]
            w("| %s | %s | %s | %s | %s | %.0f s |" % (r["label"], fmt_fig(a, lm), fmt_fig(t, lm),
                                                        fmt_speed(speed(a, t, lm)), fmt_quality(a, t, lm),
                                                        r["wall_s"]))
        w("")
    if scaling:
        th = scaling["threads"]
        w("## CPU scaling: %s, time per epoch after the first" % scaling["label"])
        w("")
        w("| threads | %s | 1 → %d speed-up |" % (" | ".join(str(t) for t in th), th[-1]))
        w("|---|%s---|" % ("---|" * len(th)))
        for side, name in (("anvil", "anvil (`OMP_NUM_THREADS`)"), ("torch", "PyTorch (`torch.set_num_threads`)")):
            figs = [scaling[side][str(t)] for t in th]
            one, last = figure(figs[0], False), figure(figs[-1], False)
            w("| %s | %s | %s |" % (name, " | ".join(fmt_fig(f, False) for f in figs),
                                    "%.2f×" % (one / last) if one and last else "—"))
        w("")
    for section, where in (("cuda", "cuda:0"), ("cpu", "the CPU")):
        profile = profiles.get(section)
        if not profile:
            continue
        w("## Top ops of the slowest model on %s" % where)
        w("")
        if "model" in profile:
            w("%s, anvil's speed %.2f×: `%s` (`--profile`, 2 epochs), the profiler's own per-op table." %
              (profile["label"], profile["speed"], profile.get("command", "").replace(REPO + os.sep, "")))
            w("")
        if "table" in profile:
            w("```")
            w(profile["table"].rstrip())
            w("```")
        else:
            w(profile.get("error", ""))
        w("")
    w("Total: %.0f s." % ctx.budget.elapsed())
    return "\n".join(md) + "\n"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def find_python(given):
    """A python3 that imports torch: --python, else python3 on PATH, else
    /usr/bin/python3."""
    candidates = [given] if given else [shutil.which("python3"), "/usr/bin/python3"]
    for py in candidates:
        if not py:
            continue
        try:
            if subprocess.run([py, "-c", "import torch, numpy"], capture_output=True, timeout=60).returncode == 0:
                return py
        except (OSError, subprocess.SubprocessError):
            pass
    return None


def cuda_devices(ctx):
    """(count, reason) from anvil-smi --list and, when it lists none, the
    reason anvil-smi gives (or its own failure)."""
    smi = os.path.join(ctx.bin, "tools", "anvil-smi")
    if not os.path.exists(smi):
        return 0, "%s is not built" % smi
    try:
        listed = subprocess.run([smi, "--list"], capture_output=True, text=True, timeout=60)
        full = subprocess.run([smi], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return 0, "anvil-smi failed: %s" % e
    if listed.returncode != 0:
        last = (listed.stderr.strip().splitlines() or [""])[-1]
        return 0, "anvil-smi --list: exit %d: %s" % (listed.returncode, last)
    ctx.cudnn = next((l.strip() for l in full.stdout.splitlines() if l.startswith("cuDNN")), "")
    n = sum(1 for l in listed.stdout.splitlines() if l.startswith("cuda:"))
    if n:
        return n, None
    why = [l.strip() for l in full.stdout.splitlines() if l.startswith("cuda:")]
    return 0, "anvil sees no CUDA device" + (" (%s)" % why[0] if why else "")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True, help="anvil's build folder (build/release, build/portable, ...)")
    p.add_argument("--gpu-only", action="store_true", help="only the cuda:0 rows (and the profile)")
    p.add_argument("--cpu-only", action="store_true", help="only the CPU rows and the scaling curve")
    p.add_argument("--quick", action="store_true", help="tiny subsets, 2 epochs: a smoke test")
    p.add_argument("--out", default="", help="where the table and the JSON go (default build/device-bench)")
    p.add_argument("--budget", type=float, default=0, help="seconds for the whole run (default 330; --quick 900)")
    p.add_argument("--python", default="", help="the python3 with PyTorch (default: python3, /usr/bin/python3)")
    p.add_argument("--anvil-tf32-off", default="", metavar="VAR=VALUE[,...]",
                   help="the environment that turns anvil's TF32 off (default: ANVIL_CUDNN_ALLOW_TF32=0 "
                   "and ANVIL_FLOAT32_MATMUL_PRECISION=highest where the build reads them)")
    args = p.parse_args()
    if args.gpu_only and args.cpu_only:
        p.error("--gpu-only and --cpu-only exclude each other")

    ctx = Context()
    ctx.bin = os.path.abspath(args.bin)
    ctx.quick = args.quick
    ctx.budget = Budget(args.budget or (900 if args.quick else 330))
    ctx.epochs = {"cuda": 2 if args.quick else 3, "cpu": 2}
    ctx.out = os.path.abspath(args.out or os.path.join(REPO, "build", "device-bench"))
    ctx.runs = os.path.join(ctx.out, "runs")
    shutil.rmtree(ctx.runs, ignore_errors=True)
    os.makedirs(ctx.runs, exist_ok=True)
    ctx.data_dir = os.environ.get("ANVIL_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
    ctx.corpus = os.path.join(REPO, "examples", "data", "timemachine.txt")
    ctx.anvil_tf32_off = args.anvil_tf32_off
    ctx.torch_info = {}
    ctx.gpu_skipped = None
    ctx.cudnn = ""
    ctx.python = find_python(args.python)
    log(ctx, "device-bench: anvil from %s, PyTorch from %s, budget %.0f s, output in %s" %
        (ctx.bin, ctx.python or "(none: no python3 with torch and numpy)", ctx.budget.seconds, ctx.out))

    found = detect_anvil(ctx)
    log(ctx, "anvil offers: TF32 switch %s; --amp on %s; --cell %s; --profile %s" %
        (found["tf32_off"]["how"] if found["tf32_off"] else "none",
         ", ".join(e for e, a in found["amp"].items() if a) or "none", "yes" if found["lstm"] else "no",
         "yes" if found["profile_flag"] else "no"))
    results, scaling, profiles = [], None, {}
    if not args.cpu_only:
        n, why = cuda_devices(ctx)
        if n == 0:
            ctx.gpu_skipped = why
            log(ctx, "cuda:0 rows skipped: %s" % why)
        else:
            gpu_section(ctx, found, results)
            profiles["cuda"] = profile_section(ctx, found, results, "cuda")
    if not args.gpu_only:
        scaling = cpu_section(ctx, found, results)
        profiles["cpu"] = profile_section(ctx, found, results, "cpu")

    md = table(ctx, found, results, scaling, profiles)
    with open(os.path.join(ctx.out, "device-bench.md"), "w") as f:
        f.write(md)
    with open(os.path.join(ctx.out, "device-bench.json"), "w") as f:
        json.dump({"quick": ctx.quick, "bin": ctx.bin, "python": ctx.python, "torch": ctx.torch_info,
                   "cpus": os.cpu_count(), "cpu_model": cpu_model(), "epochs": ctx.epochs, "anvil": found,
                   "gpu_skipped": ctx.gpu_skipped, "anvil_cudnn": ctx.cudnn, "rows": results, "scaling": scaling,
                   "profiles": profiles, "elapsed_s": ctx.budget.elapsed()}, f, indent=1)
    print()
    print(md)
    print("written: %s, %s" % (os.path.join(ctx.out, "device-bench.md"), os.path.join(ctx.out, "device-bench.json")))
    # Non-zero when a figure that should be there is missing (n/a columns and
    # the cuda:0 rows on a machine without a GPU are not failures; with
    # --gpu-only no GPU is).
    failed = [r["key"] for r in results for side in ("anvil", "torch") for v in r[side].values() if "error" in v]
    if scaling:
        failed += ["scaling" for side in ("anvil", "torch") for v in scaling[side].values() if "error" in v]
    if args.gpu_only and ctx.gpu_skipped:
        failed.append("cuda")
    if failed:
        print("device-bench: failed rows: %s" % ", ".join(sorted(set(failed))), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
