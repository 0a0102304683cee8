"""Streaming acquisition: a writer appends frames and commits every N; a viewer in another
process polls the file and sees every committed frame, never a torn one.

    python examples/acquisition.py [--out DIR] [--frames N] [--every N] [--interval S]

The writer (this process) creates an empty 128 x 96 volume with a 2-level pyramid, appends
synthetic frames one at a time (one every ``--interval`` seconds, as a camera delivers
them) and commits every ``--every`` frames. The viewer (a second
Python process running this file with ``--view``) opens the file again and again while the
writer works, checks that it holds whole commits (a frame count that is a multiple of
``--every``, or all of them after the last commit; every frame as written; level 1 matching
level 0) and reports what it saw.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
from _runner import run  # examples/_runner.py: the shared --out handling

import jnrrd
from jnrrd.pyramid import downsample

SHAPE = (128, 96)


def frame(t: int) -> np.ndarray:
    """Frame ``t``: a moving gradient (the viewer recomputes it to check what it reads)."""
    x, y = np.meshgrid(np.arange(SHAPE[0]), np.arange(SHAPE[1]), indexing="ij")
    return ((x * 3 + y * 5 + t * 7) % 4096).astype(np.uint16)


def view(path: str, every: int, total: int) -> None:
    """Poll ``path`` until it holds ``total`` frames; check each view; print a summary."""
    seen, polls, busy = set(), 0, 0
    print("ready", flush=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with jnrrd.open(path) as vol:
                data, level1 = vol[...], vol.levels[1][...]
        except jnrrd.DataError:  # the tiles read were replaced meanwhile: open again
            busy += 1
            continue
        polls += 1
        n = data.shape[2] - 1  # the volume starts with one empty frame
        if n % every and n != total:  # commits come every `every` frames, and at the end
            raise SystemExit(f"viewer: {n} frames: not a whole commit")
        for t in range(n):
            if not np.array_equal(data[:, :, t + 1], frame(t)):
                raise SystemExit(f"viewer: frame {t} is torn")
        if not np.array_equal(level1, downsample(data, (2, 2, 2))):
            raise SystemExit("viewer: level 1 disagrees with level 0")
        seen.add(n)
        if n == total:
            break
        time.sleep(0.01)
    if total not in seen:
        raise SystemExit(f"viewer: gave up after {polls} polls without seeing all "
                         f"{total} frames (last seen: {max(seen, default=0)})")
    print(f"viewer: {polls} polls, {len(seen)} distinct commits seen "
          f"(frame counts {sorted(seen)[:3]}...), last {max(seen)} frames; every frame "
          f"whole, levels consistent", flush=True)


def main(out: str, args: object) -> None:
    path = os.path.join(out, "acquisition.jnrrd")
    frames, every = int(args.frames), int(args.every)  # type: ignore[attr-defined]
    vol = jnrrd.create(path, (*SHAPE, 1), "uint16", tile=(64, 64, 16), levels=2)
    vol.close()
    viewer = subprocess.Popen([sys.executable, __file__, "--view", path, "--every",
                               str(every), "--frames", str(frames)], stdout=subprocess.PIPE,
                              text=True)
    assert viewer.stdout is not None and viewer.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    with jnrrd.open(path, mode="r+") as vol:
        for t in range(frames):
            time.sleep(args.interval)  # type: ignore[attr-defined]  # the next frame comes
            vol.append(frame(t))  # one frame: grows the last axis by one
            if (t + 1) % every == 0:
                vol.commit()
    print(f"writer: {frames} frames of {SHAPE[0]}x{SHAPE[1]} uint16 appended, a commit "
          f"every {every}, in {time.perf_counter() - t0:.2f} s")
    said, _ = viewer.communicate(timeout=180)
    print(said, end="")
    if viewer.returncode != 0:
        raise SystemExit("the viewer failed")
    print(f"file: {os.path.getsize(path) / 1e6:.1f} MB, "
          f"valid: {not jnrrd.validate(path, deep=True)}")


def _arguments(p: object) -> None:
    p.add_argument("--frames", type=int, default=200)  # type: ignore[attr-defined]
    p.add_argument("--every", type=int, default=20)  # type: ignore[attr-defined]
    p.add_argument("--interval", type=float, default=0.005)  # type: ignore[attr-defined]
    p.add_argument("--view", metavar="PATH")  # type: ignore[attr-defined]


if __name__ == "__main__":
    if "--view" in sys.argv:
        i = sys.argv.index("--view")
        every = int(sys.argv[sys.argv.index("--every") + 1])
        total = int(sys.argv[sys.argv.index("--frames") + 1])
        view(sys.argv[i + 1], every, total)
    else:
        run(main, __doc__, _arguments)
