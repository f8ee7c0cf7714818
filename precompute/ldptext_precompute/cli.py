"""The offline sub-commands of ``ldptext``: ``precompute <target>``, ``evaluate``, ``calibrate`` and ``demo``.

The runtime CLI (``ldptext.cli``) never imports this package; it finds :func:`register` through the
``ldptext.commands`` entry point declared in ``setup.py``, so a device install without the offline
side simply has no such commands.
"""
from __future__ import annotations

from . import calibrate, demo
from .cmp import cli as cmp_cli
from .custext import cli as custext_cli
from .dpbart import cli as dpbart_cli
from .evaluation import cli as evaluation_cli
from .santext import cli as santext_cli
from .tem import cli as tem_cli

# one target per mechanism; cmp_cli adds two (cmp, mahalanobis)
PRECOMPUTE_TARGETS = (santext_cli, dpbart_cli, tem_cli, custext_cli, cmp_cli)


def register(sub) -> None:
    """Add ``precompute`` (one target per mechanism), ``evaluate``, ``calibrate`` and ``demo`` to ``sub``."""
    parser = sub.add_parser("precompute", help="build a bundle from public embeddings or a model")
    targets = parser.add_subparsers(dest="target", metavar="TARGET", required=True)
    for module in PRECOMPUTE_TARGETS:
        module.register(targets)
    evaluation_cli.register(sub)
    calibrate.register(sub)
    demo.register(sub)
