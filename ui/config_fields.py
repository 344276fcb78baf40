"""One widget per config field, drawn from the field's declaration (dlguide_core/training/fields.py, issue 23):
its label, its range or choices, the config class's default and its tooltip (ui/field_help.py). The Train
forms (ui/train_form.py for the PyTorch recipes, ui/tensorflow.py) only say which fields they show, and where."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from streamlit.delta_generator import DeltaGenerator

from dlguide_core.training.fields import DEVICE_CHOICES, FieldSpec, spec_of
from ui.field_help import field_help

FLOAT_FORMAT = "%.4f"  # learning rates of 0.001 stay readable


def declared(config_cls: type, name: str) -> FieldSpec:
    """Field `name`'s declaration; a form only draws declared fields."""
    spec = spec_of(config_cls, name)
    if spec is None:
        raise LookupError(f"{config_cls.__name__}.{name} is not declared (training/fields.py)")
    return spec


def default_of(config_cls: type, name: str) -> Any:
    """The config class's default for `name` (a recipe subclass's own, as the small CNN's 2 epochs)."""
    return next(f.default for f in dataclasses.fields(config_cls) if f.name == name)


def offered_choices(config_cls: type, name: str) -> dict[str, Any] | None:
    """The words a form offers for `name`, each mapped to the config value it stands for: the CLI flag's own
    words when it has them (amp dtype: bf16 -> bfloat16), else the field's choices, the device rule's for the
    device; None for a field without choices."""
    spec = declared(config_cls, name)
    if spec.flag is not None and spec.flag.choices is not None:
        values = spec.flag.values or {}
        return {word: values.get(word, word) for word in spec.flag.choices}
    words = spec.choices or (DEVICE_CHOICES if name == "device" else None)
    return None if words is None else {word: word for word in words}


def number_range(config_cls: type, name: str, low: float | None = None,
                 high: float | None = None) -> tuple[float, float]:
    """The (min, max) a number input offers: the declared range, `low` raising its lower end (an architecture's
    smallest image size) and `high` lowering its upper end (the devices this machine has); an optional field
    starts at 0, which stands for None (no limit). An open end is drawn just inside it (the next float, or the
    next whole number), so every value offered is one the config accepts. Ints for a whole-number field."""
    spec = declared(config_cls, name)
    if spec.low is None or spec.high is None:
        raise LookupError(f"{config_cls.__name__}.{name} has no declared range")
    start = 0 if spec.optional else spec.low if low is None else max(spec.low, low)
    if spec.low_open and not spec.optional and start == spec.low:
        start = _inside(spec.low, spec.high, spec.whole)
    end = _inside(spec.high, spec.low, spec.whole) if spec.high_open else spec.high
    cast = int if spec.whole else float
    return cast(start), cast(end if high is None else min(end, high))


def _inside(end: float, toward: float, whole: bool) -> float:
    """The first value past an open `end`, going toward `toward`."""
    if whole:
        return end + (1 if toward > end else -1)
    return math.nextafter(end, toward)


def field_input(column: DeltaGenerator, config_cls: type, name: str, key: str, *,
                options: Sequence[str] | None = None, low: float | None = None, high: float | None = None,
                disabled: bool = False, label: str | None = None, placeholder: str | None = None,
                default: Any = None) -> Any:
    """Field `name`'s widget in `column`, and the config value it holds: a selectbox over its choices (or the
    form's `options`: the weights found), a checkbox for a switch, a text input for text, else a number input
    over `number_range` (an optional field's 0 is None; a default below a raised low end starts there).
    `label` adds to the declared label what only the page knows (the kind of device this machine has)."""
    spec, tip = declared(config_cls, name), field_help(name)
    default = default_of(config_cls, name) if default is None else default  # the page's, when it knows better
    label = label or spec.form_title()
    choices = {o: o for o in options} if options is not None else offered_choices(config_cls, name)
    if choices is not None:
        words = list(choices)
        index = next((i for i, word in enumerate(words) if choices[word] == default), 0)
        return choices[column.selectbox(label, words, index=index, key=key, help=tip, disabled=disabled)]
    if isinstance(default, bool):
        return column.checkbox(label, default, key=key, help=tip, disabled=disabled)
    if isinstance(default, str):
        return column.text_input(label, default, key=key, help=tip, disabled=disabled, placeholder=placeholder)
    start, end = number_range(config_cls, name, low, high)
    cast = type(start)
    value = column.number_input(label, start, end, cast(max(start, 0 if default is None else default)), key=key,
                                help=tip,
                                format=FLOAT_FORMAT if cast is float else None, disabled=disabled)
    return None if spec.optional and value == 0 else value
