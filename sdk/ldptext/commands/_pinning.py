"""Bundle pinning options shared by ``ldptext sanitize`` and ``ldptext rewrite``: ``--expect-mechanism``,
``--expect-epsilon-min/--expect-epsilon-max`` (SanText(+) only), ``--expect-bundle-id`` and
``--expect-min-format-version``, turned into the ``expect=`` of ``Sanitizer.load`` / ``Rewriter.load``
(:class:`ldptext.runtime.BundleExpectation`)."""
from __future__ import annotations

import argparse
import math

from .. import registry as _registry
from ..errors import ParameterError
from ..runtime import BundleExpectation


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError("must be a positive finite number")
    return value


def add_pinning_options(parser: argparse.ArgumentParser, *, epsilon: bool = True) -> None:
    """Add the ``--expect-*`` options to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The sub-command's parser.
    epsilon : bool
        Also add ``--expect-epsilon-min/max`` (SanText(+); a DP-BART bundle fixes no ε).
    """
    group = parser.add_argument_group("pinning (refuse a verified bundle that is not the expected one)")
    group.add_argument("--expect-mechanism", action="append", choices=_registry.names(), default=None,
                       metavar="MECH",
                       help=f"required mechanism (repeatable: any of them); one of {_registry.names()}")
    if epsilon:
        group.add_argument("--expect-epsilon-min", type=_positive_float, default=None, metavar="EPS",
                           help="refuse a bundle whose epsilon is below EPS")
        group.add_argument("--expect-epsilon-max", type=_positive_float, default=None, metavar="EPS",
                           help="refuse a bundle whose epsilon is above EPS")
    group.add_argument("--expect-bundle-id", default=None, metavar="ID",
                       help="the exact bundle id (64 hex digits, shown by `ldptext bundle verify`)")
    group.add_argument("--expect-min-format-version", type=int, default=None, metavar="N",
                       help="refuse bundles of an older format version")


def expectation_from_args(args: argparse.Namespace) -> BundleExpectation | None:
    """The ``expect=`` for a runtime's ``load`` from :func:`add_pinning_options`' options.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options.

    Returns
    -------
    BundleExpectation or None
        ``None`` when no ``--expect-*`` option was given.

    Raises
    ------
    ParameterError
        An option value outside its domain (e.g. a malformed bundle id).
    """
    fields = {
        "mechanism": tuple(args.expect_mechanism) if getattr(args, "expect_mechanism", None) else None,
        "epsilon_min": getattr(args, "expect_epsilon_min", None),
        "epsilon_max": getattr(args, "expect_epsilon_max", None),
        "bundle_id": getattr(args, "expect_bundle_id", None),
        "min_format_version": getattr(args, "expect_min_format_version", None),
    }
    if all(v is None for v in fields.values()):
        return None
    if fields["bundle_id"] is not None:
        fields["bundle_id"] = fields["bundle_id"].strip().lower()
    try:
        return BundleExpectation(**fields)
    except ParameterError as e:
        raise ParameterError(f"pinning option: {e}") from None
