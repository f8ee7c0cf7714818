/* JNI glue of org.ldptext.LdpText over libldptext's public API (native/include/ldptext.h) only.
 * Plain C99 and JNI: no glibc-only calls, so the same file builds with the Android NDK (bionic).
 *
 * Text crosses as UTF-8 byte arrays, never as JNI "modified UTF-8" strings (which encode NUL and
 * characters beyond the BMP differently): Java encodes and decodes with StandardCharsets.UTF_8.
 * The copy of the private input made here is wiped before it is freed. Errors are thrown as
 * org.ldptext.LdpTextException(code, ldp_strerror(code)); the messages hold no input text.
 * Handles are the C pointers as jlong; LdpText.java owns their lifetime and their threading (one
 * ldp_sanitizer per concurrent call, the ldp_bundle shared). */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ldptext.h"
#ifdef LDP_JNI_CHECK_HEADER
/* javac -h's declarations of the native methods: a signature that differs from LdpText.java's fails
 * the build (bindings/jvm/Makefile defines this; an NDK build need not) */
#include "org_ldptext_LdpText.h"
#endif

static jclass exception_class;   /* global ref to org.ldptext.LdpTextException */
static jmethodID exception_init; /* LdpTextException(int, String) */

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    JNIEnv *env;
    jclass local;
    (void)reserved;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
    /* resolved here, on the class loader that loads the library (FindClass on an app thread
     * started from native code would see only the system loader, e.g. on Android) */
    local = (*env)->FindClass(env, "org/ldptext/LdpTextException");
    if (local == NULL) return JNI_ERR;
    exception_class = (jclass)(*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    if (exception_class == NULL) return JNI_ERR;
    exception_init = (*env)->GetMethodID(env, exception_class, "<init>", "(ILjava/lang/String;)V");
    if (exception_init == NULL) return JNI_ERR;
    return JNI_VERSION_1_6;
}

JNIEXPORT void JNICALL JNI_OnUnload(JavaVM *vm, void *reserved) {
    JNIEnv *env;
    (void)reserved;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) == JNI_OK && exception_class != NULL)
        (*env)->DeleteGlobalRef(env, exception_class);
    exception_class = NULL;
}

/* Throws LdpTextException(code, ldp_strerror(code)) (its messages are ASCII, so NewStringUTF's
 * modified UTF-8 is plain UTF-8 here). Leaves an OutOfMemoryError pending if that fails. */
static void throw_code(JNIEnv *env, int code) {
    jstring message;
    jobject ex;
    if ((*env)->ExceptionCheck(env)) return;
    message = (*env)->NewStringUTF(env, ldp_strerror(code));
    if (message == NULL) return;
    ex = (*env)->NewObject(env, exception_class, exception_init, (jint)code, message);
    if (ex != NULL) (*env)->Throw(env, (jthrowable)ex);
}

/* Overwrites memory that held private text; the volatile stores are not optimised away. */
static void wipe(void *p, size_t n) {
    volatile unsigned char *v = (volatile unsigned char *)p;
    while (n--) *v++ = 0;
}

static ldp_bundle *bundle_of(jlong h) { return (ldp_bundle *)(intptr_t)h; }
static ldp_sanitizer *sanitizer_of(jlong h) { return (ldp_sanitizer *)(intptr_t)h; }

/* The trusted keys: a Java array of 32 * n bytes (lengths checked in Java), copied out. */
static uint8_t (*keys_of(JNIEnv *env, jbyteArray keys, jint n_keys))[32] {
    uint8_t (*k)[32];
    if (keys == NULL || n_keys < 0 || (*env)->GetArrayLength(env, keys) != 32 * n_keys) {
        throw_code(env, LDP_E_ARG);
        return NULL;
    }
    k = (uint8_t (*)[32])malloc(32 * (size_t)n_keys + 1);
    if (k == NULL) {
        throw_code(env, LDP_E_NOMEM);
        return NULL;
    }
    (*env)->GetByteArrayRegion(env, keys, 0, 32 * n_keys, (jbyte *)k);
    return k;
}

/* The pins (BundleExpectation.java; 0 / NULL: no pin) as an ldp_expect; the bundle id is copied into
 * id[65] (NUL-terminated by Java). 0, or -1 with an exception pending. */
