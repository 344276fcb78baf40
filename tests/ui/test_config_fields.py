"""The Train forms draw each field from its declaration (issue 23): the PyTorch form's widgets offer exactly the
declared range (the form once typed out its own: epochs up to 1000, seeds up to 2**31 - 1), keep their labels,
keys and tooltips, and hand the config its own values."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from dlguide_core.jobs.catalog import get_recipe, recipes
from dlguide_core.jobs.store import JobStore
from dlguide_core.training.fields import ConfigError, spec_of, specs
from dlguide_core.vision import architectures
from tests.support.toy_data import write_toy_dataset
from ui.config_fields import number_range
from ui.field_help import field_help
from ui.train_form import PYTORCH_FIELDS

LABELS = ["Epochs", "Batch size", "Learning rate", "Max steps (0 = no limit)", "Image size", "Weights",
          "Loader workers", "Device", "Label smoothing", "Seed", "Mixed precision (GPU)", "channels_last",
          "Mixed precision dtype"]


def _form_script() -> None:
    from dlguide_core.jobs.store import JobStore
    from ui.train_form import new_job_form

    new_job_form(JobStore())


@pytest.fixture
def form(tmp_path, monkeypatch) -> AppTest:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    return AppTest.from_function(_form_script, default_timeout=60).run()


def _widgets(at: AppTest, recipe: str) -> dict:
    at.selectbox(key="train_recipe").select(recipe).run()
    assert not at.exception, at.exception
    return {f.name: next(w for kind in ("number_input", "selectbox", "checkbox") for w in at.get(kind)
                         if w.key == f"train_{recipe}_{f.key}") for f in PYTORCH_FIELDS}


def _accepts(config_cls: type, name: str, value) -> bool:
    try:
        config_cls(**{name: value})
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("recipe", architectures.names())  # each architecture's recipe bears its name
def test_each_number_the_pytorch_form_offers_is_the_declared_range(form: AppTest, recipe: str) -> None:
    config_cls, arch = get_recipe(recipe).config_cls, architectures.architecture(recipe)
    widgets = _widgets(form, recipe)
    assert [w.label for w in widgets.values()] == LABELS
    assert all(w.help == field_help(name) for name, w in widgets.items())
    numbers = {name: w for name, w in widgets.items() if w.type == "number_input"}
    assert set(numbers) == {"epochs", "batch_size", "lr", "max_steps", "image_size", "workers", "label_smoothing",
                            "seed"}
    for name, widget in numbers.items():
        spec = spec_of(config_cls, name)
        assert spec is not None and spec.low is not None and spec.high is not None
        low = 0 if spec.optional else arch.min_size if name == "image_size" else spec.low
        # the declaration's range, an open end drawn just inside it ...
        assert (widget.min, widget.max) == number_range(config_cls, name, arch.min_size if name == "image_size"
                                                        else None), name
        assert (widget.min == low) != (spec.low_open and not spec.optional) and low <= widget.min, name
        assert (widget.max == spec.high) != spec.high_open and widget.max <= spec.high, name
        assert spec.low <= arch.min_size <= spec.high if name == "image_size" else True
        for end in (widget.min, widget.max):
            if widget.proto.disabled:  # cifar_net's fixed image size: nothing else is offered
                continue
            value = None if spec.optional and end == 0 else int(end) if spec.whole else end  # the proto: floats
            assert _accepts(config_cls, name, value), (name, end)  # ... so the config takes every value offered
        assert widget.value == (getattr(config_cls(), name) or 0)


def test_the_choices_map_to_config_values_and_the_form_queues_them(form: AppTest, monkeypatch) -> None:
    import ui.jobs

    monkeypatch.setattr(ui.jobs, "dispatch_in_background", lambda store: None)  # queue only, no process
    widgets = _widgets(form, "cifar_net")
    assert widgets["amp_dtype"].options == ["bf16", "fp16"] and widgets["amp_dtype"].value == "bf16"
    assert widgets["device"].options == ["auto", "cpu", "cuda"] and widgets["weights"].value == "none"
    widgets["amp_dtype"].select("fp16")
    widgets["device"].select("cpu")
    widgets["epochs"].set_value(10_000)  # the declared most (the form once stopped at 1000)
    form.button(key="train_cifar_net_start").click().run()
    assert not form.exception and not form.error, [e.value for e in form.error]
    store = JobStore()
    [job] = store.list_jobs()
    store.close()
    assert (job.config["amp_dtype"], job.config["device"], job.config["epochs"]) == ("float16", "cpu", 10_000)
    assert job.config["max_steps"] is None  # 0 = no limit


def test_every_recipes_number_range_is_its_declaration() -> None:
    """The TensorFlow forms draw from the same helper: every declared number of every recipe."""
    for recipe in recipes().values():
        for name, spec in specs(recipe.config_cls).items():
            if spec.low is not None and spec.high is not None:
                low, high = number_range(recipe.config_cls, name)
                assert low == 0 if spec.optional else (low > spec.low if spec.low_open else low == spec.low)
                assert high < spec.high if spec.high_open else high == spec.high, (recipe.name, name)
                assert type(number_range(recipe.config_cls, name)[0]) is (int if spec.whole else float)


def test_the_devices_section_draws_its_fields_from_their_declarations(form: AppTest) -> None:
    """The data-parallel fields (outside the form, on this machine) are declared fields too: label, tooltip and
    range from the declaration, the page adding only what it knows (the devices here, the 2 machines a
    multi-machine run needs at least)."""
    from dlguide_core.jobs import launch
    from dlguide_core.training.configs import CifarNetConfig

    form.selectbox(key="train_recipe").select("cifar_net").run()
    form.toggle(key="train_cifar_net_multinode").set_value(True).run()
    assert not form.exception, form.exception
    inputs = {w.key: w for w in form.number_input}
    most, kind = launch.device_options()
    for key, name, low, high in (("nproc", "nproc_per_node", 1, most), ("restarts", "max_restarts", 0, 100),
                                 ("nnodes", "nnodes", 2, 4096)):
        widget, spec = inputs[f"train_cifar_net_{key}"], spec_of(CifarNetConfig, name)
        assert spec is not None and widget.help == field_help(name) and (widget.min, widget.max) == (low, high)
        assert spec.low <= widget.min and widget.max <= spec.high
        assert name == "nnodes" or _accepts(CifarNetConfig, name, int(widget.min))  # 2 machines need a rendezvous
    assert inputs["train_cifar_net_nproc"].label == f"Devices: N ({ {'GPU': 'GPUs'}.get(kind, 'CPU processes')} on "\
        "this machine)"
    texts = {w.key: w for w in form.text_input}
    assert texts["train_cifar_net_rdzv"].label == spec_of(CifarNetConfig, "rdzv_endpoint").form_title()
    assert {w.key: w.label for w in form.checkbox}.items() >= {
        "train_cifar_net_syncbn": "SyncBatchNorm", "train_cifar_net_scale_lr": "Linear scaling rule (lr × N)"}.items()
