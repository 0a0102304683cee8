"""The names a write gives its files: fresh tokens, temporary-file markers, and the fresh
tile directories and data files of a multi-file dataset (docs/format.md#atomic-writes).

Only this library makes such names; which of them a target owns (and cleanup may remove) is
decided by :mod:`jnrrd.storage.ownership`.
"""

from __future__ import annotations

import os
import secrets

__all__ = ["MARK", "TOKEN_RE", "fresh_token", "stem", "tmp_marker"]

#: what every temporary name carries: ``.<target name>.jnrrd-tmp-<token>[suffix]``
MARK = ".jnrrd-tmp-"

#: The tokens in fresh names: 8 lower-case hex digits, at least one of them a letter, so that a
#: user's ``scan.20231105.raw`` (a date, a frame number) never looks like one of ours.
TOKEN_RE = "(?=[0-9]{0,7}[a-f])[0-9a-f]{8}"


def fresh_token() -> str:
    """A short random token for fresh file and directory names (matches ``TOKEN_RE``)."""
    while True:
        token = secrets.token_hex(4)
        if not token.isdigit():
            return token


def tmp_marker(target: str) -> str:
    """The name prefix of temporary files belonging to ``target``."""
    d, name = os.path.split(os.path.abspath(target))
    return os.path.join(d, f".{name}{MARK}")


def stem(target: str) -> str:
    """The stem fresh tile directories and data files of ``target`` are named from: the name
    without its ``.jnrrd`` suffix, in any case (``V.JNRRD`` → ``V``)."""
    name = os.path.basename(target)
    return name[: -len(".jnrrd")] if name.lower().endswith(".jnrrd") else name
