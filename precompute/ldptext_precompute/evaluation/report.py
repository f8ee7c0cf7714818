"""``report.md``: the evaluation's tables, written from ``results.json``'s dictionary.

The utility tables follow the layout of Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP*
(PhD thesis, Ohio State), Table 2.1 (rows = mechanisms and baselines, columns = ε), one set per classifier
(TF-IDF, MiniLM); the privacy table has one row per configuration. Because ε is not comparable across
mechanisms and embeddings (a metric ε scales with the embedding's distances), a table reads the frontier
at equal exact attack success instead (:func:`.records.utility_at_attack_success`). DP-BART (document-level
(ε, δ)-LDP, its output not aligned with its input) has "–" in every token-level privacy and attack cell, a
note stating its guarantee instead, and is compared with the token mechanisms by accuracy and BLEU. The
report is a sequence of sections, one function each.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Callable

from ldptext import registry
from ldptext.fileio import write_bytes_atomic
from .records import ATTACK_TARGETS, FRONTIER_ATTACKS, classifier_scores, kept_share, utility_at_attack_success
from ..epsilon import format_epsilon
from .rows import ROW_ORDER, Row, frequency_split, ordered_rows, row_of

__all__ = ["write_report", "shareable_mode", "ROW_ORDER", "LABELS", "MAJORITY_LABEL", "CLASSIFIER_LABELS",
           "classifier_names", "classifier_tag"]

#: Display name of each mechanism, in the report and the plots (CMP as Yue 2023 names it).
LABELS = {"none": "Unsanitized", "random": "Random",
          **{m.name: m.label for m in registry.all_mechanisms()}, "cmp": "CMP (FBDD)"}
#: Row of the accuracy tables: always predicting the most frequent training label.
MAJORITY_LABEL = "Majority class"
#: Display name of each classifier.
CLASSIFIER_LABELS = {"tfidf": "TF-IDF", "minilm": "MiniLM", "finetune": "fine-tuned MiniLM"}
_PAPER = ("Yue et al. 2021, *Differential Privacy for Text Analytics via Natural Text Sanitization* "
          "(Findings of ACL), as presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in "
          "NLP* (PhD thesis, Ohio State)")


def write_report(results: dict, path: Path) -> None:
    """Write ``report.md`` (atomically): setup, warnings, utility and leakage tables (the majority-class
    rate next to the accuracies), the classifier's chosen hyper-parameters, exact privacy metrics, the
    paper's reference numbers and the plots.

    Parameters
    ----------
    results : dict
        The ``results.json`` document (:meth:`.records.Results.to_dict`).
    path : Path
        The file written (overwritten).
    """
    lines = (_setup(results) + _warnings(results) + _utility_tables(results) + _equal_attack_tables(results)
             + _hyperparameters(results) + _privacy_table(results) + _formula_check(results)
             + _paper_reference(results) + _plots(results))
    write_bytes_atomic(path, "\n".join(lines).encode("utf-8"), mode=shareable_mode())


def shareable_mode() -> int:
    """Permission bits of an ordinary new file under the process umask (``0o666 & ~umask``).

    ``results.json``, ``report.md`` and the plots hold no text and get these; the checkpoints keep the
    private ``0o600`` of :func:`ldptext.fileio.atomic_path`.

    Returns
    -------
    int
    """
    umask = os.umask(0o077)
    os.umask(umask)
    return 0o666 & ~umask


# -- sections -----------------------------------------------------------------------------------

def _setup(results: dict) -> list[str]:
    """Title, command line and the sweep's setup (data, embeddings, classifier, seeds, BLEU, time)."""
    cfg = results["config"]
    ds = results["dataset"]
    lines = ["# Privacy–utility evaluation", ""]
    if cfg.get("command"):
        lines += ["Command:", "", "```", cfg["command"], "```", ""]
    return lines + [
        f"- Data: **{ds['name']}**, {ds['n_train']} training / {ds['n_test']} test documents, "
        f"labels {', '.join(ds['labels'])}; majority-class test accuracy {ds['majority_rate_test']:.4f}.",
        f"- Embeddings: `{cfg['embeddings']}`, vocabulary {_vocabulary(results)}{_santext_plus_p(results)}"
        f"{_splits(results)}{_cap(cfg)}.",
        *_classifier_lines(results, ds),
        *_dpbart_setup(results),
        f"- Seeds: {cfg['seeds']} ({results['randomness']}); cells are mean ± sample std over seeds "
        f"(the unsanitized row is deterministic).",
        f"- BLEU: {results['bleu']}.",
        _wall_time(results), *_resumed(results), ""]


