"""The servers of the remote benchmarks, each in a process of its own, with request counters.

- :class:`HttpServer`: ``tests/http_server.py`` serving a directory (127.0.0.1, keep-alive,
  ``TCP_NODELAY``, a latency slept before every answer), in its own process (the default) or
  in a thread of this one (``mode="thread"``); counters and latency through its control URLs.
- :class:`S3Target`: moto's S3 server (``tests/s3_server.py``, counting middleware) in a child
  process driven over its stdin/stdout (``reset``, ``latency S``, ``stats``; EOF stops it), with
  one bucket holding a copy of a directory. Out of this process, moto's CPU time and GIL are not
  the client's: the client CPU seconds the remote cases report are the client's own.

Both stop by themselves: at exit (``atexit``), and the S3 child when its stdin closes.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: "process" (``python tests/http_server.py``) or "thread" (in this process)
SERVER = os.environ.get("JNRRD_BENCH_SERVER", "process")
_START_TIMEOUT = 30.0
_ANSWER_TIMEOUT = 60.0


def tests_dir() -> Path:
    """``tests/`` (put on ``sys.path``: the servers live there)."""
    path = HERE.parent / "tests"
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
    return path


def _line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The next line the child prints, or ``""`` after ``timeout`` seconds."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    ready = sel.select(timeout=timeout)
    sel.close()
    return proc.stdout.readline().decode().strip() if ready else ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc`` (killed if it does not end within 5 s) and close its pipes."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


class HttpServer:
    """``tests/http_server.py`` serving ``root``: in a thread of this process or in its own."""

    def __init__(self, root: Path, mode: str = SERVER) -> None:
        if mode not in ("process", "thread"):
            raise ValueError(f"server mode {mode!r}: 'process' or 'thread'")
        self.mode = mode
        self.proc: subprocess.Popen[bytes] | None = None
        self.srv = None
        if mode == "thread":
            tests_dir()
            from http_server import RangeServer

            self.srv = RangeServer(root).start()
            self.url = self.srv.url
        else:
            script = tests_dir() / "http_server.py"
            self.proc = subprocess.Popen([sys.executable, str(script), str(root)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL)
            line = _line(self.proc, _START_TIMEOUT)
            if not line.startswith("http://127.0.0.1:"):
                self.close()
                raise RuntimeError(f"tests/http_server.py did not start ({line!r})")
            self.url = line
        atexit.register(self.close)

    def _control(self, command: str) -> dict:
        with urllib.request.urlopen(f"{self.url}/_server/{command}", timeout=30) as answer:
            return json.loads(answer.read())

    def set_latency(self, seconds: float) -> None:
        """Seconds slept before every answer."""
        if self.srv is not None:
            self.srv.latency = seconds
        else:
            self._control(f"latency/{seconds}")

    def reset(self) -> None:
        """Forget the counters."""
        if self.srv is not None:
            self.srv.reset()
        else:
            self._control("reset")

    def counters(self) -> dict[str, float]:
        """Requests and body bytes since the last reset."""
        s = self.srv.stats() if self.srv is not None else self._control("stats")
        return {"requests": float(s["requests"]), "bytes": float(s["bytes_sent"])}

    def close(self) -> None:
        """Stop the server (the thread, or the process: terminated, then killed)."""
        if self.srv is not None:
            self.srv.close()
            self.srv = None
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


_S3_CHILD = r"""
import json, os, sys
sys.path.insert(0, {tests!r})
import s3_server
os.environ.update(s3_server.AWS_ENV)
import io
import moto.s3.models as models
# S3 answers a ranged GET from the range; moto 5 reads the whole object for each one, under
# the object's lock, from a temporary file above 5 MB. Objects stay in memory here and a read
# of an in-memory object is the stored bytes themselves (no copy), so the range is all a
# request costs and every system's requests are measured, not moto's whole-object reads.
os.environ["MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"] = str(8 << 30)
_whole = models.FakeKey.value
def _value(key):
    memory = getattr(key._value_buffer, "_file", None)
    return memory.getvalue() if isinstance(memory, io.BytesIO) else _whole.fget(key)
models.FakeKey.value = property(_value, _whole.fset)
srv = s3_server.S3Server()
print(srv.endpoint_url, flush=True)
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "reset":
        srv.reset()
        out = {{}}
    elif cmd == "latency":
        srv.latency = float(arg)
        out = {{}}
    elif cmd == "stats":
        out = {{"requests": srv.requests, "bytes": srv.bytes_sent}}
    else:
        break
    print(json.dumps(out), flush=True)
srv.close()
"""


class S3Target:
    """moto's S3 server in a child process, with one bucket holding a copy of ``root``."""

    def __init__(self, root: Path) -> None:
        s3_server = _s3_module()
        os.environ.update(s3_server.AWS_ENV)  # the clients' dummy credentials, no lookups
        code = _S3_CHILD.format(tests=str(tests_dir()))
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL)
        atexit.register(self.close)
        endpoint = _line(self.proc, _START_TIMEOUT)
        if not endpoint.startswith("http://127.0.0.1:"):
            self.close()
            raise RuntimeError(f"the S3 server did not start ({endpoint!r})")
        self.options = {"key": s3_server.AWS_ENV["AWS_ACCESS_KEY_ID"],
                        "secret": s3_server.AWS_ENV["AWS_SECRET_ACCESS_KEY"],
                        "endpoint_url": endpoint,
                        "client_kwargs": {"region_name": s3_server.REGION}}
        self.bucket = "bench"
        request = urllib.request.Request(f"{endpoint}/{self.bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
        import s3fs

        fs = s3fs.S3FileSystem(**self.options)
        fs.put(str(root) + "/", f"{self.bucket}/", recursive=True)
        self.url = f"s3://{self.bucket}"

    def _ask(self, command: str) -> dict:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        answer = _line(self.proc, _ANSWER_TIMEOUT)
        if not answer:
            raise RuntimeError(f"the S3 server did not answer {command!r}")
        return json.loads(answer)

    def set_latency(self, seconds: float) -> None:
        """Seconds slept before every answer."""
        self._ask(f"latency {seconds}")

    def reset(self) -> None:
        """Forget the counters."""
        self._ask("reset")

    def counters(self) -> dict[str, float]:
        """Requests and body bytes since the last reset."""
        s = self._ask("stats")
        return {"requests": float(s["requests"]), "bytes": float(s["bytes"])}

    def close(self) -> None:
        """Stop the child (its stdin closed, then terminated if need be)."""
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


def _s3_module():
    tests_dir()
    import s3_server

    return s3_server
