"""The version of a remote object a reader opened, and the rule every later answer obeys.

A volume is read in many requests; the object may be replaced between two of them (by one of
the same size, so the tile offsets still fit). A :class:`Validator` is what the first answer
said about the object's version: its ``ETag``, else its ``Last-Modified`` date and size, else
only its size. Every later answer must carry the same (:meth:`Validator.check`): an ETag that
differs, or that is missing when the object had one, is a ``DataError`` ("changed while it was
read"), and so is a Last-Modified date or a size that differs or is missing when the object
was identified by them. A server that sends neither ETag nor Last-Modified gives no way to
tell two versions of the same size apart: the reader warns once, at open
(:func:`warn_unversioned`). Requests also ask the server to refuse another version
(:meth:`Validator.conditions`: ``If-Match`` with a strong ETag, ``If-Unmodified-Since`` with a
Last-Modified date), so a server that honours them answers ``412`` instead of other bytes.

Backend-neutral: a backend turns its answer's metadata into a :class:`Validator`
(:meth:`Validator.of`) and checks it before handing out any byte.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import DataError, JnrrdWarning

__all__ = ["Validator", "warn_unversioned"]


@dataclass(frozen=True)
class Validator:
    """An object's version as one answer gave it (``None``: the answer did not say)."""

    etag: str | None = None
    last_modified: str | None = None
    size: int | None = None

    @classmethod
    def of(cls, headers: Mapping[str, Any] | None, size: int | None) -> Validator:
        """From an answer's headers (``ETag``, ``Last-Modified``; any case) and the
        object's size it stated (``Content-Range`` total, or a whole body's length)."""
        etag = last = None
        for name, value in (headers or {}).items():
            low = str(name).lower()
            if low == "etag" and value:
                etag = str(value).strip()
            elif low in ("last-modified", "lastmodified") and value:
                last = str(value).strip()
        return cls(etag, last, size)

    @property
    def kind(self) -> str:
        """What identifies the object: ``"etag"``, ``"last-modified"`` or ``"size"``."""
        return "etag" if self.etag else "last-modified" if self.last_modified else "size"

    def token(self) -> Hashable:
        """The version token compared on re-open (pickles, Dask tasks)."""
        if self.etag:
            return ("etag", self.etag, self.size)
        if self.last_modified:
            return ("last-modified", self.last_modified, self.size)
        return ("size", self.size)

    def with_size(self, size: int | None) -> Validator:
        """The same validator, its size known."""
        return Validator(self.etag, self.last_modified, size)

    def conditions(self) -> dict[str, str]:
        """Request headers that make a server refuse (412) any other version."""
        if self.etag and not self.etag.startswith("W/"):  # If-Match compares strongly
            return {"If-Match": self.etag}
        if self.last_modified and not self.etag:
            return {"If-Unmodified-Since": self.last_modified}
        return {}

    def check(self, answer: Validator, url: str) -> None:
        """``DataError`` unless ``answer`` carries this validator (the rule above); a size
        the answer does not state is not compared unless the size is the validator."""
        what = None
        if self.etag:
            if answer.etag != self.etag:
                what = (f"its ETag {self.etag} became {answer.etag}" if answer.etag else
                        f"an answer came without the ETag it had ({self.etag})")
        elif self.last_modified:
            if answer.last_modified != self.last_modified:
                what = (f"its Last-Modified {self.last_modified!r} became "
                        f"{answer.last_modified!r}" if answer.last_modified else
                        "an answer came without the Last-Modified date it had "
                        f"({self.last_modified!r})")
            elif answer.size is None and self.size is not None:
                what = "an answer did not state the object's size"
        if what is None and None not in (answer.size, self.size) and answer.size != self.size:
            what = f"its size {self.size} became {answer.size}"
        if what is not None:
            raise DataError(f"{url}: the object changed while it was read ({what}); open it "
                            "again")


def warn_unversioned(url: str) -> None:
    """The warning for an object whose server gives no ETag and no Last-Modified."""
    warnings.warn(f"{url}: the server sends neither an ETag nor a Last-Modified date, so a "
                  "replacement of this object by one of the same size while it is read "
                  "cannot be detected (docs/remote.md)", JnrrdWarning, stacklevel=4)