def _vocabulary(results: dict) -> str:
    """The vocabulary as ``ldptext calibrate`` states it too (the ``--vocab-size`` words and the input-only
    ``<unk>`` row); the requested size for a file that predates the record."""
    return results.get("vocabulary") or str(results["config"]["vocab_size"] or "all")


def _santext_plus_p(results: dict) -> str:
    """``; SanText+ p = 0.3`` when a SanText+ row is in the report (nothing otherwise: p is its alone)."""
    if not any(e["mechanism"] == "santext+" for e in results["entries"]):
        return ""
    return f"; SanText+ p = {results['config']['p']:g}"


def _cap(cfg: dict) -> str:
    """The SanText bundles' verbatim cap, when the sweep built them with one (nothing otherwise)."""
    cap = cfg.get("verbatim_cap")
    return "" if cap is None else f"; SanText bundles capped: P(M(x) = x) ≤ {cap:g} for every sensitive word"


def _splits(results: dict) -> str:
    """How the SanText+ rows split the vocabulary (nothing without SanText+ rows)."""
    rows = [r for r in ordered_rows(results["entries"]) if r.split]
    if not rows:
        return ""
    return ("; " + ", ".join(f"{r.label}: non-sensitive = {r.split}" for r in rows)
            + " (the default split is what `ldptext precompute santext` builds without --non-sensitive)")


def _wall_time(results: dict) -> str:
    """The wall time: this run's; for a resumed sweep also the total over its runs, and how it is counted."""
    t = results["timings"]
    runs = results.get("runs") or []
    if len(runs) < 2:
        return f"- Wall time: {t['total_s']:.0f} s."
    earlier = ", ".join(f"{r['seconds']:.0f} s ({r['outcome']}{', shard ' + r['shard'] if r.get('shard') else ''}, "
                        f"started {r['started']})" for r in runs[:-1])
    return (f"- Wall time: **{t.get('all_runs_s', t['total_s']):.0f} s in all** over {len(runs)} runs of this sweep "
            f"into this folder (the sum of their own times: the time between runs is not counted, runs that "
            f"overlapped, such as parallel shards, are counted once): {earlier}; this run (which wrote this "
            f"report) {t['total_s']:.0f} s, started {runs[-1]['started']}.")


def _resumed(results: dict) -> list[str]:
    """Which stages came from the checkpoints of an earlier run (nothing for a fresh run)."""
    reused = results.get("reused") or {}
    if not reused:
        return []
    return ["- Resumed: reused " + ", ".join(f"{n} {stage}" for stage, n in sorted(reused.items()))
            + " checkpoint(s) of an earlier run (`OUT/checkpoints`); the rest was computed in this run."]


def _dpbart_setup(results: dict) -> list[str]:
    """The DP-BART line of the setup (nothing without DP-BART entries)."""
    cfg = results["config"]
    bundle = next((e.get("bundle") for e in results["entries"] if e["mechanism"] == "dpbart"), None)
    if bundle is None:
        return []
    signer = f"signed by key {bundle['key_id']}" if bundle.get("key_id") else "**unsigned** (allowed explicitly)"
    noise = cfg.get("dpbart_mechanism", "gaussian")
    delta = f", δ = {cfg['dpbart_delta']:g} per chunk" if noise == "gaussian" else ""
    return [f"- DP-BART: bundle `{bundle['path']}` ({signer}; variant {bundle['variant']}, L = {bundle['seq_len']}, "
            f"C = {bundle['clip']:g}), {noise} noise{delta}, ε per chunk "
            f"{', '.join(format_epsilon(e) for e in cfg.get('dpbart_epsilons') or [])}; every document rewritten "
            f"(long documents split into chunks, greedy decoding) once per ε and seed."]


