"""Privacy-budget ledger: exact basic composition, refusal without recording, authenticated
encryption (tamper, truncation, wrong key are refused and never reset), crash safety (a writer killed
at every step of a write, and by SIGKILL at random times, never loses an acknowledged spend), and no
overspending by concurrent threads or processes."""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest

from ldptext import ledger as L
from ldptext.errors import BudgetExceededError, LedgerError, ParameterError
from ldptext.ledger import Ledger

KEY = bytes(range(32))


@pytest.fixture()
def path(tmp_path):
    return tmp_path / "budget.ledger"


def test_charges_sum_and_refuse_beyond_budget(path):
    led = Ledger(path, budget=3.0, delta_budget=1e-6, key=KEY)
    r1 = led.charge(1.0, label="santext")
    r2 = led.charge(1.5, 5e-7, label="dpbart")
    assert (r1.seq, r2.seq) == (1, 2) and r2.spent_epsilon == 2.5 and r2.spent_delta == 5e-7
    with pytest.raises(BudgetExceededError):
        led.charge(0.75)               # ε would exceed
    with pytest.raises(BudgetExceededError):
        led.charge(0.1, 6e-7)          # δ would exceed
    assert len(led) == 2 and led.spent() == (2.5, 5e-7)   # refusals are not recorded
    led.charge(0.5)                    # exactly the budget is allowed
    assert led.remaining()[0] == 0.0
    assert [r.label for r in led.receipts()] == ["santext", "dpbart", ""]


def test_spend_context_charges_before_the_body(path):
    led = Ledger(path, budget=1.0, key=KEY)
    with pytest.raises(RuntimeError):
        with led.spend(0.4) as receipt:
            assert led.spent()[0] == 0.4 and receipt.seq == 1
            raise RuntimeError("output failed")
    assert led.spent()[0] == 0.4      # no refund
    with pytest.raises(BudgetExceededError):
        with led.spend(0.7):
            pytest.fail("body ran although the budget was exceeded")


def test_composition_is_exact_and_never_rounds_in_the_users_disfavour(path):
    # the float 0.1 is slightly MORE than 1/10, so ten of them exceed a budget of exactly 1.0
    led = Ledger(path, budget=1.0, key=KEY)
    for _ in range(9):
        led.charge(0.1)
    with pytest.raises(BudgetExceededError):
        led.charge(0.1)
    # a budget that is the float sum admits what exact arithmetic admits, nothing more
    assert led.spent()[0] >= 0.9 and led.remaining()[0] <= 1.0 - 0.9
    led2 = Ledger(path.with_name("b.ledger"), budget=0.75, key=KEY)
    for _ in range(3):
        led2.charge(0.25)  # dyadic values sum exactly
    assert led2.remaining() == (0.0, 0.0)


@pytest.mark.parametrize("eps, delta", [(float("nan"), 0), (-1.0, 0), (float("inf"), 0),
                                        (1.0, 1.5), (1.0, -1e-9), (True, 0), ("1", 0),
                                        (1.0, float("nan"))])
def test_invalid_amounts_are_parameter_errors(path, eps, delta):
    led = Ledger(path, budget=10.0, key=KEY)
    with pytest.raises(ParameterError):
        led.charge(eps, delta)
    assert len(led) == 0


def test_numpy_scalars_are_accepted(path):
    led = Ledger(path, budget=10.0, key=KEY)
    led.charge(np.float64(1.5), np.float32(0.0))
    assert led.spent()[0] == 1.5


def test_budget_is_fixed_at_creation(path):
    with pytest.raises(LedgerError):
        Ledger(path, key=KEY)                          # no budget to create with
    with pytest.raises(LedgerError):
        Ledger(path, budget=1.0, key=KEY, create=False)
    Ledger(path, budget=2.0, delta_budget=1e-5, key=KEY).charge(1.0)
    assert Ledger(path, key=KEY).budget == 2.0         # None: use the stored budget
    with pytest.raises(LedgerError):
        Ledger(path, budget=5.0, key=KEY)              # cannot raise it by reopening
    with pytest.raises(LedgerError):
        Ledger(path, budget=2.0, delta_budget=1e-3, key=KEY)
    with pytest.raises(LedgerError):
        Ledger(path, budget=2.0, key=b"short")