static int expect_of(JNIEnv *env, ldp_expect *e, char id[65], jint mechanisms, jdouble eps_min,
                     jdouble eps_max, jbyteArray bundle_id, jlong min_format, jboolean allow_weak) {
    e->mechanisms = (unsigned)mechanisms;
    e->epsilon_min = eps_min;
    e->epsilon_max = eps_max;
    e->min_format_version = (int64_t)min_format;
    e->allow_weak_privacy = allow_weak == JNI_TRUE;
    e->bundle_id = NULL;
    if (bundle_id != NULL) {
        if ((*env)->GetArrayLength(env, bundle_id) != 65) {
            throw_code(env, LDP_E_ARG);
            return -1;
        }
        (*env)->GetByteArrayRegion(env, bundle_id, 0, 65, (jbyte *)id);
        if (id[64] != '\0') {
            throw_code(env, LDP_E_ARG);
            return -1;
        }
        e->bundle_id = id;
    }
    return 0;
}

JNIEXPORT jstring JNICALL Java_org_ldptext_LdpText_version0(JNIEnv *env, jclass cls) {
    (void)cls;
    return (*env)->NewStringUTF(env, ldp_version());
}

JNIEXPORT jstring JNICALL Java_org_ldptext_LdpText_strerror0(JNIEnv *env, jclass cls, jint code) {
    (void)cls;
    return (*env)->NewStringUTF(env, ldp_strerror((int)code));
}

JNIEXPORT jlong JNICALL Java_org_ldptext_LdpText_openPath0(JNIEnv *env, jclass cls, jbyteArray path,
                                                           jbyteArray keys, jint n_keys, jint mechanisms,
                                                           jdouble eps_min, jdouble eps_max,
                                                           jbyteArray bundle_id, jlong min_format,
                                                           jboolean allow_weak) {
    uint8_t (*k)[32];
    char *p;
    char id[65];
    jsize len;
    ldp_expect e = LDP_EXPECT_INIT;
    ldp_bundle *b = NULL;
    int rc;
    (void)cls;
    if (path == NULL || (len = (*env)->GetArrayLength(env, path)) < 1) {
        throw_code(env, LDP_E_ARG);
        return 0;
    }
    if (expect_of(env, &e, id, mechanisms, eps_min, eps_max, bundle_id, min_format, allow_weak) != 0) return 0;
    k = keys_of(env, keys, n_keys);
    if (k == NULL) return 0;
    p = (char *)malloc((size_t)len);
    if (p == NULL) {
        free(k);
        throw_code(env, LDP_E_NOMEM);
        return 0;
    }
    (*env)->GetByteArrayRegion(env, path, 0, len, (jbyte *)p);
    if (p[len - 1] != '\0' || memchr(p, '\0', (size_t)len - 1) != NULL) {
        rc = LDP_E_ARG; /* a path with a NUL inside would name another file */
    } else {
        rc = ldp_bundle_open_expect(p, (const uint8_t (*)[32])k, (size_t)n_keys, &e, &b);
    }
    free(p);
    free(k);
    if (rc != LDP_OK) {
        throw_code(env, rc);
        return 0;
    }
    return (jlong)(intptr_t)b;
}

JNIEXPORT jlong JNICALL Java_org_ldptext_LdpText_openMemory0(JNIEnv *env, jclass cls, jbyteArray data,
                                                             jbyteArray keys, jint n_keys, jint mechanisms,
                                                             jdouble eps_min, jdouble eps_max,
                                                             jbyteArray bundle_id, jlong min_format,
                                                             jboolean allow_weak) {
    uint8_t (*k)[32];
    jbyte *bytes;
    char id[65];
    ldp_expect e = LDP_EXPECT_INIT;
    ldp_bundle *b = NULL;
    int rc;
    (void)cls;
    if (data == NULL) {
        throw_code(env, LDP_E_ARG);
        return 0;
    }
    if (expect_of(env, &e, id, mechanisms, eps_min, eps_max, bundle_id, min_format, allow_weak) != 0) return 0;
    k = keys_of(env, keys, n_keys);
    if (k == NULL) return 0;
    /* pinned or copied by the VM for the call; the library copies what it keeps */
    bytes = (*env)->GetByteArrayElements(env, data, NULL);
    if (bytes == NULL) {
        free(k);
        return 0; /* OutOfMemoryError pending */
    }
    rc = ldp_bundle_open_memory_expect((const uint8_t *)bytes, (size_t)(*env)->GetArrayLength(env, data),
                                       (const uint8_t (*)[32])k, (size_t)n_keys, &e, &b);
    (*env)->ReleaseByteArrayElements(env, data, bytes, JNI_ABORT);
    free(k);
    if (rc != LDP_OK) {
        throw_code(env, rc);
        return 0;
    }
    return (jlong)(intptr_t)b;
}

JNIEXPORT void JNICALL Java_org_ldptext_LdpText_closeBundle0(JNIEnv *env, jclass cls, jlong bundle) {
    (void)env;
    (void)cls;
    ldp_bundle_close(bundle_of(bundle));
}