def classifier_names(results: dict) -> list:
    """The classifiers of a ``results.json`` document, in order (``[None]`` for a file that predates them).

    Parameters
    ----------
    results : dict
        The ``results.json`` document.

    Returns
    -------
    list of (str or None)
    """
    return list(results.get("classifiers") or {}) or [None]


def classifier_tag(results: dict, name: str | None) -> str:
    """`` (MiniLM)``: the classifier's name for a title, or nothing when the report has one classifier only.

    Parameters
    ----------
    results : dict
        The ``results.json`` document.
    name : str or None
        The classifier.

    Returns
    -------
    str
    """
    return f" ({_classifier_label(name)})" if name and len(classifier_names(results)) > 1 else ""


def _classifier_label(name: str | None) -> str:
    return CLASSIFIER_LABELS.get(name, name) if name else ""


def _classifier_lines(results: dict, ds: dict) -> list[str]:
    """One setup line per classifier (the single ``classifier`` line for an older file)."""
    described = results.get("classifiers") or {}
    if not described:
        return [f"- Classifier: {results['classifier']}{_class_counts(ds)}."]
    return [f"- Classifier **{_classifier_label(name)}**: {c['description']}{_class_counts(ds) if i == 0 else ''}."
            for i, (name, c) in enumerate(described.items())]


def _class_counts(ds: dict) -> str:
    """`` (training documents per class: a 10, b 4)``, or nothing when the counts are not recorded."""
    counts = ds.get("train_class_counts")
    if not counts:
        return ""
    return " (training documents per class: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + ")"


def _warnings(results: dict) -> list[str]:
    """The sweep's warnings, if any, as a list under a heading."""
    notes = results.get("warnings") or []
    if not notes:
        return []
    return ["## Warnings", ""] + [f"- **Warning:** {n}" for n in notes] + [""]


def _utility_tables(results: dict) -> list[str]:
    """Mechanism × ε tables, per classifier: accuracy (with a majority-class row) and macro-F1 on sanitized
    and original test text; then BLEU, the exact attack success and the empirical unchanged-token rate.
    """
    majority = results["dataset"].get("majority_rate_test")
    lines: list[str] = []
    for name in classifier_names(results):
        def score(test: str, metric: str = "accuracy", name=name) -> Callable[[dict], str]:
            return lambda e: _fmt(classifier_scores(e, name)[test][metric])

        tag = classifier_tag(results, name)
        lines += (_table(results, f"Accuracy{tag} — trained on sanitized text, tested on sanitized text "
                                  "(the setting of Yue 2023, Table 2.1)", score("sanitized_test"), majority,
                         sub_row=_kept_words_row(results, name, majority))
                  + _kept_words_legend(results)
                  + _table(results, f"Accuracy{tag} — trained on sanitized text, tested on original text",
                           score("original_test"), majority)
                  + _table(results, f"Macro-F1{tag} — sanitized test text", score("sanitized_test", "macro_f1"))
                  + _table(results, f"Macro-F1{tag} — original test text", score("original_test", "macro_f1")))
    return (lines
            + _table(results, "BLEU of the sanitized text against its input (high = much of the "
                              "input survives)", lambda e: _fmt(e["utility"]["bleu"]))
            + _table(results, "Exact Bayes-optimal token-inversion success on the data set's tokens "
                              "(attacker knows the mechanism; public wordfreq prior; * = estimated by "
                              "sampling for a mechanism without a closed-form law, a lower bound)",
                     lambda e: f"{e['privacy']['attack']['exact_success_rate_dataset']:.4f}"
                               + ("*" if e["privacy"]["attack"].get("estimated") else ""))
            + _table(results, "Unchanged-token rate (empirical N_x over the data set's tokens)",
                     lambda e: _fmt(e["utility"]["unchanged_token_rate"]))
            + _table(results, "Embedding nearest-neighbour inversion success @1 / @10 (empirical, on the sample "
                              "drawn: the original is the nearest / among the 10 nearest words of the released "
                              "one in the public embedding; needs no knowledge of the mechanism)", _nn_cell))


