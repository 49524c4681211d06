"""tensorboard_check.py RUN_DIR EXPECTED_JSON — TensorBoard's own reader on
the event file anvil::tensorboard::SummaryWriter wrote in RUN_DIR.
tensorboard_check.py --csv CSV RUN_DIR — the same for an example's
--tensorboard run: each column of CSV after the first (the epoch) must be
the scalar of that name at each epoch.

EXPECTED_JSON (written by tests/test_tensorboard.cpp) lists what was written:
  {"records": N, "scalars": {tag: [[step, value], ...]},
   "histograms": {tag: [{"step", "values", "min", "max", "num", "sum",
                         "sum_squares", "bucket_limit", "bucket"}]},
   "images": {tag: [{"step", "height", "width", "channels", "pixels"}]},
   "texts": {tag: [{"step", "text"}]}}
Every record's CRCs are checked by TensorBoard's record reader, then
EventAccumulator reads the scalars, histograms, images and text back; the
histograms' buckets are recounted here from the raw values and TensorFlow's
bucket limits, and the PNGs are decoded with Pillow. Exits 1 listing every
mismatch.
"""
import io
import json
import math
import os
import re
import socket
import sys

import numpy as np
from PIL import Image
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
from tensorboard.util import tensor_util

problems = []


def check(ok, what):
    if not ok:
        problems.append(what)
    return ok


def tf_default_limits():
    """tensorflow/core/lib/histogram/histogram.cc's default bucket limits."""
    pos, v = [], 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return [-x for x in reversed(pos)] + [0.0] + pos