def test_a_ledger_counts_in_one_unit_fixed_at_creation(path):
    led = Ledger(path, budget=10.0, unit="metric:glove-6b-50d", key=KEY)
    assert led.unit == "metric:glove-6b-50d"
    led.charge(2.0, label="doc", unit="metric:glove-6b-50d")
    for other in ("ldp", "metric:minilm"):  # amounts of other guarantees do not add up
        with pytest.raises(LedgerError, match="unit"):
            led.charge(1.0, unit=other)
    with pytest.raises(LedgerError, match="unit"):
        led.charge(1.0)                               # the default unit is "ldp"
    assert led.spent() == (2.0, 0.0) and len(led) == 1  # refused charges record nothing
    assert Ledger(path, key=KEY).unit == "metric:glove-6b-50d"
    with pytest.raises(LedgerError, match="unit"):
        Ledger(path, unit="ldp", key=KEY)             # cannot change it by reopening
    with pytest.raises(ParameterError):
        Ledger(path.with_name("x.ledger"), budget=1.0, unit="Bad Unit!", key=KEY)


def test_default_unit_is_ldp(path):
    led = Ledger(path, budget=1.0, key=KEY)
    assert led.unit == "ldp"
    led.charge(0.5, unit="ldp")
    assert led.spent()[0] == 0.5


def _flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0x10
    path.write_bytes(bytes(data))


def test_tampered_truncated_or_foreign_ledger_is_refused_not_reset(path):
    led = Ledger(path, budget=5.0, key=KEY)
    led.charge(2.0)
    good = path.read_bytes()
    n = 0
    for offset in range(0, len(good), max(1, len(good) // 60)):
        _flip(path, offset)
        with pytest.raises(LedgerError):
            led.charge(0.1)
        with pytest.raises(LedgerError):
            Ledger(path, key=KEY)
        assert path.read_bytes() != good  # still the damaged file: nothing was reset
        path.write_bytes(good)
        n += 1
    for cut in (0, 1, 8, 20, len(good) - 1):
        path.write_bytes(good[:cut])
        with pytest.raises(LedgerError):
            led.spent()
        n += 1
    path.write_bytes(good + b"\0")
    with pytest.raises(LedgerError):
        led.spent()
    path.write_bytes(good)
    with pytest.raises(LedgerError):
        Ledger(path, key=bytes(32))                    # wrong key
    assert Ledger(path, key=KEY).spent()[0] == 2.0     # the original is intact and usable
    assert n > 60


def test_ledger_file_is_private(path):
    Ledger(path, budget=1.0, key=KEY)
    assert os.stat(path).st_mode & 0o077 == 0


def test_compaction_keeps_exact_totals(path, monkeypatch):
    monkeypatch.setattr(L, "MAX_ENTRIES", 5)
    led = Ledger(path, budget=100.0, key=KEY)
    for i in range(23):
        led.charge(0.5 + i / 8)
    assert len(led) == 23 and len(led.receipts()) == 5
    assert led.spent()[0] == sum(0.5 + i / 8 for i in range(23))
    assert led.receipts()[-1].seq == 23


def test_threads_never_overspend(path):
    led = Ledger(path, budget=40.0, key=KEY)
    ok, refused = [], []

    def spender():
        other = Ledger(path, key=KEY)  # separate objects on one file, too
        for _ in range(8):
            try:
                (led if threading.get_ident() % 2 else other).charge(1.0)
                ok.append(1)
            except BudgetExceededError:
                refused.append(1)

    threads = [threading.Thread(target=spender) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 40 and len(refused) == 24
    assert led.spent()[0] == 40.0 and len(led) == 40


CHILD = textwrap.dedent("""
    import os, sys
    from ldptext import ledger as L
    from ldptext.errors import BudgetExceededError
    path, key, attempts = sys.argv[1], bytes.fromhex(sys.argv[2]), int(sys.argv[3])
    crash_at = sys.argv[4] if len(sys.argv) > 4 else ""
    led = L.Ledger(path, key=key)
    ok = 0
    for i in range(attempts):
        if crash_at and i == attempts - 1:
            L._CRASH_HOOK = lambda step: os._exit(70) if step == crash_at else None
        try:
            r = led.charge(1.0, label="child")
            ok += 1
            print("ack", r.seq, flush=True)
        except BudgetExceededError:
            pass
    print("done", ok, flush=True)
""")


def _child(path, attempts, crash_at=""):
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), KEY.hex(), str(attempts),
                             crash_at], stdout=subprocess.PIPE, text=True)


