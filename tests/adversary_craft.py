"""An attacker's corpus of crafted bundles, built independently of the project's own corpus tests.

The attacker holds a signing key the runtimes are told to trust (its own ``keys generate`` pair,
passed as the trusted key of every door), builds small honest bundles with the project's builders
over generated embeddings, then rewrites their tables or manifest and signs the result again: the
signature and every array hash are valid, only the numbers lie. :func:`build_corpus` returns every
crafted bundle as a :class:`Case` with the refusal each runtime must give.

Nothing here is read from a test of the project: the format comes from docs/bundles.md and
``ldptext.bundle`` (``open_unverified`` / ``write_bundle``), the tables' meaning from
``ldptext.santext_tables`` and ``ldptext.alias``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

#: An out-of-vocabulary word put in every crafted document: it must never appear in an error message.
SECRET = "qzxsecretword"

# expected refusals: (Python exception class name, CLI exit status, libldptext code)
MISMATCH = ("ParameterMismatchError", 4, -100)
WEAK = ("WeakPrivacyError", 2, -105)
NONFINITE = ("BundleIntegrityError", 4, -88)
KEEP = ("BundleIntegrityError", 4, -97)
CLUSTER = ("BundleIntegrityError", 4, -99)
INTEGRITY_PY_ONLY = ("BundleIntegrityError", 4, -53)
# CMP and Mahalanobis run in the Python SDK only: libldptext refuses any of them with LDP_E_MECHANISM
MECHANISM_NOT_RUN = -53


@dataclass
class Case:
    """One crafted bundle: its file, the class of attack, a document that needs the tampered rows,
    and the refusal expected (``python``: exception class name; ``cli``: exit status; ``c``: the
    libldptext code, the same in C, wasm and the JVM; ``None`` where the runtime does not run the
    mechanism at all)."""

    name: str
    klass: str
    path: Path
    mechanism: str
    doc: str
    python: str
    cli: int
    c: int | None
    note: str = ""
    #: an honest bundle that must open only with the weak-privacy opt-in
    weak_opt_in: bool = False
    extra: dict = field(default_factory=dict)


class Attacker:
    """A key pair of the attacker's own (``ldptext.keys.generate_keypair``), trusted by the doors."""

    def __init__(self, root: Path) -> None:
        from ldptext import keys

        self.root = Path(root)
        self.key_path, self.pub_path = keys.generate_keypair(self.root / "attacker-keys")
        self.key = keys.load_private_key(self.key_path)
        self.pub_raw = keys.public_bytes(self.key.public_key())


def generated_embeddings(n: int = 240, dim: int = 16, seed: int = 11, scale: float = 0.6):
    """Words a0..a{n-1} with Gaussian vectors (the builders add the ``<unk>`` row)."""
    from ldptext_precompute.santext.embeddings import from_word_vectors

    rng = np.random.default_rng(seed)
    words = [f"a{i}" for i in range(n)]
    return from_word_vectors(words, (rng.normal(size=(n, dim)) * scale).astype(np.float32),
                             f"adversary-{n}x{dim}-seed{seed}")


def read(path: Path):
    """(manifest without the writer's own fields, plain arrays, blobs, mechanism) of a bundle."""
    from ldptext import bundle as B

    b, _ = B.open_unverified(path)
    manifest = json.loads(json.dumps({k: v for k, v in b.manifest.items()
                                      if k not in ("format", "format_version", "mechanism", "arrays")}))
    arrays = {n: np.array(a) for n, a in b.arrays.items() if not n.startswith(B.BLOB_PREFIX)}
    blobs = {n[len(B.BLOB_PREFIX):]: bytes(a) for n, a in b.arrays.items() if n.startswith(B.BLOB_PREFIX)}
    return manifest, arrays, blobs, b.mechanism


def recraft(src: Path, dst: Path, key, *, manifest: Callable[[dict], None] | None = None,
            arrays: Callable[[dict], None] | None = None, blobs: Callable[[dict], None] | None = None,
            mechanism: str | None = None) -> Path:
    """``src`` with its manifest / arrays / blobs edited in place by the callables (and, given
    ``mechanism``, relabelled as another mechanism), then written and signed with ``key`` (a valid
    signature over the lying manifest, every hash recomputed)."""
    from ldptext import bundle as B

    m, a, bl, own = read(src)
    mechanism = mechanism or own
    if manifest:
        manifest(m)
    if arrays:
        arrays(a)
    if blobs:
        blobs(bl)
    return B.write_bundle(dst, mechanism=mechanism, arrays=a, manifest=m, blobs=bl, sign_key=key)


