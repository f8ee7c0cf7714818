"""One PNG per aspect (matplotlib, Agg backend): each metric against ε, one line per mechanism.

The ε-free rows (the unsanitized reference and uniform random replacement) are horizontal lines, the
adversaries' chance rates dotted grey lines. DP-BART's ε is per chunk and on another scale than the token
mechanisms' per-token ε, so the ε axis is logarithmic and DP-BART sits to the right of them.
"""
from __future__ import annotations

from pathlib import Path

from ldptext.fileio import atomic_path
from ..plots import COLORS
from ..report import shareable_mode

__all__ = ["write_aspect_plots"]


def write_aspect_plots(results: dict, out: Path) -> list[str]:
    """Write ``aspect_<name>.png`` for every aspect of ``results``; return the file names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["rows"]
    series: dict[str, list[dict]] = {}
    for r in rows:
        series.setdefault(r["mechanism"], []).append(r)
    ticks = sorted({r["epsilon"] for r in rows if r["epsilon"] is not None})
    written = []
    for aspect, keys in results["aspects"].items():
        fig, axes = plt.subplots(1, len(keys), figsize=(4.6 * len(keys), 3.8), squeeze=False)
        for ax, key in zip(axes[0], keys):
            for mech, rs in series.items():
                color = COLORS.get(mech.split(":")[0], "tab:cyan")
                if rs[0]["epsilon"] is None:
                    ax.axhline(rs[0]["metrics"][key], color=color, linestyle="--", linewidth=1,
                               label=rs[0]["label"])
                    continue
                rs = sorted(rs, key=lambda r: r["epsilon"])
                ax.plot([r["epsilon"] for r in rs], [r["metrics"][key] for r in rs], marker="o", color=color,
                        label=rs[0]["label"])
            if key in results.get("chance", {}):
                ax.axhline(results["chance"][key], color="gray", linestyle=":", linewidth=1, label="chance")
            ax.set_xscale("log")
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
            ax.set_xlabel("ε (per token; DP-BART: per chunk)")
            ax.set_title(results["metrics"][key].replace("top-k", f"top-{results['config']['k']}"), fontsize=9)
            ax.grid(alpha=0.3)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8)
        fig.tight_layout(rect=(0, 0.14, 1, 1))
        name = f"aspect_{aspect}.png"
        with atomic_path(out / name, mode=shareable_mode()) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
        written.append(name)
    return written
