"""Pinning: an app requires mechanism, ε range, bundle id or minimum format version when loading
(``expect=``), and a verified bundle that does not match is refused with BundleExpectationError."""
from __future__ import annotations

import argparse

import numpy as np
import pytest

from conftest import build_tiny_bundle, load_seeded
from ldptext import runtime
from ldptext.bundle import Bundle, read_bundle
from ldptext.commands._pinning import add_pinning_options, expectation_from_args
from ldptext.errors import BundleError, BundleExpectationError, ParameterError
from ldptext.runtime import BundleExpectation


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("pin") / "t.ldpb", mechanism="santext+", epsilon=2.0)


def test_matching_expectations_load(tiny):
    bid = read_bundle(tiny).bundle_id
    san = load_seeded(tiny, expect={"mechanism": "santext+", "epsilon_min": 1.0, "epsilon_max": 2.0,
                                    "bundle_id": bid, "min_format_version": 1})
    assert san.mechanism == "santext+"
    assert load_seeded(tiny, expect=BundleExpectation(mechanism=("santext", "santext+"))).epsilon == 2.0


@pytest.mark.parametrize("expect, fragment", [
    ({"mechanism": "santext"}, "mechanism"),
    ({"epsilon_max": 1.5}, "exceeds"),
    ({"epsilon_min": 2.5}, "below"),
    ({"bundle_id": "0" * 64}, "pinned"),
    ({"min_format_version": 2}, "format version"),
])
def test_mismatches_are_refused(tiny, expect, fragment):
    with pytest.raises(BundleExpectationError, match=fragment):
        load_seeded(tiny, expect=expect)
    assert issubclass(BundleExpectationError, BundleError)


@pytest.mark.parametrize("expect", [
    {"epsilon": 2.0},                       # unknown key (a typo must not silently pin nothing)
    {"mechanism": "rot13"}, {"mechanism": []},
    {"epsilon_max": 0}, {"epsilon_max": float("nan")}, {"epsilon_max": True}, {"epsilon_max": "2"},
    {"epsilon_min": 3.0, "epsilon_max": 2.0},
    {"bundle_id": "ABC"}, {"bundle_id": "G" * 64},
    {"min_format_version": 0}, {"min_format_version": 1.0},
    ["mechanism"],
])
def test_malformed_expectations_are_parameter_errors(tiny, expect):
    with pytest.raises(ParameterError):
        runtime.open_bundle(tiny, mechanisms=("santext+",), expect=expect)


def test_epsilon_bounds_on_a_dpbart_bundle_are_refused():
    manifest = {"format": "ldptext-bundle", "format_version": 1, "mechanism": "dpbart", "arrays": {}}
    b = Bundle(path=None, manifest=manifest, arrays={}, key_id=None)
    BundleExpectation(mechanism="dpbart").check(b)
    with pytest.raises(BundleExpectationError, match="per call"):
        BundleExpectation(epsilon_max=3.0).check(b)


def test_bundle_id_is_the_hash_of_the_signed_manifest(tiny, tmp_path):
    import hashlib

    from ldptext.bundle import canonical_json
    b = read_bundle(tiny)
    assert b.bundle_id == hashlib.sha256(canonical_json(b.manifest)).hexdigest()
    other = build_tiny_bundle(tmp_path / "o.ldpb", mechanism="santext+", epsilon=2.0, seed=1)
    assert read_bundle(other).bundle_id != b.bundle_id


def test_cli_pinning_options():
    p = argparse.ArgumentParser()
    add_pinning_options(p)
    assert expectation_from_args(p.parse_args([])) is None
    e = expectation_from_args(p.parse_args(["--expect-mechanism", "santext", "--expect-mechanism", "santext+",
                                            "--expect-epsilon-max", "3", "--expect-bundle-id", "AB" * 32]))
    assert e == BundleExpectation(mechanism=("santext", "santext+"), epsilon_max=3.0, bundle_id="ab" * 32)
    with pytest.raises(ParameterError):
        expectation_from_args(p.parse_args(["--expect-bundle-id", "xyz"]))
    with pytest.raises(SystemExit):
        p.parse_args(["--expect-epsilon-max", "-1"])
    q = argparse.ArgumentParser()
    add_pinning_options(q, epsilon=False)   # rewrite: DP-BART's ε is a call parameter
    with pytest.raises(SystemExit):
        q.parse_args(["--expect-epsilon-max", "1"])
    assert np.isfinite(e.epsilon_max)
