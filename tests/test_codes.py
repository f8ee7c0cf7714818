"""The return codes of libldptext exist once, in ``native/include/ldptext.h``: the Python and JavaScript
tables are generated from it (``native/gen_codes.py``) and must not go stale; every code has its own
``ldp_strerror`` message; the Python runtime maps every code a bundle can fail with to an exception."""
import subprocess
import sys
from pathlib import Path

from ldptext import ldp_codes, library

ROOT = Path(__file__).resolve().parents[1]


def test_generated_tables_are_the_headers():
    res = subprocess.run([sys.executable, ROOT / "native" / "gen_codes.py", "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_the_header_is_parsed_whole():
    header = (ROOT / "native" / "include" / "ldptext.h").read_text()
    enum = header[header.index("/* Return codes:"):]
    enum = enum[:enum.index("};")]
    assert enum.count(" = -") == len(ldp_codes.CODES) - 1  # every negative code, LDP_OK apart
    assert ldp_codes.LDP_E_TEM_TABLES == -120 and ldp_codes.LDP_E_PARAMETER_MISMATCH == -100


def test_every_bundle_failure_has_an_exception_class():
    bundle_groups = {"container: safetensors header", "signature and trust", "manifest", "arrays",
                     "SanText schema and semantics", "the arrays of the mechanisms on the SanText engine"}
    for code, group in ldp_codes.GROUPS.items():
        if group in bundle_groups and code != ldp_codes.LDP_E_PARAMETER_MISMATCH:
            assert (code in library.FORMAT_CODES) != (code in library.INTEGRITY_CODES), code


def test_every_code_has_its_own_message():
    import test_libldptext
    test_libldptext.build_library()
    clib = test_libldptext.LibLdptext(test_libldptext.LIB_PATH)
    messages = {code: clib.strerror(code) for code in ldp_codes.CODES.values()}
    assert len(set(messages.values())) == len(messages)
    assert "unknown error code" not in messages.values()
