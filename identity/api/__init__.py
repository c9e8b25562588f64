"""The HTTP API: one blueprint, and one module of declarative views per resource registering on it."""

from . import changes, health, identities, webhooks  # noqa: F401 - importing a module registers its views
from .base import blp

__all__ = ["blp"]
