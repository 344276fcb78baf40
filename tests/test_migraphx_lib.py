"""Finding MIGraphX where users have it, and the reasons shown when it is not there. No real library needed
(tests/inference/test_backend_migraphx.py covers the real one); the Dockerfile's install steps are checked here too."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from dlguide_core import devices, migraphx_lib
from dlguide_core.inference import backend_base
from dlguide_core.inference.backend_base import BackendOptions
from dlguide_core.inference.backend_migraphx import MigraphxBackend
from dlguide_core.inference.choice import precision_refusals
from dlguide_core.inference.registry import backend_label
from tests.support.paths import ROOT


@pytest.fixture
def no_migraphx(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Not importable, MIGRAPHX_PYTHONPATH an empty folder, ROCM_PATH a folder without lib/migraphx*."""
    monkeypatch.setitem(sys.modules, "migraphx", None)
    (tmp_path / "named").mkdir()
    (tmp_path / "rocm" / "lib").mkdir(parents=True)
    monkeypatch.setenv("MIGRAPHX_PYTHONPATH", str(tmp_path / "named"))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    return tmp_path


def test_not_installed_lists_every_place_tried_in_order(no_migraphx: Path):
    ok, reason = migraphx_lib.status()
    assert not ok and reason.startswith("module migraphx not installed: not importable; ")
    named, rocm = reason.index(str(no_migraphx / "named")), reason.index(str(no_migraphx / "rocm" / "lib"))
    assert named < rocm and "MIGRAPHX_PYTHONPATH" in reason and "$ROCM_PATH/lib" in reason
    assert "\n" not in reason
    assert devices.migraphx_status() == (False, reason)  # what the Devices page and `devices --json` show
    status = MigraphxBackend.availability()
    assert not status.available and status.reason == reason


