"""The write methods of a volume that cannot be written: one opened with ``mode="r"`` (the
default of ``jnrrd.open``) and every pyramid level (rebuilt from level 0 on commit). Each
raises :class:`~jnrrd.errors.UnsupportedError` saying how to write instead
(docs/editing.md)."""

from __future__ import annotations

from typing import Any

from ..errors import UnsupportedError, where

__all__ = ["ReadOnly"]


class ReadOnly:
    """Write methods that refuse (a base of :class:`~jnrrd.engine.volume.LevelView`)."""

    #: how the volume was opened: ``"r"`` (read) or ``"r+"`` (read and write)
    mode = "r"

    def _refuse(self, what: str) -> UnsupportedError:
        vol: Any = getattr(self, "_vol", self)
        if vol is not self and getattr(vol, "mode", "r") == "r+":
            return UnsupportedError(f"{where(vol.name)}{what}: pyramid level "
                                    f"{getattr(self, 'index', '?')} is rebuilt from level 0 "
                                    "when you commit; write level 0 (the volume itself)")
        return UnsupportedError(f"{where(vol.name)}{what}: the volume was opened for reading; "
                                "open it with jnrrd.open(path, mode='r+') to write")

    def __setitem__(self, key: Any, value: Any) -> None:
        raise self._refuse("assignment")

    def append(self, data: Any, axis: int | None = None) -> None:
        """Refused: see the class doc."""
        raise self._refuse("append")

    def resize(self, shape: Any) -> None:
        """Refused: see the class doc."""
        raise self._refuse("resize")

    def commit(self) -> None:
        """Refused: see the class doc."""
        raise self._refuse("commit")

    def abort(self) -> None:
        """Refused: see the class doc."""
        raise self._refuse("abort")
