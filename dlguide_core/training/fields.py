"""Config fields declared once (issue 23): what a field is called in messages, its range or choices and how
the CLI offers it live in the field's own dataclass metadata, and one validation (`check_fields`) with one
device rule (`device_problem`) serves every config family: the PyTorch recipes, the TensorFlow recipes and
`evaluate`. The CLI flags (cli/common.add_field_flag) and the Train forms (ui/config_fields.py) read the same
metadata.

Nothing here imports torch or TensorFlow.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dlguide_core.errors import DlguideError

DEVICE_CHOICES = ("auto", "cpu", "cuda")  # and cuda:N, GPU N (the one device rule: device_problem)
SPEC = "dlguide"  # the metadata key of a field's FieldSpec
MAX_STEPS = 10**9  # the most steps any recipe's max_steps may name


class ConfigError(DlguideError, ValueError):
    """A recipe field with a value the recipe cannot use."""


@dataclass(frozen=True)
class Flag:
    """How the CLI offers a field: `--name-with-dashes`, its metavar and help; `choices` when the flag takes
    other words than the config holds, `values` mapping each flag word to the config's value."""

    metavar: str | None = None
    help: str | None = None
    choices: tuple[str, ...] | None = None
    values: Mapping[str, str] | None = None


@dataclass(frozen=True)
class FieldSpec:
    """A field's declaration: what messages call it, its range (`low`/`high`, either end open) or choices;
    `form_label` when the Train form's label is not the message label capitalised."""

    label: str
    low: float | None = None
    high: float | None = None
    whole: bool = False
    low_open: bool = False
    high_open: bool = False
    optional: bool = False  # None is a value (no limit)
    choices: tuple[str, ...] | None = None
    flag: Flag | None = None
    form_label: str | None = None

    def form_title(self) -> str:
        """The Train form's label: `form_label`, else the label capitalised ("batch size" -> "Batch size"), an
        optional field saying that 0 stands for None ("Max steps (0 = no limit)")."""
        title = self.form_label or self.label.capitalize()
        return f"{title} (0 = no limit)" if self.optional and self.form_label is None else title

    def span(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"

    def problem(self, value: Any) -> str | None:
        """Why `value` cannot be this field's, or None."""
        if value is None and self.optional:
            return None
        if self.choices is not None:
            return None if value in self.choices else f"{self.label} must be one of {', '.join(self.choices)}"
        if self.low is None or self.high is None:
            return None
        ok_type = isinstance(value, int) if self.whole else isinstance(value, (int, float))
        ok = ok_type and not isinstance(value, bool) and math.isfinite(value) and (
            self.low < value if self.low_open else self.low <= value) and (
            value < self.high if self.high_open else value <= self.high)
        if ok:
            return None
        return f"{self.label} must be {'a whole number' if self.whole else 'a number'} in {self.span()}, not {value!r}"


def whole(default: int | None, label: str, low: int, high: int, *, flag: Flag | None = None,
          form_label: str | None = None) -> Any:
    """A whole-number field in [low, high] (None allowed when it is the default: no limit)."""
    spec = FieldSpec(label, low, high, whole=True, optional=default is None, flag=flag, form_label=form_label)
    return dataclasses.field(default=default, metadata={SPEC: spec})


def number(default: float, label: str, low: float, high: float, *, low_open: bool = False, high_open: bool = False,
           flag: Flag | None = None) -> Any:
    """A finite number field between low and high (either end excluded when open)."""
    spec = FieldSpec(label, low, high, low_open=low_open, high_open=high_open, flag=flag)
    return dataclasses.field(default=default, metadata={SPEC: spec})


def choice(default: str, label: str, choices: tuple[str, ...], *, flag: Flag | None = None,
           form_label: str | None = None) -> Any:
    """A field that holds one of `choices`."""
    spec = FieldSpec(label, choices=choices, flag=flag, form_label=form_label)
    return dataclasses.field(default=default, metadata={SPEC: spec})


def device_field(default: str = "auto", *, flag: Flag | None = None) -> Any:
    """The device field of every config family (checked by device_problem)."""
    return dataclasses.field(default=default, metadata={SPEC: FieldSpec("device", flag=flag)})


def plain(default: Any, label: str, *, flag: Flag | None = None, form_label: str | None = None) -> Any:
    """A field its config checks itself (text, switches), declared for its label and flag."""
    return dataclasses.field(default=default, metadata={SPEC: FieldSpec(label, flag=flag, form_label=form_label)})


def device_problem(value: Any) -> str | None:
    """The one device rule: auto, cpu, cuda (the job's GPU) or cuda:N (GPU N); why not, or None."""
    base, colon, index = str(value).partition(":")
    if isinstance(value, str) and base in DEVICE_CHOICES and (not colon or (base == "cuda" and index.isdigit())):
        return None
    return f"device must be one of {', '.join(DEVICE_CHOICES)} or cuda:N, not {value!r}"


def spec_of(cls: type, name: str) -> FieldSpec | None:
    """The declaration of field `name` of config class `cls`: a subclass that only changes a default
    (`epochs: int = 2`) keeps the declaration of the class that declared it."""
    for klass in cls.__mro__:
        found = getattr(klass, "__dataclass_fields__", {}).get(name)
        if found is not None and SPEC in found.metadata:
            return found.metadata[SPEC]
    return None


def specs(cls: type) -> dict[str, FieldSpec]:
    """Every declared field of `cls`, in field order."""
    return {f.name: spec for f in dataclasses.fields(cls) if (spec := spec_of(cls, f.name)) is not None}


def check_fields(cfg: Any) -> None:
    """The one validation: every declared field in its range or choices, the device by the device rule.
    Refused at submit, naming the valid range, not hours later in the job."""
    for name, spec in specs(type(cfg)).items():
        value = getattr(cfg, name)
        problem = device_problem(value) if name == "device" else spec.problem(value)
        if problem:
            raise ConfigError(problem)
