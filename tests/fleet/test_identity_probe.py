"""The run's interpreter reporting itself (the wrapper's IDENTITY_SCRIPT), run by real interpreters: torch
is imported, at a second of CPU, only where CUDA must be asked; otherwise its installed version file is read."""

import json
import subprocess
import sys

from tests.runs.conftest import load_wrapper

WRAPPER = load_wrapper()
PROBE = WRAPPER.IDENTITY_SCRIPT + "print(json.dumps({'torch_imported': 'torch' in sys.modules}))\n"


def probe(python: str, *args: str, path: str = "") -> tuple[dict, bool]:
    env = {"PYTHONPATH": path} if path else {}
    done = subprocess.run([python, "-c", PROBE, *args], capture_output=True, text=True, timeout=120, env=env)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2, done.stdout + done.stderr
    return json.loads(lines[0]), json.loads(lines[1])["torch_imported"]


def test_a_run_with_no_gpus_gets_torchs_own_version_and_cuda_build_without_importing_it():
    import torch

    info, imported = probe(sys.executable)
    assert not imported
    assert info["torch"] == torch.__version__ and info["cuda"] == torch.version.cuda
    assert "cuda_available" not in info and info["cuda_checked"] is False  # not asked, so not claimed either way


def test_a_run_with_gpus_imports_torch_and_asks_cuda():
    import torch

    info, imported = probe(sys.executable, "--cuda")
    assert imported
    assert info["torch"] == torch.__version__ and info["cuda_available"] is torch.cuda.is_available()
    assert info["cuda_device_count"] == len(info["gpu_names"])


def test_an_interpreter_without_torch_says_so_either_way():
    for args in ((), ("--cuda",)):
        info, imported = probe("/usr/bin/python3", *args)
        assert info["torch"] is None and info["torch_error"] == "ModuleNotFoundError" and not imported


def test_a_torch_laid_out_without_a_version_file_is_imported_instead(tmp_path):
    """A box's own build of torch (no torch/version.py): the light read fails, the import answers."""
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(
        "__version__ = '9.9.9+box'\n"
        "class version:\n    cuda = '12.1'\n"
        "class cuda:\n    is_available = staticmethod(lambda: False)\n"
    )
    info, imported = probe("/usr/bin/python3", path=str(tmp_path))
    assert imported and info["torch"] == "9.9.9+box" and info["cuda"] == "12.1" and info["cuda_available"] is False
