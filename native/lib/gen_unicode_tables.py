"""Generate native/lib/unicode_tables.h: the Unicode behaviour of Hugging Face ``tokenizers``.

The C tokenizer must give the ids ``tokenizers`` gives. ``tokenizers`` takes its character
classes from the ``unicode_categories`` crate (an old Unicode version, with its own quirks: its
"non-spacing mark" table also holds spacing and enclosing marks), lowercases with Rust's
``char::to_lowercase`` (the Unicode version of the Rust toolchain that built the wheel) and
normalizes with ``unicode-normalization-alignments`` (an older Unicode version than utf8proc's).
None of that equals utf8proc's current tables, so this script asks the installed ``tokenizers``
itself, one code point at a time, and writes what it answers:

* ``hf_other``   code points BertNormalizer's clean_text removes (U+0000, U+FFFD, Cc/Cf/Co/Cs of
                 the crate, except tab, newline and carriage return);
* ``hf_space``   Rust ``char::is_whitespace`` (the pre-tokenizers' split, clean_text's map to ' ');
* ``hf_mn``      the crate's ``is_mark_nonspacing`` (BertNormalizer's strip_accents removes these
                 after NFD);
* ``hf_mark``    ``unicode-normalization-alignments``' ``is_combining_mark`` (the StripAccents
                 normalizer removes these: all of M, not only Mn);
* ``hf_punct``   BertPreTokenizer's punctuation (ASCII punctuation or the crate's P*);
* ``hf_lower``   Rust ``char::to_lowercase`` for every code point it changes;
* ``hf_norm_active`` every code point the normalization tables of ``tokenizers`` know to matter:
                 it decomposes (NFKD), has a non-zero canonical combining class, is a piece of a
                 canonical composition, or is a Hangul jamo. Everything else is inert there
                 (a starter that never decomposes or composes), so the C side hands only runs of
                 active code points to utf8proc, whose data agree with the crate's for every code
                 point the crate knows (Unicode's normalization stability policy).

Run with the project's virtual environment: ``.venv/bin/python native/lib/gen_unicode_tables.py``
(about 30 s). ``tests/test_libldptext_conformance.py`` checks the C tokenizer against the
installed ``tokenizers`` code point by code point, so a ``tokenizers`` upgrade that changes any of
this fails there; rerun the script then.
"""
from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

import tokenizers
from tokenizers import normalizers as N
from tokenizers import pre_tokenizers as P

OUT = Path(__file__).with_name("unicode_tables.h")
MAX_CP = 0x110000


def code_points():
    """Every Unicode scalar value (no surrogates)."""
    for c in range(MAX_CP):
        if not 0xD800 <= c < 0xE000:
            yield c


def ranges(cps):
    """Sorted [first, last] runs of a set of code points."""
    out = []
    for c in sorted(cps):
        if out and out[-1][1] + 1 == c:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def main() -> None:
    """Ask the installed tokenizers and write unicode_tables.h."""
    clean = N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                             lowercase=False)
    strip, nfd, nfkd, lower = N.StripAccents(), N.NFD(), N.NFKD(), N.Lowercase()
    bert_strip = N.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                                  lowercase=False)
    bert_pre = P.BertPreTokenizer()
    other, space, mn, mark, punct, active, lower_map = set(), set(), set(), set(), set(), set(), {}
    for c in code_points():
        s = chr(c)
        if clean.normalize_str(s) == "":
            other.add(c)
        if strip.normalize_str(s) == "":
            mark.add(c)
        parts = [p for p, _ in bert_pre.pre_tokenize_str("a" + s + "b")]
        if parts == ["a", "b"]:
            space.add(c)
        elif parts == ["a", s, "b"]:
            punct.add(c)
        elif parts != ["a" + s + "b"]:
            raise SystemExit(f"unexpected pre-tokenization of U+{c:04X}: {parts!r}")
        low = lower.normalize_str(s)
        if low != s:
            if not 1 <= len(low) <= 3:
                raise SystemExit(f"lowercase of U+{c:04X} has {len(low)} code points")
            lower_map[c] = [ord(x) for x in low]
        decomposed = nfd.normalize_str(s)
        if decomposed == s and bert_strip.normalize_str(s) == "":  # (a decomposed one is gone)
            mn.add(c)
        if nfkd.normalize_str(s) != s:
            active.add(c)
        if decomposed != s and not 0xAC00 <= c <= 0xD7A3:  # Hangul syllables: algorithmic
            dec = unicodedata.decomposition(s)
            if not dec or dec.startswith("<"):
                raise SystemExit(f"U+{c:04X}: canonical decomposition unknown to unicodedata")
            active.update(int(x, 16) for x in dec.split())
        k = unicodedata.combining(s)
        if k and decomposed == s:
            # does tokenizers know this mark's combining class? reorder it against a known mark
            if k > 1:
                known = nfd.normalize_str("a" + s + "\u0334") == "a\u0334" + s
            else:
                known = nfd.normalize_str("a\u0301" + s) == "a" + s + "\u0301"
            if known:
                active.add(c)
    # Hangul: L, V and T jamo compose algorithmically; the syllables decompose (already in)
    active.update(range(0x1100, 0x1113), range(0x1161, 0x1176), range(0x11A8, 0x11C3))
    # clean_text maps exactly the whitespace it does not remove to ' '
    for c in code_points():
        if c in space and c not in other and c != 0x20:
            assert clean.normalize_str(chr(c)) == " ", hex(c)

    lines = [
        "/* Generated by native/lib/gen_unicode_tables.py from tokenizers "
        f"{tokenizers.__version__}: do not edit. */",
        "/* The Unicode behaviour of Hugging Face tokenizers, code point ranges [first, last]; see",
        " * the generator for how each table is obtained. */",
        "#ifndef LDP_UNICODE_TABLES_H",
        "#define LDP_UNICODE_TABLES_H",
        "#include <stdint.h>",
        f'#define LDP_UNICODE_TABLES_SOURCE "tokenizers {tokenizers.__version__}"',
    ]
    for name, cps in (("hf_other", other), ("hf_space", space), ("hf_mn", mn), ("hf_mark", mark),
                      ("hf_punct", punct), ("hf_norm_active", active)):
        rs = ranges(cps)
        lines.append(f"static const uint32_t {name}[][2] = {{ /* {len(cps)} code points */")
        row = []
        for a, b in rs:
            row.append(f"{{0x{a:X},0x{b:X}}}")
            if len(row) == 6:
                lines.append("    " + ", ".join(row) + ",")
                row = []
        if row:
            lines.append("    " + ", ".join(row) + ",")
        lines.append("};")
    lines.append(f"static const struct {{ uint32_t cp; uint32_t lower[3]; }} hf_lower[] = {{ "
                 f"/* {len(lower_map)} code points */")
    for c in sorted(lower_map):
        low = lower_map[c] + [0] * (3 - len(lower_map[c]))
        lines.append(f"    {{0x{c:X}, {{0x{low[0]:X}, 0x{low[1]:X}, 0x{low[2]:X}}}}},")
    lines += ["};", "#endif", ""]
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}: other {len(other)}, space {len(space)}, mn {len(mn)}, mark {len(mark)}, "
          f"punct {len(punct)}, "
          f"active {len(active)}, lower {len(lower_map)}", file=sys.stderr)


if __name__ == "__main__":
    main()