#: The sub-row under each SanText+ row of the accuracy table.
KEPT_WORDS_LABEL = "↳ its kept-in-clear words alone"


def _kept_words(e: dict, name: str | None) -> dict | None:
    kept = (e.get("utility") or {}).get("kept_words_accuracy") or {}
    return kept.get(name) if name in kept else next(iter(kept.values()), None)


def _kept_words_row(results: dict, name: str | None, majority: float | None):
    """The sub-row of a SanText+ row: the accuracy of its kept-in-clear words alone and their share of the
    row's gain over the majority class (None for every other row, and for a file without the record)."""
    def cell(e: dict) -> str:
        kept = _kept_words(e, name)
        if kept is None:
            return "–"
        acc = classifier_scores(e, name)["sanitized_test"]["accuracy"]["mean"]
        share = None if majority is None else kept_share(kept["mean"], acc, majority)
        return _fmt(kept) + ("" if share is None else f" ({share:.0%} of the gain)")

    def sub_row(row: Row):
        if row.mechanism != "santext+" or not any(_kept_words(e, name) for e in results["entries"]
                                                  if row_of(e) == row):
            return None
        return KEPT_WORDS_LABEL, cell

    return sub_row


def _kept_words_legend(results: dict) -> list[str]:
    """What the kept-words sub-rows are (nothing without them)."""
    if not any(_kept_words(e, None) for e in results["entries"]):
        return []
    return [f"*{KEPT_WORDS_LABEL}* (under each SanText+ row): how much of the row's utility the words its split "
            "keeps explain. SanText+ releases each non-sensitive word (the default split: function words and "
            "punctuation; the frequency split: the most frequent words) unchanged with probability 1 − p; the "
            "same classifier (same settings, tuning and seed) is trained and tested on **those kept-in-clear words "
            "alone** — in each seed's sample, the released tokens whose input is non-sensitive and that came out "
            "unchanged, every other token dropped. Cell: its accuracy (mean ± std over seeds), and in parentheses "
            "its share of the row's gain over the majority class, (kept − majority) / (row − majority): near "
            "100% means the row's accuracy comes from the words kept in the clear, not from the sanitized ones.",
            ""]


def _nn_cell(e: dict) -> str:
    nn = e["utility"].get("nn_inversion_success")
    if not nn:
        return "–"
    return " / ".join(f"{nn[k]['mean']:.4f}" for k in sorted(nn, key=int))


