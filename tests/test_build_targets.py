"""What the packaging targets of the top-level Makefile run (``make -n``, nothing is built): each needs
only its own tools, and ``make setup`` (so ``make demo``) installs the data-only packages of
requirements/nodeps.txt last, so that pip never prints an ERROR about their unmet dependencies."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dry_run(*args: str) -> list[str]:
    res = subprocess.run(["make", "-n", "--no-print-directory", *args], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return res.stdout.splitlines()


def test_extension_packages_a_bundle_without_the_dev_setup(tmp_path):
    """The default bundle (the web bundle) cached, or one given: no setup, no precompute."""
    (tmp_path / "web-glove20k-santextplus-eps3.ldpb").write_bytes(b"")  # make -n only: it exists
    given = tmp_path / "given.ldpb"
    given.write_bytes(b"")
    for extra in ([], [f"EXT_BUNDLE={given}"]):
        out = "\n".join(dry_run("extension", f"CACHE={tmp_path}", f"VENV={tmp_path / 'venv'}", *extra))
        check_extension(out)


def check_extension(out: str) -> None:
    assert "system-deps.sh wasm" in out and "build.py --bundle" in out
    assert "pip install -q -e . " in out  # the runtime alone
    assert "torch==" not in out and "[precompute" not in out and "precompute santext" not in out
    assert "system-deps.sh core" not in out


def test_wasm_and_npm_install_their_system_packages(tmp_path):
    wasm = dry_run("wasm", f"VENV={tmp_path / 'venv'}")
    assert wasm[0].startswith("bash scripts/system-deps.sh wasm")
    npm = "\n".join(dry_run("npm", f"VENV={tmp_path / 'venv'}"))
    assert "system-deps.sh wasm" in npm and "system-deps.sh npm" in npm and "npm pack" in npm
    assert "torch" not in npm and "pip " not in npm


def test_setup_installs_the_data_only_packages_last(tmp_path):
    lines = dry_run("setup", f"VENV={tmp_path / 'venv'}")
    pip = [line for line in lines if " -m pip " in line]
    nodeps_install = [i for i, line in enumerate(pip) if "--no-deps -r requirements/nodeps.txt" in line]
    nodeps_removal = [i for i, line in enumerate(pip) if "uninstall" in line and "requirements/nodeps.txt" in line]
    resolving = [i for i, line in enumerate(pip) if "install" in line and "--no-deps" not in line
                 and "uninstall" not in line and "--upgrade pip" not in line]
    assert nodeps_install == [len(pip) - 1], pip  # last
    assert nodeps_removal and nodeps_removal[0] < min(i for i in resolving if "-e '." in pip[i]), pip
