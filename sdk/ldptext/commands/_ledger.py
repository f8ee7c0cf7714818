"""``--ledger PATH`` for ``ldptext sanitize`` and ``ldptext rewrite``: charge every release to a
privacy-budget ledger (:class:`ldptext.ledger.Ledger`) before its output is written.

The first run names the total budget (``--budget B``, and for DP-BART ``--delta-budget D``), which
creates the ledger in the runtime's unit; later runs may repeat it (it must match) or leave it out.
The ledger's key comes from ``--ledger-passphrase-file`` / ``--ledger-passphrase-env`` or, without
either, from the OS keyring (the ``keyring`` extra). Each batch of lines is one charge: when the
ledger refuses it (exit status 6) the batch is not written, while earlier batches were; a ledger
that cannot be read, authenticated or written exits 7. Every option value is checked before the
bundle is opened.
"""
from __future__ import annotations

import argparse
import math
import os
from typing import TYPE_CHECKING, Any

from ..errors import ParameterError

if TYPE_CHECKING:  # pragma: no cover
    from ..ledger import Ledger


def add_ledger_options(p: argparse.ArgumentParser, *, delta: bool) -> None:
    """Add ``--ledger``, ``--budget`` (and ``--delta-budget`` when ``delta``) and the key options.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The ``sanitize`` or ``rewrite`` parser.
    delta : bool
        Whether releases have a δ (DP-BART's Gaussian mechanism).
    """
    group = p.add_argument_group("privacy budget (charge every release to a ledger)")
    group.add_argument("--ledger", default=None, metavar="PATH",
                       help="encrypted privacy-budget ledger: every batch of lines is charged before it is "
                            "written; exit 6 when the budget would be exceeded, 7 when the ledger is unusable")
    group.add_argument("--budget", default=None, metavar="B",
                       help="total epsilon of the ledger: needed to create it (first use of PATH); must match "
                            "the recorded budget afterwards")
    if delta:
        group.add_argument("--delta-budget", default=None, metavar="D",
                           help="total delta of a new ledger, in [0, 1] (default 0: only Laplace releases fit)")
    key = group.add_mutually_exclusive_group()
    key.add_argument("--ledger-passphrase-file", default=None, metavar="F",
                     help="derive the ledger's key from the passphrase in this file (first line); default: "
                          "the OS keyring (pip install 'ldptext[keyring]')")
    key.add_argument("--ledger-passphrase-env", default=None, metavar="VAR",
                     help="derive the ledger's key from the passphrase in this environment variable")


def _amount(text: str | None, option: str, upper: float = math.inf) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(f"{option} must be a number, got {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= upper):
        raise ParameterError(f"{option} must be finite and in [0, {upper:g}], got {text!r}")
    return value


def check_ledger_options(args: argparse.Namespace) -> None:
    """Validate the ledger options before anything is opened (usage errors exit 2 first).

    Raises
    ------
    ParameterError
        A budget without ``--ledger``, a value outside its domain, or a new ledger without ``--budget``.
    """
    delta_text = getattr(args, "delta_budget", None)
    if args.ledger is None:
        for option, value in (("--budget", args.budget), ("--delta-budget", delta_text),
                              ("--ledger-passphrase-file", args.ledger_passphrase_file),
                              ("--ledger-passphrase-env", args.ledger_passphrase_env)):
            if value is not None:
                raise ParameterError(f"{option} needs --ledger PATH")
        return
    args.budget_value = _amount(args.budget, "--budget")
    args.delta_budget_value = _amount(delta_text, "--delta-budget", 1.0)
    path = os.path.expanduser(args.ledger)
    if os.path.isdir(path):
        raise ParameterError(f"--ledger {args.ledger} is a directory; it names the ledger file")
    if args.budget_value is None and not os.path.lexists(path):
        raise ParameterError(f"--ledger {args.ledger} does not exist yet: give --budget B to create it")
    if args.ledger_passphrase_env is not None and not os.environ.get(args.ledger_passphrase_env):
        raise ParameterError(f"--ledger-passphrase-env: the environment variable "
                             f"{args.ledger_passphrase_env} is not set or empty")


def _passphrase(args: argparse.Namespace) -> bytes | None:
    if args.ledger_passphrase_env is not None:
        return os.environ[args.ledger_passphrase_env].encode("utf-8")
    if args.ledger_passphrase_file is None:
        return None
    try:
        with open(args.ledger_passphrase_file, "rb") as f:
            first = f.readline().rstrip(b"\r\n")
    except OSError as e:
        raise ParameterError(f"--ledger-passphrase-file: cannot read it: {e.strerror}") from None
    if not first:
        raise ParameterError("--ledger-passphrase-file: the first line is empty")
    return first


def open_ledger(args: argparse.Namespace, unit: str) -> "Ledger | None":
    """The ledger named by ``--ledger`` (created in ``unit`` on first use), or ``None`` without it.

    Parameters
    ----------
    args : argparse.Namespace
        Options checked by :func:`check_ledger_options`.
    unit : str
        The runtime's ledger unit (``Sanitizer.ledger_unit``, ``"ldp"`` for DP-BART).

    Raises
    ------
    LedgerError
        The ledger cannot be read, authenticated, written, or counts in another unit or budget.
    """
    if args.ledger is None:
        return None
    from ..ledger import Ledger

    return Ledger(args.ledger, budget=args.budget_value, delta_budget=args.delta_budget_value, unit=unit,
                  passphrase=_passphrase(args))


def attach_ledger(runtime: Any, args: argparse.Namespace, unit: str) -> None:
    """Give ``runtime`` the ``--ledger`` (if any), after checking it counts in the runtime's unit."""
    from ..runtime import check_ledger_unit

    ledger = open_ledger(args, unit)
    if ledger is not None:
        check_ledger_unit(ledger, unit)
        runtime.ledger = ledger
