"""PyTorch's side of ./run device-bench: trains one book example (d2l_torch.py)
in one or more variants, one after the other in this process, and prints one
JSON line per variant (and a first line describing the machine):

  {"info": {"torch": "2.11.0", "cuda": "13.0", "cudnn": 91900, "gpu": "...", "threads": 16}}
  {"variant": "default", "epochs": [{"epoch": 1, "seconds": 1.2, "test_acc": 0.81}, ...]}
  {"variant": "bf16", "error": "RuntimeError: ..."}

Variants: default (PyTorch's defaults), notf32 (TF32 off in cuDNN and in
matmul), bf16 (the forward pass under torch.autocast(dtype=torch.bfloat16)),
channels_last (ResNet-18 and its batches in torch.channels_last), threads=N
(torch.set_num_threads(N), for the CPU scaling curve). Every
variant starts from a fresh model seeded by --seed; its first epoch is the
warm-up the driver leaves out.

  python3 torch_bench.py --model lenet --device cuda --variants default,notf32 --epochs 3 \
      --data-dir /usr/share/datasets/fashion-mnist
  python3 torch_bench.py --jobs jobs.json    # several models in one process (device_bench.py)
"""

import argparse
import gc
import json
import sys
import time
import traceback

import torch

import d2l_torch as d2l


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", default="", help="a JSON file of jobs to run one after the other (see main)")
    p.add_argument("--model", choices=["mlp", "lenet", "resnet", "vit", "gru", "lstm"])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--variants", default="default")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--train-subset", type=int, default=0, help="first N training samples (0: all)")
    p.add_argument("--test-subset", type=int, default=0, help="first N test samples (0: all)")
    p.add_argument("--resize", type=int, default=0, help="resize on the host to NxN (0: keep 28x28)")
    p.add_argument("--max-tokens", type=int, default=-1)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--corpus", default="examples/data/timemachine.txt")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def emit(obj):
    print(json.dumps(obj), flush=True)


_TF32_DEFAULTS = {}


def set_tf32(enabled):
    """TF32 in cuDNN and matmul on (PyTorch's defaults) or off (both off).
    The legacy switches, as the issue names them; where a PyTorch rejects
    them (mixing with the fp32_precision API), the new API."""
    b = torch.backends
    if not _TF32_DEFAULTS:
        _TF32_DEFAULTS["cudnn"] = b.cudnn.allow_tf32
        _TF32_DEFAULTS["matmul"] = b.cuda.matmul.allow_tf32
    try:
        b.cudnn.allow_tf32 = _TF32_DEFAULTS["cudnn"] if enabled else False
        b.cuda.matmul.allow_tf32 = _TF32_DEFAULTS["matmul"] if enabled else False
    except RuntimeError:
        if enabled:
            raise
        b.cudnn.fp32_precision = "ieee"
        b.cuda.matmul.fp32_precision = "ieee"
    return {"cudnn.allow_tf32": b.cudnn.allow_tf32, "cuda.matmul.allow_tf32": b.cuda.matmul.allow_tf32}


def run_variant(args, variant, device, data):
    amp = None
    flags = set_tf32(variant != "notf32") if device.type == "cuda" else {}
    channels_last = variant == "channels_last"
    if variant == "bf16":
        amp = torch.bfloat16
    elif variant.startswith("threads="):
        torch.set_num_threads(int(variant.split("=", 1)[1]))
    elif variant not in ("default", "notf32", "channels_last"):
        raise ValueError("unknown variant '%s'; expected default, notf32, bf16, channels_last or threads=N" % variant)
    if channels_last and args.model != "resnet":
        raise ValueError("the channels_last variant is ResNet-18's only")
    epochs = []

    def on_epoch(epoch, seconds, metrics):
        epochs.append(dict(epoch=epoch, seconds=seconds, **metrics))

    torch.manual_seed(args.seed)
    m = args.model
    if m in ("gru", "lstm"):
        tokens, vocab = data
        net = d2l.RNNModel(vocab, 256, m).to(device)
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        if amp is not None:
            raise ValueError("the language model has no bf16 variant")
        d2l.fit_lm(net, opt, tokens, device, args.epochs, 32, 35, args.seed, on_epoch)
    else:
        train, test = data
        to_device = lambda x: x.to(device, non_blocking=True)
        if args.resize > 0:
            prepare = lambda x: d2l.resize_bilinear(x, args.resize).to(device, non_blocking=True)
        else:
            prepare = to_device
        if m == "vit":
            patch = 16 if args.resize > 0 else 7
            net = d2l.ViT(img_size=args.resize or 28, patch_size=patch).to(device)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            d2l.fit_vit(net, opt, train, test, device, args.epochs, 128, prepare, amp, on_epoch)
        elif m == "resnet":
            net = d2l.resnet18().to(device)
            if channels_last:  # the model and each batch NHWC in memory (torch.channels_last)
                net = net.to(memory_format=torch.channels_last)
                resize_to = prepare
                prepare = lambda x: resize_to(x).contiguous(memory_format=torch.channels_last)
            opt = torch.optim.SGD(net.parameters(), lr=0.05)
            d2l.fit(net, opt, train, test, device, args.epochs, 256, 256, prepare, amp, on_epoch)
        else:
            net = (d2l.mlp() if m == "mlp" else d2l.lenet()).to(device)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            d2l.fit(net, opt, train, test, device, args.epochs, 256, 1024, to_device, amp, on_epoch)
    return {"variant": variant, "epochs": epochs, "tf32": flags, "threads": torch.get_num_threads()}


