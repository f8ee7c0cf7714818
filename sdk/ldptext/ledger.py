"""Privacy-budget ledger: an encrypted, crash-safe record of every release's (ε, δ) (opt-in).

Use it to cap what one user's device ever releases::

    ledger = Ledger("~/.local/share/myapp/ldp.ledger", budget=50.0, delta_budget=1e-6, key=key32)
    receipt = ledger.charge(epsilon, delta, label="santext doc")   # raises BudgetExceededError
    ...return the output only after charge() returned...

**Contract for the runtimes** (``Sanitizer``, ``Rewriter`` accept ``ledger=``): compute the release,
then call ``ledger.charge(epsilon, delta, label=...)`` exactly once per release, *after* the output
exists and *before* it is returned; if it raises :class:`~ldptext.errors.BudgetExceededError`,
discard the output and let the exception propagate (nothing is output). ``charge`` returns only
after the spend is durably on disk. What to charge: for SanText(+) the document's worst-case LDP
level ``report.document_epsilon`` (n_tokens·(ε·D_max + ε₀)) with δ = 0; for DP-BART each chunk's
(ε, δ), i.e. k·ε and k·δ for a document of k chunks (one charge per document or one per chunk).
``with ledger.spend(ε, δ, label=...) as receipt:`` is the same charge as a context manager.

Units: a ledger counts in one ``unit``, fixed when it is created, and every charge names its unit;
a charge in another unit is refused (:class:`~ldptext.errors.LedgerError`), because amounts of
different guarantees do not add up. ``"ldp"`` (the default) is (ε, δ)-LDP of whole releases
(DP-BART). A metric-LDP mechanism charges in ``"metric:<metric id>"``: ε per unit of distance of
that one metric, which composes by addition only for the same metric (SanText(+) documents
its unit in :class:`ldptext.Sanitizer`).

Composition rule (basic sequential composition): a sequence of releases that are (εᵢ, δᵢ)-LDP is
(Σεᵢ, Σδᵢ)-LDP. A release is allowed iff Σε + ε ≤ budget and Σδ + δ ≤ delta_budget. Sums and
comparisons are exact (rational arithmetic on the float64 values), so rounding can never let a
release through that exact arithmetic would refuse. (Consequence: the float 0.1 is slightly more
than 1/10, so ten charges of 0.1 exceed a budget of exactly 1.0; the mechanism really ran with that
slightly larger ε.) Tighter accountants (advanced composition, RDP)
would allow more releases; basic composition is the conservative choice that needs no assumptions.

Storage (format 2): one file, ``MAGIC || header length (4 bytes, LE) || header || nonce (12 bytes) ||
AES-256-GCM(state JSON)``. The header is canonical JSON in the clear: the ledger id and, for a
passphrase ledger, the key derivation (Scrypt, its parameters and the ledger's random 16-byte salt).
The associated data binds the magic, the whole header **and the ledger's real path** (``~`` expanded,
symlinks resolved, so the same file reached through a symlinked directory, e.g. macOS's ``/var`` →
``/private/var``, is the same ledger): a ledger file copied over another ledger's path, another
ledger's file, or a header with an edited id or salt fails authentication. So a ledger cannot be
moved by copying its file; keep its path stable. Files written before real paths were bound (bound to
the absolute path as given) are still read through that path and re-bound by their next write. The
state repeats the ledger id (checked against the header). Files of format 1 (:data:`MAGIC_V1`, bound
to nothing but the magic) are still read, and rewritten in format 2 by the first charge (migration);
until then they carry no path binding.

Keys, exactly one source:

* ``key=``: 32 bytes from the app;
* ``passphrase=``: the key is derived with Scrypt (n = 2^15, r = 8, p = 1: about 32 MiB and tens of
  milliseconds, once per :class:`Ledger` object) from the passphrase and the per-ledger salt;
* neither: the OS keyring (the ``keyring`` extra, ``pip install 'ldptext[keyring]'``, with a usable
  backend; a random key is created there with a new ledger, stored under the ledger's path). Without
  the package or a backend, one :class:`~ldptext.errors.LedgerError` line names the extra and the
  alternatives.

A file that fails authentication (tampered, truncated, wrong key or passphrase, moved) raises
:class:`~ldptext.errors.LedgerError`; it is never reset or overwritten. Writes are atomic: a temporary
file in the same directory, fsync, rename over the ledger, fsync of the directory; a crash at any
point leaves either the old or the new complete file, so a spend whose ``charge`` returned is never
lost. Threads and processes serialise on a lock file (``<path>.lock``, ``filelock``) plus an
in-process lock, and every charge re-reads the file under the lock, so concurrent spenders can never
overspend.

Size and cost: the state carries exact running totals (ε, δ, count of every release ever) and keeps
only the last :data:`MAX_ENTRIES` releases individually; older ones are folded into an exact carried
total. A charge therefore costs the same whatever the ledger's history (no re-summing), and the file
stays small. :meth:`Ledger.receipts` returns the kept window only; :meth:`Ledger.spent` and ``len``
cover every release.

Rollback. Where the ``keyring`` extra is importable with a usable OS backend, every write also
records the ledger's id, its generation (one more per write) and the SHA-256 of the file in the
keyring, under the ledger's real path; a read then refuses (:class:`~ldptext.errors.LedgerError`) a
file older than that record (an older authentic copy restored over the ledger), a different file of
the same generation, and a new ledger where the record says one existed (the file was deleted). A
file newer than the record (a crash between the file's rename and the keyring write) is accepted and
re-recorded. Not protected without a keyring backend (needs storage the device owner cannot
rewind), nor against a user who can also edit the OS keyring: deleting the ledger file, or replacing
it by an older authentic copy of the same ledger, resets the record to that point. ``create=False``
refuses to start a new ledger when the file is missing; apps should set it after the first run.
"""
from __future__ import annotations

