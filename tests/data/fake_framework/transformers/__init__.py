"""A stand-in for a framework checked out from source (not in site-packages): its frames must never
be taken for the user's line, and the innermost one is named beside it (tests/test_library_frames.py)."""

from .trainer import Trainer

__all__ = ["Trainer"]
