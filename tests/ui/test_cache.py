"""The app's model cache (ui/cache.py): a checkpoint rewritten at the same path is reloaded (issue 10)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.compiled_helpers import write_cifar_checkpoint


def test_a_checkpoint_rewritten_at_the_same_path_is_not_served_stale(tmp_path: Path) -> None:
    from ui.cache import cached_model, get_model

    cached_model.clear()
    path = tmp_path / "checkpoint.pt"
    write_cifar_checkpoint(path, seed=0)
    first = get_model(str(path))
    assert get_model(str(path)) is first  # cached: a plain rerun does not reload

    before = path.stat()
    write_cifar_checkpoint(path, seed=1)  # a resume's later save: same path, same size, new weights
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # even within one mtime tick
    assert path.stat().st_size == before.st_size
    second = get_model(str(path))
    assert second is not first
    assert second.fingerprint != first.fingerprint
    cached_model.clear()