def test_rocm_path_defaults_to_opt_rocm(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.delenv("MIGRAPHX_PYTHONPATH", raising=False)
    expected = [("MIGRAPHX_PYTHONPATH", None), ("$ROCM_PATH/lib", Path("/opt/rocm/lib"))]
    assert migraphx_lib.fallback_folders() == expected


def test_a_module_that_fails_to_load_is_reported_as_unusable(no_migraphx: Path):
    (no_migraphx / "named" / "migraphx.cpython-311-x86_64-linux-gnu.so").write_bytes(b"not an ELF file")
    ok, reason = migraphx_lib.status()
    assert not ok and reason.startswith("module migraphx found but unusable")
    assert "(MIGRAPHX_PYTHONPATH) failed to load" in reason and "\n" not in reason


def test_a_python_module_in_migraphx_pythonpath_is_loaded_from_there(no_migraphx: Path):
    (no_migraphx / "named" / "migraphx.py").write_text("__version__ = 'test-9.9'\n")
    module, found = migraphx_lib.load()
    assert (found.how, found.version) == ("MIGRAPHX_PYTHONPATH", "test-9.9")
    assert sys.modules["migraphx"] is module  # later `import migraphx` gets the same module
    assert migraphx_lib.status() == (True, f"migraphx test-9.9 from {no_migraphx / 'named' / 'migraphx.py'} "
                                           "(MIGRAPHX_PYTHONPATH)")


def test_rocm_path_lib_is_tried_after_migraphx_pythonpath(no_migraphx: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MIGRAPHX_PYTHONPATH")
    (no_migraphx / "rocm" / "lib" / "migraphx.py").write_text("__version__ = 'rocm-1'\n")
    _module, found = migraphx_lib.load()
    assert found.how == "$ROCM_PATH/lib" and found.path.endswith("rocm/lib/migraphx.py")


def test_missing_migraphx_makes_every_precision_refused_in_one_line(no_migraphx: Path):
    refusals = precision_refusals("migraphx", "cpu")
    assert set(refusals) == {"fp16", "bf16", "int8"}
    assert all(r.startswith("module migraphx not installed") and "\n" not in r for r in refusals.values())


def test_labels_name_the_target():
    assert backend_label("migraphx", "migraphx:cpu") == "MIGraphX (CPU)"
    assert backend_label("migraphx", "migraphx:gpu int8") == "MIGraphX (GPU)"
    assert backend_label("onnxruntime", "CPUExecutionProvider") == "ONNX Runtime"


def test_auto_target_is_cpu_without_an_amd_gpu(monkeypatch: pytest.MonkeyPatch, no_migraphx: Path):
    monkeypatch.setattr(backend_base, "amd_gpu_visible", lambda: False)
    assert MigraphxBackend(BackendOptions()).target == "cpu" and MigraphxBackend(BackendOptions()).label == \
        "MIGraphX (CPU)"
    monkeypatch.setattr(backend_base, "amd_gpu_visible", lambda: True)
    assert MigraphxBackend(BackendOptions()).target == "gpu"


def test_write_pth_names_the_folder_or_a_repaired_copy(tmp_path: Path):
    """`make install`'s step: a .pth in the venv; a copy whose library links became small files gets a
    folder of real symlinks instead (the loader otherwise reads "file too short")."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libx.so.1.0").write_bytes(b"\x7fELF" + b"\0" * 400)
    (lib / "libx.so.1").write_text("libx.so.1.0")  # a flattened symlink
    (lib / "migraphx.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF" + b"\0" * 400)
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    pth = migraphx_lib.write_pth(lib, venv)
    folder = Path(pth.read_text().strip())
    assert pth.parent.name == "site-packages" and folder == venv.resolve() / "migraphx-lib"
    assert (folder / "libx.so.1").is_symlink() and (folder / "libx.so.1").resolve() == (lib / "libx.so.1.0")
    assert (folder / "migraphx.cpython-311-x86_64-linux-gnu.so").resolve() == lib / "migraphx.cpython-311-x86_64-" \
        "linux-gnu.so"
    (lib / "libx.so.1").unlink()
    (lib / "libx.so.1").symlink_to("libx.so.1.0")  # a faithful copy: named as it is
    assert Path(migraphx_lib.write_pth(lib, venv).read_text().strip()) == lib.resolve()


def test_makefile_install_writes_the_pth_only_when_the_shared_build_exists():
    text = (ROOT / "Makefile").read_text()
    assert "MIGRAPHX_SHARED ?= ../shared/migraphx" in text
    recipe = text[text.index("$(STAMP):"):text.index("touch $(STAMP)")]
    assert "if [ -d $(MIGRAPHX_SHARED)/lib ]; then $(PY) -m dlguide_core.migraphx_lib $(MIGRAPHX_SHARED)/lib " \
           "$(VENV); fi" in recipe


# ---------------------------------------------------------------- the image (no Docker engine here: parse it)


def _dockerfile_steps() -> list[str]:
    """Instructions with their continuation lines joined, comments dropped."""
    lines = [line for line in (ROOT / "Dockerfile").read_text().splitlines() if not line.lstrip().startswith("#")]
    return [step.strip() for step in re.sub(r"\\\n\s*", " ", "\n".join(lines)).splitlines() if step.strip()]


def test_dockerfile_installs_migraphx_and_onnxruntime_rocm_in_one_step():
    every = _dockerfile_steps()
    froms = [i for i, step in enumerate(every) if step.startswith("FROM ")]
    # the rocm stage is the last (the default target; issue 42 put a `cpu` stage before it)
    assert every[froms[-1]].startswith("FROM rocm/pytorch:") and every[froms[-1]].endswith(" AS rocm")
    steps = every[froms[-1]:]
    installs = [s for s in steps if s.startswith("RUN") and "migraphx" in s]
    assert len(installs) == 1, "the MIGraphX / ONNX Runtime install lives in one RUN step"
    run = installs[0]
    apt = re.search(r"apt-get install -y [^&]*", run).group(0).split()
    assert {"migraphx", "migraphx-dev", "half"} <= set(apt)
    assert run.index("apt-get update") < run.index("apt-get install")
    # the app's requirements without the CPU wheel, then ORT's ROCm build from AMD's index, then a check
    assert "grep -v '^onnxruntime' requirements.txt" in run
    assert re.search(r'pip install --no-cache-dir onnxruntime-rocm -f "\$ROCM_WHEELS"', run)
    assert run.index("pip uninstall -y onnxruntime") < run.index("onnxruntime-rocm")
    assert "'MIGraphXExecutionProvider' in o.get_available_providers()" in run and "import migraphx" in run
    args = dict(s.split(None, 1)[1].split("=", 1) for s in steps if s.startswith("ARG"))
    assert re.fullmatch(r"https://repo\.radeon\.com/rocm/manylinux/rocm-rel-6\.4(\.\d)?/", args["ROCM_WHEELS"])
    env = " ".join(s for s in steps if s.startswith("ENV"))
    assert "PYTHONPATH=/opt/rocm/lib" in env and "ROCM_PATH=/opt/rocm" in env
    assert not any(re.search(r"pip install[^&]*-r requirements\.txt", s) for s in steps), "CPU onnxruntime wheel"


def test_readme_documents_the_rocm_check():
    text = (ROOT / "README.md").read_text()
    # the installed command (issue 42) or the module: the same CLI
    assert ("dlguide devices --json" in text or "python -m dlguide_core devices --json" in text)
    assert '"migraphx": true' in text


_TF_THEN_MIGRAPHX = """
import json, sys
{first}
from dlguide_core import migraphx_lib
print(json.dumps(migraphx_lib.status()))
"""


THROUGH_OUR_RUNTIME = "from dlguide_core.tf.runtime import import_tensorflow; import_tensorflow('cpu')"


@pytest.mark.slow
@pytest.mark.parametrize("first", ["import tensorflow", THROUGH_OUR_RUNTIME])
def test_migraphx_after_tensorflow_refuses_or_loads_first_instead_of_aborting(first: str) -> None:
    """MIGraphX loaded after TensorFlow aborts the process (clashing protobuf registrations). A plain
    `import tensorflow` first: status says so in one line; TensorFlow through our runtime: MIGraphX loaded first."""
    import importlib.util
    import json
    import subprocess

    if importlib.util.find_spec("tensorflow") is None or not migraphx_lib.status()[0]:
        pytest.skip("needs TensorFlow and a loadable MIGraphX (`make install` with ../shared/migraphx)")
    done = subprocess.run([sys.executable, "-c", _TF_THEN_MIGRAPHX.format(first=first)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:]  # -6 (SIGABRT) before the fix
    usable, reason = json.loads(done.stdout.strip().splitlines()[-1])
    if first == "import tensorflow":
        assert not usable and "restart" in reason and "TensorFlow" in reason and "\n" not in reason
    else:
        assert usable, reason
