"""anvil.amp: autocast and GradScaler (anvil/amp.h)."""

from ._anvil.amp import GradScaler, autocast, get_autocast_dtype, is_autocast_enabled  # noqa: F401
