"""Content codings: streaming, linear however many members, bounded by the size cap and the deadline."""

from __future__ import annotations

import gzip
import random
import time
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pytest_django.fixtures import Settings

from fetch.errors import FetchError
from fetch.wire import decoding
from fetch.wire.deadline import Deadline

CAP = 20 * 2**20
ONE_BYTE_MEMBER = gzip.compress(b"a", mtime=0)  # 21 bytes
EMPTY_MEMBER = gzip.compress(b"", mtime=0)  # 20 bytes, the smallest gzip member


@pytest.fixture(autouse=True)
def cap(settings: Settings) -> int:
    settings.SIFT_FETCH_MAX_BYTES = CAP
    return CAP


def many_members(size: int, member: bytes = ONE_BYTE_MEMBER) -> bytes:
    return member * (size // len(member))


class ZlibWork:
    """Counts the bytes zlib is handed and hands back, through every decompressor made."""

    def __init__(self) -> None:
        self.bytes = 0
        self.decoders = 0
        self.largest_input = 0


@pytest.fixture
def zlib_work(monkeypatch: pytest.MonkeyPatch) -> ZlibWork:
    work = ZlibWork()
    real = zlib.decompressobj

    class Counted:
        def __init__(self, wbits: int) -> None:
            self._inner = real(wbits)
            work.decoders += 1

        def decompress(self, data: Any, max_length: int = 0) -> bytes:
            out = self._inner.decompress(data, max_length)
            work.largest_input = max(work.largest_input, len(data))
            # what went in, and the copies zlib makes of what it did not use
            work.bytes += len(data) + len(self._inner.unused_data) + len(self._inner.unconsumed_tail)
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    monkeypatch.setattr(zlib, "decompressobj", Counted)
    return work


# Linear however many members ------------------------------------------------------------------


@pytest.mark.parametrize("mib", [1, 4, 16])
def test_a_body_of_many_tiny_gzip_members_is_decoded_with_work_linear_in_its_size(
    zlib_work: ZlibWork, mib: int
) -> None:
    body = many_members(mib * 2**20)
    members = len(body) // len(ONE_BYTE_MEMBER)

    assert decoding.decode(body, ["gzip"], CAP) == b"a" * members
    assert zlib_work.decoders == members
    # Feeding each member the whole rest of the body (the quadratic way) would hand zlib about
    # members * size / 2 bytes: 27 GB for 1 MiB. Linear work stays a small multiple of the size.
    assert zlib_work.bytes < 32 * len(body)


def test_one_large_member_is_fed_in_bounded_windows(zlib_work: ZlibWork) -> None:
    text = random.Random(7).randbytes(2**20) * 8  # 8 MiB; each MiB barely compresses
    body = gzip.compress(text, compresslevel=1)

    assert decoding.decode(body, ["gzip"], CAP) == text
    assert zlib_work.decoders == 1
    assert zlib_work.largest_input == decoding.MAX_WINDOW
    assert zlib_work.bytes <= len(body) + decoding.MAX_WINDOW


@hypothesis_settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.one_of(st.binary(max_size=64), st.binary(min_size=1, max_size=8).map(lambda b: b * 20_000)),
        min_size=1,
        max_size=12,
    ),
    wbits=st.sampled_from([("gzip", 31), ("deflate", 15)]),
)
def test_members_of_any_size_decode_to_their_concatenation(
    parts: list[bytes], wbits: tuple[str, int]
) -> None:
    coding, bits = wbits
    body = b""
    for part in parts:
        packer = zlib.compressobj(wbits=bits)
        body += packer.compress(part) + packer.flush()

    assert decoding.decode(body, [coding], CAP) == b"".join(parts)


# Today's semantics, kept ----------------------------------------------------------------------


def test_bytes_after_a_complete_member_are_ignored_as_browsers_do() -> None:
    body = gzip.compress(b"whole", mtime=0) + b"\x00\x00trailing garbage" * 1000

    assert decoding.decode(body, ["gzip"], CAP) == b"whole"


def test_a_truncated_stream_keeps_what_arrived() -> None:
    text = b"The tide comes in. " * 5000
    body = gzip.compress(text, mtime=0)

    decoded = decoding.decode(body[: len(body) // 2], ["gzip"], CAP)

    assert decoded
    assert text.startswith(decoded)


def test_a_damaged_first_member_is_upstream_5xx_even_past_the_first_window() -> None:
    body = bytearray(gzip.compress(random.Random(7).randbytes(300_000), compresslevel=1, mtime=0))
    body[decoding.MAX_WINDOW * 2] ^= 0xFF  # found by the CRC at the end of the member

    with pytest.raises(FetchError) as caught:
        decoding.decode(bytes(body), ["gzip"], CAP)

    assert caught.value.outcome == "upstream_5xx"


def test_raw_deflate_is_tried_when_zlib_wrapping_is_missing() -> None:
    packer = zlib.compressobj(wbits=-15)
    body = packer.compress(b"raw deflate " * 10_000) + packer.flush()

    assert decoding.decode(body, ["deflate"], CAP) == b"raw deflate " * 10_000


def test_many_members_that_together_pass_the_cap_are_too_long(settings: Settings) -> None:
    settings.SIFT_FETCH_MAX_BYTES = 1000
    body = many_members(30_000)  # about 1,400 members of one byte each

    with pytest.raises(FetchError) as caught:
        decoding.decode(body, ["gzip"], 1000)

    assert caught.value.outcome == "too_long"


# The deadline bounds the CPU work ---------------------------------------------------------------


def test_a_decompression_that_outlasts_the_deadline_ends_with_timeout() -> None:
    body = many_members(CAP, EMPTY_MEMBER)  # a million members: seconds of work on any machine
    deadline = Deadline(0.5)
    started = time.monotonic()

    with pytest.raises(FetchError) as caught:
        decoding.decode(body, ["gzip"], CAP, deadline)

    assert caught.value.outcome == "timeout"
    assert time.monotonic() - started < 0.5 + 1.0
