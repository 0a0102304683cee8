"""The one read seam: :meth:`HeldObjects.get_ranges`, and what is built on it.

Every store (:class:`~.local.LocalStore`, :class:`~.remote.RemoteStore`,
:class:`StreamStore`) reads through :meth:`HeldObjects.get_ranges`: the tile sources
(:mod:`jnrrd.engine.sources`), the data sections of untiled files (through
:class:`RangeStream`), detached data files, external tile files. A store *holds* an object
it reads many ranges of (:meth:`HeldObjects.hold`: the ``.jnrrd`` file whose header was
parsed, its internal tiles read from that very file even when the path is replaced
meanwhile; a data file being decoded); a key not held is opened for the call alone.

A range is ``(start, stop)``, or ``(start, None)``: from ``start`` to the object's end, at
most ``limit`` bytes (a whole tile file). With ``wait=False`` the call returns at once, one
pending buffer per range (``result()`` waits for it; ``when_ready(fn)`` calls ``fn()`` once
it is there, or failed): a remote store has the requests in flight, merged, and the first
buffers arrive while later ones are on the wire.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import DataError

__all__ = ["HeldObjects", "RangeStream", "Ready", "StreamStore"]

Range = tuple[int, "int | None"]


class Ready:
    """A buffer (or the error reading it) that is already there, shaped like a pending one."""

    __slots__ = ("data", "error")

    def __init__(self, data: Any = None, error: BaseException | None = None) -> None:
        self.data, self.error = data, error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.data

    def when_ready(self, fn: Callable[[], object]) -> None:
        """``fn()`` now: the buffer is there."""
        fn()


def ready(fn: Any, *args: Any) -> Ready:
    """``Ready(fn(*args))``, or the ``OSError``/``JnrrdError`` it raised, for later."""
    try:
        return Ready(fn(*args))
    except (OSError, DataError) as exc:
        return Ready(error=exc)


class HeldObjects:
    """The read seam every store shares: :meth:`get_ranges` over objects held open
    (:meth:`hold`) or opened for one call. A store provides ``_open_object(key, field)`` (a
    reader with ``fetch_many(ranges, limit)``, ``read_into``, ``file_size`` and ``close``) and
    ``_whole(key, limit, field)`` (one pending buffer: a whole object, at most ``limit``
    bytes)."""

    def _held_objects(self) -> dict[str, list[Any]]:
        held = self.__dict__.get("_held")
        if held is None:
            held = self.__dict__.setdefault("_held", {})
            self.__dict__.setdefault("_held_lock", threading.Lock())
        return held

    def hold(self, key: str, reader: Any = None, *, field: str = "data_file") -> Any:
        """Keep ``key`` open for the reads that follow (``reader``: the already opened object
        to read it from, e.g. the file whose header was parsed); one :meth:`release` per
        call. Returns the reader."""
        held = self._held_objects()
        with self.__dict__["_held_lock"]:
            entry = held.get(key)
            if entry is not None:
                if reader is not None and reader is not entry[0]:
                    raise RuntimeError(f"{key!r} is already held by another reader")
                entry[1] += 1
                return entry[0]
        opened = reader if reader is not None else self._open_object(key, field)
        with self.__dict__["_held_lock"]:
            entry = held.setdefault(key, [opened, 0])
            entry[1] += 1
        if entry[0] is not opened:  # another thread held it meanwhile
            opened.close()
        return entry[0]

    def release(self, key: str) -> None:
        """Undo one :meth:`hold`; the last one closes the object."""
        held = self._held_objects()
        with self.__dict__["_held_lock"]:
            entry = held.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del held[key]
        entry[0].close()

    def held(self, key: str) -> Any:
        """The reader holding ``key``, or ``None``."""
        entry = self._held_objects().get(key)
        return None if entry is None else entry[0]

    def get_ranges(self, key: str, ranges: Sequence[Range], *, field: str = "data_file",
                   limit: int | None = None, wait: bool = True,
                   out: Sequence[Any] | None = None) -> list[Any]:
        """The bytes of each range of object ``key``, in order (module docstring): buffers,
        or with ``wait=False`` pending buffers; with ``out`` (one writable buffer per
        finite range) the bytes are read into those and ``out`` is returned."""
        reader = self.held(key)
        if reader is None and all(b is None for _, b in ranges) and out is None:
            if limit is None:
                limit = self.policy.max_bytes  # type: ignore[attr-defined]
            if any(a != 0 for a, _ in ranges):
                return self._opened_ranges(key, ranges, field, limit, wait, out)
            pending = [self._whole(key, limit, field) for _ in ranges]
            return [p.result() for p in pending] if wait else pending
        if reader is None:
            return self._opened_ranges(key, ranges, field, limit, wait, out)
        return _read(reader, ranges, limit, wait, out)

    def _opened_ranges(self, key: str, ranges: Sequence[Range], field: str,
                       limit: int | None, wait: bool, out: Sequence[Any] | None) -> list[Any]:
        reader = self._open_object(key, field)
        try:
            got = _read(reader, ranges, limit, True, out)
        finally:
            reader.close()
        return got if wait else [Ready(g) for g in got]

    def _open_object(self, key: str, field: str) -> Any:  # pragma: no cover - per store
        raise TypeError(f"{type(self).__name__} cannot open objects")

    def _whole(self, key: str, limit: int, field: str) -> Any:  # pragma: no cover
        raise TypeError(f"{type(self).__name__} cannot read whole objects")


def _read(reader: Any, ranges: Sequence[Range], limit: int | None, wait: bool,
          out: Sequence[Any] | None) -> list[Any]:
    size = reader.file_size
    spans = [(a, b if b is not None else min(size, a + (limit if limit is not None else size)))
             for a, b in ranges]
    if out is not None:
        for (a, _), buf in zip(spans, out, strict=True):
            reader.read_into(a, buf)
        return list(out)
    pending = reader.fetch_many(spans)
    return [p.result() for p in pending] if wait else pending


class StreamStore(HeldObjects):
    """A caller's stream that has no path (``BytesIO``, a socket's file) as a store of one
    object, ``key``: what its internal tiles and data section are read from."""

    remote = False

    def __init__(self, reader: Any, key: str = "", *, policy: Any = None) -> None:
        self.policy = policy
        self.key = key
        self.hold(key, reader)

    def close(self) -> None:
        """Release the stream's reader (closing it when it owns the stream)."""
        self.release(self.key)

    def _open_object(self, key: str, field: str) -> Any:
        raise FileNotFoundError(f"{key!r}: a stream without a path holds no other object")

    def _whole(self, key: str, limit: int, field: str) -> Any:
        return Ready(error=FileNotFoundError(f"{key!r}: a stream without a path holds no "
                                             "other object"))


