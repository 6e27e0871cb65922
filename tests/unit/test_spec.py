from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from autotune.errors import SpecError
from autotune.inputs.check import check_inputs
from autotune.search.samplers import PRUNERS, SAMPLERS
from autotune.spec import (
    SEARCH_PARAMS,
    PrunerSpec,
    SamplerSpec,
    SearchSpec,
    load_spec,
    parse_spec,
    parse_spec_yaml,
)
from tests.conftest import REPO, tiny_spec


def test_defaults_are_the_classic_grid() -> None:
    spec = parse_spec({"name": "x", "model": {"name": "tiny"}, "data": {"source": "builtin:smoke"}})
    assert spec.search.rank.choices == [4, 8, 16, 32]
    assert spec.search.batch_size.choices == [16, 32, 64]
    lr = spec.search.learning_rate
    assert (lr.low, lr.high, lr.log) == (1e-4, 1e-3, True)
    assert (spec.objective.val_weight, spec.objective.train_weight) == (1.0, 0.1)
    assert (spec.sampler.name, spec.pruner.name, spec.precision) == ("tpe", "asha", "auto")


def test_a_study_confirms_its_two_best_at_the_target_and_keeps_the_best_adapter_by_default() -> None:
    base = {"name": "x", "model": {"name": "tiny"}, "data": {"source": "builtin:smoke"}}
    b = parse_spec(base).budget
    assert (b.confirm_top, b.confirm_seeds, b.keep_adapters) == (2, 1, 1)
    off = parse_spec({**base, "budget": {"confirm_top": 0}}).budget
    assert (off.confirm_top, off.keep_adapters) == (0, 0)  # nothing confirmed: nothing to keep
    assert parse_spec({**base, "budget": {"confirm_top": 3, "keep_adapters": 2}}).budget.keep_adapters == 2
    with pytest.raises(SpecError, match="confirm_top"):
        parse_spec({**base, "budget": {"confirm_top": 0, "keep_adapters": 1}})


def test_sampler_and_pruner_accept_a_plain_name() -> None:
    spec = parse_spec(tiny_spec(sampler="random", pruner="median"))
    assert spec.sampler.name == "random"
    assert spec.pruner.name == "median"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"modle": {"name": "tiny"}}, "modle: unknown field"),
        ({"lora": {"rnak": 3}}, "lora.rnak: unknown field"),
        ({"task": "translation"}, "task:"),
        ({"sampler": "bayes"}, "sampler.name:"),
        ({"pruner": "asap"}, "pruner.name:"),
        ({"precision": "int8"}, "precision:"),
        ({"n_trials": 0}, "n_trials:"),
        ({"name": "has space"}, "name:"),
        ({"search": {"rank": {"choices": [4, 8.5]}}}, "rank values must be whole numbers"),
        ({"search": {"learning_rate": {"low": 1e-3, "high": 1e-4}}}, "must be below high"),
        ({"search": {"learning_rate": {"low": 0.0, "high": 1e-3, "log": True}}}, "log range needs low > 0"),
        ({"search": {"batch_size": {"choices": []}}}, "choices must not be empty"),
        ({"search": {"rank": {"low": 4}}}, "give choices, or both low and high"),
        ({"sampler": "grid"}, "grid sampler needs choices"),
        ({"objective": {"val_weight": 0, "train_weight": 0}}, "cannot both be 0"),
        ({"budget": {"train_examples": 0}}, "budget.train_examples:"),
        ({"data": {"source": "builtin:smoke", "prompt_field": "q"}}, "go together"),
    ],
)
def test_bad_field_is_one_line_naming_it(change: dict, expected: str) -> None:
    data = tiny_spec()
    data.update(change)
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    msg = str(err.value)
    assert expected in msg, msg
    assert "\n" not in msg, msg


def test_missing_required_field() -> None:
    with pytest.raises(SpecError, match="model: required field is missing"):
        parse_spec({"name": "x", "data": {"source": "builtin:smoke"}})


def test_bad_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not valid YAML"):
        parse_spec_yaml("name: [unclosed")
    with pytest.raises(SpecError, match="must be a YAML mapping"):
        parse_spec_yaml("- a\n- b")
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "nope.yaml")


def test_spec_round_trips_through_yaml() -> None:
    spec = parse_spec(tiny_spec())
    assert parse_spec_yaml(spec.to_yaml()) == spec


@pytest.mark.parametrize(
    "path",
    sorted([*(REPO / "studies").glob("*.yaml"), *(REPO / "bench" / "specs").glob("*.yaml")]),
    ids=lambda p: p.name,
)
def test_every_shipped_study_validates(path: Path) -> None:
    """A shipped study runs as it is: the spec validates, and its data and model pass the checks
    `autotune validate` runs before any trial (files, columns, model config; torch-free)."""
    spec = load_spec(path)
    assert parse_spec_yaml(spec.to_yaml()) == spec
    if not spec.data.source.startswith("builtin:") and not Path(spec.data.source).exists():
        pytest.skip(f"{path.name}: data from the Hugging Face hub ({spec.data.source}), which no test reaches")
    examples = check_inputs(spec)
    assert examples.train and examples.validation, path.name


def test_spec_literals_are_the_registries() -> None:
    """The names a spec accepts are exactly the samplers and pruners that exist."""
    assert set(get_args(SamplerSpec.model_fields["name"].annotation)) == set(SAMPLERS)
    assert set(get_args(PrunerSpec.model_fields["name"].annotation)) == set(PRUNERS)


def test_search_registry_covers_every_search_field() -> None:
    ranges = [n for n, f in SearchSpec.model_fields.items() if "ParamRange" in str(f.annotation)]
    assert list(SEARCH_PARAMS) == ranges
    assert "expand_bounds" not in SEARCH_PARAMS  # an option of the search, not a parameter


def test_placement_takes_presets_and_numbers_take_numbers() -> None:
    ok = parse_spec(tiny_spec(search={"target_modules": {"choices": ["attention", "attention+mlp", "all-linear"]}}))
    assert ok.search.target_modules is not None
    with pytest.raises(SpecError, match="target_modules takes choices of auto, attention, attention\\+mlp, all-linear"):
        parse_spec(tiny_spec(search={"target_modules": {"choices": ["attention", "mlp-only"]}}))
    with pytest.raises(SpecError, match="target_modules takes choices"):
        parse_spec(tiny_spec(search={"target_modules": {"low": 1, "high": 2}}))
    with pytest.raises(SpecError, match="rank values must be numbers"):
        parse_spec(tiny_spec(search={"rank": {"choices": ["eight", "sixteen"]}}))
