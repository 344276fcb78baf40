"""recipes: the guide's defaults, validation, and a registry other frameworks plug into (through jobs.catalog)."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from dlguide_core.jobs import catalog
from dlguide_core.training import recipes
from dlguide_core.training.configs import CifarNetConfig, ConfigError, InceptionV3Config
from dlguide_core.training.recipes import Recipe, get_recipe


def test_inception_defaults_are_the_guides() -> None:
    cfg = InceptionV3Config()
    assert (cfg.lr, cfg.momentum, cfg.weight_decay) == (0.1, 0.9, 1e-4)
    assert (cfg.lr_step_size, cfg.lr_gamma, cfg.batch_size, cfg.epochs) == (30, 0.1, 32, 90)
    assert (cfg.image_size, cfg.weights, cfg.amp, cfg.label_smoothing) == (299, "imagenet", False, 0.0)


def test_cifar_defaults_are_the_guides() -> None:
    cfg = CifarNetConfig()
    assert (cfg.batch_size, cfg.lr, cfg.momentum, cfg.image_size, cfg.weights) == (4, 0.001, 0.9, 32, "none")


def test_configs_are_frozen_and_validated() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        InceptionV3Config().lr = 1.0  # type: ignore[misc]
    with pytest.raises(ConfigError, match="at least 75"):
        InceptionV3Config(image_size=64)
    with pytest.raises(ConfigError, match="label smoothing"):
        CifarNetConfig(label_smoothing=1.5)
    with pytest.raises(ConfigError, match="device must be one of auto, cpu, cuda"):
        CifarNetConfig(device="tpu")


def test_make_config_refuses_unknown_fields_and_keeps_defaults_for_none() -> None:
    recipe = get_recipe("inception_v3")
    cfg = recipe.make_config(epochs=3, lr=None)
    assert cfg.epochs == 3 and cfg.lr == 0.1
    with pytest.raises(ConfigError, match="no field"):
        recipe.make_config(learning_rate=0.1)
    assert recipe.config_from_dict({**dataclasses.asdict(cfg), "gone_field": 1}) == cfg


def test_a_recipe_from_another_module_registers_and_imports_lazily(monkeypatch) -> None:
    module = types.ModuleType("fake_tf_entry")

    @dataclasses.dataclass(frozen=True)
    class FakeConfig:
        epochs: int = 1

    def run(cfg, ctx):
        return "ran"

    module.run = run
    monkeypatch.setattr(recipes, "_REGISTRY", dict(recipes._REGISTRY))
    recipes.register(Recipe("fake_tf", "tensorflow", FakeConfig, "fake_tf_entry:run", "test only"))
    found = catalog.recipes()  # the catalog answers from the registry, plug-ins included
    assert found["fake_tf"].framework == "tensorflow"
    with pytest.raises(ModuleNotFoundError):
        found["fake_tf"].run_function()  # the entry module is imported only when a job runs
    monkeypatch.setitem(sys.modules, "fake_tf_entry", module)
    assert found["fake_tf"].run_function()(FakeConfig(), None) == "ran"


def test_the_registry_holds_the_pytorch_recipes_and_the_catalog_every_kind() -> None:
    assert {"inception_v3", "cifar_net"} <= set(recipes._REGISTRY)
    assert recipes.get_recipe("cifar_net").arch == "cifar_net"
    assert catalog.get_recipe("evaluate").kind == "evaluate" and "evaluate" not in catalog.recipes()


def test_unknown_recipe_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="inception_v3"):
        get_recipe("resnet")


def test_sync_batchnorm_on_the_cpu_is_refused_by_the_config() -> None:
    with pytest.raises(ConfigError, match="sync batchnorm needs GPUs"):
        CifarNetConfig(device="cpu", sync_batchnorm=True, nproc_per_node=2)
    assert CifarNetConfig(device="cuda", sync_batchnorm=True).sync_batchnorm


def test_a_missing_tensorflow_recipe_is_explained_not_unknown(monkeypatch) -> None:
    from dlguide_core.tf import configs as tf_configs
    from dlguide_core.tf import runtime as tensorflow_runtime

    monkeypatch.setattr(tensorflow_runtime, "tensorflow_status",
                        lambda: tensorflow_runtime.TensorFlowStatus(False, "no TF here"))
    monkeypatch.setattr(recipes, "_REGISTRY", {n: r for n, r in recipes._REGISTRY.items()
                                               if n not in tf_configs.TENSORFLOW_RECIPES})
    with pytest.raises(ConfigError, match="^no TF here$"):
        catalog.get_recipe("tf_fashion_mnist")
    with pytest.raises(ConfigError, match="unknown recipe 'resnet'"):
        catalog.get_recipe("resnet")


@pytest.mark.parametrize("endpoint", ["node0:", ":29400", "node0", "node0:29x", "node0:0", "node0:70000", "node 0:1"])
def test_a_bad_rendezvous_endpoint_is_refused_when_the_job_is_made(endpoint: str) -> None:
    """One rule (HOST:PORT) at submit: what passed here used to fail only at launch, leaving a job `running`."""
    with pytest.raises(ConfigError, match="HOST:PORT"):
        get_recipe("cifar_net").make_config(data="/d", nnodes=2, rdzv_endpoint=endpoint)
    from dlguide_core.errors import DistributedError
    from dlguide_core.jobs.launch import LaunchSpec

    with pytest.raises(DistributedError, match="HOST:PORT"):
        LaunchSpec(nnodes=2, rdzv_endpoint=endpoint)


def test_a_good_rendezvous_endpoint_passes_both_checks() -> None:
    from dlguide_core.jobs.launch import LaunchSpec

    for endpoint in ("node0.example:29400", "10.0.0.1:1", "[fe80::1]:29400"):
        assert get_recipe("cifar_net").make_config(data="/d", nnodes=2, rdzv_endpoint=endpoint).nnodes == 2
        assert LaunchSpec(nnodes=2, rdzv_endpoint=endpoint).rdzv_endpoint == endpoint