def _equal_attack_tables(results: dict) -> list[str]:
    """Per attack and classifier, mechanism × attack level t: the best measured accuracy at success ≤ t."""
    lines = ["**Utility at equal attack success** — ε is not comparable across mechanisms or embeddings, attack "
             "success is. Each cell: the highest mean accuracy (trained and tested on sanitized text) among the "
             "*measured* configurations of the mechanism whose attack success on the data set's tokens is ≤ t, "
             "with that configuration's ε and attack success (no interpolation between measured points; – when "
             "none qualifies). *Exact Bayes*: the exact inversion attack (for CMP and Mahalanobis bundles an "
             "estimate by sampling, a lower bound; the CMP baseline without a bundle has none and is not ranked). "
             "*Nearest-neighbour @10*: the empirical embedding inversion, which ranks CMP too.", ""]
    if _dpbart_entries(results):
        lines += ["DP-BART is not ranked here: no token-level attack applies to it (its output is not aligned "
                  "with its input; its guarantee is document-level (ε, δ)-LDP). It is compared with the token "
                  "mechanisms by accuracy and BLEU (the tables above and the last panel of `frontier.png`).", ""]
    titles = {"exact_bayes": "exact Bayes inversion", "nn_inversion@10": "nearest-neighbour inversion @10"}
    rows = ordered_rows(results["entries"])
    for attack in FRONTIER_ATTACKS:
        for name in classifier_names(results):
            tag = classifier_tag(results, name)
            cells = {t: utility_at_attack_success(results["entries"], t, name, attack=attack) for t in ATTACK_TARGETS}
            ranked = {m for c in cells.values() for m in c}
            mechs = [r for r in rows if r.key in ranked]
            if not mechs:
                continue
            lines += [f"*Accuracy{tag} at {titles[attack]} success ≤ t*", "",
                      "| mechanism | " + " | ".join(f"t = {t:g}" for t in ATTACK_TARGETS) + " |",
                      "| --- |" + " --- |" * len(ATTACK_TARGETS)]
            for m in mechs:
                row = []
                for t in ATTACK_TARGETS:
                    c = cells[t].get(m.key)
                    if c is None:
                        row.append("–")
                        continue
                    eps = "" if c["epsilon"] is None else f"ε={format_epsilon(c['epsilon'])}, "
                    row.append(f"{c['accuracy']:.4f} ({eps}attack {c['attack_success']:.3f})")
                lines.append(f"| {m.label} | " + " | ".join(row) + " |")
            lines.append("")
    return lines


def _hyperparameters(results: dict) -> list[str]:
    """Mechanism × ε tables (one per classifier) of the hyper-parameters chosen on each run's training text:
    C and the class weight of the logistic regressions, the early-stopping epoch of the fine-tuned model."""
    described = results.get("classifiers") or {}
    lines: list[str] = []
    for name in classifier_names(results):
        settings = (described.get(name) or {}).get("settings") or results.get("classifier_settings") or {}
        if name == "finetune":
            def chosen(h: dict) -> str:
                score = h.get("holdout_score")
                return f"epoch {h['best_epoch']:g}" + ("" if score is None else f" ({score:.3f})")

            title = (f"held-out part ({settings.get('holdout', 0):.0%}, stratified) of each run's (sanitized) "
                     f"training set — the epoch whose weights were scored and their held-out "
                     f"{settings.get('metric', 'score')}; one per seed")
            title = f"Classifier{classifier_tag(results, name)} checkpoint chosen by early stopping on the " + title
        else:
            def chosen(h: dict) -> str:
                return f"C={h['C']:g}, {h['class_weight'] or 'unweighted'}"

            grid = ", ".join(f"{c:g}" for c in settings.get("c_grid", []))
            title = (f"Classifier{classifier_tag(results, name)} hyper-parameters chosen by cross-validation on "
                     f"each run's (sanitized) training set — C in {{{grid}}}, class weight; one per seed")

        def cell(e: dict, name=name, chosen=chosen) -> str:
            runs = classifier_scores(e, name).get("classifier_hyperparameters") or []
            return "; ".join(chosen(h) for h in runs) or "–"

        lines += _table(results, title, cell)
    return lines