def own_slot(arrays: dict, row: int) -> int:
    """The head slot of ``row`` that proposes ``row`` itself."""
    slots = np.flatnonzero(arrays["head_ids"][row].astype(np.int64) == row)
    assert slots.size == 1, "row is not in its own head"
    return int(slots[0])


def always_itself(arrays: dict, row: int) -> None:
    """Row ``row`` releases its own word with probability 1: every alias column sends its mass to the
    row's own head slot, accepted with exp(0)."""
    j = own_slot(arrays, row)
    thr, ali = arrays["alias_threshold"], arrays["alias_index"]
    thr[row, :] = 0
    ali[row, :] = j
    thr[row, j] = np.iinfo(np.uint32).max
    ali[row, j] = j
    arrays["accept_gamma"][row, j] = 0


def sensitive_rows_in_own_head(arrays: dict) -> np.ndarray:
    """Sensitive valid rows that are outputs (so in their own head)."""
    rows = np.flatnonzero(arrays["sensitive"] & arrays["valid_input"] & (arrays["keep_row"] == 0))
    return np.array([r for r in rows if (arrays["head_ids"][r].astype(np.int64) == r).any()])


def own_rates(path: Path, key_pub) -> np.ndarray:
    """The realised P(x -> x) of every row of an honest bundle (its own runtime's exact law)."""
    from ldptext.runtime import load_token_runtime

    with load_token_runtime(path, trusted_keys=[key_pub], allow_weak_privacy=True) as rt:
        n = len(rt.vocab)
        rows = np.arange(n)
        lp = rt.log_probabilities(rows)
        return np.exp(lp[rows, rows])


# ---- the corpus ---------------------------------------------------------------------------------


