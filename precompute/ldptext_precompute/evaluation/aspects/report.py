"""``aspects.md``: the table of an aspects sweep (numbers and labels only, never text)."""
from __future__ import annotations

from ...progress import format_duration

__all__ = ["aspects_markdown", "COLUMNS"]

#: Table columns: metric key and short header.
COLUMNS = (("bertscore_f1", "BERTScore F1 ↑"), ("frechet", "Fréchet ↓"), ("pos_score", "POS score ↑"),
           ("pos_jsd", "POS JSD ↓"), ("divergence", "1 − BLEU"), ("char_jsd", "char-3 JSD"),
           ("reid_top1", "re-id @1"), ("reid_topk", "re-id @k"), ("linkage", "linkage @1"),
           ("profiling", "profiling"))


def _eps(row: dict) -> str:
    e = row["epsilon"]
    return "–" if e is None else (f"{e:g} / chunk" if row["mechanism"] == "dpbart" else f"{e:g}")


def aspects_markdown(results: dict) -> str:
    """The markdown report of :func:`.runner.evaluate_aspects`'s results."""
    c = results["corpus"]
    cfg = results["config"]
    k = cfg["k"]
    chance = results["chance"]
    lines = [
        "# What the sanitized corpus keeps and gives away",
        "",
        f"Corpus: {c['name']} ({c['source']}), {c['documents']} documents of {c['doc_words']} words by "
        f"{c['authors']} authors ({c['per_party']} per {c['attribute']}), {c['docs_per_author']} per author; "
        f"re-identification: half of each author's documents are released, the other half are the adversary's "
        f"known original text. Seeds per configuration: {cfg['seeds']} ({results['seeded']}). "
        f"Tagger: {results['tagger']}; encoder: {results['encoder']}.",
        "",
        "↑: higher is better preserved; ↓: lower is better preserved. 1 − BLEU and char-3 JSD: higher is further "
        "from the original. Re-identification (re-id @1, @k with k = " + str(k) + "), linkage and profiling: "
        "the adversary's success, lower is more private.",
        "",
        "| mechanism | ε | " + " | ".join(h.replace("@k", f"@{k}") for _, h in COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for row in results["rows"]:
        m = row["metrics"]
        lines.append(f"| {row['label']} | {_eps(row)} | " + " | ".join(f"{m[key]:.3f}" for key, _ in COLUMNS) + " |")
    lines.append("| chance | | " + " | ".join(f"{chance[key]:.3f}" if key in chance else "" for key, _ in COLUMNS)
                 + " |")
    lines += ["", f"Wall time: {format_duration(results['wall_time_s'])} ({results['wall_time_s']:.0f} s)."]
    if results.get("plots"):
        lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in results["plots"]) + "."]
    if any(r["mechanism"] == "dpbart" for r in results["rows"]):
        lines += ["", "DP-BART's ε is per chunk of at most L tokens; a document of k chunks is released with k·ε."]
    return "\n".join(lines) + "\n"
