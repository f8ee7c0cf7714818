"""The offline sub-commands of ``ldptext``: ``precompute <target>``, ``evaluate``, ``calibrate`` and ``demo``.

The runtime CLI (``ldptext.cli``) never imports this package; it finds :func:`register` through the
``ldptext.commands`` entry point declared in ``setup.py``, so a device install without the offline
side simply has no such commands.
"""
from __future__ import annotations

import importlib

from ldptext import registry

from . import calibrate, demo
from .evaluation import cli as evaluation_cli

#: the builders' CLI modules, from the registry (one module may add the targets of a family: the
#: cmp module adds cmp and mahalanobis)
PRECOMPUTE_TARGETS = tuple(importlib.import_module(name) for name in dict.fromkeys(
    m.builder_cli for m in registry.all_mechanisms() if m.builder_cli is not None))


def register(sub) -> None:
    """Add ``precompute`` (one target per mechanism), ``evaluate``, ``calibrate`` and ``demo`` to ``sub``."""
    parser = sub.add_parser("precompute", help="build a bundle from public embeddings or a model")
    targets = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for module in PRECOMPUTE_TARGETS:
        module.register(targets)
    evaluation_cli.register(sub)
    importlib.import_module(".evaluation.aspects.cli", __package__).register(sub)
    calibrate.register(sub)
    demo.register(sub)
