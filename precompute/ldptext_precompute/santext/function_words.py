"""The default non-sensitive set of SanText+: closed-class function words and punctuation marks.

SanText+ releases a non-sensitive word **in the clear with probability 1 − p** (Yue et al. 2021,
*Differential Privacy for Text Analytics via Natural Text Sanitization* (Findings of ACL), as
presented in Yue 2023, *Data Synthesis: Boosting Utility and Privacy in NLP* (PhD thesis, Ohio
State), §2.4). The paper takes the most frequent words as non-sensitive; by public frequency that
set holds first names, cities, countries, digits and words such as "hospital", "police", "cancer",
"gay", "muslim" — exactly what users call sensitive. The default here is therefore the closed word
classes only:

    V_N = vocabulary ∩ ((CLOSED_CLASS ∩ public stop-word list) ∪ PUNCTUATION_MARKS)

The public list is scikit-learn's ``ENGLISH_STOP_WORDS`` (Glasgow Information Retrieval Group
list); it also holds number words ("fifteen") and content words ("fire", "bill", "system"), which the
intersection with the categories below removes. Homographs of names, places or numbers ("us" / US,
"will" / Will, "may" / May, "one", "mine") are left out of the categories on purpose. Nothing here is
a name, a place, a number or digit, or a health, religion or sexuality word.
"""
from __future__ import annotations

import string

from ldptext.errors import ParameterError
from ldptext.function_words import FUNCTION_WORDS

SOURCE = "closed-class function words (ldptext_precompute.santext.function_words) ∩ " \
         "scikit-learn ENGLISH_STOP_WORDS, plus punctuation marks"

#: Closed word classes, by category (lowercase).
CATEGORIES: dict[str, frozenset[str]] = {
    "pronoun": frozenset("""
        i me my myself you your yours yourself yourselves he him his himself she her hers herself
        it its itself we our ours ourselves they them their theirs themselves who whom whose which
        what whatever whoever anyone anything everyone everything nobody noone nothing someone
        something none
    """.split()),
    "determiner": frozenset("""
        a an the this that these those all any both each either every few many more most much
        neither no other another several some such
    """.split()),
    "preposition": frozenset("""
        about above across after against along among amongst around as at before behind below
        beside besides between beyond by down during except for from in into of off on onto over
        per since through throughout thru to toward towards under until up upon via with within
        without
    """.split()),
    "conjunction": frozenset("""
        and but or nor so yet if because although though while whereas whether than unless once
    """.split()),
    "auxiliary": frozenset("""
        am is are was were be been being have has had do does did can could shall should would
        must might cannot not
    """.split()),
}

#: Every closed-class word of :data:`CATEGORIES`.
CLOSED_CLASS: frozenset[str] = frozenset().union(*CATEGORIES.values())

#: Punctuation marks (a subset of Python's public ``string.punctuation``; no currency, percent,
#: number or at signs).
PUNCTUATION_MARKS: frozenset[str] = frozenset(".,;:!?'\"()[]{}-/`") & frozenset(string.punctuation)


def public_stop_words() -> frozenset[str]:
    """The public English stop-word list the categories are intersected with.

    Returns
    -------
    frozenset of str
        scikit-learn's ``ENGLISH_STOP_WORDS``.

    Raises
    ------
    ParameterError
        scikit-learn is not installed.
    """
    try:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    except ImportError:  # pragma: no cover - an install problem
        raise ParameterError("the default non-sensitive set needs scikit-learn (its public stop-word "
                             "list); install it, or pass --non-sensitive frequency:W or a FILE") from None
    return frozenset(ENGLISH_STOP_WORDS)


def derived_function_words() -> frozenset[str]:
    """The default non-sensitive words derived again: closed-class ∩ the public list, plus
    punctuation marks (needs scikit-learn; equal to :func:`function_words`, a test checks).

    Returns
    -------
    frozenset of str
        Lowercase words and single punctuation characters.
    """
    return (CLOSED_CLASS & public_stop_words()) | PUNCTUATION_MARKS


def function_words() -> frozenset[str]:
    """The default non-sensitive words: the runtime's list (:data:`ldptext.function_words.FUNCTION_WORDS`),
    which every runtime checks a ``function-words`` bundle against.

    Returns
    -------
    frozenset of str
        Lowercase words and single punctuation characters.
    """
    return FUNCTION_WORDS
