"""Preview pictures (issue 17, part 5): ``Volume.preview`` and ``jnrrd preview``.

Every picture is checked through a PNG decoder written here (zlib + struct, independent of
the writer) and, when Pillow is installed, through Pillow as well.
"""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import jnrrd
from jnrrd.cli import main
from jnrrd.engine.volume import LevelView
from jnrrd.errors import UnsupportedError
from jnrrd.preview import encode_png, write_png
from jnrrd.preview.colour import PALETTE
from jnrrd.preview.render import GAP


# -- a PNG decoder for the tests (PNG specification §5, §11, §9: filter type 0 only) ----------
def decode_png(data: bytes) -> np.ndarray:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        pos += 12 + n
    assert [k for k, _ in chunks][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    w, h, depth, colour, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, colour, comp, filt, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    rows = np.frombuffer(raw, np.uint8).reshape(h, 1 + 3 * w)
    assert (rows[:, 0] == 0).all()  # filter type 0 on every scanline
    return rows[:, 1:].reshape(h, w, 3)


def read_png(path: Path) -> np.ndarray:
    pic = decode_png(path.read_bytes())
    try:
        from PIL import Image
    except ImportError:
        return pic
    with Image.open(path) as im:
        assert im.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(im), pic)
    return pic


def colours(pic: np.ndarray) -> set[tuple[int, int, int]]:
    return {tuple(int(c) for c in p) for p in np.unique(pic.reshape(-1, 3), axis=0)}


def three_view_size(px: int, py: int, pz: int) -> tuple[int, int, int]:
    """(height, width, 3) of three views: (x by y), (x by z), (y by z), GAP apart."""
    return max(py, pz), px + px + py + 2 * GAP, 3


def phantom(shape: tuple[int, int, int] = (64, 48, 32)) -> np.ndarray:
    """A noisy ellipsoid with a bright inner ball (header order x, y, z)."""
    x, y, z = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    cx, cy, cz = (n / 2 for n in shape)
    d = ((x - cx) / (0.4 * shape[0])) ** 2 + ((y - cy) / (0.4 * shape[1])) ** 2 + \
        ((z - cz) / (0.4 * shape[2])) ** 2
    ball = (x - cx * 0.7) ** 2 + (y - cy * 0.7) ** 2 + (z - cz) ** 2 < (shape[2] / 6) ** 2
    rng = np.random.default_rng(7)
    return (1000 * (d < 1) + 500 * ball + rng.normal(0, 30, shape)).astype(np.int16)


# -- PNG -----------------------------------------------------------------------------------------
def test_png_bytes_are_a_valid_rgb_png(tmp_path: Path) -> None:
    a = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    data = encode_png(a)
    # signature, then IHDR: length 13, width 3, height 2, depth 8, truecolour, 0, 0, 0
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[8:33] == (b"\x00\x00\x00\x0dIHDR" + struct.pack(">II", 3, 2)
                          + b"\x08\x02\x00\x00\x00" + data[29:33])
    np.testing.assert_array_equal(decode_png(data), a)
    write_png(tmp_path / "a.png", a)
    np.testing.assert_array_equal(read_png(tmp_path / "a.png"), a)
    assert [p.name for p in tmp_path.iterdir()] == ["a.png"]  # no temporary left


@pytest.mark.parametrize("bad", [np.zeros((2, 3), np.uint8), np.zeros((2, 3, 4), np.uint8),
                                 np.zeros((2, 3, 3), np.uint16), np.zeros((0, 3, 3), np.uint8)])
def test_png_refuses_what_it_cannot_write(bad: np.ndarray) -> None:
    with pytest.raises(ValueError, match="encode_png"):
        encode_png(bad)


