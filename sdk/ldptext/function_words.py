"""The words SanText+'s default split keeps in the clear, as every runtime checks a bundle that
says it used them (``params.non_sensitive = "function-words"``).

The list is the closed word classes (pronouns, determiners, prepositions, conjunctions, auxiliaries)
that are also on scikit-learn's public English stop-word list, plus punctuation marks: nothing here is
a name, a place, a number or a health, religion or sexuality word (why, and the categories:
``ldptext_precompute.santext.function_words``, whose test derives this list again). It lives in the
runtime so that a label can be checked where a bundle is opened: libldptext has the same list,
generated from this one (``native/gen_mechanisms.py``).
"""
from __future__ import annotations

__all__ = ["LABEL", "FUNCTION_WORDS", "is_function_word"]

#: The split's label in ``params.non_sensitive``.
LABEL = "function-words"

#: Lowercase function words and single punctuation marks (ASCII only).
FUNCTION_WORDS: frozenset[str] = frozenset("""
    a about above across after against all along although am among amongst an and another any anyone
    anything are around as at be because been before behind being below beside besides between beyond
    both but by can cannot could do down during each either every everyone everything except few for
    from had has have he her hers herself him himself his i if in into is it its itself many me might
    more most much must my myself neither no nobody none noone nor not nothing of off on once onto or
    other our ours ourselves over per several she should since so some someone something such than that
    the their them themselves these they this those though through throughout thru to toward towards
    under until up upon via was we were what whatever whereas whether which while who whoever whom
    whose with within without would yet you your yours yourself yourselves
""".split()) | frozenset('!"\'(),-./:;?[]`{}')


def is_function_word(token: str) -> bool:
    """Whether a vocabulary token is on the list, case-insensitively (``str.lower``; the list is
    ASCII and no listed word holds a "k", so libldptext's ASCII lowercasing decides the same: the
    Kelvin sign is the one non-ASCII character that lowercases to ASCII)."""
    return token.lower() in FUNCTION_WORDS
