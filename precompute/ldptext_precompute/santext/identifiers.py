"""Identifier-shaped vocabulary entries: never outputs of a default bundle.

A public embedding's vocabulary contains tokens that identify a person or a place by themselves:
phone numbers (``202-383-7824``), postal codes (``20003``), long digit strings, e-mail addresses and
URLs (``http://www.nytimes.com``, ``nytimes.com``). They sit apart from every other word in the
embedding space, so the metric mechanisms release them unchanged far more often than other words.
The builders leave every such token out of the **output** domain (it is never released, by anyone's
input); it stays a valid input, sanitized from its own row like any other sensitive word. What the
shapes are is fixed here, from the token's characters only (public, no private text):

* a digit string of 5 or more digits (ZIP codes, account and ID numbers; 4-digit strings are
  mostly years and stay);
* digits with separators (``-``, ``.``, ``/``, ``(``, ``)``, ``+``, space) holding 7 or more digits
  (phone numbers, ZIP+4, long dotted or dashed numbers), except a range of two years
  (``2008-2009``, ``1975-90``);
* an e-mail address (``local@domain.tld``);
* a URL: a scheme (``http://``, ``https://``, ``ftp://``, any ``xyz://``), a ``www.`` prefix, or a
  dotted host name ending in a common top-level domain (``nytimes.com``, ``bbc.co.uk``).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

__all__ = ["DESCRIPTION", "is_identifier", "identifier_mask"]

#: One line for the manifest: what the builder removed from the outputs.
DESCRIPTION = ("identifier-shaped tokens (5+ digit strings, 7+ digits with separators, e-mail addresses, "
               "URLs and host names) are not outputs")

_DIGITS = re.compile(r"^\d{5,}$")
_SEPARATED = re.compile(r"^[\d\-./()+ ]+$")
_YEARS = re.compile(r"^(?:1[5-9]|20)\d\d[-/](?:\d\d|(?:1[5-9]|20)\d\d)$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*://", re.IGNORECASE)
_WWW = re.compile(r"^www\.", re.IGNORECASE)
# a host name: labels of letters, digits and hyphens, the last one a common top-level domain
_HOST = re.compile(r"^(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)+"
                   r"(?:com|org|net|gov|edu|mil|int|info|biz|io|co|uk|de|fr|jp|cn|ru|au|ca|in|it|nl|es|"
                   r"ch|se|no|us|eu|tv|me)$", re.IGNORECASE)


def is_identifier(token: str) -> bool:
    """Whether ``token`` has one of the identifier shapes of this module.

    Parameters
    ----------
    token : str
        A vocabulary entry (WordPiece continuation marks ``##`` are ignored).

    Returns
    -------
    bool
    """
    t = token[2:] if token.startswith("##") else token
    if _DIGITS.match(t):
        return True
    if _SEPARATED.match(t) and sum(c.isdigit() for c in t) >= 7 and not _YEARS.match(t):
        return True
    return bool(_EMAIL.match(t) or _SCHEME.match(t) or _WWW.match(t) or _HOST.match(t))


def identifier_mask(vocab: Sequence[str]) -> np.ndarray:
    """:func:`is_identifier` of every vocabulary entry.

    Parameters
    ----------
    vocab : sequence of str

    Returns
    -------
    np.ndarray of bool, shape (len(vocab),)
    """
    return np.fromiter((is_identifier(w) for w in vocab), dtype=bool, count=len(vocab))
