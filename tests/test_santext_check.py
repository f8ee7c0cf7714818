"""A trusted signer's wrong ε, p or D_max does not pass a device (ldptext.santext_check): the bundle
of the red team's report is crafted the same way (an ε = 10 bundle, its manifest edited, re-signed
with the same trusted key without the sign-time check) and every loader refuses it."""
from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from conftest import build_tiny_bundle, edited_bundle
from ldptext import bundle as B
from ldptext import santext_check as C
from ldptext.errors import ParameterMismatchError
from ldptext.santext import Sanitizer

KEY = Ed25519PrivateKey.generate()
PUB = KEY.public_key()
BACKENDS = ["fallback", "native"]


@pytest.fixture(scope="module", params=["santext", "santext+"])
def eps10(request, tmp_path_factory):
    return build_tiny_bundle(tmp_path_factory.mktemp("check") / "t.ldpb", n=120, dim=8,
                             mechanism=request.param, epsilon=10.0, sign_key=KEY)


def relabelled(src, dst, edit):
    """``src`` with its manifest edited and signed again by the same trusted key, bypassing
    ``sign_bundle``'s check (a misused key, a wrong build script)."""
    return edited_bundle(src, dst, edit, sign_key=KEY)


def set_epsilon(value):
    def edit(m):
        m["params"]["epsilon"] = value
    return edit


def test_the_honest_bundle_loads_on_every_backend(eps10):
    for backend in BACKENDS:
        with Sanitizer.load(eps10, trusted_keys=[PUB], allow_weak_privacy=True, backend=backend) as san:
            assert san.epsilon == 10.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("label", [3.0, 9.99, 10.0 * (1 + 1e-6), 30.0])
def test_a_relabelled_epsilon_is_refused_at_load(eps10, tmp_path, backend, label):
    path = relabelled(eps10, tmp_path / "lie.ldpb", set_epsilon(label))
    B.read_bundle(path, trusted_keys=[PUB])           # the signature and hashes are valid
    with pytest.raises(ParameterMismatchError, match="epsilon .* is not what the tables realise"):
        Sanitizer.load(path, trusted_keys=[PUB], allow_weak_privacy=True, backend=backend,
                       expect={"epsilon_max": label})
    with pytest.raises(ParameterMismatchError):
        Sanitizer.load(path.read_bytes(), trusted_keys=[PUB], backend=backend, allow_weak_privacy=True)


def test_the_refusal_names_the_realised_epsilon(eps10, tmp_path):
    path = relabelled(eps10, tmp_path / "lie.ldpb", set_epsilon(3.0))
    with pytest.raises(ParameterMismatchError) as e:
        Sanitizer.load(path, trusted_keys=[PUB], allow_weak_privacy=True)
    realised = float(str(e.value).split("about ")[1].split(":")[0])
    assert realised == pytest.approx(10.0, rel=1e-6)


@pytest.mark.parametrize("edit, fragment", [
    (lambda m: m["privacy"].update(d_max=1.0), "D_max"),
    (lambda m: m["privacy"].update(d_max=m["privacy"]["d_max"] * 0.9), "D_max"),
])
def test_an_understated_d_max_is_refused_at_load(eps10, tmp_path, edit, fragment):
    path = relabelled(eps10, tmp_path / "dmax.ldpb", edit)
    for backend in BACKENDS:
        with pytest.raises(ParameterMismatchError, match=fragment):
            Sanitizer.load(path, trusted_keys=[PUB], allow_weak_privacy=True, backend=backend)


def test_a_relabelled_p_is_refused_at_load(eps10, tmp_path):
    b, _ = B.open_unverified(eps10)
    if b.mechanism != "santext+":
        pytest.skip("p is SanText+ only")
    path = relabelled(eps10, tmp_path / "p.ldpb", lambda m: m["params"].update(p=0.9))
    with pytest.raises(ParameterMismatchError, match="epsilon0"):
        Sanitizer.load(path, trusted_keys=[PUB], allow_weak_privacy=True)
    # p and epsilon0 changed together: the sampler then really uses p = 0.9 and the statement is
    # true (p is in no array), so the bundle loads, with p = 0.9
    both = relabelled(eps10, tmp_path / "p2.ldpb",
                      lambda m: m["params"].update(p=0.9, epsilon0=float(np.log(1 / 0.9))))
    with Sanitizer.load(both, trusted_keys=[PUB], allow_weak_privacy=True) as san:
        assert san.p == 0.9


