# The C sources of libldptext, relative to native/: the one list that native/Makefile and
# native/wasm/Makefile build and that the Android recipe of docs/jvm.md lists (written there by
# native/gen_android_cmake.py; tests/test_android_build.py checks it and links it for aarch64).
LDP_LIB_SRC := chacha20.c samplers.c santext_sampler.c lib/json.c lib/unicode.c lib/tokenizer.c \
               lib/bundle.c lib/sanitizer.c lib/errors.c lib/check.c lib/expect.c lib/tem.c \
               lib/sha256.c lib/keys.c
