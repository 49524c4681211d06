"""anvil.profiler: where the time goes (anvil/profiler.h, docs/profiling.md),
with torch.profiler's names:

    with anvil.profiler.profile() as prof:
        with anvil.profiler.record_function("train_step"):
            loss = anvil.nn.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
    print(prof.key_averages().table(sort_by="device_total", row_limit=10))
    prof.export_chrome_trace("trace.json")      # open in https://ui.perfetto.dev
    print(prof.sync_table())                    # host waits per line of your Python code

Every op, copy, host sync, backward node and optimiser step is the C++
profiler's own record; this file only names them the PyTorch way.
ANVIL_PROFILE=trace.json python prog.py profiles a whole program.
"""

import functools as _functools

from ._anvil import profiler as _profiler
from ._anvil.profiler import (  # noqa: F401  (re-exported)
    MemoryTotals, OpStats, Profile, SortBy, SyncSite, TraceEvent, enabled, profile_until_exit,
)

# The table's sort keys: anvil's column names, and torch.profiler's for the
# same columns.
_SORT_BY = {
    "host_total": SortBy.HOST_TOTAL, "cpu_time_total": SortBy.HOST_TOTAL,
    "host_self": SortBy.HOST_SELF, "self_cpu_time_total": SortBy.HOST_SELF,
    "device_total": SortBy.DEVICE_TOTAL, "cuda_time_total": SortBy.DEVICE_TOTAL,
    "device_time_total": SortBy.DEVICE_TOTAL,
    "calls": SortBy.CALLS, "count": SortBy.CALLS,
    "memory": SortBy.MEMORY, "cpu_memory_usage": SortBy.MEMORY,
    "name": SortBy.NAME,
}


def _sort_key(sort_by):
    if isinstance(sort_by, SortBy):
        return sort_by
    try:
        return _SORT_BY[sort_by]
    except KeyError:
        raise ValueError(f"table: unknown sort_by {sort_by!r}; expected one of {sorted(_SORT_BY)}") from None


class KeyAverages(list):
    """key_averages(): one OpStats per op name (and input shapes when grouped),
    and table() to print them as torch.profiler's EventList.table() does."""

    def __init__(self, prof, group_by_shape):
        super().__init__(prof.key_averages(group_by_shape))
        self._prof = prof
        self._group_by_shape = group_by_shape

    def table(self, sort_by="host_total", row_limit=20):
        """The C++ table: name, calls, host total/self, device total, memory;
        row_limit=0 prints every row."""
        return self._prof.table(_sort_key(sort_by), self._group_by_shape, row_limit)


class profile:  # noqa: N801  (torch.profiler.profile)
    """Records every op from `with` (or start()) to its end (or stop()); one
    profile records at a time in a process (a second raises anvil.ValueError).
    trace_path: write the Chrome trace there when it stops. record_shapes: the
    ops' input shapes (for key_averages(group_by_input_shape=True));
    profile_memory: allocations per device; device_time: device-clock markers
    around every op on a device that has a clock."""

    def __init__(self, trace_path=None, *, record_shapes=True, profile_memory=True, device_time=True):
        self._options = dict(trace_path=trace_path or "", device_time=device_time, record_shapes=record_shapes,
                             memory=profile_memory)
        self._prof = None

    def start(self):
        self._prof = Profile(**self._options)
        return self

    def stop(self):
        self._profile().stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self._prof is not None:
            self._prof.stop()
        return False

    def _profile(self):
        if self._prof is None:
            raise RuntimeError("profile: not started; use `with anvil.profiler.profile() as prof:` or start()")
        return self._prof

    def key_averages(self, group_by_input_shape=False):
        return KeyAverages(self._profile(), group_by_input_shape)

    def table(self, sort_by="host_total", row_limit=20, group_by_input_shape=False):
        return self.key_averages(group_by_input_shape).table(sort_by, row_limit)

    def events(self):
        """Every recorded span (TraceEvent), as in the trace."""
        return self._profile().events()

    def export_chrome_trace(self, path):
        """Writes the Chrome trace (Trace Event Format) atomically."""
        self._profile().write_trace(str(path))

    def trace_json(self):
        return self._profile().trace_json()

    def conv_algorithms(self):
        """Each convolution's algorithm, math and workspace per direction
        (ConvAlgorithmStats: name, shapes, choice, calls)."""
        return self._profile().conv_algorithms()

    def conv_table(self, row_limit=20):
        return self._profile().conv_table(row_limit)

    def sync_sites(self):
        """The lines of user code that made the host wait, by waiting time."""
        return self._profile().sync_sites()

    def sync_table(self, row_limit=20):
        return self._profile().sync_table(row_limit)

    def memory(self):
        """Allocations and frees per device during the profile (MemoryTotals)."""
        return self._profile().memory()


class record_function(_profiler._RecordFunction):  # noqa: N801
    """A named span around a block or a function (torch.profiler.record_function):
    `with anvil.profiler.record_function("step"):` or `@record_function("step")`.
    The ops run inside nest under it in the table's tree and the trace. Costs a
    branch when no profile records."""

    def __call__(self, fn):
        @_functools.wraps(fn)
        def spanned(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return spanned
