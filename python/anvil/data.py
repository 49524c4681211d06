"""anvil.data: Fashion-MNIST and the DataLoader (anvil/data.h)."""

from ._anvil.data import DataLoader, FashionMNIST, read_idx  # noqa: F401  (re-exported)