def test_processes_never_overspend(path):
    Ledger(path, budget=30.0, key=KEY)
    procs = [_child(path, 12) for _ in range(4)]
    total = 0
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        total += int(out.split()[-1])
    assert total == 30
    assert Ledger(path, key=KEY).spent()[0] == 30.0


@pytest.mark.parametrize("step", ["tmp-written", "tmp-synced", "renamed", "dir-synced"])
def test_crash_at_every_write_step_loses_no_acknowledged_spend(path, step):
    Ledger(path, budget=100.0, key=KEY)
    p = _child(path, 4, crash_at=step)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 70, out
    acked = [int(line.split()[1]) for line in out.splitlines() if line.startswith("ack")]
    assert acked == [1, 2, 3]
    led = Ledger(path, key=KEY)  # the file authenticates after the crash
    n = len(led)
    # before the rename the 4th spend is not there; from the rename on it is (never half)
    assert n == (3 if step in ("tmp-written", "tmp-synced") else 4)
    led.charge(1.0)              # and the ledger keeps working; the stale temporary is removed
    assert not list(path.parent.glob(f".{path.name}.*.tmp"))
    assert len(led) == n + 1


def test_sigkill_at_random_times_never_loses_an_acknowledged_spend(path):
    Ledger(path, budget=1e9, key=KEY)
    rng = np.random.default_rng(5)
    acknowledged = 0
    for _ in range(4):
        p = _child(path, 10_000)
        deadline = time.monotonic() + 0.05 + 0.25 * float(rng.random())
        seen = 0
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if line.startswith("ack"):
                seen = int(line.split()[1])
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        rest = p.stdout.read()
        for line in rest.splitlines():  # acks already written before the kill count too
            if line.startswith("ack"):
                seen = int(line.split()[1])
        p.stdout.close()
        led = Ledger(path, key=KEY)
        assert len(led) >= seen >= acknowledged
        acknowledged = len(led)
    assert acknowledged > 0


def test_keyring_is_optional(path, monkeypatch):
    monkeypatch.setitem(sys.modules, "keyring", None)  # import fails
    with pytest.raises(LedgerError, match="key"):
        Ledger(path, budget=1.0)


def test_keyring_backend_supplies_and_keeps_the_key(path, monkeypatch):
    store = _fake_keyring(monkeypatch)
    Ledger(path, budget=2.0).charge(1.5)
    assert len([u for _, u in store if u.startswith("ledger:")]) == 1  # one key (and a rollback record)
    assert Ledger(path).spent()[0] == 1.5
    kr = sys.modules["keyring"]
    kr.get_keyring = lambda: kr.backends.fail.Keyring()   # keyring's "no backend" answer
    with pytest.raises(LedgerError, match="keyring"):
        Ledger(path)


def test_spent_rounding_helpers():
    from fractions import Fraction
    x = Fraction(1, 10)
    assert L._round_up(x) >= x and L._round_down(x) <= x
    assert math.isclose(L._round_up(x), 0.1)


# ---- binding, passphrase, keyring message, bounded state (format 2) ---------------------------

def _state(led):
    with led._locked():
        return led._read()


def test_a_ledger_file_copied_to_another_path_is_refused(tmp_path):
    a, b = tmp_path / "a.ledger", tmp_path / "b.ledger"
    Ledger(a, budget=5.0, key=KEY).charge(4.0)
    Ledger(b, budget=5.0, key=KEY).charge(1.0)
    b.write_bytes(a.read_bytes())                        # another ledger's file over b's path
    with pytest.raises(LedgerError, match="another ledger or path"):
        Ledger(b, key=KEY)
    moved = tmp_path / "sub" / "a.ledger"
    moved.parent.mkdir()
    moved.write_bytes(a.read_bytes())                    # the same ledger, moved by copying
    with pytest.raises(LedgerError):
        Ledger(moved, key=KEY)
    assert Ledger(a, key=KEY).spent()[0] == 4.0          # the original still opens at its own path


def test_header_ledger_id_and_salt_are_authenticated(path):
    Ledger(path, budget=5.0, passphrase="correct horse").charge(1.0)
    data = path.read_bytes()
    for field in (b'"ledger_id":"', b'"salt":"'):
        i = data.index(field) + len(field)
        forged = bytearray(data)
        forged[i] = ord("0") if forged[i] != ord("0") else ord("1")
        path.write_bytes(bytes(forged))
        with pytest.raises(LedgerError):
            Ledger(path, passphrase="correct horse")
    path.write_bytes(data)
    assert Ledger(path, passphrase="correct horse").spent()[0] == 1.0


