"""The layout rules: disk path = import path, the runtime never imports the offline side, and a
runtime import pulls in none of the offline dependencies."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ldptext
import ldptext_precompute

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "sdk" / "ldptext"
OFFLINE = ROOT / "precompute" / "ldptext_precompute"
OFFLINE_ONLY = ("ldptext_precompute", "torch", "transformers", "sklearn", "matplotlib", "wordfreq", "onnx.")


def _imports(path: Path) -> set[str]:
    """Absolute names of every module the file imports (relative imports resolved)."""
    package = list(path.relative_to(path.parents[len(path.relative_to(ROOT).parts) - 2]).parent.parts)
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                names.add(".".join(base + ([node.module] if node.module else [])))
            else:
                names.add(node.module)
    return names


def test_disk_path_equals_import_path():
    assert Path(ldptext.__file__).resolve() == RUNTIME / "__init__.py"
    assert Path(ldptext_precompute.__file__).resolve() == OFFLINE / "__init__.py"


def test_runtime_never_imports_the_offline_side():
    offenders = {}
    for path in RUNTIME.rglob("*.py"):
        bad = {n for n in _imports(path)
               if n == "ldptext_precompute" or n.startswith(OFFLINE_ONLY)}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert offenders == {}


def test_relative_imports_resolve_inside_their_package():
    # a sanity check of the scanner above: the runtime's relative imports name ldptext modules
    assert "ldptext.commands._io" in _imports(RUNTIME / "commands" / "sanitize.py")
    assert "ldptext.errors" in _imports(RUNTIME / "commands" / "rewrite.py")


def test_importing_the_runtime_loads_no_offline_dependency():
    code = ("import sys, ldptext, ldptext.santext, ldptext.dpbart, ldptext.bundle, ldptext.ledger, "
            "ldptext.runtime\n"
            f"bad = [m for m in sys.modules if m.startswith({OFFLINE_ONLY!r}) or m == 'onnx']\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_offline_commands_reach_the_cli_through_the_entry_point():
    from ldptext.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {"sanitize", "rewrite", "bundle", "keys"} <= set(sub.choices)  # the runtime's own
    assert {"precompute", "evaluate", "demo"} <= set(sub.choices)          # from ldptext_precompute
