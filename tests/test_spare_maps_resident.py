"""Results of a few MiB on kept maps that stay resident (jnrrd/engine/spare_maps.py): a
result of MIN_OUTPUT (4 MiB) to LAZY_FREE (32 MiB) lies on a map of its own, which is kept as
it is when dropped (no ``MADV_FREE``), apart from the large maps and bounded on its own; the
next region or slice of about its size writes into it without page faults, whatever state
``malloc`` is in. The real thresholds are used here; page faults come from ``getrusage``,
lazily freed bytes from ``/proc/self/smaps``.
"""

from __future__ import annotations

import resource

import numpy as np
import pytest
from spare_maps_support import lazy_free as _lazy_free
from spare_maps_support import lease as _lease

import jnrrd
from jnrrd.engine import spare_maps
from jnrrd.engine.spare_maps import SPARES

MIB = 1 << 20
pytestmark = [
    pytest.mark.skipif(spare_maps._MADV_FREE is None, reason="no MADV_FREE: NumPy's outputs"),
    pytest.mark.usefixtures("fresh_spares")]


@pytest.fixture(scope="module")
def volume(tmp_path_factory):
    """A 256×256×128 uint16 tiled volume (16 MiB) and its data."""
    rng = np.random.default_rng(7)
    data = np.asfortranarray(rng.integers(0, 60000, size=(256, 256, 128), dtype=np.uint16))
    path = tmp_path_factory.mktemp("resident") / "v.jnrrd"
    jnrrd.write(path, data, tile=64, compression="zstd")
    return path, data


def test_the_thresholds():
    assert spare_maps.MIN_OUTPUT == 4 * MIB and spare_maps.LAZY_FREE == 32 * MIB
    assert spare_maps.RESIDENT_BYTES == 64 * MIB and spare_maps.RESIDENT_MAPS == 16


def test_a_region_of_a_few_mib_is_kept_resident_and_reused(volume, monkeypatch):
    path, data = volume
    monkeypatch.setattr(spare_maps, "_HUGEPAGE", None)  # 4 KiB pages: one fault each
    box = (slice(0, 128), slice(0, 256), slice(0, 64))  # 4 MiB
    with jnrrd.open(path, cache_bytes=0) as vol:
        out = vol[box]
        np.testing.assert_array_equal(out, data[box])
        lease = _lease(out)
        assert lease is not None and not out.flags.owndata
        address = out.ctypes.data
        del out, lease
        assert len(SPARES) == 1 and SPARES.resident() == 4 * MIB
        assert _lazy_free(address) == 0  # kept as it was: resident, not lazily freed
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        other = (slice(128, 256), slice(0, 256), slice(64, 128))  # other contents
        again = vol[other]
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        assert again.ctypes.data == address and len(SPARES) == 0
        np.testing.assert_array_equal(again, data[other])  # nothing of the first shows
    # the 1024 pages of the result were written without a fault each
    assert faults < 4 * MIB // 4096 // 4, faults


def test_smaller_results_are_numpys(volume):
    path, data = volume
    with jnrrd.open(path, cache_bytes=0) as vol:
        out = vol[:, :, :31]  # 3.9 MiB
        np.testing.assert_array_equal(out, data[:, :, :31])
        assert _lease(out) is None and out.flags.owndata


def test_resident_maps_are_bounded(monkeypatch):
    monkeypatch.setattr(spare_maps, "RESIDENT_MAPS", 3)
    outs = [spare_maps.empty((5 * MIB,), np.uint8) for _ in range(5)]
    maps = [_lease(o)._map for o in outs]
    for i in range(5):  # dropped in this order
        outs[i] = None
    assert len(SPARES) == 3 and SPARES.resident() == 15 * MIB
    assert [m.closed for m in maps] == [True, True, False, False, False]  # the oldest go
    monkeypatch.setattr(spare_maps, "RESIDENT_BYTES", 12 * MIB)
    big = spare_maps.empty((13 * MIB,), np.uint8)  # over the limit: given back
    kept = _lease(big)._map
    del big
    assert kept.closed and len(SPARES) == 3


def test_resident_and_lazily_freed_maps_do_not_push_each_other_out(monkeypatch):
    monkeypatch.setattr(spare_maps, "LAZY_FREE", 8 * MIB)
    monkeypatch.setattr(spare_maps, "SPARE_MAPS", 1)
    monkeypatch.setattr(spare_maps, "RESIDENT_MAPS", 2)
    large = spare_maps.empty((8 * MIB,), np.uint8)
    large[:] = 1
    large_map = _lease(large)._map
    address = large.ctypes.data
    del large
    assert _lazy_free(address) > 0  # a large one: lazily freed
    small = [spare_maps.empty((4 * MIB,), np.uint8) for _ in range(4)]
    del small
    assert len(SPARES) == 3 and not large_map.closed  # 2 resident + the large one
    SPARES.clear()
    assert len(SPARES) == 0 and large_map.closed


def test_a_fitting_map_of_either_kind_is_taken(monkeypatch):
    """A result takes the smallest kept map of its size to twice that, resident first."""
    monkeypatch.setattr(spare_maps, "LAZY_FREE", 8 * MIB)
    a = spare_maps.empty((9 * MIB,), np.uint8)  # lazily freed when kept
    b = spare_maps.empty((6 * MIB,), np.uint8)  # resident when kept
    map_a, map_b = _lease(a)._map, _lease(b)._map
    del a, b
    c = spare_maps.empty((5 * MIB,), np.uint8)
    assert _lease(c)._map is map_b
    d = spare_maps.empty((5 * MIB,), np.uint8)  # 9 MiB is under twice 5: taken
    assert _lease(d)._map is map_a and len(SPARES) == 0
    e = spare_maps.empty((4 * MIB,), np.uint8)
    assert _lease(e)._map not in (map_a, map_b)