def test_passphrase_ledger(path):
    led = Ledger(path, budget=3.0, passphrase="correct horse")
    led.charge(2.0)
    raw = path.read_bytes()
    assert b'"name":"scrypt"' in raw and b"correct horse" not in raw   # salt in clear, secret not
    assert Ledger(path, passphrase=b"correct horse").spent()[0] == 2.0
    with pytest.raises(LedgerError, match="fails authentication"):
        Ledger(path, passphrase="wrong")
    with pytest.raises(LedgerError, match="passphrase"):
        Ledger(path, key=KEY)                            # names the fix
    with pytest.raises(ParameterError):
        Ledger(path, key=KEY, passphrase="x")
    with pytest.raises(ParameterError):
        Ledger(path, passphrase="")
    other = path.with_name("other.ledger")
    Ledger(other, budget=1.0, passphrase="correct horse")
    salt = lambda p: L.Ledger._split(led, p.read_bytes())[1]["kdf"]["salt"]  # noqa: E731
    assert salt(other) != salt(path)                     # per-ledger random salt


def test_key_ledger_refuses_a_passphrase(path):
    Ledger(path, budget=1.0, key=KEY)
    with pytest.raises(LedgerError, match="not created with a passphrase"):
        Ledger(path, passphrase="x")


def _write_format1(path, state, key=KEY):
    """A ledger file as the format-1 code wrote it (magic-only associated data)."""
    import json as _json

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    nonce = os.urandom(12)
    plain = _json.dumps(state, separators=(",", ":")).encode()
    path.write_bytes(L.MAGIC_V1 + nonce + AESGCM(key).encrypt(nonce, plain, L.MAGIC_V1))


def test_format1_ledger_is_read_and_migrated_on_first_write(path):
    entries = [{"seq": i + 1, "epsilon": 0.25, "delta": 0.0, "label": "old", "time": "t"} for i in range(300)]
    _write_format1(path, {"version": 1, "ledger_id": "ab" * 16, "created": "t", "composition": "basic",
                          "budget": {"epsilon": 1000.0, "delta": 0.0},
                          "carried": {"epsilon": "5", "delta": "0", "count": 20},
                          "generation": 300, "entries": entries})
    led = Ledger(path, key=KEY)
    assert led.spent()[0] == 80.0 and len(led) == 320 and led.unit == "ldp"
    assert path.read_bytes().startswith(L.MAGIC_V1)      # reading does not rewrite
    r = led.charge(1.0)
    assert r.seq == 321 and r.spent_epsilon == 81.0
    assert path.read_bytes().startswith(L.MAGIC)         # migrated, now bound to its path
    assert Ledger(path, key=KEY).spent()[0] == 81.0 and len(led) == 321
    assert len(led.receipts()) == L.MAX_ENTRIES and led.receipts()[-1].spent_epsilon == 81.0


def test_stored_state_stays_bounded(path):
    led = Ledger(path, budget=1e9, key=KEY)
    sizes = []
    for i in range(3 * L.MAX_ENTRIES):
        led.charge(0.1, label="x")
        if i + 1 in (L.MAX_ENTRIES, 3 * L.MAX_ENTRIES):
            sizes.append(path.stat().st_size)
    state = _state(led)
    assert len(state["entries"]) == L.MAX_ENTRIES and state["total"]["count"] == 3 * L.MAX_ENTRIES
    assert sizes[1] < 1.1 * sizes[0]                     # older entries folded, not kept
    from fractions import Fraction
    assert Fraction(state["total"]["epsilon"]) == 3 * L.MAX_ENTRIES * Fraction(0.1)
    assert led.receipts()[0].seq == 2 * L.MAX_ENTRIES + 1


def test_keyring_missing_names_the_extra_and_the_alternatives(path, monkeypatch):
    monkeypatch.setitem(sys.modules, "keyring", None)
    with pytest.raises(LedgerError) as e:
        Ledger(path, budget=1.0)
    msg = str(e.value)
    assert "ldptext[keyring]" in msg and "key=" in msg and "passphrase=" in msg and "\n" not in msg


