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


# ------------------------------------------------------------------ the import graph: no cycles, no upward arrow

def _module_name(path: Path) -> str:
    base = RUNTIME if RUNTIME in path.parents else OFFLINE
    parts = list(path.relative_to(base.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """Module → the project modules it imports, counting imports inside functions too (a hidden
    import is still an arrow). A ``from X import y`` names the module ``X.y`` when that is one."""
    paths = {_module_name(p): p for root in (RUNTIME, OFFLINE) for p in root.rglob("*.py")}
    known = set(paths) | {"ldptext._native"}  # the compiled extension: a leaf
    graph = {}
    for name, path in paths.items():
        is_pkg = path.name == "__init__.py"
        package = name.split(".") if is_pkg else name.split(".")[:-1]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                mod = ".".join(package[: len(package) - (node.level - 1)] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                targets |= {f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names}
        resolved = set()
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                resolved.add(t)
        graph[name] = resolved
    graph["ldptext._native"] = set()
    return graph


#: Layers, lowest first: a module may import its own layer and the ones below, never one above. The
#: runtime (ldptext) is below the offline side (ldptext_precompute) as a whole. Every module must be
#: placed: a new one is given its layer here. First matching pattern wins.
LAYERS = [
    # runtime: primitives, then formats and tables, bundles, runtime base, mechanisms, tools, CLI
    ("ldptext.errors ldptext.fileio ldptext.ldp_codes ldptext.alias ldptext.decoding "
     "ldptext.noise ldptext._native ldptext.registry"),
    ("ldptext.keys ldptext.ledger ldptext.santext_tables ldptext._fallback ldptext.rng "
     "ldptext.multivariate_laplace ldptext.engine_rows ldptext.verbatim ldptext.row_guard ldptext.guarantee "
     "ldptext.description ldptext.function_words "
     "ldptext.report"),
    ("ldptext.mechanisms ldptext.mechanisms.* ldptext.bundle ldptext.dpbart_schema ldptext.tokenization "
     "ldptext.runtime ldptext.library"),
    "ldptext.token_runtime ldptext.santext_check ldptext.dpbart_check",
    "ldptext.santext ldptext.tem ldptext.custext ldptext.cmp ldptext.dpbart",
    "ldptext.bundle_check ldptext.spark",
    "ldptext.commands ldptext.commands.* ldptext.cli ldptext",
    # offline: shared building blocks, builders, evaluation, commands
    ("ldptext_precompute.progress ldptext_precompute.checkpoints ldptext_precompute.bleu ldptext_precompute.epsilon "
     "ldptext_precompute.metricdp ldptext_precompute.metricdp.common ldptext_precompute.metricdp.engine "
     "ldptext_precompute.metricdp.faiss_search ldptext_precompute.metricdp.cli_options "
     "ldptext_precompute.santext.embeddings ldptext_precompute.santext.frequency "
     "ldptext_precompute.santext.function_words ldptext_precompute.santext.clusters "
     "ldptext_precompute.santext.knn ldptext_precompute.santext.identifiers ldptext_precompute.dpbart.data "
     "ldptext_precompute.dpbart.model "
     "ldptext_precompute.dpbart.adept_noise"),
    ("ldptext_precompute.santext ldptext_precompute.tem ldptext_precompute.custext ldptext_precompute.cmp "
     "ldptext_precompute.dpbart ldptext_precompute.*.build ldptext_precompute.dpbart.train "
     "ldptext_precompute.dpbart.export ldptext_precompute.dpbart.adept"),
    "ldptext_precompute.evaluation ldptext_precompute.evaluation.* ldptext_precompute.calibrate",
    ("ldptext_precompute.*.cli ldptext_precompute.evaluation.cli ldptext_precompute.evaluation.aspects.cli "
     "ldptext_precompute.cli ldptext_precompute.demo "
     "ldptext_precompute"),
]


def _layer(module: str) -> int | None:
    """The layer of a module: an exact name first, then the first matching pattern."""
    from fnmatch import fnmatchcase

    for exact in (True, False):
        for i, patterns in enumerate(LAYERS):
            for p in patterns.split():
                if (module == p) if exact else fnmatchcase(module, p):
                    return i
    return None


def test_the_import_graph_has_no_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_every_module_has_a_layer_and_no_import_points_upward():
    graph = _graph()
    unplaced = sorted(m for m in graph if _layer(m) is None)
    assert unplaced == []
    upward = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts if _layer(t) > _layer(m))
    assert upward == []


def test_the_layer_check_sees_hidden_and_relative_imports():
    graph = _graph()
    # the units import the verbatim rate inside a function; sanitize imports _parquet the same way
    assert "ldptext.verbatim" in graph["ldptext.mechanisms"]
    assert "ldptext.commands._parquet" in graph["ldptext.commands.sanitize"]
    assert "ldptext._native" in graph["ldptext.rng"]
    assert _layer("ldptext.santext") > _layer("ldptext.bundle") > _layer("ldptext.errors")
