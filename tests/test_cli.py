"""The ``ldptext`` command shell: version, one clear line when an optional extra is missing, one exit
status per kind of error (usage 2, input 3, bundle 4, trust 5, budget 6, ledger 7, extra 8, Ctrl-C 130),
and help text on every option of every command (runtime and offline)."""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import ldptext
from ldptext import cli
from ldptext import errors as E
from ldptext.cli import EXIT_MISSING_EXTRA, EXTRAS, main


def test_version_names_the_backend_available(capsys, monkeypatch):
    from ldptext import rng
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"ldptext {ldptext.__version__} (backend: {rng.available_backend()})"
    monkeypatch.setattr(rng, "_native", None)  # an install without the C extension says so
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"ldptext {ldptext.__version__} (backend: fallback)"


def _run_without(module: str, args: list[str]) -> subprocess.CompletedProcess:
    # None in sys.modules makes `import module` raise ModuleNotFoundError, as if it were not installed
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from ldptext.cli import main\n"
            f"sys.exit(main({args!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_missing_precompute_extra_is_one_line_naming_it(tmp_path):
    r = _run_without("torch", ["precompute", "dpbart", "--out", str(tmp_path / "x.ldpb")])
    assert r.returncode == EXIT_MISSING_EXTRA == 8
    assert r.stderr.strip().splitlines() == [
        "ldptext: error: this command needs the optional dependency 'torch': pip install 'ldptext[precompute]'"]


