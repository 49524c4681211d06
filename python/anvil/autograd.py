"""anvil.autograd: backward and grad (anvil/autograd.h)."""

from ._anvil.autograd import backward, grad  # noqa: F401  (re-exported)