import base64
import datetime as _dt
import glob
import hashlib
import json
import math
import numbers
import os
import re
import struct
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable, Iterator

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from filelock import FileLock, Timeout

from .errors import BudgetExceededError, LedgerError, ParameterError
from .fileio import temporary_pattern, write_bytes_atomic

__all__ = ["Ledger", "Receipt", "KEYRING_SERVICE"]

MAGIC = b"LDPLEDG\x02"
MAGIC_V1 = b"LDPLEDG\x01"      # format 1: read, and migrated by the first write
NONCE_SIZE = 12
STATE_VERSION = 2
_SCRYPT = {"name": "scrypt", "n": 2 ** 15, "r": 8, "p": 1}
_MAX_HEADER = 4096
KEYRING_HINT = ("install the keyring extra (pip install 'ldptext[keyring]') with a usable OS backend, "
                "or pass key= (32 bytes) or passphrase=")
KEYRING_SERVICE = "ldptext-ledger"
MAX_LABEL = 200
DEFAULT_UNIT = "ldp"
_UNIT = re.compile(r"[a-z0-9][a-z0-9:+._-]{0,63}")
# Older entries are folded into an exact carried total beyond this many, so a long-lived ledger's
# file (rewritten on every charge) stays small and a charge costs the same at any age; the totals
# are unaffected.
MAX_ENTRIES = 100
_MAX_FILE = 64 << 20

# Test hook: called with the name of each step of a write ("tmp-written", "tmp-synced", "renamed",
# "dir-synced"); crash-simulation tests set it to a function that kills the process there.
_CRASH_HOOK: Callable[[str], None] | None = None

