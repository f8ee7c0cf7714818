"""PNG plots of an evaluation (matplotlib, Agg backend: no display needed).

* ``utility_vs_epsilon.png`` — accuracy on sanitized and on original test text vs ε, per mechanism,
  error bars = std over seeds; the ε-free baselines and the majority-class rate as horizontal lines; one
  row per classifier;
* ``privacy_vs_epsilon.png`` — exact Bayes-attack success, median N_x, median S_x, median S_y* vs ε;
* ``frontier.png`` — the privacy–utility frontier at equal attack success, not at equal ε (ε scales
  differ across mechanisms and embeddings): accuracy against the exact Bayes inversion success, one
  panel per classifier, with the attack levels of the report's "utility at attack success ≤ t" table as
  dotted lines; accuracy against the empirical nearest-neighbour inversion success@10 and against BLEU
  (the last two panels, which also place CMP). DP-BART has no token-level attack (its output is not aligned
  with its input; its guarantee is document-level) and its ε is per chunk of a document, not per token: it is
  in none of the ε or attack panels, only in the accuracy-vs-BLEU panel, next to the token mechanisms.

Each file is written atomically.
"""
from __future__ import annotations

from pathlib import Path

from ldptext import registry
from ldptext.fileio import atomic_path
from ..epsilon import format_epsilon
from .records import ATTACK_TARGETS, attack_success, classifier_scores
from .report import LABELS, MAJORITY_LABEL, classifier_names, classifier_tag, shareable_mode
from .rows import DEFAULT_SPLIT, Row, ordered_rows, row_of

__all__ = ["write_plots", "COLORS", "label_offsets"]

#: Line colour of each mechanism (display names: :data:`.report.LABELS`).
COLORS = {"santext": "tab:blue", "santext+": "tab:green", "cmp": "tab:orange", "random": "tab:gray",
          "none": "black", "mahalanobis": "tab:brown", "tem": "tab:purple", "custext": "tab:red",
          "custext+": "tab:pink", "dpbart": "tab:olive"}
#: Colour of a SanText+ row with another split than the default.
OTHER_SPLIT_COLOR = "tab:cyan"
#: The majority-class line is drawn under the baselines' lines (random often sits on it), dotted.
MAJORITY_ZORDER, BASELINE_ZORDER = 1.5, 2.5
#: Candidate offsets (points) of an ε label from its marker, tried in order until one does not overlap.
LABEL_OFFSETS = ((4, 4), (4, -11), (-30, 4), (-30, -11), (4, 14), (4, -21), (-30, 14), (-30, -21))
#: Size (points) assumed for an ε label when placing it.
LABEL_BOX = (28.0, 9.0)


def _color(row: Row) -> str:
    return COLORS[row.mechanism] if row.split in (None, DEFAULT_SPLIT) else OTHER_SPLIT_COLOR


def _series(entries, row: Row):
    """The entries of one ε-dependent row, by increasing ε."""
    return sorted((e for e in entries if row_of(e) == row and e["epsilon"] is not None),
                  key=lambda e: e["epsilon"])


def label_offsets(anchors, box=LABEL_BOX, candidates=LABEL_OFFSETS) -> list[tuple[float, float]]:
    """An offset per label anchor (display points, in order) such that no two label boxes overlap when
    any candidate allows it (the first candidate otherwise).

    Parameters
    ----------
    anchors : sequence of (float, float)
        The markers' positions, in points.
    box : (float, float)
        Width and height of a label, in points.
    candidates : sequence of (float, float)
        Offsets of a label's lower-left corner from its marker, tried in order.

    Returns
    -------
    list of (float, float)
    """
    placed: list[tuple[float, float]] = []
    chosen = []
    w, h = box
    for ax_, ay in anchors:
        pick = candidates[0]
        for dx, dy in candidates:
            x, y = ax_ + dx, ay + dy
            if all(abs(x - px) >= w or abs(y - py) >= h for px, py in placed):
                pick = (dx, dy)
                break
        placed.append((ax_ + pick[0], ay + pick[1]))
        chosen.append(pick)
    return chosen


def _annotate(ax, points: list[tuple[float, float, str]]) -> None:
    """ε labels of one panel's markers, placed by :func:`label_offsets` in display points."""
    ax.autoscale_view()
    scale = 72.0 / ax.figure.dpi
    anchors = [tuple(v * scale for v in ax.transData.transform((x, y))) for x, y, _ in points]
    for (x, y, lab), offset in zip(points, label_offsets(anchors)):
        ax.annotate(lab, (x, y), textcoords="offset points", xytext=offset, fontsize=7)


def _flat(entries, mech):
    """The entry of an ε-free baseline, or None."""
    return next((e for e in entries if e["mechanism"] == mech and e["epsilon"] is None), None)


def _save(fig, path: Path) -> None:
    """Save a figure as PNG atomically."""
    with atomic_path(path, mode=shareable_mode()) as tmp:
        fig.savefig(tmp, dpi=120, format="png")


