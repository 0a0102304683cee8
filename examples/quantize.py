"""Quantize float32 data to uint8 on disk with ``scale_offset`` + ``cast_value``.

    python examples/quantize.py [--out DIR]

The header keeps ``type: float32`` (what readers get back); each tile is stored as uint8:
``stored = round((x - offset) * scale)``, NaN mapped to 0 and back. With offset -0.1 and
scale 10 the values 0.0 .. 25.4 map to 1 .. 255, so the error is at most half a step (0.05).
"""

from __future__ import annotations

import os

import numpy as np
from _runner import run  # examples/_runner.py: the shared --out handling

import jnrrd

CODECS = [
    {"name": "scale_offset", "configuration": {"offset": -0.1, "scale": 10}},
    {"name": "cast_value", "configuration": {
        "data_type": "uint8", "rounding": "nearest-even",
        "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}},
    {"name": "bytes"},
    {"name": "zstd", "configuration": {"level": 3}},
]


def main(out_dir: str) -> None:
    rng = np.random.default_rng(1)
    x, y, z = np.meshgrid(*(np.linspace(0, 1, n) for n in (80, 60, 40)), indexing="ij")
    data = (12.7 + 12.6 * np.sin(6 * x) * np.cos(5 * y) * np.cos(3 * z)).astype(np.float32)
    data[rng.random(data.shape) < 0.01] = np.nan  # 1 % missing samples
    path = os.path.join(out_dir, "quantized.jnrrd")
    # padding_value null = NaN: edge padding goes through the codecs like data (NaN -> 0).
    jnrrd.write(path, data, {"tile:padding_value": None}, tile=(32, 32, 32), codecs=CODECS)
    back, header = jnrrd.read(path)
    assert header["type"] == "float32" and back.dtype == np.float32
    nan = np.isnan(data)
    assert np.array_equal(np.isnan(back), nan), "NaN must map to 0 and back"
    err = float(np.max(np.abs(back[~nan] - data[~nan])))
    assert err <= 0.05 + 1e-5, err
    size = os.path.getsize(path)
    print(f"float32 {data.shape}: {data.nbytes:,} bytes -> {size:,} bytes on disk "
          f"({data.nbytes / size:.1f}x)")
    print(f"max abs error {err:.4f} (half a quantization step is 0.05); "
          f"{int(nan.sum())} NaN samples preserved")
    print("tile:codecs =", header["tile:codecs"])
    with jnrrd.open(path) as vol:
        print(f"a stored tile decodes to {vol.read_tile((0, 0, 0)).dtype} (the header type)")


if __name__ == "__main__":
    run(lambda out, args: main(out), __doc__)
