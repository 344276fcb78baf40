"""ui/evaluation.py figures: classes in the dataset's words, the class id in the tooltip (issue 24 point 7)."""

from __future__ import annotations

from ui.evaluation import confusion_figure, per_class_figure

RESULT = {"confusion": {"classes": ["n01443537", "n07749582"], "labels": ["goldfish", "lemon"],
                        "matrix": [[3, 1], [0, 4]]}}


def test_the_confusion_matrix_and_per_class_bars_show_words_with_ids_in_the_tooltip() -> None:
    heat = confusion_figure(RESULT).data[0]
    assert list(heat.x) == ["goldfish", "lemon"] and list(heat.y) == ["goldfish", "lemon"]  # worst class first
    assert [list(cell) for cell in heat.customdata[0]] == [[3, "n01443537", "n01443537"], [1, "n01443537", "n07749582"]]
    assert "%{customdata[1]}" in heat.hovertemplate and "%{customdata[2]}" in heat.hovertemplate
    bars = per_class_figure(RESULT).data[0]
    assert list(bars.x) == ["goldfish", "lemon"] and list(bars.customdata) == ["n01443537", "n07749582"]