def write_plots(results: dict, out: Path) -> list[str]:
    """Draw the three plots of the module docstring from the results.

    Parameters
    ----------
    results : dict
        The ``results.json`` document (:meth:`.records.Results.to_dict`).
    out : Path
        Directory the PNG files are written to (overwritten).

    Returns
    -------
    list of str
        The file names written, relative to ``out``.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = results["entries"]
    token = set(registry.names(kind="token"))
    mechs = [r for r in ordered_rows(entries) if r.mechanism in token and _series(entries, r)]
    names = classifier_names(results)
    written = []

    def accuracy(e: dict, name, test: str = "sanitized_test") -> dict:
        return classifier_scores(e, name)[test]["accuracy"]

    # utility vs epsilon: one row per classifier
    fig, grid = plt.subplots(len(names), 2, figsize=(10, 4 * len(names)), sharey=True, squeeze=False)
    for axes, name in zip(grid, names):
        tag = classifier_tag(results, name)
        for ax, test, title in ((axes[0], "sanitized_test", "tested on sanitized text"),
                                (axes[1], "original_test", "tested on original text")):
            for m in mechs:
                s = [e for e in _series(entries, m) if "utility" in e]
                ax.errorbar([e["epsilon"] for e in s], [accuracy(e, name, test)["mean"] for e in s],
                            yerr=[accuracy(e, name, test)["std"] for e in s], marker="o",
                            capsize=3, color=_color(m), label=m.label)
            for m in ("none", "random"):
                e = _flat(entries, m)
                if e and "utility" in e:
                    ax.axhline(accuracy(e, name, test)["mean"], ls="--", lw=1.6, color=COLORS[m], label=LABELS[m],
                               zorder=BASELINE_ZORDER)
            majority = results.get("dataset", {}).get("majority_rate_test")
            if majority is not None:
                ax.axhline(majority, ls=":", lw=1.0, color="tab:red", label=MAJORITY_LABEL, zorder=MAJORITY_ZORDER)
            ax.set_xlabel("ε")
            ax.set_title(f"Accuracy{tag}, trained on sanitized text,\n{title}", fontsize=10)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("accuracy")
    grid[0][0].legend(fontsize=8)
    fig.tight_layout()
    _save(fig, out / "utility_vs_epsilon.png")
    plt.close(fig)
    written.append("utility_vs_epsilon.png")

    # privacy vs epsilon
    exact_law = set(registry.names(kind="token", exact_law=True))
    exact = [r for r in mechs if r.mechanism in exact_law]
    panels = [("attack", "Bayes attack success (data set)",
               lambda e: e["privacy"]["attack"]["exact_success_rate_dataset"], False),
              ("n_x", "median N_x (vocabulary)",
               lambda e: e["privacy"]["vocabulary"]["n_x"]["median"], False),
              ("s_x", f"median S_x (threshold {results['config']['threshold']:g})",
               lambda e: e["privacy"]["vocabulary"]["s_x"]["median"], True),
              ("s_y", "median S_y* (sampled outputs)",
               lambda e: e["privacy"]["vocabulary"]["s_y_star"]["median"], True)]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8))
    for ax, (_, title, get, logy) in zip(axes, panels):
        for m in exact:
            s = _series(entries, m)
            ax.plot([e["epsilon"] for e in s], [get(e) for e in s], marker="o", color=_color(m),
                    label=m.label)
        for m in ("none", "random"):
            e = _flat(entries, m)
            if e and "vocabulary" in e.get("privacy", {}):
                try:
                    ax.axhline(get(e), ls="--", color=COLORS[m], label=LABELS[m])
                except (KeyError, TypeError):
                    pass
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    _save(fig, out / "privacy_vs_epsilon.png")
    plt.close(fig)
    written.append("privacy_vs_epsilon.png")

    # frontier: accuracy at equal attack success (one panel per classifier), and against BLEU
    panels = [("attack", name) for name in names] + [("nn", names[0]), ("bleu", names[0])]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), sharey=True, squeeze=False)
    pending = []
    for ax, (xkey, name) in zip(axes[0], panels):
        labelled = []
        for m in mechs + [Row("dpbart"), Row("none"), Row("random")]:
            if m.mechanism == "dpbart" and xkey != "bleu":
                continue   # no token-level attack applies to DP-BART
            pts = (_series(entries, m) if m.mechanism not in ("none", "random")
                   else [e for e in [_flat(entries, m.mechanism)] if e])
            xs, ys, labels = [], [], []
            for e in pts:
                if "utility" not in e:
                    continue
                x = (e["utility"]["bleu"]["mean"] if xkey == "bleu"
                     else attack_success(e, "exact_bayes" if xkey == "attack" else "nn_inversion@10"))
                if x is None:
                    continue
                xs.append(x)
                ys.append(accuracy(e, name)["mean"])
                labels.append("" if e["epsilon"] is None else f"ε={format_epsilon(e['epsilon'])}")
            if not xs:
                continue
            ax.plot(xs, ys, marker="o", color=_color(m), label=m.label,
                    ls="-" if len(xs) > 1 else "none")
            labelled += [(x, y, lab) for x, y, lab in zip(xs, ys, labels) if lab]
        tag = classifier_tag(results, name)
        if xkey in ("attack", "nn"):
            for t in ATTACK_TARGETS:
                ax.axvline(t, ls=":", lw=0.8, color="0.6")
            ax.set_xscale("log")
            which = "exact Bayes inversion" if xkey == "attack" else "nearest-neighbour inversion @10"
            ax.set_xlabel(f"{which} success (data set; log) — lower is more private", fontsize=8)
            ax.set_title(f"Accuracy{tag} at equal {which} success", fontsize=10)
        else:
            ax.set_xlabel("BLEU output vs input — lower is more private")
            extra = [registry.get(m).label for m in registry.names(exact_law=False) if _series(entries, Row(m))]
            ax.set_title(f"Accuracy{tag} vs BLEU" + (f" (includes {', '.join(extra)})" if extra else ""),
                         fontsize=10)
        ax.grid(alpha=0.3)
        pending.append((ax, labelled))
        ax.legend(fontsize=8, loc="lower right")
    axes[0][0].set_ylabel("accuracy (sanitized train and test)")
    fig.tight_layout()
    for ax, labelled in pending:   # once the layout is final: labels are placed in display points
        _annotate(ax, labelled)
    _save(fig, out / "frontier.png")
    plt.close(fig)
    written.append("frontier.png")
    return written
