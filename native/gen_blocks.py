"""What the generators of native/ share: rewriting the block between two markers of a file that is
otherwise hand-written, and the main that writes the stale generated files or, with ``--check``, only
names them (``gen_codes.py``, ``gen_mechanisms.py``, ``gen_android_cmake.py``)."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def replace_block(text: str, begin: str, end: str, block: str, path: Path, script: str) -> str:
    """``text`` with everything from ``begin`` to the first ``end`` after it replaced by ``block``
    (which carries the markers itself); ``script`` names the generator in the error."""
    if begin not in text or end not in text.split(begin, 1)[1]:
        raise SystemExit(f"{script}: {path.relative_to(ROOT)} lacks the generated-block markers")
    head, rest = text.split(begin, 1)
    return head + block + rest.split(end, 1)[1]


def write_or_check(wanted: dict[Path, str], argv: list[str], script: str) -> int:
    """Write each file of ``wanted`` (path -> text) whose text differs; with ``--check`` in ``argv``
    only name them on stderr and return 1 if any differs."""
    stale = [path for path, text in wanted.items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run python native/{script}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
    return 0