JNIEXPORT jbyteArray JNICALL Java_org_ldptext_LdpText_info0(JNIEnv *env, jclass cls, jlong bundle) {
    char *json = NULL;
    size_t n;
    jbyteArray out;
    int rc;
    (void)cls;
    rc = ldp_bundle_info(bundle_of(bundle), &json);
    if (rc != LDP_OK) {
        throw_code(env, rc);
        return NULL;
    }
    n = strlen(json);
    if (n > (size_t)INT32_MAX) {
        ldp_free(json);
        throw_code(env, LDP_E_NOMEM);
        return NULL;
    }
    out = (*env)->NewByteArray(env, (jsize)n);
    if (out != NULL) (*env)->SetByteArrayRegion(env, out, 0, (jsize)n, (const jbyte *)json);
    ldp_free(json);
    return out;
}

JNIEXPORT jlong JNICALL Java_org_ldptext_LdpText_sanitizerNew0(JNIEnv *env, jclass cls, jlong bundle) {
    ldp_sanitizer *s = NULL;
    int rc;
    (void)cls;
    rc = ldp_sanitizer_new(bundle_of(bundle), &s);
    if (rc != LDP_OK) {
        throw_code(env, rc);
        return 0;
    }
    return (jlong)(intptr_t)s;
}

/* TESTS ONLY (LdpText.openSeededForTests): reproducible, NOT private. The jlong's 64 bits are the
 * unsigned seed. */
JNIEXPORT jlong JNICALL Java_org_ldptext_LdpText_sanitizerNewSeeded0(JNIEnv *env, jclass cls,
                                                                     jlong bundle, jlong seed) {
    ldp_sanitizer *s = NULL;
    int rc;
    (void)cls;
    rc = ldp_sanitizer_new_seeded(bundle_of(bundle), (uint64_t)seed, &s);
    if (rc != LDP_OK) {
        throw_code(env, rc);
        return 0;
    }
    return (jlong)(intptr_t)s;
}

JNIEXPORT void JNICALL Java_org_ldptext_LdpText_sanitizerFree0(JNIEnv *env, jclass cls, jlong sanitizer) {
    (void)env;
    (void)cls;
    ldp_sanitizer_free(sanitizer_of(sanitizer));
}

/* ldp_sanitize on the UTF-8 bytes; fills report[0..8] with epsilon, epsilon0, p, n_tokens,
 * mechanism, seeded, d_max, tolerance, worst_case_epsilon and returns the output's UTF-8 bytes. */
JNIEXPORT jbyteArray JNICALL Java_org_ldptext_LdpText_sanitize0(JNIEnv *env, jclass cls, jlong sanitizer,
                                                                jbyteArray text, jdoubleArray report) {
    ldp_report rep = LDP_REPORT_INIT;
    char *in, *out = NULL;
    size_t out_len = 0;
    jsize len;
    jbyteArray result;
    jdouble values[9];
    int rc;
    (void)cls;
    if (text == NULL || report == NULL || (*env)->GetArrayLength(env, report) < 9) {
        throw_code(env, LDP_E_ARG);
        return NULL;
    }
    len = (*env)->GetArrayLength(env, text);
    in = (char *)malloc((size_t)len + 1);
    if (in == NULL) {
        throw_code(env, LDP_E_NOMEM);
        return NULL;
    }
    (*env)->GetByteArrayRegion(env, text, 0, len, (jbyte *)in);
    rc = ldp_sanitize(sanitizer_of(sanitizer), in, (size_t)len, &out, &out_len, &rep);
    wipe(in, (size_t)len);
    free(in);
    if (rc != LDP_OK) {
        throw_code(env, rc);
        return NULL;
    }
    if (out_len > (size_t)INT32_MAX) {
        ldp_free(out);
        throw_code(env, LDP_E_TOO_LONG);
        return NULL;
    }
    result = (*env)->NewByteArray(env, (jsize)out_len);
    if (result != NULL) (*env)->SetByteArrayRegion(env, result, 0, (jsize)out_len, (const jbyte *)out);
    ldp_free(out);
    if (result == NULL) return NULL; /* OutOfMemoryError pending */
    values[0] = rep.epsilon;
    values[1] = rep.epsilon0;
    values[2] = rep.p;
    values[3] = (jdouble)rep.n_tokens;
    values[4] = (jdouble)rep.mechanism;
    values[5] = (jdouble)rep.seeded;
    values[6] = rep.d_max;
    values[7] = rep.tolerance;
    values[8] = rep.worst_case_epsilon;
    (*env)->SetDoubleArrayRegion(env, report, 0, 9, values);
    return result;
}
