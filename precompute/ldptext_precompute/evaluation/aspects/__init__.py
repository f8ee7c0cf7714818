"""What a sanitized corpus keeps and what it gives away (``ldptext evaluate-aspects``).

The aspects and metrics of Chim, Ive & Liakata, *Evaluating Synthetic Data Generation from User Generated
Text* (Computational Linguistics, 2025), §3–4 and Table 2, measured per mechanism and ε on a corpus with
author identities:

* :mod:`.meaning`      meaning preservation: BERTScore F1 per pair (MiniLM token states) and the Fréchet
  distance of sentence embeddings per corpus;
* :mod:`.style`        style preservation: POS-trigram Jaccard similarity per pair and the POS-trigram
  Jensen–Shannon divergence per corpus (spaCy's ``en_core_web_sm`` tagger, installed as a package);
* :mod:`.divergence`   divergence (a proxy for privacy): 1 − BLEU per pair and the character-trigram
  Jensen–Shannon divergence per corpus;
* :mod:`.reidentification` extrinsic privacy: author re-identification (top-1 / top-k among N authors)
  and author-attribute profiling on sanitized text, with classifiers trained on original text;
* :mod:`.corpus`       the authored corpus (2012 US convention speeches, speaker and party);
* :mod:`.runner`       the sweep (bundles and samples as ``ldptext evaluate`` makes them), the table, the
  plots; :mod:`.cli` the command.

Nothing here is imported by the runtime SDK; the heavy packages are imported where they are used.
"""
