"""anvil.optim: SGD and Adam (anvil/optim.h); params may be any iterable."""

from ._anvil import optim as _optim
from ._anvil.optim import Optimizer  # noqa: F401  (re-exported)


class SGD(_optim.SGD):
    __doc__ = _optim.SGD.__doc__

    def __init__(self, params, lr=0.01, **kwargs):
        super().__init__(list(params), lr, **kwargs)


class Adam(_optim.Adam):
    __doc__ = _optim.Adam.__doc__

    def __init__(self, params, lr=1e-3, **kwargs):
        super().__init__(list(params), lr, **kwargs)