_DATA = {}


def load_data(args):
    """The job's dataset, read once per process."""
    if args.model in ("gru", "lstm"):
        key = ("corpus", args.corpus, args.max_tokens)
        if key not in _DATA:
            _DATA[key] = d2l.load_corpus(args.corpus, args.max_tokens)
        return _DATA[key]
    key = ("fashion", args.data_dir)
    if key not in _DATA:
        _DATA[key] = (d2l.fashion_mnist(args.data_dir, "train"), d2l.fashion_mnist(args.data_dir, "test"))
    (xs, ys), (tx, ty) = _DATA[key]
    return ((d2l.first(xs, args.train_subset), d2l.first(ys, args.train_subset)),
            (d2l.first(tx, args.test_subset), d2l.first(ty, args.test_subset)))


def run_job(args, job=None):
    """Every variant of one model; returns 1 when one failed."""
    tag = {} if job is None else {"job": job}
    variants = [v for v in args.variants.split(",") if v]
    if args.device == "cuda" and not torch.cuda.is_available():
        why = ("this PyTorch is built without CUDA" if torch.version.cuda is None else
               "torch.cuda.is_available() is False (no GPU or driver)")
        for v in variants:
            emit(dict(tag, variant=v, error="PyTorch %s: %s" % (torch.__version__, why)))
        return 1
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    status = 0
    try:
        data = load_data(args)
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        for v in variants:
            emit(dict(tag, variant=v, error="%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")))
        return 1
    for v in variants:
        torch.set_num_threads(_DEFAULT_THREADS)
        try:
            t0 = time.monotonic()
            result = run_variant(args, v, device, data)
            emit(dict(tag, variant_wall_s=time.monotonic() - t0, **result))
        except Exception as e:  # one variant's failure leaves the others to run
            traceback.print_exc(file=sys.stderr)
            emit(dict(tag, variant=v, error="%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")))
            status = 1
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return status


def info():
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "threads": _DEFAULT_THREADS}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
        out["cudnn"] = torch.backends.cudnn.version()
    return out


_DEFAULT_THREADS = torch.get_num_threads()


def main():
    args = parse()
    emit({"info": info()})
    if not args.jobs:
        if not args.model:
            raise SystemExit("torch_bench.py: --model or --jobs is required")
        return run_job(args)
    # --jobs FILE: [{"id": "mlp", "argv": ["--model", "mlp", ...]}, ...], one
    # after the other in this process (one import of torch and one CUDA
    # context for all); each job's lines carry its id, framed by
    # {"job": id, "start": true} and {"job": id, "done": true}.
    with open(args.jobs) as f:
        jobs = json.load(f)
    status = 0
    for job in jobs:
        emit({"job": job["id"], "start": True})
        # The process's --data-dir and --corpus hold for every job.
        shared = ["--data-dir", args.data_dir, "--corpus", args.corpus]
        status |= run_job(parse(shared + job["argv"]), job["id"])
        emit({"job": job["id"], "done": True})
    return status


if __name__ == "__main__":
    sys.exit(main())
