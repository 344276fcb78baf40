"""A dataset's class ids in people's words (tiny-imagenet's words.txt: WordNet ids to names). Torch-free, so
`jobs show` can name the classes without importing what the datasets need."""

from __future__ import annotations

from pathlib import Path


def readable_names(root: Path, classes: tuple[str, ...]) -> tuple[str, ...]:
    """tiny-imagenet's words.txt (`wnid<TAB>synonyms, ...`): the first synonym per class id, else the id."""
    words = Path(root) / "words.txt"
    if not words.is_file():
        return classes
    names: dict[str, str] = {}
    for line in words.read_text(errors="replace").splitlines():
        wnid, _, synonyms = line.partition("\t")
        if wnid in classes and synonyms.strip():
            names[wnid] = synonyms.split(",")[0].strip()
    return tuple(names.get(c, c) for c in classes)
