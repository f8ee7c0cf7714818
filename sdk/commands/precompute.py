"""``ldptext precompute <target>``: build a signed bundle offline. Each target module (listed in
TARGETS, all in ``ldptext.precompute``) defines ``register(subparsers)``."""
from __future__ import annotations

import importlib

TARGETS = ["ldptext.precompute.santext_cli", "ldptext.precompute.dpbart_cli"]


def register(sub) -> None:
    parser = sub.add_parser("precompute", help="build a bundle from public embeddings or a model")
    targets = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for name in TARGETS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:  # a real missing dependency inside an existing target
                raise
            continue  # target not part of this installation
        module.register(targets)