# -- pictures ------------------------------------------------------------------------------------
def test_three_mid_slices_size_aspect_and_content(tmp_path: Path) -> None:
    # voxels 1 x 1 x 2 mm: z is 32 voxels but 64 mm, as long as x
    jnrrd.write(tmp_path / "v.jnrrd", phantom(), tile=16, levels=2,
                header={"spacings": [1.0, 1.0, 2.0]})
    with jnrrd.open(tmp_path / "v.jnrrd") as vol:
        pic = vol.preview(128)
    assert pic.shape == three_view_size(128, 96, 128) and pic.dtype == np.uint8
    assert len(colours(pic)) > 50
    # grey: R == G == B everywhere; the bright ball is white, the outside dark
    assert (pic[..., 0] == pic[..., 1]).all() and (pic[..., 1] == pic[..., 2]).all()
    assert pic[..., 0].max() == 255 and pic[..., 0].min() == 0
    # the first view's centre is inside the ellipsoid, its corner outside
    assert pic[48, 64, 0] > 150 > pic[2, 2, 0]


def test_mip_differs_from_slices(tmp_path: Path) -> None:
    data = np.zeros((32, 32, 32), np.float32)
    data[4, 5, 6] = 100.0  # far from every middle plane
    data[16, 16, 16] = 1.0
    jnrrd.write(tmp_path / "p.jnrrd", data, tile=8)
    with jnrrd.open(tmp_path / "p.jnrrd") as vol:
        slices = vol.preview(32)
        mip = vol.preview(32, mip=True)
    assert slices.shape == mip.shape == three_view_size(32, 32, 32)
    assert not (slices == mip).all()
    g = mip[..., 0]
    # the point shows in each projection: (x, y) in view 1, (x, z) in view 2, (y, z) in view 3
    assert g[5, 4] == 255 and g[6, 32 + GAP + 4] == 255 and g[6, 64 + 2 * GAP + 5] == 255
    assert slices[..., 0][5, 4] == 0


def test_picture_through_the_cli_and_mip(tmp_path: Path) -> None:
    src = tmp_path / "v.jnrrd"
    jnrrd.write(src, phantom(), tile=16, levels=3)
    assert main(["preview", str(src), "-o", str(tmp_path / "s.png"), "--size", "64"]) == 0
    assert main(["preview", str(src), "-o", str(tmp_path / "m.png"), "--size", "64",
                 "--mip"]) == 0
    s, m = read_png(tmp_path / "s.png"), read_png(tmp_path / "m.png")
    assert s.shape == m.shape == three_view_size(64, 48, 32)
    assert len(colours(s)) > 10 and not (s == m).all()
    with jnrrd.open(src) as vol:
        np.testing.assert_array_equal(s, vol.preview(64))
        np.testing.assert_array_equal(m, vol.preview(64, mip=True))
    assert main(["preview", str(src), "-o", str(tmp_path / "l.png"), "--level", "0"]) == 0
    assert read_png(tmp_path / "l.png").shape == three_view_size(256, 192, 128)


