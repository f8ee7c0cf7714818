"""Each mechanism and its guarantee are stated once, in the registry and the mechanism's unit: the C,
JavaScript, TypeScript and Java tables are generated from them (``native/gen_mechanisms.py``) and must
not go stale, and what the C library states of a bundle is the unit's statement."""
import subprocess
import sys
from pathlib import Path

from ldptext import registry

ROOT = Path(__file__).resolve().parents[1]


def test_generated_mechanism_tables_are_the_registrys():
    res = subprocess.run([sys.executable, ROOT / "native" / "gen_mechanisms.py", "--check"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_a_changed_statement_makes_the_tables_stale(tmp_path, monkeypatch):
    """The check is not vacuous: a statement that differs from the generated C table is found."""
    sys.path.insert(0, str(ROOT / "native"))
    try:
        import gen_mechanisms
    finally:
        sys.path.pop(0)
    table = gen_mechanisms.rows()
    assert [r["name"] for r in table] == [m.name for m in sorted(
        (m for m in registry.all_mechanisms() if m.c_code is not None), key=lambda m: m.c_code)]
    table[0]["neighbouring"] = "any two tokens, said differently"
    assert gen_mechanisms.c_table(table) != (ROOT / "native" / "lib" / "mechanisms.h").read_text()
