"""PNG plots of an evaluation (matplotlib, Agg backend: no display needed).

* ``utility_vs_epsilon.png`` — accuracy on sanitized and on original test text vs ε, per mechanism,
  error bars = std over seeds; the ε-free baselines and the majority-class rate as horizontal lines;
* ``privacy_vs_epsilon.png`` — exact Bayes-attack success, median N_x, median S_x, median S_y* vs ε;
* ``frontier.png`` — the privacy–utility frontier: accuracy against exact attack success (left) and
  against BLEU (right, which also places CMP).

Each file is written atomically.
"""
from __future__ import annotations

from pathlib import Path

from ldptext.fileio import atomic_path
from .report import LABELS, MAJORITY_LABEL, shareable_mode

__all__ = ["write_plots", "COLORS"]

#: Line colour of each mechanism (display names: :data:`.report.LABELS`).
COLORS = {"santext": "tab:blue", "santext+": "tab:green", "cmp": "tab:orange", "random": "tab:gray",
          "none": "black"}


def _series(entries, mech):
    """The entries of one ε-dependent mechanism, by increasing ε."""
    return sorted((e for e in entries if e["mechanism"] == mech and e["epsilon"] is not None),
                  key=lambda e: e["epsilon"])


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
    mechs = [m for m in ("cmp", "santext", "santext+") if _series(entries, m)]
    written = []

    # utility vs epsilon
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, test, title in ((axes[0], "sanitized_test", "tested on sanitized text"),
                            (axes[1], "original_test", "tested on original text")):
        for m in mechs:
            s = [e for e in _series(entries, m) if "utility" in e]
            ax.errorbar([e["epsilon"] for e in s],
                        [e["utility"][test]["accuracy"]["mean"] for e in s],
                        yerr=[e["utility"][test]["accuracy"]["std"] for e in s], marker="o",
                        capsize=3, color=COLORS[m], label=LABELS[m])
        for m in ("none", "random"):
            e = _flat(entries, m)
            if e and "utility" in e:
                ax.axhline(e["utility"][test]["accuracy"]["mean"], ls="--", color=COLORS[m],
                           label=LABELS[m])
        majority = results.get("dataset", {}).get("majority_rate_test")
        if majority is not None:
            ax.axhline(majority, ls=":", color="tab:red", label=MAJORITY_LABEL)
        ax.set_xlabel("ε")
        ax.set_title(f"Accuracy, trained on sanitized text,\n{title}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    _save(fig, out / "utility_vs_epsilon.png")
    plt.close(fig)
    written.append("utility_vs_epsilon.png")

    # privacy vs epsilon
    exact = [m for m in ("santext", "santext+") if _series(entries, m)]
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
            ax.plot([e["epsilon"] for e in s], [get(e) for e in s], marker="o", color=COLORS[m],
                    label=LABELS[m])
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

    # frontier
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, xkey in ((axes[0], "attack"), (axes[1], "bleu")):
        for m in mechs + ["none", "random"]:
            pts = _series(entries, m) if m in mechs else [e for e in [_flat(entries, m)] if e]
            xs, ys, labels = [], [], []
            for e in pts:
                if "utility" not in e:
                    continue
                if xkey == "attack":
                    if "attack" not in e.get("privacy", {}):
                        continue
                    x = e["privacy"]["attack"]["exact_success_rate_dataset"]
                else:
                    x = e["utility"]["bleu"]["mean"]
                xs.append(x)
                ys.append(e["utility"]["sanitized_test"]["accuracy"]["mean"])
                labels.append("" if e["epsilon"] is None else f"ε={e['epsilon']:g}")
            if not xs:
                continue
            ax.plot(xs, ys, marker="o", color=COLORS[m], label=LABELS[m],
                    ls="-" if len(xs) > 1 else "none")
            for x, y, lab in zip(xs, ys, labels):
                if lab:
                    ax.annotate(lab, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xlabel("exact Bayes attack success (data set) — lower is more private"
                      if xkey == "attack" else "BLEU output vs input — lower is more private")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy (sanitized train and test)")
    axes[0].set_title("Privacy–utility frontier (exact attack)", fontsize=10)
    axes[1].set_title("Privacy–utility frontier (BLEU; includes CMP)", fontsize=10)
    for ax in axes:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    _save(fig, out / "frontier.png")
    plt.close(fig)
    written.append("frontier.png")
    return written
