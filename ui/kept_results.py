"""The Classify page's latest result, kept for the session and keyed by its input, so that a rerun with the same
input (a download click, a tab switch, any widget) reuses it instead of classifying again: the downloaded file is
then the result on screen (its latency_ms included), and a click never holds the forward slot again (issue 31:
the CSV said 2368 ms where the screen said 872). One result per session: a new input replaces it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import streamlit as st

from dlguide_core.vision.classify import ImageResult
from dlguide_core.vision.result_files import RunInfo

STATE_KEY = "classify_kept_result"  # not a widget key


@dataclass(frozen=True)
class ClassifyInput:
    """What a classification depends on: the images (digest of their names and bytes), the weights (by their
    fingerprint), the backend, its precision and the number of classes shown."""

    images: str
    weights: str
    fingerprint: str
    backend: str
    precision: str
    top_k: int


@dataclass(frozen=True)
class KeptResult:
    input: ClassifyInput
    results: tuple[ImageResult, ...]
    run: RunInfo
    fresh: bool  # computed in this run (False: reused from an earlier run)


def images_digest(sources: Sequence[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in sources:
        digest.update(hashlib.sha256(name.encode()).digest() + hashlib.sha256(data).digest())
    return digest.hexdigest()


def classified_once(key: ClassifyInput, classify: Callable[[], tuple[list[ImageResult], RunInfo]]) -> KeptResult:
    """The session's result for `key`: the one kept when the input is the same, else `classify()`'s, kept."""
    kept = st.session_state.get(STATE_KEY)
    if isinstance(kept, KeptResult) and kept.input == key:
        return KeptResult(kept.input, kept.results, kept.run, fresh=False)
    results, run = classify()
    kept = KeptResult(key, tuple(results), run, fresh=True)
    st.session_state[STATE_KEY] = kept
    return kept