class HeldStream(io.RawIOBase):
    """A seekable, read-only binary stream over the object ``key`` of ``store``, held by the
    store while the stream is open (``reader``: its already opened reader). The set-up,
    position and release shared by :class:`RangeStream` and the remote stream."""

    def __init__(self, store: Any, key: str, reader: Any = None, *,
                 field: str = "data_file", start: int = 0) -> None:
        super().__init__()
        self.store, self.key = store, key
        self.reader = store.hold(key, reader, field=field)
        self._pos = start

    @property
    def size(self) -> int:
        """The object's size in bytes."""
        return int(self.reader.file_size)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def close(self) -> None:
        if not self.closed:
            self.store.release(self.key)
        super().close()


class RangeStream(HeldStream):
    """A held object of a store as a seekable binary stream: every read is a
    :meth:`HeldObjects.get_ranges` call (bytes read into the caller's buffer). The data
    section of an untiled file and detached data files are decoded from such streams."""

    def __init__(self, store: Any, key: str, *, field: str = "data_file",
                 reader: Any = None, start: int = 0, name: Any = None) -> None:
        super().__init__(store, key, reader, field=field, start=start)
        self.name = name if name is not None else key

    def fileno(self) -> int:
        """The descriptor of a local file the store holds (the codecs that decode a whole
        section at once map it); ``io.UnsupportedOperation`` otherwise."""
        fileno = getattr(self.reader, "fileno", None)
        if fileno is None:
            raise io.UnsupportedOperation(f"{self.name}: not a local file")
        return int(fileno())

    def remaining(self) -> int:
        """Bytes from the position to the object's end."""
        return max(0, self.size - self._pos)

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        n = min(len(view), self.remaining())
        if n <= 0:
            return 0
        self.store.get_ranges(self.key, [(self._pos, self._pos + n)], out=[view[:n]])
        self._pos += n
        return n

    def read(self, n: int | None = -1) -> bytes:
        k = self.remaining() if n is None or n < 0 else min(n, self.remaining())
        if k <= 0:
            return b""
        buf = bytearray(k)
        got = self.readinto(buf)
        return bytes(buf[:got]) if got < k else bytes(buf)

    def readline(self, limit: int | None = -1) -> bytes:
        out = bytearray()
        cap = -1 if limit is None else limit
        while cap < 0 or len(out) < cap:
            want = 4096 if cap < 0 else min(4096, cap - len(out))
            chunk = self.read(want)
            if not chunk:
                break
            end = chunk.find(b"\n")
            if end >= 0:
                self._pos -= len(chunk) - end - 1
                out += chunk[: end + 1]
                break
            out += chunk
        return bytes(out)
