"""Quick start: load a SanText+ bundle, sanitize a sentence, print the text and its privacy report.

    .venv/bin/python examples/quickstart.py BUNDLE   # a bundle you built, or your publisher's
    .venv/bin/python examples/quickstart.py          # first builds a small demo bundle (about 5 s,
                                                     # needs the precompute extra)

BUNDLE must be signed by a key this machine trusts (`ldptext keys trust PUB`, or
`ldptext keys trust --developer` for bundles you built here). The demo bundle is signed with this
machine's developer key, which this script trusts for its own load only.
"""
import sys
import tempfile
from pathlib import Path

import ldptext

TEXT = "Emily was diagnosed with asthma at Mercy Hospital"


def build_demo_bundle(folder: Path) -> Path:
    """A 5,000-word GloVe SanText+ bundle (ε = 3, p = 0.3, the CLI's default verbatim cap of 0.5),
    signed with the developer key."""
    from ldptext_precompute.santext.build import build_santext_bundle

    return build_santext_bundle(folder / "quickstart.ldpb", embeddings="glove-6b-50d", vocab_size=5000,
                                epsilon=3.0, mechanism="santext+", p=0.3, verbatim_cap="default",
                                progress=False)


def main(argv: list[str]) -> int:
    """Sanitize TEXT with the bundle named in ``argv`` (or a freshly built demo bundle)."""
    with tempfile.TemporaryDirectory() as tmp:
        if argv:
            bundle, trusted = argv[0], None  # None: the local trust store
        else:
            from ldptext.keys import developer_public_key

            bundle = build_demo_bundle(Path(tmp))
            trusted = [developer_public_key()]
        # verifies signature, signer, every hash and the tables, then memory-maps the bundle;
        # the with block releases the mapping at its end
        with ldptext.Sanitizer.load(bundle, trusted_keys=trusted) as san:
            result = san.sanitize(TEXT)
            print(result.text)               # safe to upload
            print(result.report.summary())   # the guarantee that holds for this text
            ids = san.tokenize(TEXT)
            print(san.sample_ids(ids))       # the primitive: token ids in, sanitized ids out
        # an app that ships the bundle as an asset passes its bytes: the same checks, the same sampler
        data = Path(bundle).read_bytes()
        with ldptext.Sanitizer.load(data, trusted_keys=trusted) as san:
            print(san.sanitize(TEXT).text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
