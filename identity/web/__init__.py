"""The HTTP API: one blueprint, and one module of declarative views per resource registering on it."""

from . import changes, health, identities, keys, webhooks  # noqa: F401 - importing a module registers its views
from .blueprint import blp

__all__ = ["blp"]