def build_corpus(root: Path, atk: Attacker) -> dict[str, Case]:
    """Build the honest bases and every crafted bundle under ``root``; returns the cases by name."""
    from ldptext_precompute.cmp.build import build_cmp_bundle
    from ldptext_precompute.custext.build import build_custext_bundle
    from ldptext_precompute.santext.build import build_santext_bundle
    from ldptext_precompute.tem.build import build_tem_bundle

    root = Path(root)
    base = root / "base"
    out = root / "crafted"
    base.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    emb = generated_embeddings()
    freqs = np.linspace(1.0, 0.0, len(emb.vocab))
    key = atk.key
    common = dict(embeddings="generated", loaded=emb, sign_key=key)

    # honest bases
    st3 = build_santext_bundle(base / "santext-e3.ldpb", epsilon=3.0, mechanism="santext", head_size=8,
                               progress=False, frequencies=freqs, verbatim_cap="default", **common)
    sp3 = build_santext_bundle(base / "santextp-e3.ldpb", epsilon=3.0, mechanism="santext+", p=0.3, w=0.7,
                              head_size=8, progress=False, frequencies=freqs, verbatim_cap="default", **common)
    st_weak = build_santext_bundle(base / "santext-e60.ldpb", epsilon=60.0, mechanism="santext", head_size=8,
                                   progress=False, frequencies=freqs, allow_weak_privacy=True, **common)
    tem3 = build_tem_bundle(base / "tem-e3.ldpb", epsilon=3.0, head_size=8, progress=False, **common)
    tem_far = build_tem_bundle(base / "tem-e3-gamma2.ldpb", epsilon=3.0, beta=None, gamma=2.0, head_size=8,
                               progress=False, **common)  # a far set on every row
    tem_weak = build_tem_bundle(base / "tem-e60.ldpb", epsilon=60.0, beta=None, gamma=4.0, head_size=8,
                                progress=False, allow_weak_privacy=True, **common)
    cus3 = build_custext_bundle(base / "custext-e3.ldpb", epsilon=3.0, k=10, progress=False, **common)
    cus_weak = build_custext_bundle(base / "custext-e12.ldpb", epsilon=12.0, k=3, progress=False,
                                    allow_weak_privacy=True, **common)
    cmp3 = build_cmp_bundle(base / "cmp-e3.ldpb", epsilon=3.0, **common)
    mah3 = build_cmp_bundle(base / "mahalanobis-e3.ldpb", epsilon=3.0, mechanism="mahalanobis", lam=0.5,
                            **common)

    vocab = json.loads(read(st3)[2]["vocab.json"])
    all_words = " ".join(vocab[:-1])
    cases: dict[str, Case] = {}

    def add(name, klass, src, expect, *, doc=None, manifest=None, arrays=None, blobs=None, note="",
            c=None, mechanism=None, **extra):
        path = recraft(src, out / f"{name}.ldpb", key, manifest=manifest, arrays=arrays, blobs=blobs,
                       mechanism=mechanism)
        mech = read(path)[3]
        py, cli, code = expect
        cases[name] = Case(name, klass, path, mech, (doc or all_words) + " " + SECRET, py, cli,
                           code if c is None else c, note, extra=extra)

    def set_path(*keys_value):
        *keys, value = keys_value

        def edit(m):
            node = m
            for k in keys[:-1]:
                node = node[k]
            node[keys[-1]] = value(node[keys[-1]]) if callable(value) else value
        return edit

    # ---- class 1: tables realise a larger epsilon (or weaker noise) than the manifest states --------
    add("c1-santext-eps3-as-1", "1 relabelled epsilon", st3, MISMATCH, manifest=set_path("params", "epsilon", 1.0))
    add("c1-custext-eps3-as-1", "1 relabelled epsilon", cus3, MISMATCH, manifest=set_path("params", "epsilon", 1.0))
    add("c1-custext-eps3-as-2.5", "1 relabelled epsilon", cus3, MISMATCH,
        manifest=set_path("params", "epsilon", 2.5))
    add("c1-custext-similarity", "1 relabelled similarity", cus3, MISMATCH,
        manifest=set_path("params", "similarity", "cosine"))
    add("c1-tem-eps3-as-1", "1 relabelled epsilon", tem3, MISMATCH, manifest=set_path("params", "epsilon", 1.0))

    def tem_eps1_consistent(m):
        # an attacker who also restates gamma for beta at the lower epsilon (and the worst case)
        o = m["vocab"]["outputs"]
        beta = m["params"]["beta"]
        gamma = (2 / 1.0) * np.log((1 - beta) * o / beta)
        m["params"].update(epsilon=1.0, gamma=float(gamma))
        m["privacy"]["worst_case_token_epsilon"] = float(min(gamma, m["privacy"]["d_max"]) * 1.0)
    add("c1-tem-eps3-as-1-gamma-restated", "1 relabelled epsilon", tem3, MISMATCH, manifest=tem_eps1_consistent)

    def tem_gamma(m):
        m["params"]["gamma"] = m["params"]["gamma"] / 3
        m["params"]["beta"] = None
    add("c1-tem-gamma-relabelled", "1 relabelled gamma", tem3, MISMATCH, manifest=tem_gamma)

    def tem_lighter_far(a):
        a["bot_gamma"] = a["bot_gamma"] + 2.0  # the far branch (the "other words") made lighter
    add("c1-tem-bot-gamma-raised", "1 weakened noise", tem_far, MISMATCH, arrays=tem_lighter_far,
        note="TEM's far branch made lighter on every row")
    add("c1-cmp-eps-relabelled", "1 relabelled epsilon", cmp3, MISMATCH,
        manifest=set_path("params", "epsilon", 1.0), c=MECHANISM_NOT_RUN)

    def cmp_dmax(m):
        m["privacy"]["d_max"] = m["privacy"]["d_max"] / 4
        m["privacy"]["worst_case_token_epsilon"] = m["privacy"]["d_max"] * m["params"]["epsilon"]
    add("c1-cmp-dmax-relabelled", "1 relabelled D_max", cmp3, MISMATCH, manifest=cmp_dmax, c=MECHANISM_NOT_RUN)

    def weaker_noise(a):
        a["noise_transform"] = a["noise_transform"] * 0.1  # a tenth of the noise
    add("c1-mahalanobis-noise-x0.1", "1 weakened noise", mah3, MISMATCH, arrays=weaker_noise, c=MECHANISM_NOT_RUN)
    add("c1-mahalanobis-lambda", "1 relabelled lambda", mah3, MISMATCH, manifest=set_path("params", "lambda", 0.9),
        c=MECHANISM_NOT_RUN)

    def other_index(bl):
        # the faiss index of other vectors: nearest neighbours no longer the bundle's outputs
        from ldptext_precompute.metricdp.faiss_search import build_index, require_faiss
        faiss = require_faiss()
        rng = np.random.default_rng(5)
        index = build_index(rng.normal(size=(len(vocab) - 1, 16)).astype(np.float32), "flat")
        bl["index.faiss"] = bytes(faiss.serialize_index(index))
    add("c1-cmp-swapped-index", "1 swapped index", cmp3, INTEGRITY_PY_ONLY, blobs=other_index)

    add("c1-santextp-epsilon0", "1 relabelled epsilon0", sp3, MISMATCH, manifest=set_path("params", "epsilon0", 0.1))
    add("c1-tem-bot-count-halved", "1 TEM far set", tem_far, MISMATCH,
        arrays=lambda a: a.__setitem__("bot_count", a["bot_count"] // 2))
    st_d_max = read(st3)[0]["privacy"]["d_max"]

    def as_santext(m):
        # another mechanism's tables presented as SanText's (the SanText manifest's own fields)
        m["params"] = {"epsilon": m["params"]["epsilon"], "epsilon0": 0.0, "head_size": m["params"]["head_size"],
                       "p": None, "w": None}
        m["privacy"]["notion"] = "metric-LDP"
        m["privacy"]["d_max"] = st_d_max
        m["privacy"].pop("worst_case_token_epsilon", None)

    def without(*names):
        def edit(a):
            for n in names:
                a.pop(n)
        return edit
    add("c1-tem-as-santext", "1 mechanism relabelled", tem_far, MISMATCH, manifest=as_santext,
        arrays=without("bot_gamma", "bot_count"), mechanism="santext")
    add("c1-custext-as-santext", "1 mechanism relabelled", cus3, MISMATCH, manifest=as_santext,
        arrays=without("group_id"), mechanism="santext")

    add("c1-tem-beta-relabelled", "1 relabelled beta", tem3, MISMATCH, manifest=set_path("params", "beta", 1e-7))

    def d_max_halved(m):
        m["privacy"]["d_max"] /= 2
        m["privacy"]["worst_case_token_epsilon"] = m["privacy"]["d_max"] * m["params"]["epsilon"]
    add("c1-santext-dmax-halved", "1 relabelled D_max", st3, MISMATCH, manifest=d_max_halved)

    def plus_as_plain(m):
        m["params"].update(p=None, w=None, epsilon0=0.0)
        m["params"].pop("non_sensitive", None)
        m["privacy"]["notion"] = "metric-LDP"
    add("c1-santextp-as-santext", "1 mechanism relabelled", sp3, KEEP, manifest=plus_as_plain, mechanism="santext")

    # ---- class 2: SanText tail tampering ----------------------------------------------------------------
    _, sp_arrays, _, _ = read(sp3)
    rows = sensitive_rows_in_own_head(sp_arrays)
    r = int(rows[len(rows) // 2])
    word_r = vocab[r]
    k = sp_arrays["head_ids"].shape[1]

    def tail_gamma(a):
        a["accept_gamma"][r, k] += 4.0  # the tail slot accepted e^-4 as often: the head (and r) gain
    add("c2-tail-accept-gamma", "2 tail accept gamma", sp3, MISMATCH, doc=word_r, arrays=tail_gamma)

    def all_tails(a):
        a["accept_gamma"][:, k] += 1.0  # every row's tail lighter
    add("c2-tail-accept-gamma-all-rows", "2 tail accept gamma", sp3, MISMATCH, arrays=all_tails)

    def floor_up(a):
        a["tail_floor"][r] = a["tail_floor"][r] * 2 + 1.0  # no longer a lower bound of the tail
    add("c2-tail-floor-raised", "2 tail floor", sp3, MISMATCH, doc=word_r, arrays=floor_up)

    def floor_neg(a):
        a["tail_floor"][r] = -0.5
    add("c2-tail-floor-negative", "2 invalid tail floor", sp3, NONFINITE, doc=word_r, arrays=floor_neg)

    def floor_nan(a):
        a["tail_floor"][r] = np.nan
    add("c2-tail-floor-nan", "2 invalid tail floor", sp3, NONFINITE, doc=word_r, arrays=floor_nan)

    def cluster_bounds(a):
        a["cluster_gamma"][r, :] = 255  # every cluster bound far above the true distance gap
    add("c2-cluster-bounds-raised", "2 cluster bounds", sp3, MISMATCH, doc=word_r, arrays=cluster_bounds)

    def cluster_ids(a):
        a["tail_cluster"][:] = a["cluster_gamma"].shape[1]  # a cluster id >= C
    add("c2-cluster-id-out-of-range", "2 cluster ids", sp3, CLUSTER, arrays=cluster_ids)

    def clusters_rotated(a):
        c = a["cluster_gamma"].shape[1]
        a["tail_cluster"][:] = (a["tail_cluster"].astype(np.int64) + 1) % c  # bounds of the wrong cluster
    add("c2-tail-clusters-reassigned", "2 cluster bounds", sp3, MISMATCH, arrays=clusters_rotated)

    def head_size_lie(m):
        m["params"]["head_size"] = 4
    add("c2-head-size-relabelled", "2 head size", sp3, ("BundleIntegrityError", 4, -96), manifest=head_size_lie)

    def keep_sensitive(a):
        a["keep_row"][r] = 1  # a sensitive word kept in the clear w.p. 1 - p
    add("c2-keep-row-sensitive", "2 kept in clear", sp3, KEEP, doc=word_r, arrays=keep_sensitive)

    _, cus_arrays, _, _ = read(cus3)

    def group_of_one(a):
        a["group_id"][np.flatnonzero(a["valid_input"])[3]] = a["group_id"].max() + 1
    add("c2-custext-group-below-k", "2 CusText output set", cus3, ("BundleIntegrityError", 4, -121),
        arrays=group_of_one)

    # ---- class 3: one altered row among many valid ones --------------------------------------------
    _, st_arrays, _, _ = read(st3)
    st_rows = sensitive_rows_in_own_head(st_arrays)
    r3 = int(st_rows[len(st_rows) // 3])
    add("c3-santext-row-always-itself", "3 one altered row", st3, MISMATCH, doc=vocab[r3],
        arrays=lambda a: always_itself(a, r3), row=r3, clean_doc=" ".join(vocab[i] for i in range(5) if i != r3))
    add("c3-santextp-row-always-itself", "3 one altered row", sp3, MISMATCH, doc=word_r,
        arrays=lambda a: always_itself(a, r), row=r,
        clean_doc=" ".join(vocab[i] for i in (r + 1, r + 2)))

    def swap_rows(a):
        # row r3 gets the proposal of another row: a law of the wrong word, every hash valid
        other = int(st_rows[0])
        for n in ("alias_threshold", "alias_index", "accept_gamma"):
            a[n][r3] = a[n][other]
    add("c3-santext-row-from-other-row", "3 one altered row", st3, MISMATCH, doc=vocab[r3], arrays=swap_rows,
        row=r3)

    rc_ = int(np.flatnonzero(cus_arrays["valid_input"])[7])
    add("c3-custext-row-always-itself", "3 one altered row", cus3, MISMATCH, doc=vocab[rc_],
        arrays=lambda a: always_itself(a, rc_), row=rc_)

    y3 = int(st_arrays["head_ids"][r3][0])

    def one_scale(a):
        a["emb_scale"][y3] *= 1.5  # one output moved: every row with it in its head is wrong
    add("c3-santext-one-embedding-row", "3 one altered row", st3, MISMATCH, doc=vocab[r3], arrays=one_scale)

    # ---- class 4: a stated verbatim median / maximum that misstates the tables -----------------------
    def median_only(m):
        m["privacy"]["verbatim"]["median"] = 0.5
        m["privacy"].pop("weak_privacy", None)
    add("c4-median-0.5-naive", "4 misstated median", st_weak, MISMATCH, manifest=median_only)

    def median_consistent(m):
        v = m["privacy"]["verbatim"]
        n = v["inputs"]
        v.update(median=0.5, above_0_5=n // 2, above_0_9=n // 2 - 1)
        m["privacy"].pop("weak_privacy", None)
    add("c4-median-0.5-consistent", "4 misstated median", st_weak, MISMATCH, manifest=median_consistent)
    add("c4-tem-median-0.5-consistent", "4 misstated median", tem_weak, MISMATCH, manifest=median_consistent)

    st_rates = own_rates(st3, atk.pub_raw)
    top = int(np.argmax(np.where(st_arrays["sensitive"], st_rates, -1)))

    def max_lowered(m):
        v = m["privacy"]["verbatim"]
        v.update(max=v["median"], p90=v["median"], p99=v["median"], above_0_5=0, above_0_9=0)
    def median_just_below(m):
        v = m["privacy"]["verbatim"]
        v.update(median=0.89, above_0_9=v["inputs"] // 2 - 1)
        m["privacy"].pop("weak_privacy", None)
    add("c4-median-0.89", "4 misstated median", st_weak, MISMATCH, manifest=median_just_below)
    add("c4-max-lowered", "4 misstated maximum", st3, MISMATCH, doc=vocab[top], manifest=max_lowered)

    def above_cap(m):
        m["privacy"]["verbatim"]["cap"] = m["privacy"]["verbatim"]["max"] / 2
    add("c4-max-above-cap", "4 misstated cap", st3, MISMATCH, manifest=above_cap)

    # ---- class 5: honest near-identity bundles (weak privacy), and the label dropped -------------------
    for name, src in (("c5-santext-weak", st_weak), ("c5-tem-weak", tem_weak), ("c5-custext-weak", cus_weak)):
        path = recraft(src, out / f"{name}.ldpb", key)  # re-signed as is
        cases[name] = Case(name, "5 weak privacy", path, read(path)[3], all_words + " " + SECRET, *WEAK,
                           weak_opt_in=True)
    path = recraft(st_weak, out / "c5-santext-weak-unlabelled.ldpb", key,
                   manifest=lambda m: m["privacy"].pop("weak_privacy", None))
    def threshold(m):
        m["privacy"]["verbatim"]["near_identity_median"] = 1.5  # the refusal threshold, restated
        m["privacy"].pop("weak_privacy", None)
    path = recraft(st_weak, out / "c5-santext-weak-threshold-restated.ldpb", key, manifest=threshold)
    cases["c5-santext-weak-threshold-restated"] = Case("c5-santext-weak-threshold-restated", "5 weak privacy",
                                                       path, "santext", all_words + " " + SECRET, *WEAK,
                                                       weak_opt_in=True)
    # the downgrade: the whole privacy.verbatim section left out (older bundles state none), so that
    # no stated median marks the bundle as near identity
    def no_verbatim(m):
        m["privacy"].pop("verbatim")
        m["privacy"].pop("weak_privacy", None)
    for name, src in (("c5-santext-weak-verbatim-dropped", st_weak), ("c5-tem-weak-verbatim-dropped", tem_weak),
                      ("c5-custext-weak-verbatim-dropped", cus_weak)):
        dropped = recraft(src, out / f"{name}.ldpb", key, manifest=no_verbatim)
        cases[name] = Case(name, "5 weak privacy", dropped, read(dropped)[3], all_words + " " + SECRET, *WEAK)
    cases["c5-santext-weak-unlabelled"] = Case("c5-santext-weak-unlabelled", "5 weak privacy", path, "santext",
                                               all_words + " " + SECRET, *WEAK, weak_opt_in=True)

    # ---- class 7: descriptive manifest fields that lie --------------------------------------------------
    add("c7-vocab-size", "7 descriptive lie", sp3, MISMATCH, manifest=set_path("vocab", "size", lambda v: v + 1000))
    add("c7-kept-in-clear", "7 descriptive lie", cus3, MISMATCH, manifest=set_path("vocab", "kept_in_clear", 50))
    add("c7-non-sensitive", "7 descriptive lie", sp3, MISMATCH, manifest=set_path("vocab", "non_sensitive", 0))
    add("c7-sensitive", "7 descriptive lie", sp3, MISMATCH, manifest=set_path("vocab", "sensitive", lambda v: v * 2))
    add("c7-outputs", "7 descriptive lie", st3, MISMATCH, manifest=set_path("vocab", "outputs", lambda v: v + 5000))
    add("c7-notion", "7 descriptive lie", st3, MISMATCH, manifest=set_path("privacy", "notion", "LDP"))
    add("c7-custext-groups", "7 descriptive lie", cus3, MISMATCH,
        manifest=set_path("privacy", "smallest_group", 50))
    add("c7-sources-vocab-size", "7 descriptive lie", st3, MISMATCH,
        manifest=set_path("sources", "embeddings", "vocab_size", 50000))
    add("c7-vocab-dim", "7 descriptive lie", st3, MISMATCH, manifest=set_path("vocab", "dim", 300))
    add("c7-vocab-kind", "7 descriptive lie", st3, MISMATCH, manifest=set_path("vocab", "kind", "wordpiece"))
    add("c7-verbatim-inputs", "7 descriptive lie", st3, MISMATCH,
        manifest=set_path("privacy", "verbatim", "inputs", 50000))
    add("c7-removed-outputs", "7 descriptive lie", st3, MISMATCH,
        manifest=set_path("privacy", "not_outputs", "above_verbatim_cap", 0))
    add("c7-tolerance-understated", "7 descriptive lie", st3, MISMATCH,
        manifest=set_path("numeric", "max_relative_error", 1e-18))
    add("c7-tem-far-rows", "7 descriptive lie", tem_far, MISMATCH,
        manifest=set_path("privacy", "rows_with_far_outputs", 0))

    # ---- class 10: numbers outside their domain (each check has its own code, the same everywhere) --
    add("c10-tolerance-above-limit", "10 domain", st3, ("BundleIntegrityError", 4, -84),
        manifest=set_path("numeric", "max_relative_error", 1e-3))
    add("c10-tem-tolerance-above-limit", "10 domain", tem3, ("BundleIntegrityError", 4, -84),
        manifest=set_path("numeric", "max_relative_error", 1e-3))
    add("c10-p-zero", "10 domain", sp3, ("BundleIntegrityError", 4, -83), manifest=set_path("params", "p", 0.0))
    add("c10-p-above-one", "10 domain", sp3, ("BundleIntegrityError", 4, -83), manifest=set_path("params", "p", 1.5))
    add("c10-epsilon-negative", "10 domain", st3, ("BundleIntegrityError", 4, -82),
        manifest=set_path("params", "epsilon", -3.0))
    add("c10-epsilon-1e300", "10 domain", st3, MISMATCH, manifest=set_path("params", "epsilon", 1e300))

    def alias_out_of_range(a):
        a["alias_index"][5, 0] = 200
    add("c10-alias-slot-out-of-range", "10 domain", st3, ("BundleIntegrityError", 4, -92), arrays=alias_out_of_range)

    # ---- class 8: the SanText+ split ---------------------------------------------------------------
    # V_N (released unchanged w.p. 1 - p) is 150 of the 240 words, p = 0.01: an honest build, which
    # the builder labels near identity (privacy.weak_privacy); the attacker drops the label
    wordlist = base / "vn-words.txt"
    wordlist.write_text("\n".join(vocab[:150]) + "\n", encoding="utf-8")
    split = build_santext_bundle(base / "santextp-split150-p0.01.ldpb", epsilon=3.0, mechanism="santext+", p=0.01,
                                 head_size=8, progress=False, frequencies=freqs, non_sensitive=wordlist,
                                 verbatim_cap=None, allow_weak_privacy=True, **common)
    add("c8-split-majority-kept", "8 split", split, WEAK, doc=" ".join(vocab[:150]),
        manifest=lambda m: m["privacy"].pop("weak_privacy", None),
        note="99 % of a document of V_N words leaves unchanged; the build's weak-privacy label dropped")
    add("c8-split-relabelled-function-words", "8 split", split, MISMATCH,
        manifest=set_path("params", "non_sensitive", "function-words"), doc=" ".join(vocab[:150]),
        note="a 150-word V_N of ordinary words described as the closed-class function words")

    # ---- class 9: what a released id renders as -------------------------------------------------
    # every other head output of row r9 renders as r9's own word, upper-cased or with zero-width
    # spaces: released ids differ from the input's (so the id-based verbatim rate is honest) but the
    # released text is the input word
    r9 = int(st_rows[10])
    head9 = [int(h) for h in st_arrays["head_ids"][r9] if h != r9]
    look_alikes = [vocab[r9].upper() + "\u200b" * i for i in range(len(head9))]

    def tokenizer_renders(bl):
        t = json.loads(bl["tokenizer.json"])
        v = t["model"]["vocab"]
        for h, s_ in zip(head9, look_alikes):
            del v[vocab[h]]
            v[s_] = h
        bl["tokenizer.json"] = json.dumps(t).encode()

    def vocab_renders(bl):
        tokenizer_renders(bl)
        v = json.loads(bl["vocab.json"])
        for h, s_ in zip(head9, look_alikes):
            v[h] = s_
        bl["vocab.json"] = json.dumps(v).encode()
    add("c9-tokenizer-disagrees-with-vocab", "9 rendering", st3, ("BundleIntegrityError", 4, -111),
        doc=vocab[r9], blobs=tokenizer_renders, row=r9,
        note="tokenizer.json renders 7 output ids as the input word's look-alikes; vocab.json does not")
    add("c9-look-alike-outputs", "9 rendering", st3, MISMATCH, doc=vocab[r9], blobs=vocab_renders, row=r9,
        note="7 output tokens that render as the input word (case, zero-width spaces), consistently")
    return cases


# ---- DP-BART ----------------------------------------------------------------------------------------

#: (name, what is damaged, expected Python exception class name): every one must exit 4 in ``ldptext
#: rewrite``, never with an ONNX Runtime traceback
DPBART_CASES = {
    "dp-seq-len-16": ("dpbart.seq_len 10 stated as 16", "ParameterMismatchError"),
    "dp-seq-len-4": ("dpbart.seq_len 10 stated as 4", "ParameterMismatchError"),
    "dp-hidden-64": ("dpbart.hidden 32 stated as 64", "ParameterMismatchError"),
    "dp-heads-4": ("dpbart.heads 2 stated as 4", "ParameterMismatchError"),
    "dp-encoder-is-decoder": ("encoder.onnx replaced by the decoder graph", "ParameterMismatchError"),
    "dp-decoder-is-encoder": ("decoder.onnx replaced by the encoder graph", "ParameterMismatchError"),
    "dp-garbage-encoder": ("encoder.onnx replaced by random bytes", "BundleFormatError"),
    "dp-pruned-out-of-range": ("pruned indices shifted past the hidden size", "BundleFormatError"),
    "dp-n-pruned-lie": ("dpbart.n_pruned 8 stated as 2", "ParameterMismatchError"),
    "dp-max-output-tokens": ("dpbart.max_output_tokens 10 stated as 10000 (past the decoder's positions)",
                             "BundleError"),
}


def build_dpbart_corpus(root: Path, atk: Attacker) -> dict[str, Path]:
    """A tiny DP-BART bundle (tests/conftest_dpbart.py's random 2-layer BERT-to-BERT, no training),
    signed by the attacker, and one damaged copy per :data:`DPBART_CASES` entry, re-signed."""
    from conftest_dpbart import build_tiny_bundle, single_thread_torch

    root = Path(root)
    with single_thread_torch():
        src, _, _ = build_tiny_bundle(root / "dpbart.ldpb", sign_key=atk.key, quantize=None)

    def dp(key, value):
        def edit(m):
            m["dpbart"][key] = value
        return edit

    def blob_from(dst_name, src_name):
        def edit(bl):
            bl[dst_name] = bl[src_name]
        return edit

    def garbage(bl):
        bl["encoder.onnx"] = bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8))

    def shift_pruned(a):
        a["pruned"] = a["pruned"] + 100

    edits = {
        "dp-seq-len-16": dict(manifest=dp("seq_len", 16)),
        "dp-seq-len-4": dict(manifest=dp("seq_len", 4)),
        "dp-hidden-64": dict(manifest=dp("hidden", 64)),
        "dp-heads-4": dict(manifest=dp("heads", 4)),
        "dp-encoder-is-decoder": dict(blobs=blob_from("encoder.onnx", "decoder.onnx")),
        "dp-decoder-is-encoder": dict(blobs=blob_from("decoder.onnx", "encoder.onnx")),
        "dp-garbage-encoder": dict(blobs=garbage),
        "dp-pruned-out-of-range": dict(arrays=shift_pruned),
        "dp-n-pruned-lie": dict(manifest=dp("n_pruned", 2)),
        "dp-max-output-tokens": dict(manifest=dp("max_output_tokens", 10000)),
    }
    assert set(edits) == set(DPBART_CASES)
    out = {"honest": src}
    for name, kw in edits.items():
        out[name] = recraft(src, root / f"{name}.ldpb", atk.key, **kw)
    return out
