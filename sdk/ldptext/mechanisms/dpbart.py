"""DP-BART: what a bundle fixes of its guarantee.

Igamberdiev & Habernal 2023, *DP-BART for Privatized Text Rewriting under Local Differential Privacy*
(Findings of ACL), as presented in Igamberdiev 2023, *Differentially Private Methods in NLP* (PhD
thesis, TU Darmstadt), chapter 6: the encoder output of each chunk of L tokens is clipped to [−C, C],
the pruned hidden indices are zeroed, and discrete Laplace (ε-LDP) or discrete Gaussian ((ε, δ)-LDP)
noise calibrated to the sensitivity of the n = L·(d − |P|) remaining values is added, against any
other input chunk. (ε, δ) are chosen per call; the bundle fixes L, d, |P| and C.
"""
from __future__ import annotations

from ..guarantee import Guarantee, Statement
from . import number, section_of

REFERENCE = ("Igamberdiev & Habernal 2023, DP-BART for Privatized Text Rewriting under Local Differential "
             "Privacy (Findings of ACL), as presented in Igamberdiev 2023, Differentially Private Methods in "
             "NLP (PhD thesis, TU Darmstadt), chapter 6")

#: the numbers the bound depends on, in report order
PARAMETERS = ("seq_len", "hidden", "n_pruned", "clip")

STATEMENTS = {
    "dpbart": Statement(
        notion="LDP", unit="chunk", neighbouring="any two input chunks of L tokens; a document of k chunks "
        "costs k*eps (and k*delta), the number of chunks is not hidden", metric=None,
        worst_case_rule=None, no_worst_case="eps and delta are chosen per call: the report of each "
        "rewrite states them", numeric_note="exact: integer arithmetic on the grid C/2^k, Laplace scale a "
        "rational and Gaussian sigma^2 an integer, both rounded up (more noise), so no slack is added to eps",
        kept_in_clear=None, ledger_kind="ldp", reference=REFERENCE,
        parameters=PARAMETERS),
}


def guarantee(manifest: dict) -> Guarantee:
    """What a DP-BART bundle fixes (L, d, |P|, C, the sensitivities); ε and δ are chosen per call."""
    from .. import noise as _noise
    from ..registry import get

    mech = manifest["mechanism"]
    dp = section_of(manifest, "dpbart")
    seq_len, hidden = number(dp.get("seq_len")), number(dp.get("hidden"))
    n_pruned, clip = number(dp.get("n_pruned")), number(dp.get("clip"))
    details: list[tuple[str, str]] = []
    if seq_len is not None:
        details.append(("release unit", f"each chunk of L = {seq_len:g} tokens is one release"))
    if hidden is not None:
        details.append(("hidden size d", f"{hidden:g}"))
    if n_pruned is not None:
        details.append(("pruned |P|", f"{n_pruned:g} hidden indices set to 0 (public, fixed by the bundle)"))
    if clip is not None:
        details.append(("clip C", f"{clip:.6g} (every encoder value clipped to [-C, C])"))
    try:
        n = _noise.effective_dim(int(seq_len), int(hidden), int(n_pruned))
        details.append(("n = L x (d - |P|)", f"{n}"))
        details.append(("sensitivity", f"L1 = {_noise.l1_sensitivity(clip, n):.6g}, "
                                       f"L2 = {_noise.l2_sensitivity(clip, n):.6g}"))
    except Exception:  # missing or malformed numbers: show only what the manifest states
        pass
    details.append(("noise families", "discrete Laplace (pure eps) or discrete Gaussian (eps, delta), "
                                      "calibrated at run time to (C, n)"))
    details.append(("eps = inf", "refused unless explicitly allowed for evaluation: no noise, no privacy"))
    return Guarantee(
        mechanism=mech, label=get(mech).label, statement=STATEMENTS[mech], epsilon=None,
        ledger_unit=None, worst_case_epsilon=None, numeric_tolerance=None,
        parameters={"seq_len": seq_len, "hidden": hidden, "n_pruned": n_pruned, "clip": clip},
        details=tuple(details))