def _privacy_table(results: dict) -> list[str]:
    """One row per configuration with an exact profile: N_x, S_x, S_y*, H∞, H₁, H₀."""
    cfg = results["config"]
    lines = [f"**Exact privacy metrics** (Yue 2023, §2.5.5; S_x and S_y* at cumulative threshold "
             f"{cfg['threshold']:g}; entropies in bits). *Vocabulary*: median [quartiles] over every valid "
             f"input token (S_y*: over {cfg['columns']} sampled outputs plus the data set's most "
             f"frequent). *Data*: median weighted by occurrences in the data set.", "",
             "| mechanism | ε | N_x vocab | N_x data | S_x vocab | S_x data | S_y* vocab | "
             "H∞ vocab | H₁ vocab | H₀ vocab |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    order = {r: i for i, r in enumerate(ordered_rows(results["entries"]))}
    for e in sorted(results["entries"], key=lambda e: (order[row_of(e)], e["epsilon"] or 0)):
        pv = e.get("privacy", {})
        if e["mechanism"] == "dpbart":
            lines.append(f"| {LABELS['dpbart']} | {format_epsilon(e['epsilon'])} |" + " – |" * 8)
            continue
        if "vocabulary" not in pv:
            continue
        voc, dat = pv["vocabulary"], pv["dataset"]
        eps = "–" if e["epsilon"] is None else format_epsilon(e["epsilon"])
        lines.append(f"| {row_of(e).label} | {eps} | {_iqr(voc['n_x'])} | "
                     f"{_q(dat['n_x'])} | {_iqr(voc['s_x'])} | {_q(dat['s_x'])} | "
                     f"{_iqr(voc.get('s_y_star'))} | {_q(voc['h_inf'])} | {_q(voc['h1'])} | "
                     f"{_q(voc['h0'])} |")
    return lines + ["", "CMP/FBDD has no closed-form output distribution here; its empirical "
                    "unchanged-token rate is in the table above.", ""] + _dpbart_note(results)


def _dpbart_entries(results: dict) -> list[dict]:
    """The DP-BART entries of the results, by increasing ε."""
    return sorted((e for e in results["entries"] if e["mechanism"] == "dpbart"), key=lambda e: e["epsilon"])


def _dpbart_note(results: dict) -> list[str]:
    """One line: why DP-BART's token-level cells are "–", and its document-level guarantee per ε."""
    entries = _dpbart_entries(results)
    if not entries:
        return []
    stated = "; ".join(f"ε = {format_epsilon(e['epsilon'])}: {e['privacy'].get('description', '–')}" for e in entries)
    return ["DP-BART: – in every token-level privacy and attack cell (N_x, S_x, S_y*, entropies, the Bayes and "
            "nearest-neighbour inversion attacks, the unchanged-token rate): its output is a new text, not aligned "
            "token by token with its input. Its guarantee is document-level (ε, δ)-LDP, each chunk of at most L "
            f"tokens one release, k chunks composing to (k·ε, k·δ), as the Rewriter reports: {stated}.", ""]


def _formula_check(results: dict) -> list[str]:
    """How closely the SanText formula behind the exact metrics matches the sampler (if checked)."""
    checks = [e["privacy"]["formula_vs_realised"] for e in results["entries"]
              if e.get("privacy", {}).get("formula_vs_realised")]
    if not checks:
        return []
    worst = max(c["max_rel_diff"] for c in checks)
    return [f"The exact metrics use the SanText formula over the bundle's embeddings; on "
            f"{checks[0]['rows_checked']} sampled rows per bundle they match "
            f"`Sanitizer.log_probabilities` (the sampler's realised distribution) to a "
            f"relative difference of at most {worst:.1e}.", ""]


def _paper_reference(results: dict) -> list[str]:
    """The paper's SST-2 accuracies (``paper_reference_sst2``), for the ordering of mechanisms."""
    ref = results.get("paper_reference_sst2")
    if not ref:
        return []
    lines = [f"**Reference: Yue 2023, Table 2.1** ({_PAPER}; SST-2, GloVe vocabulary of 14,730 words, BERT "
             "fine-tuned on sanitized text and tested on sanitized text). A different corpus, "
             "classifier and vocabulary: compare the ordering, not the values.", "",
             "| mechanism | ε = 1 | ε = 2 | ε = 3 |", "| --- | --- | --- | --- |"]
    for mech in (m for m in ROW_ORDER if m in ref):  # the paper has no TEM / CusText / Mahalanobis row
        label = Row(mech, frequency_split(0.9)).label if mech == "santext+" else LABELS[mech]  # p = 0.3, w = 0.9
        lines.append(f"| {label} | " + " | ".join(f"{ref[mech][k]:.4f}" for k in ("1", "2", "3")) + " |")
    return lines + [""]


def _plots(results: dict) -> list[str]:
    """Links to the PNG plots (their default names before they are drawn), unless plots are off."""
    if not results["config"].get("plots", True):
        return []
    plots = results.get("plots") or ["utility_vs_epsilon.png", "privacy_vs_epsilon.png", "frontier.png"]
    return ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]


