"""``bundle sign`` (``--force`` or not) refuses a manifest whose privacy parameters are not what the
arrays realise (ldptext.bundle_check): SanText(+) ε from the realised log-ratios of head outputs, ε₀,
head size, D_max; DP-BART L, d, |P| from the encoder graph and the pruned array."""
from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from conftest import build_tiny_bundle, edited_bundle
from ldptext import bundle as B
from ldptext.bundle_check import check_parameters, sign_bundle
from ldptext.errors import BundleFormatError, ParameterMismatchError

KEY = Ed25519PrivateKey.generate()


@pytest.fixture(scope="module", params=["santext", "santext+"])
def tiny(request, tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("params") / "t.ldpb", mechanism=request.param,
                             epsilon=2.0, sign_key=KEY)


def edited(src, dst, edit, arrays_edit=None):
    """An (unsigned) copy of ``src`` with the manifest edited: what a tamperer hands to ``sign``."""
    return edited_bundle(src, dst, edit, arrays_edit)


def test_a_consistent_bundle_passes_and_resigns(tiny, tmp_path):
    check_parameters(B.open_unverified(tiny)[0])
    out = sign_bundle(tiny, KEY, out=tmp_path / "re.ldpb")
    assert out.read_bytes() == tiny.read_bytes()      # deterministic signature, canonical header


@pytest.mark.parametrize("factor", [1.5, 0.5, 1 + 1e-6])
def test_edited_epsilon_is_refused_even_with_force(tiny, tmp_path, factor):
    def edit(m):
        m["params"]["epsilon"] *= factor
    path = edited(tiny, tmp_path / "e.ldpb", edit)
    with pytest.raises(ParameterMismatchError, match="epsilon"):
        sign_bundle(path, KEY, force=True)
    with pytest.raises(ParameterMismatchError, match="epsilon"):
        sign_bundle(path, KEY)                       # unsigned input: no force needed, same check


@pytest.mark.parametrize("edit, fragment", [
    (lambda m: m["privacy"].update(d_max=m["privacy"]["d_max"] / 2), "D_max"),
    (lambda m: m["params"].update(head_size=m["params"]["head_size"] + 1), "head_ids"),
    (lambda m: m["params"].update(epsilon0=m["params"]["epsilon0"] + 0.5), "epsilon0"),
    (lambda m: m["params"].update(p=1.5), "p"),
    (lambda m: m["params"].update(p=0.5), "p"),
])
def test_other_parameters_are_checked(tiny, tmp_path, edit, fragment):
    path = edited(tiny, tmp_path / "x.ldpb", edit)
    with pytest.raises(ParameterMismatchError, match=fragment):
        sign_bundle(path, KEY, force=True)


def test_cli_sign_force_refuses_a_tampered_epsilon(tiny, tmp_path, capsys):
    from ldptext import cli
    from ldptext.keys import generate_keypair
    priv, _ = generate_keypair(tmp_path / "k")
    data = bytearray(tiny.read_bytes())
    i = data.index(b'\\"epsilon\\":2.0')
    data[i + 12] = ord("7")                            # 2.0 -> 2.7 in place: signature now invalid
    bad = tmp_path / "bad.ldpb"
    bad.write_bytes(bytes(data))
    assert cli.main(["bundle", "sign", str(bad), "--key", str(priv), "--force"]) == 4  # bundle error
    err = capsys.readouterr().err
    assert "not what the tables realise" in err and err.count("\n") == 1
    assert cli.main(["bundle", "sign", str(tiny), "--key", str(priv), "--out", str(tmp_path / "ok.ldpb")]) == 0
    out = capsys.readouterr().out
    assert "bundle id " + B.open_unverified(tiny)[0].bundle_id in out


# ---- DP-BART structural fields -----------------------------------------------------------------

def _encoder(vocab=10, hidden=6) -> bytes:
    """A stand-in encoder graph: input_ids (B, L) -> embedding lookup (B, L, hidden)."""
    import onnx
    from onnx import TensorProto, helper
    emb = helper.make_tensor("emb", TensorProto.FLOAT, [vocab, hidden],
                             np.arange(vocab * hidden, dtype=np.float32).tolist())
    graph = helper.make_graph(
        [helper.make_node("Gather", ["emb", "input_ids"], ["hidden_states"], axis=0)], "enc",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "l"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "l"])],
        [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, ["b", "l", hidden])],
        initializer=[emb])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _dpbart(tmp_path, *, hidden=6, pruned=(1, 4), **over):
    dp = {"seq_len": 5, "hidden": hidden, "n_pruned": len(pruned), "special": {"pad": 0, "bos": 2}}
    dp.update(over)
    return B.write_bundle(tmp_path / "d.ldpb", mechanism="dpbart",
                          arrays={"pruned": np.asarray(pruned, dtype=np.int64)}, manifest={"dpbart": dp},
                          blobs={"encoder.onnx": _encoder(hidden=6)})


def test_an_incomplete_dpbart_bundle_is_not_signed(tmp_path):
    """A DP-BART bundle goes through the one check every door runs (ldptext.dpbart_check): one with an
    encoder only and a partial manifest is refused before signing. Its stated fields against the graphs
    (hidden size, n_pruned, pruned indices, heads, ...) are refused at every door in test_dpbart.py."""
    pytest.importorskip("onnx")
    with pytest.raises(BundleFormatError, match="incomplete"):
        check_parameters(B.open_unverified(_dpbart(tmp_path))[0])
    with pytest.raises(BundleFormatError, match="incomplete"):
        sign_bundle(_dpbart(tmp_path), KEY, force=True)
