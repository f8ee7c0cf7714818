"""ldptext.fileio: the one atomic-write path (bundles, ledger, trust store). A failure at any step
leaves the old file intact and no temporary behind; success replaces the file whole."""
from __future__ import annotations

import os
import stat

import pytest

from ldptext.fileio import atomic_path, temporary_pattern, write_bytes_atomic

STEPS = ("tmp-written", "tmp-synced", "renamed", "dir-synced")


class Boom(Exception):
    pass


def test_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    seen = []
    write_bytes_atomic(target, b"new content", checkpoint=seen.append)
    assert target.read_bytes() == b"new content"
    assert seen == list(STEPS)
    assert list(tmp_path.glob(temporary_pattern(target))) == []


@pytest.mark.parametrize("fail_at", STEPS[:2])
def test_failure_before_the_rename_keeps_the_old_file(tmp_path, fail_at):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def checkpoint(step: str) -> None:
        if step == fail_at:
            raise Boom

    with pytest.raises(Boom):
        write_bytes_atomic(target, b"new", checkpoint=checkpoint)
    assert target.read_bytes() == b"old"
    assert list(tmp_path.glob(temporary_pattern(target))) == []


def test_failure_inside_the_body_keeps_the_old_file(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    with pytest.raises(Boom):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise Boom
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_mode_is_applied_and_defaults_to_private(tmp_path):
    write_bytes_atomic(tmp_path / "pub", b"x", mode=0o644)
    write_bytes_atomic(tmp_path / "priv", b"x")
    assert stat.S_IMODE(os.stat(tmp_path / "pub").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "priv").st_mode) == 0o600


def test_a_reader_sees_old_or_new_never_partial(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"A" * 1000)
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"B" * 1000)
        assert target.read_bytes() == b"A" * 1000  # not yet visible
    assert target.read_bytes() == b"B" * 1000


def test_file_sha256_matches_hashlib_across_block_boundaries(tmp_path):
    import hashlib

    from ldptext.fileio import file_sha256

    data = bytes(range(256)) * ((3 << 20) // 256 + 7)  # 3 MiB and a partial block
    f = tmp_path / "blob.bin"
    f.write_bytes(data)
    assert file_sha256(f) == hashlib.sha256(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert file_sha256(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()