# -- table cells --------------------------------------------------------------------------------

def _table(results: dict, title: str, getter: Callable[[dict], str],
           majority: float | None = None, sub_row: Callable[[Row], tuple | None] | None = None) -> list[str]:
    """A mechanism × ε table of ``getter(entry)``; rows without any entry are left out; a last
    "Majority class" row of ``majority`` in every column when it is given; ``sub_row(row)``, when given and
    not None for a row, is a ``(label, getter)`` pair drawn as a row right under it.
    """
    eps = _epsilon_columns(results)
    lines = [f"**{title}**", "", "| mechanism | " + " | ".join(f"ε = {format_epsilon(e)}" for e in eps) + " |",
             "| --- |" + " --- |" * len(eps)]
    for row in ordered_rows(results["entries"]):
        cells = [_cell(results["entries"], row, e, getter) for e in eps]
        if all(c is None for c in cells):
            continue
        lines.append(f"| {row.label} | " + " | ".join(c or "–" for c in cells) + " |")
        extra = sub_row(row) if sub_row else None
        if extra:
            label, get = extra
            lines.append(f"| {label} | " + " | ".join(_cell(results["entries"], row, e, get) or "–" for e in eps)
                         + " |")
    if majority is not None:
        lines.append(f"| {MAJORITY_LABEL} | " + " | ".join(f"{majority:.4f}" for _ in eps) + " |")
    return lines + [""]


def _epsilon_columns(results: dict) -> list[float]:
    """The ε columns of the mechanism × ε tables, ascending, each once: the swept ε and any other ε of an
    entry (DP-BART's own)."""
    swept = {float(e) for e in results["config"]["epsilons"]}
    return sorted(swept | {e["epsilon"] for e in results["entries"] if e["epsilon"] is not None})


def _cell(entries: list[dict], row: Row, eps, getter: Callable[[dict], str]) -> str | None:
    """The cell of (row, ε) — an ε-free baseline fills every column; "–" where the value is
    missing; None when the row has no entry.
    """
    for e in entries:
        if row_of(e) == row and (e["epsilon"] is None or e["epsilon"] == eps):
            try:
                return getter(e)
            except (KeyError, TypeError):
                return "–"
    return None


def _fmt(stat: dict | None, digits: int = 4) -> str:
    """``mean ± std`` of a :class:`.records.MeanStd` dictionary (``mean`` alone when std is 0)."""
    if not stat or stat.get("mean") is None or not math.isfinite(stat["mean"]):
        return "–"
    if stat.get("std") and math.isfinite(stat["std"]):
        return f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}"
    return f"{stat['mean']:.{digits}f}"


def _q(summary: dict, key: str = "median", digits: int = 4) -> str:
    """One statistic of a :func:`.metrics.summarize` dictionary."""
    v = summary.get(key) if summary else None
    if v is None:
        return "–"
    return f"{v:.{digits}g}"


def _iqr(summary: dict, digits: int = 4) -> str:
    """``median [q25, q75]`` of a :func:`.metrics.summarize` dictionary."""
    if not summary or summary.get("median") is None:
        return "–"
    return f"{summary['median']:.{digits}g} [{summary['q25']:.{digits}g}, {summary['q75']:.{digits}g}]"
