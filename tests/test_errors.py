"""Errors about one document of a batch carry its index as an attribute (callers name their own line
or row from it, never by parsing the message)."""
from __future__ import annotations

import pickle

import pytest
from conftest import build_tiny_bundle, load_seeded

from ldptext.errors import InputError


@pytest.mark.parametrize("backend", ["native", "fallback"])
def test_a_failing_document_is_named_by_index(tmp_path, backend):
    san = load_seeded(build_tiny_bundle(tmp_path / "b.ldpb"), backend=backend)
    with pytest.raises(InputError) as e:
        san.sanitize_batch(["w1 w2", "w3", 7, "w4"])
    assert e.value.document == 2 and str(e.value).startswith("document 2 ")


def test_the_index_is_optional_and_the_error_pickles():
    assert InputError("plain").document is None
    e = pickle.loads(pickle.dumps(InputError("document 3 could not be tokenized", document=3)))
    assert isinstance(e, InputError) and str(e) == "document 3 could not be tokenized"


def test_the_cli_and_spark_name_their_line_and_row_from_the_index():
    from ldptext.commands._io import _name_line
    from ldptext.spark import _name_row

    err = InputError("document 1 could not be tokenized", document=1)
    assert str(_name_line(err, [(10, "a"), (11, "b")])) == "the document on input line 11 could not be tokenized"
    assert str(_name_row(err, [40, 41], lambda r: f"row {r}")) == "row 41 could not be tokenized"
    # no index: the whole batch is named, the message kept
    plain = InputError("the tokenizer could not process this batch of documents")
    assert str(_name_line(plain, [(10, "a"), (11, "b")])).startswith("input lines 10-11: ")
