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

Writes <out>/device-bench.md (the table), <out>/device-bench.json (every
figure, command and epoch) and <out>/runs/ (each child's output).
"""

import argparse
import csv
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# --- what runs --------------------------------------------------------------------------


class Config:
    """One model configuration: anvil's example with its flags beside
    torch_bench.py's model with the same sizes, each in its variants
    (default, notf32, bf16)."""

    def __init__(self, key, label, example, anvil_args, torch_args, samples=0, bf16=False, lm=False):
        self.key, self.label, self.example = key, label, example
        self.anvil_args, self.torch_args = anvil_args, torch_args
        self.samples = samples  # training samples per epoch (to turn a rate into seconds)
        self.bf16, self.lm = bf16, lm


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

    def add(key, label, example, args, samples=0, bf16=False, is_lm=False):
        rows.append(Config(key, label, example, args[0], args[1], samples, bf16, is_lm))

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
            bf16=True)
        s, t = (256, 256) if q else (2048, 1024)
        add("resnet96", "ResNet-18 96×96 (`resnet --train-subset %d`)" % s, "resnet", resnet(96, s, t), s, bf16=True)
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
        s, t = (64, 64) if q else (1024, 256)
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
    binary = os.path.join(ctx.bin, "examples", cfg.example)
    cmd = [binary, "--device", "cuda:0" if device == "cuda" else "cpu", "--epochs", str(ctx.epochs[device]),
           "--out-dir", out_dir] + cfg.anvil_args + extra_args
    env = dict(os.environ)
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


def run_torch(ctx, cfg, device, variants, cap, extra=()):
    name = "%s-%s-torch" % (device, cfg.key)
    cmd = [ctx.python, os.path.join(HERE, "torch_bench.py"), "--device", device, "--epochs",
           str(ctx.epochs[device]), "--variants", ",".join(variants), "--data-dir", ctx.data_dir] + cfg.torch_args
    cmd += list(extra)
    if not ctx.python:
        return {v: {"error": "no python3 with torch found"} for v in variants}, {}
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    rc, stdout, why, secs = run_child(cmd, env, os.path.join(ctx.runs, name), cap, ctx.budget)
    results, info = {}, {}
    for line in stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if "info" in obj:
            info = obj["info"]
        elif "variant" in obj:
            results[obj["variant"]] = obj
    for v in variants:
        if v not in results:
            results[v] = {"error": why or "no result (see %s.err)" % name}
        results[v]["command"] = " ".join(cmd)
        results[v]["process_wall_s"] = secs
    return results, info


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
    found["profile_flag"] = all("--profile" in h for h in helps.values() if h)
    found["tf32_off"] = anvil_tf32_off(ctx, helps)
    return found


def anvil_tf32_off(ctx, helps):
    """How to run anvil with TF32 off: --anvil-tf32-off VAR=VALUE when given;
    otherwise a --tf32 flag the examples may have. None: anvil has no switch
    (the column says n/a)."""
    if ctx.anvil_tf32_off:
        var, _, value = ctx.anvil_tf32_off.partition("=")
        return {"env": {var: value}, "args": [], "how": ctx.anvil_tf32_off}
    if helps and all("--tf32" in h for h in helps.values() if h):
        return {"env": {}, "args": ["--tf32", "off"], "how": "--tf32 off"}
    return None


def gpu_section(ctx, found, results):
    rows = configs(ctx.quick, "cuda", ctx.corpus, found["lstm"])
    tf32 = found["tf32_off"]
    cap = 120 if ctx.quick else 90
    for cfg in rows:
        t0 = time.monotonic()
        anvil = {"default": run_anvil(ctx, cfg, "cuda", "default", {}, [], cap)}
        variants = ["default", "notf32"] + (["bf16"] if cfg.bf16 else [])
        torch, info = run_torch(ctx, cfg, "cuda", variants, 2 * cap)
        if info:
            ctx.torch_info.setdefault("cuda", info)
        if tf32:
            anvil["notf32"] = run_anvil(ctx, cfg, "cuda", "notf32", tf32["env"], tf32["args"], cap)
        if cfg.bf16 and found["amp"].get(cfg.example):
            anvil["bf16"] = run_anvil(ctx, cfg, "cuda", "bf16", {}, ["--amp", "bf16"], cap)
        row = {"section": "cuda", "key": cfg.key, "label": cfg.label, "lm": cfg.lm, "anvil": anvil, "torch": torch,
               "wall_s": time.monotonic() - t0}
        results.append(row)
        progress(ctx, row)


def cpu_section(ctx, found, results):
    rows = configs(ctx.quick, "cpu", ctx.corpus, found["lstm"])
    cap = 150 if ctx.quick else 60
    for cfg in rows:
        t0 = time.monotonic()
        anvil = {"default": run_anvil(ctx, cfg, "cpu", "default", {}, [], cap)}
        torch, info = run_torch(ctx, cfg, "cpu", ["default"], cap)
        if info:
            ctx.torch_info.setdefault("cpu", info)
        row = {"section": "cpu", "key": cfg.key, "label": cfg.label, "lm": cfg.lm, "anvil": anvil, "torch": torch,
               "wall_s": time.monotonic() - t0}
        results.append(row)
        progress(ctx, row)


def scaling_section(ctx):
    """LeNet at 1/2/4/8/16 threads (those up to this machine's cores):
    OMP_NUM_THREADS for anvil, torch.set_num_threads for PyTorch."""
    n, test = (1024, 256) if ctx.quick else (10000, 1000)
    threads = [t for t in (1, 2, 4, 8, 16) if t <= (os.cpu_count() or 1)]
    cfg = Config("lenet-scaling", "LeNet, %d images" % n, "train_fashion_mnist", *fashion("lenet", n, test),
                 samples=n)
    t0 = time.monotonic()
    anvil = {}
    for t in threads:
        anvil[t] = run_anvil(ctx, cfg, "cpu", "threads%d" % t, {"OMP_NUM_THREADS": str(t)}, [], 60)
    torch, _ = run_torch(ctx, cfg, "cpu", ["threads=%d" % t for t in threads], 150)
    section = {"label": cfg.label, "threads": threads, "anvil": {str(t): anvil[t] for t in threads},
               "torch": {str(t): torch["threads=%d" % t] for t in threads}, "wall_s": time.monotonic() - t0}
    log(ctx, "[%6.1f s] cpu scaling (%s): anvil %s | PyTorch %s  (%.0f s)" %
        (ctx.budget.elapsed(), cfg.label, " ".join(fmt_fig(anvil[t], False) for t in threads), " ".join(
            fmt_fig(torch["threads=%d" % t], False) for t in threads), section["wall_s"]))
    return section


def profile_section(ctx, found, results):
    """The top ops of the slowest model on cuda:0 (lowest anvil's speed), from
    anvil's profiler (issue 32).

    HOOK: issue 32's profiler has not landed in this tree yet; when the
    examples take --profile FILE (or honour ANVIL_PROFILE=trace.json), run
    that model's example once more for 2 epochs with it and put its per-op
    table here. Until then the section says why it is empty."""
    gpu = [r for r in results if r["section"] == "cuda"]
    worst, worst_speed = None, None
    for r in gpu:
        s = speed(r["anvil"].get("default"), r["torch"].get("default"), r["lm"])
        if s is not None and (worst_speed is None or s < worst_speed):
            worst, worst_speed = r, s
    if worst is None:
        return {"error": "no CUDA row finished, nothing to profile"}
    out = {"model": worst["key"], "label": worst["label"], "speed": worst_speed}
    if not found["profile_flag"]:
        out["error"] = ("not available: the examples have no --profile flag (issue 32's profiler has not "
                        "landed in this build)")
    return out


def progress(ctx, row):
    lm = row["lm"]
    parts = []
    for side in ("anvil", "torch"):
        for v, r in row[side].items():
            parts.append("%s %s %s" % (side if side == "anvil" else "PyTorch", v, fmt_fig(r, lm)))
    log(ctx, "[%6.1f s] %s %s: %s  (%.0f s)" % (ctx.budget.elapsed(), row["section"], row["key"], "; ".join(parts),
                                               row["wall_s"]))


def log(ctx, line):
    print(line, flush=True)


# --- the table --------------------------------------------------------------------------


def table(ctx, found, results, scaling, profile):
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
       os.path.relpath(ctx.bin, REPO), (info.get("cuda") or info.get("cpu") or {}).get("torch", "?"), ctx.python,
       (", CUDA %s, cuDNN %s" % (info["cuda"].get("cuda"), info["cuda"].get("cudnn"))) if "cuda" in info else ""))
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
        w("")
        w("TF32 off: PyTorch with `torch.backends.cudnn.allow_tf32 = False` and "
          "`torch.backends.cuda.matmul.allow_tf32 = False`; anvil %s. bf16 rows: the forward pass under autocast "
          "(PyTorch: `torch.autocast(\"cuda\", dtype=torch.bfloat16)`)." %
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
    if profile:
        w("## Top ops of the slowest model on cuda:0")
        w("")
        if "model" in profile:
            w("%s (anvil's speed %.2f×)." % (profile["label"], profile["speed"]))
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
    """(count, reason) from anvil-smi --list."""
    smi = os.path.join(ctx.bin, "tools", "anvil-smi")
    if not os.path.exists(smi):
        return 0, "%s is not built" % os.path.relpath(smi, REPO)
    try:
        out = subprocess.run([smi, "--list"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return 0, "anvil-smi --list failed: %s" % e
    n = sum(1 for l in out.splitlines() if l.startswith("cuda:"))
    if n:
        return n, None
    try:
        full = subprocess.run([smi], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        full = ""
    why = [l.strip() for l in full.splitlines() if "cuda" in l.lower()]
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
    p.add_argument("--anvil-tf32-off", default="", metavar="VAR=VALUE",
                   help="the environment that turns anvil's TF32 off (default: what the build offers)")
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
    ctx.python = find_python(args.python)
    log(ctx, "device-bench: anvil from %s, PyTorch from %s, budget %.0f s, output in %s" %
        (ctx.bin, ctx.python or "(none: no python3 with torch and numpy)", ctx.budget.seconds, ctx.out))

    found = detect_anvil(ctx)
    log(ctx, "anvil offers: TF32 switch %s; --amp on %s; --cell %s; --profile %s" %
        (found["tf32_off"]["how"] if found["tf32_off"] else "none",
         ", ".join(e for e, a in found["amp"].items() if a) or "none", "yes" if found["lstm"] else "no",
         "yes" if found["profile_flag"] else "no"))
    results, scaling, profile = [], None, None
    if not args.cpu_only:
        n, why = cuda_devices(ctx)
        if n == 0:
            ctx.gpu_skipped = why
            log(ctx, "cuda:0 rows skipped: %s" % why)
        else:
            gpu_section(ctx, found, results)
            profile = profile_section(ctx, found, results)
    if not args.gpu_only:
        cpu_section(ctx, found, results)
        scaling = scaling_section(ctx)

    md = table(ctx, found, results, scaling, profile)
    with open(os.path.join(ctx.out, "device-bench.md"), "w") as f:
        f.write(md)
    with open(os.path.join(ctx.out, "device-bench.json"), "w") as f:
        json.dump({"quick": ctx.quick, "bin": ctx.bin, "python": ctx.python, "torch": ctx.torch_info,
                   "cpus": os.cpu_count(), "cpu_model": cpu_model(), "epochs": ctx.epochs, "anvil": found,
                   "gpu_skipped": ctx.gpu_skipped, "rows": results, "scaling": scaling, "profile": profile,
                   "elapsed_s": ctx.budget.elapsed()}, f, indent=1)
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