def test_an_infinite_epsilon_release_is_never_charged(path):
    """Evaluation-only releases (ε = ∞, no privacy) are refused by the runtime's one charging call
    with a message that says why, and nothing is recorded."""
    from ldptext import runtime
    led = Ledger(path, budget=1e300, key=KEY)
    with pytest.raises(ParameterError, match="evaluation only"):
        runtime.charge(led, math.inf, 0.0, "dpbart")
    assert len(led) == 0 and led.spent() == (0.0, 0.0)
    runtime.charge(None, math.inf, 0.0, "dpbart")  # no ledger: nothing to charge, nothing refused


def test_a_ledger_reached_through_a_symlinked_directory_is_the_same_ledger(tmp_path):
    real = tmp_path / "private" / "var"
    real.mkdir(parents=True)
    (tmp_path / "var").symlink_to(real)          # as macOS's /var -> /private/var
    via_link = tmp_path / "var" / "budget.ledger"
    Ledger(via_link, budget=5.0, key=KEY).charge(1.0)
    led = Ledger(real / "budget.ledger", key=KEY)  # the same file by its real path: not "copied"
    assert led.spent()[0] == 1.0
    led.charge(2.0)
    assert Ledger(via_link, key=KEY).spent()[0] == 3.0
    copy = tmp_path / "elsewhere.ledger"
    copy.write_bytes((real / "budget.ledger").read_bytes())
    with pytest.raises(LedgerError, match="fails authentication"):  # a copy is still refused
        Ledger(copy, key=KEY)


def test_a_file_bound_to_the_unresolved_path_is_still_read_and_rebound(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    via_link = tmp_path / "link" / "budget.ledger"
    monkeypatch.setattr(L.os.path, "realpath", lambda p: p)  # as written before real paths were bound
    Ledger(via_link, budget=5.0, key=KEY).charge(1.0)
    monkeypatch.undo()
    led = Ledger(via_link, key=KEY)
    assert led.spent()[0] == 1.0
    led.charge(1.0)                                           # rewritten, now bound to the real path
    assert Ledger(real / "budget.ledger", key=KEY).spent()[0] == 2.0


def _fake_keyring(monkeypatch) -> dict:
    """An in-memory keyring backend installed as the ``keyring`` module; returns its store."""
    store: dict = {}
    fail_mod = types.ModuleType("keyring.backends.fail")
    fail_mod.Keyring = type("FailKeyring", (), {"priority": 0})
    backends = types.ModuleType("keyring.backends")
    backends.fail = fail_mod
    kr = types.ModuleType("keyring")
    kr.backends = backends
    kr.get_keyring = lambda: types.SimpleNamespace(priority=5)
    kr.get_password = lambda service, user: store.get((service, user))
    kr.set_password = lambda service, user, pw: store.__setitem__((service, user), pw)
    monkeypatch.setitem(sys.modules, "keyring", kr)
    monkeypatch.setitem(sys.modules, "keyring.backends", backends)
    monkeypatch.setitem(sys.modules, "keyring.backends.fail", fail_mod)
    return store


def test_with_a_keyring_an_older_copy_restored_over_the_ledger_is_refused(path, monkeypatch):
    _fake_keyring(monkeypatch)
    led = Ledger(path, budget=5.0, key=KEY)
    led.charge(1.0)
    old = path.read_bytes()                       # an authentic copy after the first spend
    led.charge(3.0)
    path.write_bytes(old)                         # restored: 4 spent becomes 1
    with pytest.raises(LedgerError, match="older copy was restored"):
        Ledger(path, key=KEY)
    with pytest.raises(LedgerError, match="older copy"):
        led.charge(3.0)                           # an open ledger re-reads the file: refused too


def test_with_a_keyring_a_deleted_ledger_is_not_silently_restarted(path, monkeypatch):
    _fake_keyring(monkeypatch)
    Ledger(path, budget=5.0, key=KEY).charge(4.0)
    path.unlink()
    with pytest.raises(LedgerError, match="deleted"):
        Ledger(path, budget=5.0, key=KEY)


def test_with_a_keyring_a_crash_before_the_record_is_accepted(path, monkeypatch):
    store = _fake_keyring(monkeypatch)
    led = Ledger(path, budget=5.0, key=KEY)
    led.charge(1.0)
    stale = dict(store)
    led.charge(1.0)
    store.clear()
    store.update(stale)                           # the file was renamed, the keyring write never happened
    assert Ledger(path, key=KEY).spent()[0] == 2.0
    led.charge(1.0)                               # and re-recorded
    assert Ledger(path, key=KEY).spent()[0] == 3.0
