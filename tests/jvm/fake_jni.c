/* Runs the jar's libldptext_jni.so without a JVM (there is none for aarch64 here: tests/test_jvm_jar.py
 * runs this under qemu-aarch64): dlopen()s the library, calls JNI_OnLoad and the Java_org_ldptext_*
 * entry points exactly as LdpText.java does, through a JNIEnv whose few functions the glue calls are
 * implemented below over plain C arrays.
 *
 *   fake_jni LIB BUNDLE KEYHEX SEED TEXT
 *
 * prints "version V", then for the bundle opened with the 32-byte key KEYHEX and a seeded sanitizer
 * "text T" and "tokens N" (the seeded output, to compare with the Python runtime's), then the code
 * of opening it with a stranger's key ("refused C": the glue's exception path). Exit 0 when all ran. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <dlfcn.h>
#include <jni.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    jsize len;
    unsigned char data[];
} array; /* jbyteArray and jdoubleArray */

static int pending; /* the code of a thrown LdpTextException; 0: none */
static char cls_exception[] = "LdpTextException";

static array *new_array(jsize len, size_t elem) {
    array *a = calloc(1, sizeof(array) + (size_t)len * elem + 1);
    if (a == NULL) exit(3);
    a->len = len;
    return a;
}

static jint JNICALL get_env(JavaVM *vm, void **penv, jint version);
static jclass JNICALL find_class(JNIEnv *env, const char *name) {
    (void)env;
    return strcmp(name, "org/ldptext/LdpTextException") == 0 ? (jclass)cls_exception : NULL;
}
static jobject JNICALL new_global_ref(JNIEnv *env, jobject o) { (void)env; return o; }
static void JNICALL delete_ref(JNIEnv *env, jobject o) { (void)env; (void)o; }
static jmethodID JNICALL get_method_id(JNIEnv *env, jclass c, const char *name, const char *sig) {
    (void)env; (void)c;
    return strcmp(name, "<init>") == 0 && strcmp(sig, "(ILjava/lang/String;)V") == 0 ? (jmethodID)1 : NULL;
}
static jboolean JNICALL exception_check(JNIEnv *env) { (void)env; return pending != 0; }
static jstring JNICALL new_string_utf(JNIEnv *env, const char *s) { (void)env; return (jstring)strdup(s); }
static jobject JNICALL new_object(JNIEnv *env, jclass c, jmethodID m, ...) {
    va_list ap;
    jint code;
    (void)env; (void)c; (void)m;
    va_start(ap, m);
    code = va_arg(ap, jint);
    va_end(ap);
    return (jobject)(intptr_t)code;
}
static jint JNICALL throw_(JNIEnv *env, jthrowable t) { (void)env; pending = (int)(intptr_t)t; return 0; }
static jsize JNICALL get_array_length(JNIEnv *env, jarray a) { (void)env; return ((array *)a)->len; }
static void JNICALL get_byte_region(JNIEnv *env, jbyteArray a, jsize start, jsize n, jbyte *buf) {
    (void)env;
    memcpy(buf, ((array *)a)->data + start, (size_t)n);
}
static void JNICALL set_byte_region(JNIEnv *env, jbyteArray a, jsize start, jsize n, const jbyte *buf) {
    (void)env;
    memcpy(((array *)a)->data + start, buf, (size_t)n);
}
static void JNICALL set_double_region(JNIEnv *env, jdoubleArray a, jsize start, jsize n, const jdouble *buf) {
    (void)env;
    memcpy(((array *)a)->data + start * sizeof(jdouble), buf, (size_t)n * sizeof(jdouble));
}
static jbyteArray JNICALL new_byte_array(JNIEnv *env, jsize n) { (void)env; return (jbyteArray)new_array(n, 1); }

static struct JNINativeInterface_ functions;
static JNIEnv env_value = &functions;
static struct JNIInvokeInterface_ invoke;
static JavaVM vm_value = &invoke;

static jint JNICALL get_env(JavaVM *vm, void **penv, jint version) {
    (void)vm; (void)version;
    *penv = &env_value;
    return JNI_OK;
}

static void *sym(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (f == NULL) {
        fprintf(stderr, "missing %s\n", name);
        exit(2);
    }
    return f;
}

static array *bytes_of(const void *p, size_t n) {
    array *a = new_array((jsize)n, 1);
    memcpy(a->data, p, n);
    return a;
}

typedef jlong (*open_path_fn)(JNIEnv *, jclass, jbyteArray, jbyteArray, jint, jint, jdouble, jdouble, jbyteArray,
                              jlong, jboolean);

