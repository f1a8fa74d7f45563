"""txt2img's spec: params, task costs, seeds and batch sizing. Pure functions of the core
(nova_queue.apps.txt2img, txt2img_params); no torch needed."""

from __future__ import annotations

import json

import pytest

from nova_queue.apps.txt2img import Txt2ImgSpec
from nova_queue.apps.txt2img_params import (
    KNOWN_PARAMS,
    default_batch_size,
    parse_params,
    task_seed,
)
from nova_queue.errors import InputError

GIB = 2**30


def test_defaults_and_idempotent_parsing():
    params = parse_params({})
    assert params == {"model": "stabilityai/sd-turbo", "width": 512, "height": 512, "steps": 1,
                      "guidance": 0.0, "seed": 0, "batch": None, "compile": False,
                      "attention_slicing": "auto"}
    raw = {"width": "1024", "height": " 768", "steps": "4", "guidance": "1.5", "seed": "7",
           "batch": "3", "compile": "yes", "attention_slicing": "off", "model": "./m"}
    parsed = parse_params(raw)
    assert parsed["width"] == 1024 and parsed["height"] == 768 and parsed["batch"] == 3
    assert parsed["compile"] is True and parsed["attention_slicing"] is False
    assert parse_params(json.loads(json.dumps(parsed))) == parsed


@pytest.mark.parametrize("key,value,expect", [
    ("width", "500", "multiple of 8, got 500"),
    ("width", "32", "64..2048"),
    ("height", "4096", "64..2048"),
    ("height", "big", "must be an integer"),
    ("steps", "0", "1..100"),
    ("steps", "101", "1..100"),
    ("steps", "1.5", "must be an integer"),
    ("guidance", "-1", "0..50"),
    ("guidance", "nan", "0..50"),
    ("guidance", "x", "must be a number"),
    ("seed", "-1", "0.."),
    ("batch", "0", "1..64"),
    ("batch", "65", "1..64"),
    ("compile", "maybe", "true/false"),
    ("attention_slicing", "sometimes", "true/false/auto"),
    ("model", " ", "hub id or a folder"),
])
def test_bad_values_name_the_param(key: str, value: str, expect: str):
    with pytest.raises(InputError) as err:
        parse_params({key: value})
    assert str(err.value).startswith(f"param {key}: ") and expect in str(err.value)


def test_unknown_params_list_the_known_ones():
    with pytest.raises(InputError) as err:
        parse_params({"widht": "64", "cfg": "2"})
    assert "cfg, widht" in str(err.value)
    assert all(name in str(err.value) for name in KNOWN_PARAMS)


def test_cost_scales_with_pixels_and_steps():
    app = Txt2ImgSpec()
    specs = app.make_tasks(["a", "b", "c"], parse_params({}))
    assert [s.input for s in specs] == ["a", "b", "c"] and {s.cost for s in specs} == {1.0}
    assert app.make_tasks(["a"], parse_params({"width": "1024", "steps": "4"}))[0].cost == 8.0
    assert app.make_tasks(["a"], parse_params({"width": "64", "height": "64"}))[0].cost == 1 / 64


def test_task_seed_formula_is_stable():
    assert [task_seed(0, i) for i in range(3)] == [0, 1, 2]
    assert task_seed(1, 2) == 1_000_005
    assert task_seed(2**63 - 1, 5) == ((2**63 - 1) * 1_000_003 + 5) % 2**63


@pytest.mark.parametrize("backend,free_gib,total_gib,size,expected", [
    ("cuda", 40, 80, 512, 8), ("cuda", 40, 80, 256, 32), ("cuda", 40, 80, 64, 64),
    ("rocm", 14, 16, 512, 4), ("cuda", 9, 12, 512, 2), ("cuda", 4, 6, 512, 1),
    ("cuda", 40, 80, 1024, 2), ("cuda", None, None, 512, 1),
    ("mps", None, 32, 512, 2), ("mps", None, 8, 512, 1), ("mps", None, 32, 64, 2),
    ("cpu", 8, 16, 512, 1), ("cpu", 8, 16, 64, 4), ("cpu", 8, 16, 1024, 1),
])
def test_batch_size_heuristic(backend, free_gib, total_gib, size, expected):
    gib = (lambda v: None if v is None else int(v * GIB))
    assert default_batch_size(backend, size, size, memory_free=gib(free_gib),
                              memory_total=gib(total_gib)) == expected