@pytest.mark.parametrize("argv, message", [
    (["--level", "3"], "--level 3"),
    (["--level", "-1"], "--level"),
    (["--size", "0"], "--size"),
    (["--size", "100000"], "--size"),
    (["--size", "big"], "--size"),
    ([], "-o"),
])
def test_bad_level_or_size_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture,
                                            argv: list[str], message: str) -> None:
    src = tmp_path / "v.jnrrd"
    jnrrd.write(src, phantom((16, 16, 8)), tile=8, levels=3)
    out = [] if argv == [] else ["-o", str(tmp_path / "x.png")]
    assert main(["preview", str(src), *out, *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_api_refuses_a_bad_level_or_size(tmp_path: Path) -> None:
    jnrrd.write(tmp_path / "v.jnrrd", phantom((16, 16, 8)), tile=8, levels=2)
    with jnrrd.open(tmp_path / "v.jnrrd") as vol:
        with pytest.raises(IndexError, match="level 2 does not exist"):
            vol.preview(level=2)
        for size in (0, -5, 10**6, 2.5, True):
            with pytest.raises(ValueError, match="size"):
                vol.preview(size)


def test_info_says_where_the_preview_is(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    jnrrd.write(tmp_path / "ct scan.jnrrd", phantom((16, 16, 8)))
    assert main(["info", str(tmp_path / "ct scan.jnrrd")]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"preview:     jnrrd preview '{tmp_path / 'ct scan.jnrrd'}' -o 'ct scan.png'"
    assert main(["info", "--json", str(tmp_path / "ct scan.jnrrd")]) == 0
    assert "preview" not in capsys.readouterr().out


# -- the level: the coarsest that still gives the size --------------------------------------------
def test_reads_only_the_coarsest_level_that_gives_the_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # external tiles: level 0's files are removed, so reading level 0 would fail
    src = tmp_path / "v.jnrrd"
    jnrrd.write(src, phantom((128, 128, 64)), tile=32, levels=3, storage="external")
    (tiles,) = tmp_path.glob("*.tiles")
    shutil.rmtree(tiles / "0")
    read: list[int] = []
    original = LevelView.__getitem__

    def counting(self: LevelView, key: object) -> np.ndarray:
        read.append(self.index)
        return original(self, key)

    monkeypatch.setattr(LevelView, "__getitem__", counting)
    with jnrrd.open(src) as vol:
        # level 2 is 32 x 32 x 16: enough for 32 pixels across x (and 16 across z)
        assert vol.preview(32).shape == three_view_size(32, 32, 16)
        assert set(read) == {2}
        read.clear()
        assert vol.preview(32, mip=True).shape == three_view_size(32, 32, 16)
        assert set(read) == {2}
        read.clear()
        # 40 pixels need level 1 (64 voxels): level 2 has only 32
        vol.preview(40)
        assert set(read) == {1}
        read.clear()
        vol.preview(16, level=1)
        assert set(read) == {1}
        with pytest.raises(jnrrd.DataError):  # level 0 really is gone
            vol.preview(200)


def test_virtual_levels_are_not_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "v.jnrrd"
    jnrrd.write(src, phantom((32, 32, 16)), tile=8, levels=3,
                header={"tile:levels_stored": [0, 1]})
    with jnrrd.open(src) as vol:
        assert vol.levels[2].stored is False
        read: list[int] = []
        original = LevelView.__getitem__

        def counting(self: LevelView, key: object) -> np.ndarray:
            read.append(self.index)
            return original(self, key)

        monkeypatch.setattr(LevelView, "__getitem__", counting)
        vol.preview(8)  # level 2 (8 x 8 x 4) would do, but it is computed from level 0
        assert set(read) == {1}


# -- labels, colour, special values, shapes -----------------------------------------------------
def test_labels_get_palette_colours(tmp_path: Path) -> None:
    x, y, z = np.meshgrid(np.arange(32), np.arange(32), np.arange(16), indexing="ij")
    lab = (1 * (x < 16) + 2 * (x >= 16) + 5 * ((y > 20) & (z > 4))).astype(np.uint16)
    lab[:4] = 0
    jnrrd.write(tmp_path / "l.jnrrd", lab, tile=16, levels=2, downsample="mode")
    with jnrrd.open(tmp_path / "l.jnrrd") as vol:
        pic = vol.preview(32)
        grey = vol.preview(32, labels=False)
    allowed = {(0, 0, 0), *(tuple(int(c) for c in PALETTE[v - 1]) for v in (1, 2, 6, 7))}
    assert colours(pic) <= allowed and len(colours(pic)) >= 4
    assert tuple(pic[2, 8]) == tuple(PALETTE[0])  # x = 8, y = 2, z = 8: label 1
    assert tuple(pic[2, 20]) == tuple(PALETTE[1])  # label 2
    assert tuple(pic[2, 1]) == (0, 0, 0)  # label 0
    assert (grey[..., 0] == grey[..., 1]).all()  # forced grey


def test_few_distinct_integers_are_labels_many_are_not(tmp_path: Path) -> None:
    few = np.zeros((16, 16, 16), np.int32)
    few[4:12, 4:12, 4:12] = 3
    many = np.arange(16**3, dtype=np.int32).reshape(16, 16, 16)
    jnrrd.write(tmp_path / "few.jnrrd", few)  # untiled, no mode pyramid
    jnrrd.write(tmp_path / "many.jnrrd", many)
    with jnrrd.open(tmp_path / "few.jnrrd") as a, jnrrd.open(tmp_path / "many.jnrrd") as b:
        assert colours(a.preview(16)) == {(0, 0, 0), tuple(int(c) for c in PALETTE[2])}
        assert len(colours(b.preview(16))) > 20
        assert colours(b.preview(16, labels=True)) <= {(0, 0, 0), *map(tuple, PALETTE.tolist())}


def test_rgb_is_shown_as_colour(tmp_path: Path) -> None:
    img = np.zeros((3, 40, 20), np.uint8)  # kinds: RGB-color, space, space
    img[0, :20] = 255  # left half red
    img[2, 20:] = 200  # right half blue
    img[1, :, 10:] = 100  # lower half green added
    jnrrd.write(tmp_path / "c.jnrrd", img, header={"kinds": ["RGB-color", "space", "space"]},
                tile=[None, 16, 16])
    with jnrrd.open(tmp_path / "c.jnrrd") as vol:
        pic = vol.preview(40)
    assert pic.shape == (20, 40, 3)
    assert tuple(pic[0, 0]) == (255, 0, 0) and tuple(pic[0, 39]) == (0, 0, 200)
    assert tuple(pic[19, 0]) == (255, 100, 0) and tuple(pic[19, 39]) == (0, 100, 200)
    # float RGB: one window for the three components
    jnrrd.write(tmp_path / "f.jnrrd", img.astype(np.float32) / 255,
                header={"kinds": ["RGB-color", "space", "space"]})
    with jnrrd.open(tmp_path / "f.jnrrd") as vol:
        f = vol.preview(40)
    assert tuple(f[0, 0]) == (255, 0, 0) and f[19, 39, 1] < f[19, 39, 2]


def test_channel_axis_shows_its_first_channel(tmp_path: Path) -> None:
    data = np.zeros((2, 16, 16, 8), np.float32)
    data[0, :8] = 1.0   # channel 0: left half bright
    data[1, 8:] = 1.0   # channel 1: right half bright
    jnrrd.write(tmp_path / "v.jnrrd", data, header={"kinds": ["vector", "space", "space",
                                                               "space"]})
    with jnrrd.open(tmp_path / "v.jnrrd") as vol:
        pic = vol.preview(16)
    assert pic.shape == three_view_size(16, 16, 8)
    assert pic[4, 2, 0] == 255 and pic[4, 12, 0] == 0


def test_nan_and_inf_are_handled(tmp_path: Path) -> None:
    data = np.linspace(0, 1, 24 * 24 * 12, dtype=np.float32).reshape(24, 24, 12)
    data[:, :, 6] = np.linspace(0, 1, 24, dtype=np.float32)[:, None]
    data[:6, :, :] = np.nan
    data[20:, :, :] = np.inf
    data[6:8, :, :] = -np.inf
    jnrrd.write(tmp_path / "n.jnrrd", data, tile=8, levels=2)
    with jnrrd.open(tmp_path / "n.jnrrd") as vol:  # warnings are errors in this suite
        pic = vol.preview(24)
        mip = vol.preview(24, mip=True)
    g = pic[..., 0]
    assert g.shape == (24, 24 + 24 + 24 + 2 * GAP)
    assert (g[:, :6] == 0).all()  # NaN: black
    assert (g[:, 20:24] == 255).all()  # +inf: white
    assert (g[:, 6:8] == 0).all()  # -inf: black
    assert len(np.unique(g[:, 8:20])) > 5  # the finite part is windowed, not flattened
    assert len(np.unique(mip[..., 0])) > 5
    allnan = np.full((8, 8, 8), np.nan, np.float64)
    jnrrd.write(tmp_path / "all.jnrrd", allnan)
    with jnrrd.open(tmp_path / "all.jnrrd") as vol:
        assert (vol.preview(8) == 0).all() and (vol.preview(8, mip=True) == 0).all()


def test_two_d_volume_is_one_picture(tmp_path: Path) -> None:
    img = np.add.outer(np.arange(60), np.arange(30)).astype(np.uint16)
    jnrrd.write(tmp_path / "i.jnrrd", img, tile=16, levels=2, header={"spacings": [0.5, 2.0]})
    with jnrrd.open(tmp_path / "i.jnrrd") as vol:
        pic = vol.preview(60)
        assert (vol.preview(60, mip=True) == pic).all()
    # 60 x 0.5 = 30 mm wide, 30 x 2 = 60 mm high: rows are axis 1
    assert pic.shape == (60, 30, 3)
    assert pic[0, 0, 0] < pic[59, 29, 0] and len(colours(pic)) > 20


def test_untiled_nrrd_and_c_order(tmp_path: Path) -> None:
    data = phantom((40, 30, 20))
    jnrrd.write(tmp_path / "t.jnrrd", data, tile=16, levels=2)
    jnrrd.write(tmp_path / "u.jnrrd", data)
    jnrrd.write(tmp_path / "u.nrrd", data)
    jnrrd.write(tmp_path / "g.nrrd", data, encoding="gzip")
    with jnrrd.open(tmp_path / "t.jnrrd") as vol:
        ref = vol.preview(40, level=0)
    for name in ("u.jnrrd", "u.nrrd", "g.nrrd"):
        with jnrrd.open(tmp_path / name) as vol:
            np.testing.assert_array_equal(vol.preview(40), ref, err_msg=name)
    with jnrrd.open(tmp_path / "t.jnrrd", index_order="C") as vol:
        np.testing.assert_array_equal(vol.preview(40, level=0), ref)


def test_a_large_untiled_file_is_sampled_not_read_whole(tmp_path: Path) -> None:
    # 256 x 256 x 256 uint8 (16 MiB) untiled: the views read strided samples of three planes
    path = tmp_path / "big.jnrrd"
    data = np.lib.format.open_memmap(tmp_path / "big.npy", "w+", np.uint8, (256, 256, 256))
    data[:, :, 128] = np.arange(256, dtype=np.uint8)[:, None]
    data.flush()
    jnrrd.write(path, data)
    del data
    (tmp_path / "big.npy").unlink()
    import tracemalloc

    with jnrrd.open(path) as vol:
        vol.preview(8)  # first use: imports and caches, not the picture
        tracemalloc.start()
        pic = vol.preview(64)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert pic.shape == three_view_size(64, 64, 64)
    assert len(colours(pic)) > 10
    assert peak < 1 << 20, peak  # the volume is 16 MiB, three whole planes 192 KiB


def test_one_domain_axis_has_no_picture(tmp_path: Path) -> None:
    jnrrd.write(tmp_path / "line.jnrrd", np.arange(10, dtype=np.float32))
    with jnrrd.open(tmp_path / "line.jnrrd") as vol, pytest.raises(UnsupportedError,
                                                                   match="two domain axes"):
        vol.preview()
    assert main(["preview", str(tmp_path / "line.jnrrd"), "-o", str(tmp_path / "l.png")]) == 1


def test_views_are_the_middle_planes_exactly(tmp_path: Path) -> None:
    # pixels == voxels (size 20 on a 20 x 16 x 12 volume): no resampling, so each view is the
    # palette image of one middle plane, rows = the second axis of the view
    rng = np.random.default_rng(3)
    lab = rng.integers(0, 6, (20, 16, 12), dtype=np.uint8)
    jnrrd.write(tmp_path / "l.jnrrd", lab, tile=8, compression="zstd")
    with jnrrd.open(tmp_path / "l.jnrrd") as vol:
        pic = vol.preview(20)
    assert pic.shape == three_view_size(20, 16, 12)

    def paint(plane: np.ndarray) -> np.ndarray:
        out = PALETTE[(plane.astype(np.intp) - 1) % len(PALETTE)]
        out[plane == 0] = 0
        return out

    np.testing.assert_array_equal(pic[:16, :20], paint(lab[:, :, 6].T))
    np.testing.assert_array_equal(pic[:12, 20 + GAP:40 + GAP], paint(lab[:, 8, :].T))
    np.testing.assert_array_equal(pic[:12, 40 + 2 * GAP:], paint(lab[10, :, :].T))
    assert (pic[12:, 20 + GAP:] == 0).all() and (pic[:, 20:20 + GAP] == 0).all()


def test_mip_in_many_slabs_equals_numpy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jnrrd.preview.render as render

    rng = np.random.default_rng(5)
    lab = rng.integers(0, 12, (24, 20, 30), dtype=np.int16)
    jnrrd.write(tmp_path / "m.jnrrd", lab, tile=[8, 8, 7])  # 7: slabs cut tiles unevenly
    with jnrrd.open(tmp_path / "m.jnrrd") as vol:
        whole = vol.preview(30, mip=True, labels=True)
        monkeypatch.setattr(render, "_SLAB_BYTES", 1)
        monkeypatch.setattr(render, "_SLAB_TILE_BYTES", 1)  # one plane per slab
        assert (vol.preview(30, mip=True, labels=True) == whole).all()
        monkeypatch.setattr(render, "_SLAB_TILE_BYTES", 1 << 30)  # one tile row per slab
        assert (vol.preview(30, mip=True, labels=True) == whole).all()
    expected = [lab.max(axis=2).T, lab.max(axis=1).T, lab.max(axis=0).T]  # no resampling
    views = [whole[:20, :24], whole[:30, 24 + GAP:48 + GAP], whole[:30, 48 + 2 * GAP:]]
    for got, want in zip(views, expected, strict=True):
        painted = PALETTE[(want.astype(np.intp) - 1) % len(PALETTE)]
        painted[want == 0] = 0
        np.testing.assert_array_equal(got, painted)


# -- the real-data set (tests/data, written by pynrrd) ------------------------------------------
DATA = Path(__file__).resolve().parent / "data"


def test_real_nrrd_files_written_by_pynrrd(tmp_path: Path) -> None:
    nrrd = pytest.importorskip("nrrd")
    # RGB: pixels == voxels (16 x 12 at 0.25 mm), so the picture is pynrrd's data, transposed
    rgb, _ = nrrd.read(str(DATA / "rgb.nrrd"))  # (3, 16, 12), axis 0 fastest
    with jnrrd.open(DATA / "rgb.nrrd") as vol:
        np.testing.assert_array_equal(vol.preview(16), np.transpose(rgb, (2, 1, 0)))
    # a Slicer segmentation (list axis of layers): layer 0 in palette colours
    seg, _ = nrrd.read(str(DATA / "seg.seg.nrrd"))
    with jnrrd.open(DATA / "seg.seg.nrrd") as vol:
        pic = vol.preview(64)
    want = {(0, 0, 0), *(tuple(int(c) for c in PALETTE[v - 1]) for v in np.unique(seg[0])
                         if v)}
    assert colours(pic) == want and len(want) >= 3
    # grey scalar volumes, a DWI (list axis: first gradient), vectors, a time series
    for name in ("ct.nrrd", "dwi.nrrd", "vector.nrrd", "series.nrrd", "pair.nhdr"):
        assert main(["preview", str(DATA / name), "-o", str(tmp_path / "p.png"),
                     "--size", "48"]) == 0
        pic = read_png(tmp_path / "p.png")
        assert max(pic.shape[:2]) <= 48 + 2 * 48 + 2 * GAP and len(colours(pic)) > 3, name
        assert (pic[..., 0] == pic[..., 2]).all(), name


def test_an_unwritable_output_names_the_output(tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    jnrrd.write(tmp_path / "v.jnrrd", phantom((16, 16, 8)))
    for out in (tmp_path / "missing" / "x.png", tmp_path):
        assert main(["preview", str(tmp_path / "v.jnrrd"), "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert f"jnrrd: error: {out}: " in err and ".tmp" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.jnrrd"]