int main(int argc, char **argv) {
    void *lib;
    jint (*on_load)(JavaVM *, void *);
    jstring (*version0)(JNIEnv *, jclass);
    open_path_fn open_path0;
    jlong (*seeded0)(JNIEnv *, jclass, jlong, jlong);
    jbyteArray (*sanitize0)(JNIEnv *, jclass, jlong, jbyteArray, jdoubleArray);
    void (*sanitizer_free0)(JNIEnv *, jclass, jlong);
    void (*close0)(JNIEnv *, jclass, jlong);
    unsigned char key[32], stranger[32];
    array *path, *keys, *text, *report, *out;
    jlong bundle, san;
    double rep[9];
    JNIEnv *env = &env_value;
    int i;

    if (argc != 6 || strlen(argv[3]) != 64) {
        fprintf(stderr, "usage: fake_jni LIB BUNDLE KEYHEX SEED TEXT\n");
        return 2;
    }
    functions.FindClass = find_class;
    functions.NewGlobalRef = new_global_ref;
    functions.DeleteGlobalRef = delete_ref;
    functions.DeleteLocalRef = delete_ref;
    functions.GetMethodID = get_method_id;
    functions.ExceptionCheck = exception_check;
    functions.NewStringUTF = new_string_utf;
    functions.NewObject = new_object;
    functions.Throw = throw_;
    functions.GetArrayLength = get_array_length;
    functions.GetByteArrayRegion = get_byte_region;
    functions.SetByteArrayRegion = set_byte_region;
    functions.SetDoubleArrayRegion = set_double_region;
    functions.NewByteArray = new_byte_array;
    invoke.GetEnv = get_env;

    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    on_load = (jint (*)(JavaVM *, void *))sym(lib, "JNI_OnLoad");
    version0 = (jstring (*)(JNIEnv *, jclass))sym(lib, "Java_org_ldptext_LdpText_version0");
    open_path0 = (open_path_fn)sym(lib, "Java_org_ldptext_LdpText_openPath0");
    seeded0 = (jlong (*)(JNIEnv *, jclass, jlong, jlong))sym(lib, "Java_org_ldptext_LdpText_sanitizerNewSeeded0");
    sanitize0 = (jbyteArray (*)(JNIEnv *, jclass, jlong, jbyteArray, jdoubleArray))sym(
        lib, "Java_org_ldptext_LdpText_sanitize0");
    sanitizer_free0 = (void (*)(JNIEnv *, jclass, jlong))sym(lib, "Java_org_ldptext_LdpText_sanitizerFree0");
    close0 = (void (*)(JNIEnv *, jclass, jlong))sym(lib, "Java_org_ldptext_LdpText_closeBundle0");

    if (on_load(&vm_value, NULL) != JNI_VERSION_1_6) {
        fprintf(stderr, "JNI_OnLoad failed\n");
        return 1;
    }
    printf("version %s\n", (const char *)version0(env, NULL));

    for (i = 0; i < 32; i++) {
        unsigned v;
        sscanf(argv[3] + 2 * i, "%2x", &v);
        key[i] = (unsigned char)v;
        stranger[i] = (unsigned char)i;
    }
    path = bytes_of(argv[2], strlen(argv[2]) + 1); /* NUL-terminated, as LdpText.pathBytes */
    keys = bytes_of(key, 32);
    bundle = open_path0(env, NULL, (jbyteArray)path, (jbyteArray)keys, 1, 0, 0.0, 0.0, NULL, 0, JNI_FALSE);
    if (pending) {
        fprintf(stderr, "open refused: %d\n", pending);
        return 1;
    }
    san = seeded0(env, NULL, bundle, (jlong)strtoull(argv[4], NULL, 10));
    if (pending) {
        fprintf(stderr, "seeded sanitizer refused: %d\n", pending);
        return 1;
    }
    text = bytes_of(argv[5], strlen(argv[5]));
    report = new_array(9, sizeof(jdouble));
    out = (array *)sanitize0(env, NULL, san, (jbyteArray)text, (jdoubleArray)report);
    if (pending || out == NULL) {
        fprintf(stderr, "sanitize refused: %d\n", pending);
        return 1;
    }
    memcpy(rep, report->data, sizeof rep);
    printf("text %.*s\n", (int)out->len, (const char *)out->data);
    printf("tokens %.0f\n", rep[3]);
    sanitizer_free0(env, NULL, san);
    close0(env, NULL, bundle);

    keys = bytes_of(stranger, 32);
    bundle = open_path0(env, NULL, (jbyteArray)path, (jbyteArray)keys, 1, 0, 0.0, 0.0, NULL, 0, JNI_FALSE);
    printf("refused %d\n", bundle == 0 ? pending : 0);
    return 0;
}
