#!/usr/bin/env python3
"""profile_check.py TRACE [NAME...]: the Chrome trace an example wrote with
--profile is valid Trace Event Format JSON, holds a span for every NAME, every
backward node lies inside a `backward` span of its thread. (Device spans and
their order: test_profiler.) Prints `profile_check: ok, N spans`."""
import json
import sys


def main():
    path, names = sys.argv[1], sys.argv[2:]
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    for e in spans:
        for key in ("name", "cat", "ts", "dur", "pid", "tid"):
            assert key in e, f"a span without {key}: {e}"
        assert e["dur"] >= 0, f"a negative duration: {e}"
    host = [e for e in spans if e["pid"] == 0]
    seen = {e["name"] for e in host}
    missing = [n for n in names if n not in seen]
    assert not missing, f"no span named {missing}; the trace has {sorted(seen)}"
    whole = [e for e in host if e["name"] == "backward"]
    for e in host:
        if e["cat"] == "backward" and e["name"] != "backward":
            assert any(w["tid"] == e["tid"] and w["ts"] - 0.002 <= e["ts"] and
                       e["ts"] + e["dur"] <= w["ts"] + w["dur"] + 0.002 for w in whole), \
                f"{e['name']} at {e['ts']} is outside every backward span"
    print(f"profile_check: ok, {len(spans)} spans")


if __name__ == "__main__":
    main()
