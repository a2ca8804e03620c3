"""The one configuration grammar (core.config), as the API and every command's --config read it."""

import pytest

from gemmlab.core.config import ConfigSpec, format_config, parse_config
from gemmlab.core.registry import get


def test_nothing_given_means_the_defaults():
    assert parse_config(None) is None
    assert parse_config([]) is None
    assert parse_config("") is None
    assert get("tile_2d").config(None) == dict(get("tile_2d").params)


def test_key_value_pairs_are_integers_in_any_base():
    assert parse_config("BM=64, TM=0x4") == ConfigSpec(None, {"BM": 64, "TM": 4})


def test_a_json_object_is_accepted():
    assert parse_config('{"BM": 64, "BN": 32}') == ConfigSpec(None, {"BM": 64, "BN": 32})


def test_a_preset_name_alone_or_followed_by_overrides():
    assert parse_config("64x64") == ConfigSpec("64x64", {})
    cfg = get("blocked").config("64x64,BK=32")
    assert cfg["BM"] == 64 and cfg["TM"] == 4 and cfg["BK"] == 32


def test_repeated_options_merge_left_to_right():
    assert parse_config(["BM=64", "BN=32", "BM=32"]) == ConfigSpec(None, {"BM": 32, "BN": 32})


def test_keys_match_the_rungs_parameters_case_insensitively():
    assert get("tile_2d").config("bm=64,bn=64")["BM"] == 64


def test_a_value_that_is_not_an_integer_is_refused_naming_it():
    with pytest.raises(ValueError, match="BM='big'.*integer"):
        parse_config("BM=big")
    with pytest.raises(ValueError, match="integer"):
        parse_config('{"BM": true}')


def test_malformed_text_is_refused_naming_the_problem():
    with pytest.raises(ValueError, match="valid JSON"):
        parse_config("{BM: 64")
    with pytest.raises(ValueError, match="two presets"):
        parse_config("64x64,128x128")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_config("=64")


def test_an_unknown_preset_or_parameter_names_the_choices():
    with pytest.raises(ValueError, match="presets: \\['128x128', '64x64'\\]"):
        get("blocked").config("huge")
    with pytest.raises(ValueError, match="no parameter 'XX'"):
        get("blocked").config("XX=4")


def test_a_resolved_configuration_formats_back_to_the_same_values():
    rung = get("warp_tiling")
    cfg = rung.config("BM=64,BK=16")
    assert rung.config(format_config(cfg)) == cfg
