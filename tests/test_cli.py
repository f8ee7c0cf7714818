"""The ``ldptext`` command shell: version, and one clear line when an optional extra is missing."""
from __future__ import annotations

import subprocess
import sys

import ldptext
from ldptext.cli import EXTRAS, main


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert capsys.readouterr().out.strip() == f"ldptext {ldptext.__version__}"


def _run_without(module: str, args: list[str]) -> subprocess.CompletedProcess:
    # None in sys.modules makes `import module` raise ModuleNotFoundError, as if it were not installed
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from ldptext.cli import main\n"
            f"sys.exit(main({args!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_missing_precompute_extra_is_one_line_naming_it(tmp_path):
    r = _run_without("torch", ["precompute", "dpbart", "--out", str(tmp_path / "x.ldpb")])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "ldptext: error: this command needs the optional dependency 'torch': pip install 'ldptext[precompute]'"]


def test_missing_evaluate_extra_is_one_line_naming_it(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("text,label\n" + "".join(f"doc {i},{i % 2}\n" for i in range(20)), encoding="utf-8")
    r = _run_without("sklearn", ["evaluate", "--data", str(csv), "--epsilon", "1", "--seeds", "1",
                                 "--baselines", "no", "--mechanism", "santext", "--vocab-size", "500",
                                 "--no-plots", "--quiet", "--out", str(tmp_path / "out")])
    assert r.returncode == 2, r.stderr
    assert "pip install 'ldptext[evaluate]'" in r.stderr
    assert "Traceback" not in r.stderr


def test_every_extra_named_exists_in_setup():
    setup = (ldptext.__file__.rsplit("sdk", 1)[0] + "setup.py")
    text = open(setup, encoding="utf-8").read()
    for extra in set(EXTRAS.values()):
        assert f'"{extra}":' in text, extra