_PATH_LOCKS: dict[str, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _path_lock(path: Path) -> threading.Lock:
    """One in-process lock per ledger file, shared by every Ledger object opened on it."""
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(str(path), threading.Lock())


def _crash_point(step: str) -> None:
    if _CRASH_HOOK is not None:
        _CRASH_HOOK(step)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _frac(text: str) -> Fraction:
    value = Fraction(text)
    if value < 0:
        raise ValueError("negative total")
    return value


def _round_up(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _round_down(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def _unit(state: dict) -> str:
    """The unit a stored state counts in (ledgers written before units existed count in "ldp")."""
    return state.get("unit", DEFAULT_UNIT)


def _check_unit(unit: str) -> str:
    if not isinstance(unit, str) or not _UNIT.fullmatch(unit):
        raise ParameterError("unit must be 1-64 characters of a-z, 0-9 and ':+._-' (e.g. 'ldp')")
    return unit


def _check_amount(value, name: str, upper: float = math.inf) -> float:
    # numbers.Real covers int, float and numpy scalars; bools and strings are refused
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a real number")
    value = float(value)
    if not (math.isfinite(value) and 0.0 <= value <= upper):
        raise ParameterError(f"{name} must be finite and in [0, {upper:g}]")
    return value


@dataclass(frozen=True)
class Receipt:
    """One recorded release and the ledger's totals right after it."""

    seq: int                 # 1-based sequence number of the release in this ledger
    epsilon: float
    delta: float
    label: str
    time: str                # UTC, ISO 8601
    spent_epsilon: float     # Σε including this release (rounded up)
    spent_delta: float
    budget_epsilon: float
    budget_delta: float

    @property
    def remaining_epsilon(self) -> float:
        """ε left in the budget right after this release (rounded down)."""
        return max(0.0, _round_down(Fraction(self.budget_epsilon) - Fraction(self.spent_epsilon)))


def _keyring_key(path: Path, create: bool, given: Path | None = None) -> bytes:
    """The ledger's key from the OS keyring (optional dependency), created when ``create``; stored under
    the real ``path`` (a key stored under the path as ``given``, before real paths, is still found)."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        raise LedgerError(f"no ledger key and no 'keyring' package: {KEYRING_HINT}") from None
    try:
        backend = keyring.get_keyring()
        if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 1) <= 0:
            raise LedgerError(f"the OS keyring has no usable backend: {KEYRING_HINT}")
        user = f"ledger:{path}"
        stored = keyring.get_password(KEYRING_SERVICE, user)
        if stored is None and given is not None and given != path:
            stored = keyring.get_password(KEYRING_SERVICE, f"ledger:{given}")
        if stored is None:
            if not create:
                raise LedgerError("the OS keyring holds no key for this ledger")
            stored = base64.b64encode(os.urandom(32)).decode()
            keyring.set_password(KEYRING_SERVICE, user, stored)
        key = base64.b64decode(stored, validate=True)
    except LedgerError:
        raise
    except Exception as e:  # keyring backends raise their own types
        raise LedgerError(f"cannot use the OS keyring ({type(e).__name__}): {KEYRING_HINT}") from None
    if len(key) != 32:
        raise LedgerError("the key in the OS keyring is not 32 bytes")
    return key


def _usable_keyring():
    """The ``keyring`` module when it is importable with a usable backend, else ``None``."""
    try:
        import keyring
        from keyring.backends import fail
        backend = keyring.get_keyring()
    except Exception:  # not installed, or a backend that fails to start: no rollback record
        return None
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 1) <= 0:
        return None
    return keyring


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _check_kdf(kdf) -> dict:
    """A stored key-derivation record, bounded so that a hostile header cannot demand huge work."""
    if not isinstance(kdf, dict) or set(kdf) != {"name", "n", "r", "p", "salt"} or kdf["name"] != "scrypt":
        raise LedgerError("ledger header names an unknown key derivation")
    n, r, p = kdf["n"], kdf["r"], kdf["p"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n, r, p)) \
            or not (2 ** 14 <= n <= 2 ** 20 and n & (n - 1) == 0 and 1 <= r <= 16 and 1 <= p <= 4):
        raise LedgerError("ledger header has out-of-range key derivation parameters")
    try:
        salt = base64.b64decode(kdf["salt"], validate=True)
    except (ValueError, TypeError):
        raise LedgerError("ledger header has a malformed salt") from None
    if len(salt) != 16:
        raise LedgerError("ledger header has a malformed salt")
    return kdf


def _derive_key(passphrase: bytes, kdf: dict) -> bytes:
    return Scrypt(salt=base64.b64decode(kdf["salt"]), length=32, n=kdf["n"], r=kdf["r"],
                  p=kdf["p"]).derive(passphrase)


class Ledger:
    """An encrypted, append-only record of privacy spends with a hard budget.

    Parameters
    ----------
    path:
        The ledger file (created with the first open when ``create`` is true). The file is bound to
        this absolute path (see "Storage" in the module docstring).
    budget, delta_budget:
        Total ε and δ this ledger may ever spend. Required to create a ledger, recorded in it, and
        must match (or be ``None``) when an existing ledger is opened.
    unit:
        What ε counts (see "Units" in the module docstring): ``"ldp"`` when a ledger is created
        without one; when given for an existing ledger it must match the recorded unit.
    key:
        32-byte AES-256-GCM key. Give ``key`` or ``passphrase``, not both; neither uses the OS
        keyring (the ``keyring`` extra, see the module docstring).
    passphrase:
        Text or bytes from which the key is derived (Scrypt with the ledger's random salt, stored in
        the file's clear header); a ledger created with a passphrase must be opened with it.
    create:
        Start a new ledger if the file does not exist (``False``: refuse, see "Not protected").
    timeout:
        Seconds to wait for another process's lock before raising LedgerError.

    Thread- and process-safe; see :meth:`charge` for the contract with the runtimes.
    """

    def __init__(self, path: str | os.PathLike, *, budget: float | None = None,
                 delta_budget: float | None = None, unit: str | None = None,
                 key: bytes | None = None, passphrase: bytes | str | None = None, create: bool = True,
                 timeout: float = 60.0) -> None:
        given = os.path.abspath(os.path.expanduser(os.fspath(path)))
        # bound by its real path: one ledger, however a symlinked directory spells it
        self.path = Path(os.path.realpath(given))
        self._given_path = Path(given)  # what older files were bound to (before real paths)
        if key is not None and passphrase is not None:
            raise ParameterError("pass key= or passphrase=, not both")
        if isinstance(passphrase, str):
            passphrase = passphrase.encode("utf-8")
        if passphrase is not None and (not isinstance(passphrase, (bytes, bytearray)) or not passphrase):
            raise ParameterError("passphrase must be non-empty text or bytes")
        if key is None and passphrase is None:
            key = _keyring_key(self.path, create and not self.path.exists(), self._given_path)
        if key is not None and (not isinstance(key, (bytes, bytearray)) or len(key) != 32):
            raise LedgerError("ledger key must be exactly 32 bytes")
        self._kdf: dict | None = None
        self._aead = AESGCM(bytes(key)) if key is not None else None
        self._timeout = float(timeout)
        self._thread_lock = _path_lock(self.path)
        self._file_lock = FileLock(str(self.path) + ".lock")
        want_eps = None if budget is None else _check_amount(budget, "budget")
        want_delta = None if delta_budget is None else _check_amount(delta_budget, "delta_budget",
                                                                     1.0)
        want_unit = None if unit is None else _check_unit(unit)
        with self._locked():
            exists = self.path.exists() or self.path.is_symlink()
            if passphrase is not None:  # under the lock: two creators must agree on one salt
                if exists:
                    kdf = self._peek_header().get("kdf")
                    if kdf is None:
                        raise LedgerError("this ledger was not created with a passphrase: open it with "
                                          "key= or the OS keyring")
                    self._kdf = _check_kdf(kdf)
                else:
                    self._kdf = dict(_SCRYPT, salt=_b64(os.urandom(16)))
                self._aead = AESGCM(_derive_key(bytes(passphrase), self._kdf))
            if exists:
                state = self._read()
                stored_eps, stored_delta = (float(state["budget"]["epsilon"]),
                                            float(state["budget"]["delta"]))
                if want_eps is not None and want_eps != stored_eps:
                    raise LedgerError(f"ledger was created with budget {stored_eps:g}, "
                                      f"not {want_eps:g}")
                if want_delta is not None and want_delta != stored_delta:
                    raise LedgerError(f"ledger was created with delta_budget {stored_delta:g}, "
                                      f"not {want_delta:g}")
                if want_unit is not None and want_unit != _unit(state):
                    raise LedgerError(f"ledger counts in unit {_unit(state)!r}, not {want_unit!r}")
            else:
                if not create:
                    raise LedgerError(f"ledger {self.path} does not exist (create=False)")
                if self._recorded() is not None:
                    raise LedgerError(f"ledger {self.path} is missing but the OS keyring records that it "
                                      f"existed: it was deleted; refusing to start a new budget")
                if want_eps is None:
                    raise LedgerError("budget= is required to create a ledger")
                self.path.parent.mkdir(parents=True, exist_ok=True)
                state = {"version": STATE_VERSION, "ledger_id": os.urandom(16).hex(),
                         "created": _now(), "composition": "basic",
                         "unit": want_unit or DEFAULT_UNIT,
                         "budget": {"epsilon": want_eps, "delta": want_delta or 0.0},
                         "total": {"epsilon": "0", "delta": "0", "count": 0},
                         "carried": {"epsilon": "0", "delta": "0", "count": 0},
                         "generation": 0, "entries": []}
                self._write(state)
        self.budget: float = float(state["budget"]["epsilon"])
        self.delta_budget: float = float(state["budget"]["delta"])
        self.ledger_id: str = state["ledger_id"]
        self.unit: str = _unit(state)

    # -- the runtime-facing API ---------------------------------------------------------------
    def charge(self, epsilon: float, delta: float = 0.0, *, label: str = "",
               unit: str = DEFAULT_UNIT) -> Receipt:
        """Record one release of (ε, δ) in ``unit`` **before** its output is returned.

        Returns a :class:`Receipt` once the spend is durably stored. Raises
        :class:`~ldptext.errors.BudgetExceededError` (nothing recorded; the caller must discard
        the output) if Σε + ε would exceed ``budget`` or Σδ + δ would exceed ``delta_budget``;
        :class:`~ldptext.errors.LedgerError` if the ledger cannot be read, authenticated or
        written, or if ``unit`` is not the ledger's unit (nothing recorded). ``label`` names the kind
        of release; never put input text in it.
        """
        unit = _check_unit(unit)
        eps = _check_amount(epsilon, "epsilon")
        dlt = _check_amount(delta, "delta", 1.0)
        if not isinstance(label, str) or len(label) > MAX_LABEL:
            raise ParameterError(f"label must be a string of at most {MAX_LABEL} characters")
        with self._locked():
            state = self._read()
            if unit != _unit(state):
                raise LedgerError(f"ledger counts in unit {_unit(state)!r}; a release in unit {unit!r} "
                                  f"cannot be added to it")
            spent_eps, spent_delta = self._totals(state)
            budget_eps = Fraction(state["budget"]["epsilon"])
            budget_delta = Fraction(state["budget"]["delta"])
            new_eps, new_delta = spent_eps + Fraction(eps), spent_delta + Fraction(dlt)
            if new_eps > budget_eps or new_delta > budget_delta:
                raise BudgetExceededError(
                    f"release of epsilon={eps:g}, delta={dlt:g} refused: the ledger has spent "
                    f"epsilon={_round_up(spent_eps):.6g} of {float(budget_eps):g} and "
                    f"delta={_round_up(spent_delta):.3g} of {float(budget_delta):g}")
            seq = int(state["total"]["count"]) + 1
            entry = {"seq": seq, "epsilon": eps, "delta": dlt, "label": label, "time": _now()}
            state["entries"].append(entry)
            # running totals: O(1) per charge, whatever the ledger's history
            state["total"] = {"epsilon": str(new_eps), "delta": str(new_delta), "count": seq}
            state["generation"] = int(state["generation"]) + 1
            self._compact(state)
            self._write(state)
        return Receipt(seq=seq, epsilon=eps, delta=dlt, label=label, time=entry["time"],
                       spent_epsilon=_round_up(new_eps), spent_delta=_round_up(new_delta),
                       budget_epsilon=float(budget_eps), budget_delta=float(budget_delta))

    @contextmanager
    def spend(self, epsilon: float, delta: float = 0.0, *, label: str = "",
              unit: str = DEFAULT_UNIT) -> Iterator[Receipt]:
        """``with ledger.spend(ε, δ) as receipt:`` — charges on entry (before the body produces
        output). The spend stays recorded if the body fails: part of the output may already have
        left, and a refund could be abused to release for free."""
        yield self.charge(epsilon, delta, label=label, unit=unit)

    # -- queries ---------------------------------------------------------------------------------
    def spent(self) -> tuple[float, float]:
        """(Σε, Σδ) so far, rounded up."""
        with self._locked():
            eps, dlt = self._totals(self._read())
        return _round_up(eps), _round_up(dlt)

    def remaining(self) -> tuple[float, float]:
        """(ε, δ) still available, rounded down."""
        with self._locked():
            state = self._read()
        eps, dlt = self._totals(state)
        return (max(0.0, _round_down(Fraction(state["budget"]["epsilon"]) - eps)),
                max(0.0, _round_down(Fraction(state["budget"]["delta"]) - dlt)))

    def can_afford(self, epsilon: float, delta: float = 0.0) -> bool:
        """Advisory only: another thread or process may spend in between; ``charge`` decides."""
        r_eps, r_delta = self.remaining()
        return _check_amount(epsilon, "epsilon") <= r_eps and \
            _check_amount(delta, "delta", 1.0) <= r_delta

    def receipts(self) -> list[Receipt]:
        """The individually kept entries: the last :data:`MAX_ENTRIES` releases at most (older ones
        are folded into the exact carried total; :meth:`spent` and ``len`` still count them)."""
        with self._locked():
            state = self._read()
        carried_eps = Fraction(state["carried"]["epsilon"])
        carried_delta = Fraction(state["carried"]["delta"])
        out = []
        for e in state["entries"]:
            carried_eps += Fraction(e["epsilon"])
            carried_delta += Fraction(e["delta"])
            out.append(Receipt(seq=e["seq"], epsilon=e["epsilon"], delta=e["delta"],
                               label=e["label"], time=e["time"],
                               spent_epsilon=_round_up(carried_eps),
                               spent_delta=_round_up(carried_delta),
                               budget_epsilon=float(state["budget"]["epsilon"]),
                               budget_delta=float(state["budget"]["delta"])))
        return out

    def __len__(self) -> int:
        with self._locked():
            state = self._read()
        return int(state["total"]["count"])

    def __repr__(self) -> str:
        return (f"Ledger({str(self.path)!r}, budget={self.budget:g}, delta_budget={self.delta_budget:g}, "
                f"unit={self.unit!r})")

    # -- storage ----------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            try:
                self._file_lock.acquire(timeout=self._timeout)
            except Timeout:
                raise LedgerError(f"ledger {self.path} is locked by another process") from None
            except OSError as e:
                raise LedgerError(f"cannot lock ledger {self.path}: {e.strerror}") from None
            try:
                yield
            finally:
                self._file_lock.release()

    @staticmethod
    def _totals(state: dict) -> tuple[Fraction, Fraction]:
        return Fraction(state["total"]["epsilon"]), Fraction(state["total"]["delta"])

    @staticmethod
    def _compact(state: dict) -> None:
        extra = len(state["entries"]) - MAX_ENTRIES
        if extra <= 0:
            return
        old, state["entries"] = state["entries"][:extra], state["entries"][extra:]
        carried = state["carried"]
        eps = Fraction(carried["epsilon"]) + sum((Fraction(e["epsilon"]) for e in old), Fraction(0))
        dlt = Fraction(carried["delta"]) + sum((Fraction(e["delta"]) for e in old), Fraction(0))
        state["carried"] = {"epsilon": str(eps), "delta": str(dlt),
                            "count": int(carried["count"]) + len(old)}

    @staticmethod
    def _upgrade(state: dict) -> dict:
        """A format-1 state in the format-2 layout (running totals, bounded window): once, in memory."""
        eps, dlt = Fraction(state["carried"]["epsilon"]), Fraction(state["carried"]["delta"])
        for e in state["entries"]:
            eps += Fraction(e["epsilon"])
            dlt += Fraction(e["delta"])
        state["total"] = {"epsilon": str(eps), "delta": str(dlt),
                          "count": int(state["carried"]["count"]) + len(state["entries"])}
        state["version"] = STATE_VERSION
        Ledger._compact(state)
        return state

    def _associated_data(self, framed_header: bytes, path: Path | None = None) -> bytes:
        return MAGIC + framed_header + b"\0" + os.fsencode(str(self.path if path is None else path))

    def _read_blob(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                blob = f.read(_MAX_FILE + 1)
        except OSError as e:
            raise LedgerError(f"cannot read ledger {self.path}: {e.strerror}") from None
        if len(blob) > _MAX_FILE or len(blob) < len(MAGIC) + NONCE_SIZE + 16 \
                or not (blob.startswith(MAGIC) or blob.startswith(MAGIC_V1)):
            raise LedgerError(f"ledger {self.path} is not a ledger file or is truncated; "
                              f"refusing to use or reset it")
        return blob

    def _split(self, blob: bytes) -> tuple[bytes, dict, bytes]:
        """(framed header, parsed header, rest) of a format-2 file; the header is not yet authenticated."""
        n = len(MAGIC)
        if len(blob) < n + 4:
            raise LedgerError(f"ledger {self.path} is truncated; refusing to use or reset it")
        (hlen,) = struct.unpack("<I", blob[n:n + 4])
        if hlen > _MAX_HEADER or len(blob) < n + 4 + hlen + NONCE_SIZE + 16:
            raise LedgerError(f"ledger {self.path} has a malformed header; refusing to use or reset it")
        framed = blob[n:n + 4 + hlen]
        try:
            header = json.loads(framed[4:])
            if not isinstance(header, dict) or set(header) != {"kdf", "ledger_id"}:
                raise ValueError
        except ValueError:
            raise LedgerError(f"ledger {self.path} has a malformed header; refusing to use or reset it") from None
        return framed, header, blob[n + 4 + hlen:]

    def _peek_header(self) -> dict:
        blob = self._read_blob()
        return {"kdf": None} if blob.startswith(MAGIC_V1) else self._split(blob)[1]

    def _read(self) -> dict:
        blob = self._read_blob()
        legacy = blob.startswith(MAGIC_V1)
        if legacy:
            if self._kdf is not None:
                raise LedgerError("this ledger was not created with a passphrase: open it with key=")
            aad, body, header = MAGIC_V1, blob[len(MAGIC_V1):], None
        else:
            framed, header, body = self._split(blob)
            aad = self._associated_data(framed)
        try:
            plain = self._decrypt(body, aad, None if legacy else framed)
        except InvalidTag:
            hint = ("it was created with a passphrase: pass passphrase="
                    if header is not None and header.get("kdf") is not None and self._kdf is None else
                    "wrong key or passphrase, tampered file, or a file copied from another ledger or path")
            raise LedgerError(f"ledger {self.path} fails authentication ({hint}); "
                              f"refusing to use or reset it") from None
        try:
            state = json.loads(plain)
            if legacy:
                if state["version"] != 1:
                    raise ValueError("version")
                state = self._upgrade(state)
            elif state["ledger_id"] != header["ledger_id"]:
                raise ValueError("ledger id")
            self._validate(state)
        except (ValueError, KeyError, TypeError):
            raise LedgerError(f"ledger {self.path} has an invalid structure") from None
        self._check_rollback(state, blob)
        return state

    def _decrypt(self, body: bytes, aad: bytes, framed: bytes | None) -> bytes:
        """The state's plaintext; a file bound to the path as given (written before real paths were
        bound, through a symlinked directory) is still accepted, and re-bound by the next write."""
        try:
            return self._aead.decrypt(body[:NONCE_SIZE], body[NONCE_SIZE:], aad)
        except InvalidTag:
            if framed is None or self._given_path == self.path:
                raise
            return self._aead.decrypt(body[:NONCE_SIZE], body[NONCE_SIZE:],
                                      self._associated_data(framed, self._given_path))

    @staticmethod
    def _validate(state: dict) -> None:
        # authenticated, so this only guards against our own bugs and future versions
        if state["version"] != STATE_VERSION:
            raise ValueError("unknown ledger version")
        float(state["budget"]["epsilon"]), float(state["budget"]["delta"])
        _frac(state["carried"]["epsilon"]), _frac(state["carried"]["delta"])
        _frac(state["total"]["epsilon"]), _frac(state["total"]["delta"])
        int(state["carried"]["count"]), int(state["total"]["count"]), int(state["generation"])
        if not isinstance(state["ledger_id"], str):
            raise ValueError("ledger id")
        _check_unit(_unit(state))
        for e in state["entries"]:
            if not (e["epsilon"] >= 0 and e["delta"] >= 0):
                raise ValueError("negative entry")

    def _write(self, state: dict) -> None:
        plain = json.dumps(state, separators=(",", ":"), allow_nan=False).encode()
        header = json.dumps({"kdf": self._kdf, "ledger_id": state["ledger_id"]}, sort_keys=True,
                            separators=(",", ":")).encode()
        framed = struct.pack("<I", len(header)) + header
        nonce = os.urandom(NONCE_SIZE)  # random 96-bit nonces: fine far beyond 2^32 writes/key
        blob = MAGIC + framed + nonce + self._aead.encrypt(nonce, plain, self._associated_data(framed))
        self._remove_stale_temporaries()
        try:
            write_bytes_atomic(self.path, blob, checkpoint=_crash_point)
        except OSError as e:
            raise LedgerError(f"cannot write ledger {self.path}: {e.strerror}") from None
        self._record(state, blob)

    # -- rollback record in the OS keyring (see "Rollback" in the module docstring) ---------------
    def _record_user(self) -> str:
        return f"state:{self.path}"

    def _recorded(self) -> tuple[str, int, str] | None:
        """(ledger id, generation, file SHA-256) last recorded in the keyring, or None."""
        keyring = _usable_keyring()
        if keyring is None:
            return None
        try:
            stored = keyring.get_password(KEYRING_SERVICE, self._record_user())
        except Exception as e:  # keyring backends raise their own types
            raise LedgerError(f"cannot read the ledger's rollback record in the OS keyring "
                              f"({type(e).__name__})") from None
        if stored is None:
            return None
        try:
            ledger_id, generation, digest = stored.split(":")
            return ledger_id, int(generation), digest
        except ValueError:
            raise LedgerError("the ledger's rollback record in the OS keyring is malformed") from None

    def _record(self, state: dict, blob: bytes) -> None:
        keyring = _usable_keyring()
        if keyring is None:
            return
        value = f"{state['ledger_id']}:{int(state['generation'])}:{hashlib.sha256(blob).hexdigest()}"
        try:
            keyring.set_password(KEYRING_SERVICE, self._record_user(), value)
        except Exception as e:
            # the spend is on disk; failing here withholds the output, the safe side
            raise LedgerError(f"cannot update the ledger's rollback record in the OS keyring "
                              f"({type(e).__name__})") from None

    def _check_rollback(self, state: dict, blob: bytes) -> None:
        recorded = self._recorded()
        if recorded is None:
            return
        ledger_id, generation, digest = recorded
        current = int(state["generation"])
        if ledger_id != state["ledger_id"]:
            raise LedgerError(f"ledger {self.path} is not the ledger the OS keyring records at this path "
                              f"(replaced); refusing to use it")
        if current < generation or (current == generation and hashlib.sha256(blob).hexdigest() != digest):
            raise LedgerError(f"ledger {self.path} is older than the state the OS keyring records "
                              f"(generation {current} < {generation}, or a different file of the same "
                              f"generation): an older copy was restored; refusing to use it")

    def _remove_stale_temporaries(self) -> None:
        """Temporary files left by a writer that crashed (we hold the lock: none is live)."""
        try:
            for p in self.path.parent.glob(temporary_pattern(glob.escape(self.path.name))):
                p.unlink(missing_ok=True)
        except OSError:
            pass