def test_missing_evaluate_extra_is_one_line_naming_it(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("text,label\n" + "".join(f"doc {i},{i % 2}\n" for i in range(20)), encoding="utf-8")
    r = _run_without("sklearn", ["evaluate", "--data", str(csv), "--epsilon", "1", "--seeds", "1",
                                 "--baselines", "no", "--mechanism", "santext", "--vocab-size", "500",
                                 "--no-plots", "--quiet", "--out", str(tmp_path / "out")])
    assert r.returncode == EXIT_MISSING_EXTRA, r.stderr
    assert "pip install 'ldptext[evaluate]'" in r.stderr
    assert "Traceback" not in r.stderr


def test_every_extra_named_exists_in_setup():
    setup = (ldptext.__file__.rsplit("sdk", 1)[0] + "setup.py")
    text = open(setup, encoding="utf-8").read()
    for extra in set(EXTRAS.values()):
        assert f'"{extra}":' in text, extra


# ---- exit status: usage errors vs runtime errors (README "Command line") -----------------------------
ERROR_STATUS = [
    (E.ParameterError("--epsilon must be > 0"), 2),
    (E.InputError("input line 3 is not valid UTF-8"), 3),
    (E.BundleError("bundle file not found: x"), 4),
    (E.BundleFormatError("not an ldptext bundle"), 4),
    (E.BundleIntegrityError("hash differs"), 4),
    (E.BundleExpectationError("not the pinned bundle"), 4),
    (E.ParameterMismatchError("epsilon is not what the tables realise"), 4),
    (E.SignatureError("signature does not verify"), 5),
    (E.UnsignedBundleError("bundle is unsigned"), 5),
    (E.UnknownKeyError("untrusted key"), 5),
    (E.KeyFileError("wrong passphrase"), 5),
    (E.BudgetExceededError("over budget"), 6),
    (E.LedgerError("ledger tampered"), 7),
    (E.ClosedError("closed"), 1),
    (E.LdptextError("something else"), 1),
]


@pytest.mark.parametrize("error,status", ERROR_STATUS, ids=[type(e).__name__ for e, _ in ERROR_STATUS])
def test_each_kind_of_error_has_its_own_exit_status(error, status, monkeypatch, capsys):
    from ldptext.commands import keys as keys_cmd

    def fail(args):
        raise error
    monkeypatch.setattr(keys_cmd, "run_list", fail)  # bound when the parser is built
    assert cli.exit_status(error) == status
    assert main(["keys", "list"]) == status
    err = capsys.readouterr().err
    assert err == f"ldptext: error: {error}\n"  # one line


def test_interrupt_exits_130(monkeypatch):
    from ldptext.commands import keys as keys_cmd

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(keys_cmd, "run_list", interrupted)
    assert main(["keys", "list"]) == cli.EXIT_INTERRUPTED == 130


def test_usage_errors_exit_2_and_runtime_errors_do_not(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:  # argparse: missing required option
        main(["sanitize", "-"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:  # argparse: unknown option
        main(["bundle", "verify", "--no-such-option", "x"])
    assert e.value.code == 2
    # an option value outside its domain (ParameterError): usage, before the bundle is opened
    assert main(["sanitize", "--bundle", str(tmp_path / "missing.ldpb"), "--expect-bundle-id", "xyz", "-"]) == 2
    assert main(["keys", "trust"]) == 2                      # neither PUBFILE nor --developer
    assert main(["sanitize", "--bundle", str(tmp_path / "missing.ldpb"), "-"]) == 4    # bundle
    assert main(["sanitize", "--bundle", str(tmp_path), "-"]) == 4                      # a directory
    capsys.readouterr()


@pytest.mark.parametrize("argv, where", [
    (["sanitize"], "ldptext sanitize"),                                  # a required option missing
    (["sanitize", "--bundle", "b.ldpb", "--no-such-option"], "ldptext sanitize"),  # unknown option
    (["sanitize", "--bundle", "b.ldpb", "--format", "xml"], "ldptext sanitize"),  # a bad choice
    (["keys", "trust", "a.pub", "extra"], "ldptext keys trust"),         # one positional too many
    (["keys"], "ldptext keys"),
    ([], "ldptext"),
    (["no-such-command"], "ldptext"),
])
def test_usage_errors_are_one_line_with_a_hint_to_help(argv, where, capsys):
    """argparse's usage block (14 lines for sanitize) buried the line saying what was wrong."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err, err
    assert re.fullmatch(rf"ldptext: error: .+; see `{where} --help`\n", err), err


def test_offline_commands_without_the_offline_package_name_the_extra(monkeypatch, capsys):
    monkeypatch.setattr(cli, "entry_points", lambda group: [])  # as on a device install
    for command, extra in (("precompute", "precompute"), ("evaluate", "evaluate"), ("demo", "precompute")):
        assert main([command, "--help"]) == cli.EXIT_MISSING_EXTRA
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"pip install 'ldptext[{extra}]'" in err and "Traceback" not in err
    assert main(["keys", "list"]) == 0  # the runtime commands still work


def test_missing_extra_messages_cover_precompute_evaluate_and_keyring():
    def message(module, command=None):
        return cli.missing_extra_message(ModuleNotFoundError(name=module), command)

    assert message("torch") == "this command needs the optional dependency 'torch': pip install 'ldptext[precompute]'"
    assert message("transformers.models").endswith("'ldptext[precompute]'")
    assert message("matplotlib.pyplot").endswith("'ldptext[evaluate]'")
    assert message("keyring").endswith("'ldptext[keyring]'")
    # a module that two extras install is named by the extra of the failing command
    assert message("sklearn", "precompute").endswith("'ldptext[precompute]'")
    assert message("sklearn", "evaluate").endswith("'ldptext[evaluate]'")
    assert message("numpy") is None  # not optional: the error is not hidden


def test_ledger_without_keyring_names_the_keyring_extra(tmp_path, monkeypatch):
    # no CLI command opens a ledger: the library's own error names the extra
    from ldptext.ledger import Ledger
    monkeypatch.setitem(sys.modules, "keyring", None)  # import fails, as if not installed
    with pytest.raises(E.LedgerError) as e:
        Ledger(tmp_path / "l.ledger", budget=1.0)
    assert "pip install 'ldptext[keyring]'" in str(e.value) and "\n" not in str(e.value)


def test_readme_lists_every_exit_status():
    readme = (Path(ldptext.__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## Command line"):]
    section = section[:section.index("\n## ", 1)]
    rows = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", section, re.M))
    codes = {v for k, v in vars(cli).items() if k.startswith("EXIT_")}
    assert {int(c) for c in rows} == codes
    assert "usage" in rows["2"] and "input" in rows["3"] and "bundle" in rows["4"]
    assert "trust" in rows["5"] and "budget" in rows["6"] and "ledger" in rows["7"] and "extra" in rows["8"]
    for code in codes:  # and the module docstring of ldptext/cli.py
        assert re.search(rf"^{code}\s", cli.__doc__, re.M), code


# ---- help on every option of every command -----------------------------------------------------------
def _undocumented(parser: argparse.ArgumentParser, path: list[str]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not helps.get(name):
                    yield f"{' '.join(path)} {name} (the command itself)"
                yield from _undocumented(sub, path + [name])
        elif not action.help or action.help == argparse.SUPPRESS:
            yield f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"


def test_every_option_of_every_command_has_help():
    parser = cli.build_parser()
    commands = {a for act in parser._actions if isinstance(act, argparse._SubParsersAction) for a in act.choices}
    # the runtime commands and the offline ones (entry point): all of them are checked
    assert {"sanitize", "rewrite", "bundle", "keys", "precompute", "evaluate", "demo"} <= commands
    missing = list(_undocumented(parser, ["ldptext"]))
    assert not missing, "options without help=:\n" + "\n".join(missing)


# ---- warnings and Ctrl-C: one line, never a traceback -------------------------------------------------
def _default_sigint() -> None:
    # a test run started in the background (`make test &`) hands its children SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler: give the child the disposition of a terminal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_code(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          preexec_fn=_default_sigint if os.name == "posix" else None)


def test_warnings_are_one_ldptext_warning_line_without_file_and_line():
    r = _run_code("import sys, warnings\n"
                  "from ldptext import cli\n"
                  "from ldptext.commands import keys\n"
                  "keys.run_list = lambda args: warnings.warn('the bundle is unsigned\\n(development only)')\n"
                  "sys.exit(cli.main(['keys', 'list']))")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "ldptext: warning: the bundle is unsigned (development only)\n"


def test_ctrl_c_while_the_command_is_still_importing_exits_130_quietly():
    # SIGINT arrives while `ldptext` imports its command modules, as a Ctrl-C in the first half second
    r = _run_code("import os, signal, sys\n"
                  "sys.argv = ['ldptext', 'keys', 'list']\n"
                  "class Interrupt:\n"
                  "    def find_spec(self, name, path=None, target=None):\n"
                  "        if name == 'ldptext.commands':\n"
                  "            os.kill(os.getpid(), signal.SIGINT)\n"
                  "        return None\n"
                  "sys.meta_path.insert(0, Interrupt())\n"
                  "from ldptext.cli import main\n"
                  "sys.exit(main())")
    assert r.returncode == 130
    assert r.stderr == "" and r.stdout == ""


def test_ctrl_c_during_a_command_still_reaches_it_as_keyboard_interrupt():
    # once the parser is built, Python's own handler is back: commands clean up on KeyboardInterrupt
    r = _run_code("import os, signal, sys\n"
                  "sys.argv = ['ldptext', 'keys', 'list']\n"
                  "from ldptext import cli\n"
                  "from ldptext.commands import keys\n"
                  "def run(args):\n"
                  "    try:\n"
                  "        os.kill(os.getpid(), signal.SIGINT)\n"
                  "        signal.pause() if hasattr(signal, 'pause') else None\n"
                  "    except KeyboardInterrupt:\n"
                  "        print('cleaned up')\n"
                  "        raise\n"
                  "keys.run_list = run\n"
                  "sys.exit(cli.main())")
    assert r.returncode == 130 and r.stdout == "cleaned up\n" and r.stderr == ""


def test_parquet_and_spark_runs_without_their_extra_name_it(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["a b"]}), src)
    common = ["sanitize", "--bundle", str(tmp_path / "b.ldpb"), "--input", str(src), "--column", "text",
              "--output", str(tmp_path / "out.parquet")]
    r = _run_without("pyarrow", common)
    assert r.returncode == EXIT_MISSING_EXTRA, r.stderr
    assert r.stderr.strip().splitlines() == [
        "ldptext: error: this command needs the optional dependency 'pyarrow': pip install 'ldptext[parquet]'"]
    r = _run_without("pyarrow", common + ["--engine", "spark"])
    assert r.returncode == EXIT_MISSING_EXTRA and "pip install 'ldptext[spark]'" in r.stderr
    r = _run_without("pyspark", common + ["--engine", "spark"])
    assert r.returncode == EXIT_MISSING_EXTRA, r.stderr
    assert "pip install 'ldptext[spark]'" in r.stderr and "Traceback" not in r.stderr
    assert cli.missing_extra_message(ModuleNotFoundError(name="pyarrow"), "precompute").endswith(
        "'ldptext[precompute]'")
