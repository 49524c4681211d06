"""anvil.dist: processes under mpirun and their collectives (anvil/dist.h)."""

from ._anvil.dist import (  # noqa: F401  (re-exported)
    ProcessGroup, ReduceOp, Work, all_gather, all_reduce, barrier, broadcast, device, init, is_initialized, local_rank,
    rank, world, world_size,
)
