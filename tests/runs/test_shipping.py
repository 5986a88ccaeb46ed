"""What a run ships is checked before a byte moves: CRLF shell scripts are refused by name (or converted
when the run says so), and the tarball is within SOURCE_MAX_BYTES."""

import io
import tarfile

import pytest

from runs.models import Run, SourceKind
from runs.shipping import source_tarball
from runs.sources import SourceError


def run_of(source, **fields) -> Run:
    return Run(source_kind=SourceKind.LOCAL_DIR, source_path=str(source), config_path="config.yaml", **fields)


def member(tarball: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(tarball)) as archive:
        return archive.extractfile(name).read()


@pytest.fixture
def crlf_source(source):
    (source / "scripts").mkdir()
    (source / "scripts" / "prepare.sh").write_bytes(b"#!/bin/bash\r\nset -e\r\necho ready\r\n")
    return source


def test_a_crlf_shell_script_is_refused_by_name(crlf_source):
    with pytest.raises(SourceError, match=r"scripts/prepare\.sh has Windows \(CRLF\) line endings"):
        source_tarball(run_of(crlf_source))


def test_a_crlf_shebang_without_sh_is_refused_too(source):
    (source / "launch").write_bytes(b"#!/bin/sh\r\nexec python3 train.py\r\n")
    with pytest.raises(SourceError, match="launch has Windows"):
        source_tarball(run_of(source))


def test_the_run_may_ask_for_its_scripts_converted(crlf_source):
    tarball, _ = source_tarball(run_of(crlf_source, convert_crlf=True))
    assert member(tarball, "scripts/prepare.sh") == b"#!/bin/bash\nset -e\necho ready\n"
    assert member(tarball, "train.py") == (crlf_source / "train.py").read_bytes()  # nothing else touched


def test_a_python_file_with_crlf_is_left_alone(source):
    (source / "helper.py").write_bytes(b"x = 1\r\n")
    tarball, _ = source_tarball(run_of(source))
    assert member(tarball, "helper.py") == b"x = 1\r\n"


def test_the_shipped_tree_is_budgeted(source, settings):
    (source / "weights.bin").write_bytes(b"\0" * 300_000)
    settings.SOURCE_MAX_BYTES = 200_000
    with pytest.raises(SourceError, match=r"over the 0.2 MiB a source may be .*register datasets"):
        source_tarball(run_of(source))
