"""anvil.dist from Python under `mpirun -np 2` (ctest python_dist_mpi): the
collectives' values on every rank, and one DistributedDataParallel step after
which both ranks hold the same parameters, equal to one process's step on the
whole batch. Each rank works on its own device (anvil.dist.device(): opencl:0
and opencl:1 with PoCL, the CPU without accelerators). Not collected by
pytest (it needs the launcher); an assertion fails the rank, and mpirun then
fails the test."""

import numpy as np

import anvil
from anvil import nn

world = anvil.dist.init()
rank, size = anvil.dist.rank(), anvil.dist.world_size()
assert size == 2 and world.size() == 2 and world.rank() == rank, (rank, size)
assert anvil.dist.is_initialized()
dev = anvil.dist.device()

# all_reduce, in place: sum, average, max.
t = anvil.tensor([rank + 1.0, 2.0 * (rank + 1)], device=dev)
anvil.dist.all_reduce(t)
assert t.device == dev and t.tolist() == [3.0, 6.0], t
t = anvil.tensor([rank * 4.0], device=dev)
anvil.dist.all_reduce(t, anvil.dist.ReduceOp.AVG)
assert t.tolist() == [2.0], t
t = anvil.tensor([[rank, -rank]], dtype=anvil.int64, device=dev)
anvil.dist.all_reduce(t, op=anvil.dist.ReduceOp.MAX)
assert t.dtype == anvil.int64 and t.tolist() == [[1, 0]], t

# broadcast from rank 1, in place.
t = anvil.full((3,), 10.0 * rank + 7, device=dev)
anvil.dist.broadcast(t, src=1)
assert t.tolist() == [17.0, 17.0, 17.0], t

# all_gather: every rank's tensor, in rank order, on every rank.
parts = world.allgather(anvil.tensor([rank, 10 + rank], device=dev))
assert [p.tolist() for p in parts] == [[0, 10], [1, 11]], parts
assert all(p.device == dev for p in parts)
into = [anvil.zeros(2, device=dev), anvil.zeros(2, device=dev)]  # torch.distributed's form: written in place
anvil.dist.all_gather(into, anvil.tensor([rank * 1.5, 1.0], device=dev))
assert [p.tolist() for p in into] == [[0.0, 1.0], [1.5, 1.0]], into
world.barrier().wait()
anvil.dist.barrier()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.fc1(x).tanh())


# Each rank starts from different weights; DDP broadcasts rank 0's.
anvil.manual_seed(100 + rank)
net = Net().to(dev)
own = net.fc1.weight.cpu().numpy().copy()
ddp = nn.DistributedDataParallel(net)
start = {k: v.cpu().numpy().copy() for k, v in ddp.module.state_dict().items()}
starts = world.allgather(ddp.module.fc1.weight.detach())
np.testing.assert_array_equal(starts[0].cpu().numpy(), starts[1].cpu().numpy())
assert (rank == 0) == np.array_equal(own, start["fc1.weight"])  # rank 1's own weights were replaced

# One batch of 8, the same on both ranks; each trains on its half.
anvil.manual_seed(7)
x, y = anvil.randn(8, 5), anvil.randint(0, 3, (8,))
half = slice(4 * rank, 4 * rank + 4)
opt = anvil.optim.SGD(ddp.parameters(), lr=0.5)
opt.zero_grad()
loss = nn.cross_entropy(ddp(x[half].to(dev)), y[half].to(dev))
loss.backward()  # gradients averaged over the ranks
opt.step()

# Both ranks hold the same parameters...
mine = anvil.cat([p.detach().flatten() for p in ddp.parameters()])
theirs = world.allgather(mine)
np.testing.assert_array_equal(theirs[0].cpu().numpy(), theirs[1].cpu().numpy())
# ...and they are one process's step on the whole batch from rank 0's start.
ref = Net()
ref.load_state_dict({k: anvil.tensor(v) for k, v in start.items()})
ref_opt = anvil.optim.SGD(ref.parameters(), lr=0.5)
nn.cross_entropy(ref(x), y).backward()
ref_opt.step()
for (name, p), (_, q) in zip(ddp.module.named_parameters(), ref.named_parameters()):
    np.testing.assert_allclose(p.cpu().numpy(), q.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert p.device == dev
print(f"rank {rank} of {size} on {dev}: collectives and a DistributedDataParallel step agree", flush=True)
