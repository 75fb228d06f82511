"""store.heldzstd: libzstd called without releasing the GIL, interchangeable with python-zstandard."""

from __future__ import annotations

import subprocess
import sys
import threading

import orjson
import pytest
import zstandard as zstd

from controlplane.podgen import PodGenerator
from store import heldzstd
from store.codec import HELD_BELOW, Codec


@pytest.fixture(scope="module")
def pods() -> list[bytes]:
    gen = PodGenerator(seed=3)
    return [orjson.dumps(gen.pod()) for _ in range(400)]


@pytest.fixture(scope="module")
def dictionary(pods: list[bytes]) -> zstd.ZstdCompressionDict:
    return zstd.train_dictionary(16 * 1024, list[bytes | bytearray | memoryview](pods[:300]), level=1)


def test_libzstd_is_what_runs_here() -> None:
    assert heldzstd.available()  # Debian's libzstd1 is on every machine this runs on


def test_frames_read_both_ways_with_python_zstandard(pods: list[bytes], dictionary: zstd.ZstdCompressionDict) -> None:
    held_c = heldzstd.compressor(dictionary.as_bytes(), 1)
    held_d = heldzstd.decompressor(dictionary.as_bytes())
    theirs_c = zstd.ZstdCompressor(level=1, dict_data=dictionary, write_checksum=False, write_content_size=True,
                                   write_dict_id=False)
    theirs_d = zstd.ZstdDecompressor(dict_data=dictionary)
    for raw in [*pods[300:], b"", b"{}", b"x" * 300_000]:  # larger than the first scratch buffer too
        ours = held_c.compress(raw)
        assert ours == theirs_c.compress(raw)  # the same frame: same library format, same parameters
        assert theirs_d.decompress(ours) == raw
        assert held_d.decompress(theirs_c.compress(raw)) == raw
        params = zstd.get_frame_parameters(ours)
        assert (params.content_size, params.dict_id, params.has_checksum) == (len(raw), 0, False)


def test_garbage_is_a_zstd_error_not_a_crash(dictionary: zstd.ZstdCompressionDict) -> None:
    d = heldzstd.decompressor(dictionary.as_bytes())
    with pytest.raises(zstd.ZstdError):
        d.decompress(b"not a frame at all")
    good = heldzstd.compressor(dictionary.as_bytes(), 1).compress(b'{"kind":"Pod"}' * 50)
    with pytest.raises(zstd.ZstdError):
        d.decompress(good[:-3])  # truncated


def test_one_context_serves_many_threads(pods: list[bytes], dictionary: zstd.ZstdCompressionDict) -> None:
    c = heldzstd.compressor(dictionary.as_bytes(), 1)
    d = heldzstd.decompressor(dictionary.as_bytes())
    frames = [c.compress(p) for p in pods]
    wrong: list[int] = []

    def hammer(offset: int) -> None:
        for k in range(2000):
            i = (k + offset) % len(pods)
            if d.decompress(frames[i]) != pods[i] or c.compress(pods[i]) != frames[i]:
                wrong.append(i)

    threads = [threading.Thread(target=hammer, args=(n * 97,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_without_libzstd_python_zstandard_stands_in(monkeypatch: pytest.MonkeyPatch, pods: list[bytes],
                                                    dictionary: zstd.ZstdCompressionDict) -> None:
    monkeypatch.setattr(heldzstd, "_lib", None)
    assert not heldzstd.available()
    c = heldzstd.compressor(dictionary.as_bytes(), 1)
    d = heldzstd.decompressor(dictionary.as_bytes())
    assert isinstance(c, zstd.ZstdCompressor) and isinstance(d, zstd.ZstdDecompressor)
    assert d.decompress(c.compress(pods[0])) == pods[0]


def test_a_value_larger_than_the_scratch_buffer_is_decompressed_whole(dictionary: zstd.ZstdCompressionDict) -> None:
    big = b'{"data":"' + bytes(range(33, 127)) * 4000 + b'"}'  # 376 KB: past the first 64 KiB buffer
    frame = zstd.ZstdCompressor(level=1, dict_data=dictionary, write_dict_id=False).compress(big)
    d = heldzstd.decompressor(dictionary.as_bytes())
    got: list[bytes] = []
    t = threading.Thread(target=lambda: got.append(d.decompress(frame)))  # a thread with no buffer yet
    t.start()
    t.join()
    assert got == [big]


@pytest.mark.parametrize("batch", [1, HELD_BELOW - 1, HELD_BELOW, 100])
def test_the_codec_frames_a_batch_alike_held_or_in_one_call(pods: list[bytes], dictionary: zstd.ZstdCompressionDict,
                                                            batch: int) -> None:
    """encode_many compresses a small batch held, a value at a time, and a larger one in one
    multi_compress_to_buffer call: the same frames either way, each read back by decode."""
    codec = Codec()
    codec.add_dictionary(7, b"/registry/pods/", dictionary.as_bytes())
    values = pods[300:300 + batch]
    frames = codec.encode_many(7, values)
    assert [codec.decode(f) for f in frames] == values
    one_call = codec._cctx(7).multi_compress_to_buffer(list[bytes | bytearray | memoryview](values), threads=0)
    assert [f[5:] for f in frames] == [one_call[i].tobytes() for i in range(len(values))]


def test_the_library_is_loaded_by_its_soname_without_find_library() -> None:
    """Every process that opens a store imports this module, each store's applier among them:
    on Linux the soname is loaded as is, without ``ctypes.util`` (its imports and its
    ``ldconfig -p``), which is only the fallback."""
    code = ("import sys; from store import heldzstd; "
            "print(heldzstd.available(), heldzstd._lib._name, 'ctypes.util' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "libzstd.so.1", "False"]


def test_where_the_soname_is_not_found_find_library_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heldzstd, "_SONAME", "libzstd-not-here.so.9")
    lib = heldzstd._open()
    assert lib is not None and lib.ZSTD_versionNumber() >= 10400