def main(run_dir, expected_path):
    with open(expected_path) as f:
        want = json.load(f)

    files = sorted(os.listdir(run_dir))
    check(len(files) == 1, f"expected one event file in {run_dir}, got {files}")
    name = files[0]
    host = re.escape(socket.gethostname())
    check(re.fullmatch(r"events\.out\.tfevents\.\d{10}\." + host + r"\.\d+\.\d+", name) is not None,
          f"event file name {name!r} is not events.out.tfevents.<time>.<host>.<pid>.<n>")
    path = os.path.join(run_dir, name)

    # The raw records: TensorBoard's reader checks both CRCs of each.
    reader = pywrap_tensorflow.PyRecordReader_New(path.encode())
    records = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            break
        except errors.DataLossError as e:
            check(False, f"record {len(records)}: {e}")
            break
        records.append(reader.record())
    check(len(records) == want["records"], f"expected {want['records']} records, got {len(records)}")
    if records:
        first = event_pb2.Event.FromString(records[0])
        check(first.file_version == "brain.Event:2", f"first event's file_version is {first.file_version!r}")
        check(abs(first.wall_time - os.path.getmtime(path)) < 3600, f"first event's wall_time {first.wall_time}")

    acc = event_accumulator.EventAccumulator(run_dir, size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0,
        event_accumulator.IMAGES: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    for kind, key in (("scalars", "scalars"), ("histograms", "histograms"), ("images", "images"), ("texts", "tensors")):
        check(sorted(tags[key]) == sorted(want[kind]), f"{kind} tags: expected {sorted(want[kind])}, got {sorted(tags[key])}")

    for tag, rows in want["scalars"].items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)] if tag in tags["scalars"] else []
        exp = [(s, float(np.float32(v))) for s, v in rows]
        check(got == exp, f"scalar {tag}: expected {exp}, got {got}")

    limits = tf_default_limits()
    for tag, rows in want["histograms"].items():
        got = acc.Histograms(tag) if tag in tags["histograms"] else []
        check(len(got) == len(rows), f"histogram {tag}: expected {len(rows)} events, got {len(got)}")
        for g, w in zip(got, rows):
            h = g.histogram_value
            where = f"histogram {tag} step {w['step']}"
            check(g.step == w["step"], f"{where}: step {g.step}")
            for field in ("min", "max", "num", "sum", "sum_squares", "bucket_limit", "bucket"):
                check(list(getattr(h, field)) == w[field] if field.startswith("bucket") else getattr(h, field) == w[field],
                      f"{where}: {field} expected {w[field]}, got {getattr(h, field)}")
            # Independently of anvil: the statistics and the bucket counts of the raw values.
            vals = np.asarray(w["values"], dtype=np.float64)
            check(h.min == vals.min() and h.max == vals.max() and h.num == vals.size, f"{where}: min/max/num of the values")
            check(math.isclose(h.sum, vals.sum(), rel_tol=1e-12, abs_tol=1e-12), f"{where}: sum {h.sum} vs {vals.sum()}")
            check(math.isclose(h.sum_squares, float(vals @ vals), rel_tol=1e-12), f"{where}: sum_squares")
            check(all(x in limits for x in h.bucket_limit), f"{where}: a limit that is not one of TensorFlow's")
            check(list(h.bucket_limit) == sorted(set(h.bucket_limit)), f"{where}: limits not increasing")
            counts = [0.0] * len(h.bucket_limit)
            for v in vals:  # bucket i holds [limit[i-1], limit[i])
                i = next((i for i, lim in enumerate(h.bucket_limit) if v < lim), None)
                if check(i is not None, f"{where}: value {v} is past the last limit"):
                    counts[i] += 1
            check(counts == list(h.bucket), f"{where}: recounted buckets {counts}, file has {list(h.bucket)}")
            check(h.bucket[0] > 0 and h.bucket[-1] > 0, f"{where}: empty first or last bucket")
            check(h.bucket_limit[0] > h.min and (len(h.bucket_limit) == 1 or h.bucket_limit[-2] <= h.max),
                  f"{where}: limits do not bracket [min, max]")

    modes = {1: "L", 3: "RGB", 4: "RGBA"}
    for tag, rows in want["images"].items():
        got = acc.Images(tag) if tag in tags["images"] else []
        check(len(got) == len(rows), f"image {tag}: expected {len(rows)} events, got {len(got)}")
        for g, w in zip(got, rows):
            where = f"image {tag} step {w['step']}"
            check((g.step, g.height, g.width) == (w["step"], w["height"], w["width"]),
                  f"{where}: step/height/width {(g.step, g.height, g.width)}")
            img = Image.open(io.BytesIO(g.encoded_image_string))
            img.load()
            check(img.format == "PNG" and img.size == (w["width"], w["height"]) and img.mode == modes[w["channels"]],
                  f"{where}: decoded {img.format} {img.size} {img.mode}")
            check(list(img.tobytes()) == w["pixels"], f"{where}: pixels {list(img.tobytes())} vs {w['pixels']}")

    try:
        text_tags = acc.PluginTagToContent("text")
    except KeyError:
        text_tags = {}
    for tag, rows in want["texts"].items():
        check(tag in text_tags, f"text {tag}: the text plugin does not list it ({sorted(text_tags)})")
        got = acc.Tensors(tag) if tag in tags["tensors"] else []
        check(len(got) == len(rows), f"text {tag}: expected {len(rows)} events, got {len(got)}")
        for g, w in zip(got, rows):
            arr = tensor_util.make_ndarray(g.tensor_proto)
            check(g.step == w["step"] and arr.shape == (1,) and arr[0].decode("utf-8") == w["text"],
                  f"text {tag} step {w['step']}: got step {g.step}, {arr!r}")

    n = sum(len(r) for k in ("scalars", "histograms", "images", "texts") for r in want[k].values())
    if problems:
        print(f"tensorboard_check: {len(problems)} problem(s) in {path}:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"tensorboard_check: ok, {len(records)} records, {n} summaries read back by TensorBoard's EventAccumulator")
    return 0


def main_csv(csv_path, run_dir):
    with open(csv_path) as f:
        lines = [line.strip().split(",") for line in f if line.strip()]
    header, rows = lines[0], [[float(x) for x in r] for r in lines[1:]]
    acc = event_accumulator.EventAccumulator(run_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    check(sorted(acc.Tags()["scalars"]) == sorted(header[1:]),
          f"scalar tags: expected {sorted(header[1:])}, got {sorted(acc.Tags()['scalars'])}")
    check(len(rows) > 0, f"{csv_path} has no rows")
    for i, tag in enumerate(header[1:], start=1):
        got = [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []
        want = [(int(r[0]), r[i]) for r in rows]
        # The CSV holds 6 significant digits; the event a float32.
        check(len(got) == len(want) and all(gs == ws and math.isclose(gv, wv, rel_tol=1e-5, abs_tol=1e-9)
                                            for (gs, gv), (ws, wv) in zip(got, want)),
              f"scalar {tag}: the CSV has {want}, TensorBoard reads {got}")
    if problems:
        print(f"tensorboard_check: {len(problems)} problem(s) in {run_dir}:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"tensorboard_check: ok, {len(header) - 1} curves of {len(rows)} epochs read back by TensorBoard's "
          "EventAccumulator")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--csv":
        sys.exit(main_csv(sys.argv[2], sys.argv[3]))
    sys.exit(main(sys.argv[1], sys.argv[2]))