def test_load_reads_random_rows_beyond_the_fixed_sample(eps10):
    with Sanitizer.load(eps10, trusted_keys=[PUB], allow_weak_privacy=True) as san:
        t = san.tables
        fixed = set(C.fixed_rows(t).tolist())
        seen = set()
        for _ in range(20):
            rows = C.load_rows(t)
            assert rows[0] == C.fixed_rows(t)[0]           # the largest-norm row reads D_max
            assert set(rows.tolist()) >= fixed
            seen |= set(rows.tolist())
        assert t.valid_input[list(seen)].all()
        assert len(seen - fixed) > 0.8 * (t.valid_input.sum() - len(fixed))


def test_a_table_that_lies_on_one_row_is_caught_when_that_row_is_checked(eps10):
    """The check is per row: the ratios of one row built for another ε are refused by themselves."""
    with Sanitizer.load(eps10, trusted_keys=[PUB], allow_weak_privacy=True) as san:
        t = san.tables
        kwargs = dict(mechanism=san.mechanism, epsilon=san.epsilon, epsilon0=san.epsilon0, p=san.p,
                      d_max=san.d_max, tolerance=san.tolerance, dmax_rows=np.zeros(0, np.int64))
        row = int(np.flatnonzero(t.valid_input)[5])
        C.check_realised(t, rows=np.array([row]), **kwargs)
        kwargs["epsilon"] = 3.0
        with pytest.raises(ParameterMismatchError):
            C.check_realised(t, rows=np.array([row]), **kwargs)


# ---- libldptext (native/build/libldptext.so, built by make test before pytest) -------------------
LIB_PATH = __import__("pathlib").Path(__file__).resolve().parents[1] / "native" / "build" / "libldptext.so"
E_PARAMETER_MISMATCH = -100


def c_open(path) -> int:
    """ldp_bundle_open_expect with the test key trusted and the weak-privacy opt-in; the return code
    (the bundle is closed again)."""
    import ctypes
    from cryptography.hazmat.primitives import serialization

    if not LIB_PATH.exists():
        pytest.skip("libldptext not built (make -C native)")
    from test_libldptext import Expect

    lib = ctypes.CDLL(str(LIB_PATH))
    lib.ldp_bundle_open_expect.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t,
                                           ctypes.POINTER(Expect), ctypes.POINTER(ctypes.c_void_p)]
    lib.ldp_bundle_close.argtypes = [ctypes.c_void_p]
    raw = PUB.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    keys = (ctypes.c_uint8 * 32).from_buffer_copy(raw)
    out = ctypes.c_void_p()
    # the eps = 10 test bundles are near identity: opted into, as the Python loads here are
    e = Expect(size=ctypes.sizeof(Expect), allow_weak_privacy=1)
    rc = lib.ldp_bundle_open_expect(str(path).encode(), ctypes.byref(keys), 1, ctypes.byref(e), ctypes.byref(out))
    lib.ldp_bundle_close(out)
    return rc


@pytest.mark.parametrize("edit", [set_epsilon(3.0), set_epsilon(10.0 * (1 + 1e-6)),
                                  lambda m: m["privacy"].update(d_max=1.0),
                                  lambda m: m["params"].update(epsilon0=m["params"]["epsilon0"] + 0.5)])
def test_libldptext_refuses_the_relabelled_bundle(eps10, tmp_path, edit):
    assert c_open(eps10) == 0
    assert c_open(relabelled(eps10, tmp_path / "lie.ldpb", edit)) == E_PARAMETER_MISMATCH


def test_libldptext_refuses_a_stated_p_on_santext(eps10, tmp_path):
    if B.open_unverified(eps10)[0].mechanism != "santext":
        pytest.skip("SanText only")
    assert c_open(relabelled(eps10, tmp_path / "p.ldpb", lambda m: m["params"].update(p=0.5))) \
        == E_PARAMETER_MISMATCH


def test_the_extension_maps_the_library_refusal_to_parameter_mismatch(eps10, tmp_path):
    """Python's own check runs first; the C library's refusal of the same bundle (code -100) is the
    same exception, not a generic integrity error."""
    from ldptext import library

    if not library.available():
        pytest.skip("the C extension is not built")
    lie = B.read_bundle(relabelled(eps10, tmp_path / "lie.ldpb", set_epsilon(3.0)), trusted_keys=[PUB])
    with pytest.raises(ParameterMismatchError, match="libldptext refuses"):
        library.library_bundle(lie)
