/* CPython bindings of ldptext._native, a thin layer over two things:
 *
 *  - Generator and SantextTable: chacha20.c, samplers.c and santext_sampler.c (every randomness
 *    primitive of ldptext.rng, DP-BART's noise, and the numpy-free SanText sampler). These entry
 *    points hold the GIL, which is what makes a shared Generator safe to use from several threads.
 *  - Bundle and TextSanitizer: libldptext (native/lib/), the C library apps embed, so that
 *    ldptext.Sanitizer tokenizes, samples and detokenizes with the same code as every other host.
 *    Bundle adopts the arrays the Python loader has verified (lib/host.h: no second hashing);
 *    TextSanitizer's calls release the GIL while they run (each holds its own lock instead), so
 *    sanitizers in different threads work in parallel.
 *
 * Arrays are passed with the buffer protocol (numpy arrays work), so the extension needs no numpy
 * headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#endif

#include "chacha20.h"
#include "host.h"
#include "ldptext.h"
#include "samplers.h"
#include "santext_sampler.h"

/* ---- buffer helpers ---------------------------------------------------------------------- */

/* kind: 'i' signed integer, 'u' unsigned integer, 'f' float, 'b' bool or uint8 */
static int fmt_kind_ok(const char *fmt, char kind, Py_ssize_t itemsize) {
    char c;
    if (fmt == NULL) fmt = "B";
    while (*fmt == '<' || *fmt == '=' || *fmt == '@' || *fmt == '!' || *fmt == '>') {
        if (*fmt == '>' || *fmt == '!') return 0; /* big-endian data is not accepted */
        fmt++;
    }
    c = fmt[0];
    if (fmt[1] != '\0') return 0;
    switch (kind) {
    case 'i': return strchr("bhilq", c) != NULL;
    case 'u': return strchr("BHILQ", c) != NULL;
    case 'f': return strchr("efd", c) != NULL;
    case 'b': return itemsize == 1 && strchr("?Bb", c) != NULL;
    }
    return 0;
}

static int get_array(PyObject *obj, Py_buffer *view, char kind, Py_ssize_t itemsize, int writable,
                     const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) {
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous%s array", name,
                     writable ? " writable" : "");
        return -1;
    }
    if (view->itemsize != itemsize || !fmt_kind_ok(view->format, kind, itemsize)) {
        PyErr_Format(PyExc_TypeError, "%s: wrong dtype (format %s, itemsize %zd)", name,
                     view->format ? view->format : "B", view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    if (((uintptr_t)view->buf) % (uintptr_t)itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: array data is not aligned", name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ---- Generator --------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    ldp_chacha state;
} GeneratorObject;

static int parse_key(PyObject *args, uint8_t key[32], uint64_t *stream) {
    Py_buffer kb;
    unsigned long long s = 0;
    if (!PyArg_ParseTuple(args, "y*|K", &kb, &s)) return -1;
    if (kb.len != 32) {
        PyBuffer_Release(&kb);
        PyErr_SetString(PyExc_ValueError, "key must be exactly 32 bytes");
        return -1;
    }
    memcpy(key, kb.buf, 32);
    PyBuffer_Release(&kb);
    *stream = (uint64_t)s;
    return 0;
}

static int Generator_init(GeneratorObject *self, PyObject *args, PyObject *kwds) {
    uint8_t key[32];
    uint64_t stream;
    if (parse_key(args, key, &stream) != 0) return -1;
    ldp_chacha_init(&self->state, key, stream);
    return 0;
}

static PyObject *Generator_rekey(GeneratorObject *self, PyObject *args) {
    uint8_t key[32];
    uint64_t stream;
    if (parse_key(args, key, &stream) != 0) return NULL;
    ldp_chacha_init(&self->state, key, stream);
    Py_RETURN_NONE;
}

static PyObject *Generator_random_bytes(GeneratorObject *self, PyObject *args) {
    Py_ssize_t n;
    PyObject *out;
    if (!PyArg_ParseTuple(args, "n", &n)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "n must be >= 0");
        return NULL;
    }
    out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL) return NULL;
    ldp_fill_bytes(&self->state, (uint8_t *)PyBytes_AS_STRING(out), (size_t)n);
    return out;
}

static PyObject *Generator_uniform_int(GeneratorObject *self, PyObject *args) {
    unsigned long long n;
    PyObject *obj;
    Py_buffer out;
    Py_ssize_t i, count;
    if (!PyArg_ParseTuple(args, "KO", &n, &obj)) return NULL;
    if (n == 0 || n > (1ull << 63)) { /* outputs are int64: values >= 2^63 would wrap negative */
        PyErr_SetString(PyExc_ValueError, "n must be in [1, 2**63]");
        return NULL;
    }
    if (get_array(obj, &out, 'i', 8, 1, "out") != 0) return NULL;
    count = out.len / 8;
    for (i = 0; i < count; i++) ((int64_t *)out.buf)[i] = (int64_t)ldp_uniform_u64(&self->state, n);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *Generator_bernoulli(GeneratorObject *self, PyObject *args) {
    double p;
    PyObject *obj;
    Py_buffer out;
    Py_ssize_t i;
    if (!PyArg_ParseTuple(args, "dO", &p, &obj)) return NULL;
    if (!(p >= 0.0 && p <= 1.0)) {
        PyErr_SetString(PyExc_ValueError, "p must be in [0, 1]");
        return NULL;
    }
    if (get_array(obj, &out, 'b', 1, 1, "out") != 0) return NULL;
    for (i = 0; i < out.len; i++) ((uint8_t *)out.buf)[i] = (uint8_t)ldp_bernoulli(&self->state, p);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* bernoulli_exp(gammas: float64 array, out: uint8 array of the same length) */
static PyObject *Generator_bernoulli_exp(GeneratorObject *self, PyObject *args) {
    PyObject *gobj, *oobj;
    Py_buffer gam, out;
    Py_ssize_t i, n;
    if (!PyArg_ParseTuple(args, "OO", &gobj, &oobj)) return NULL;
    if (get_array(gobj, &gam, 'f', 8, 0, "gamma") != 0) return NULL;
    if (get_array(oobj, &out, 'b', 1, 1, "out") != 0) {
        PyBuffer_Release(&gam);
        return NULL;
    }
    n = gam.len / 8;
    if (out.len != n) {
        PyErr_SetString(PyExc_ValueError, "gamma and out must have the same length");
        goto fail;
    }
    for (i = 0; i < n; i++) {
        int r = ldp_bernoulli_exp(&self->state, ((double *)gam.buf)[i]);
        if (r < 0) {
            PyErr_SetString(PyExc_ValueError, "gamma must be >= 0 and not NaN");
            goto fail;
        }
        ((uint8_t *)out.buf)[i] = (uint8_t)r;
    }
    PyBuffer_Release(&gam);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&gam);
    PyBuffer_Release(&out);
    return NULL;
}

typedef int64_t (*int_sampler)(ldp_chacha *, double, int *);

static PyObject *fill_integers(GeneratorObject *self, PyObject *args, int_sampler f,
                               const char *what) {
    double param;
    PyObject *obj;
    Py_buffer out;
    Py_ssize_t i, count;
    int ok = 1;
    if (!PyArg_ParseTuple(args, "dO", &param, &obj)) return NULL;
    if (get_array(obj, &out, 'i', 8, 1, "out") != 0) return NULL;
    count = out.len / 8;
    f(&self->state, param, &ok); /* validates the parameter even when count == 0 */
    for (i = 0; ok && i < count; i++) ((int64_t *)out.buf)[i] = f(&self->state, param, &ok);
    PyBuffer_Release(&out);
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s must be finite and > 0 (or a draw overflowed int64)",
                     what);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Generator_discrete_laplace(GeneratorObject *self, PyObject *args) {
    return fill_integers(self, args, ldp_discrete_laplace, "scale");
}

static PyObject *Generator_discrete_gaussian(GeneratorObject *self, PyObject *args) {
    return fill_integers(self, args, ldp_discrete_gaussian, "sigma");
}

typedef int64_t (*int_sampler_exact)(ldp_chacha *, uint64_t, uint64_t, int *);

/* An integer parameter of the exact samplers: a Python int in [1, 2^62] (checked, never masked). */
static int exact_param(PyObject *obj, uint64_t *out, const char *name) {
    unsigned long long v;
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int", name);
        return -1;
    }
    v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        v = 0; /* negative or beyond 64 bits: out of range below */
    }
    if (v < 1 || v > LDP_EXACT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s must be an integer in [1, 2**62]", name);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static PyObject *fill_integers_exact(GeneratorObject *self, PyObject *args, int_sampler_exact f,
                                     const char *a_name, const char *b_name) {
    PyObject *ao, *bo, *obj;
    uint64_t a, b;
    Py_buffer out;
    Py_ssize_t i, count;
    int ok = 1;
    if (!PyArg_ParseTuple(args, "OOO", &ao, &bo, &obj)) return NULL;
    if (exact_param(ao, &a, a_name) != 0 || exact_param(bo, &b, b_name) != 0) return NULL;
    if (f == ldp_discrete_gaussian_exact && !(b <= a && (a - 1) / 4 < b)) {
        PyErr_SetString(PyExc_ValueError, "need m <= t <= 4m (proposal scale t within [sigma, 2 sigma])");
        return NULL;
    }
    if (get_array(obj, &out, 'i', 8, 1, "out") != 0) return NULL;
    count = out.len / 8;
    for (i = 0; ok && i < count; i++) ((int64_t *)out.buf)[i] = f(&self->state, a, b, &ok);
    PyBuffer_Release(&out);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "a draw overflowed int64");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* discrete_laplace_exact(num, den, out): P(k) ∝ exp(-|k| den / num) */
static PyObject *Generator_discrete_laplace_exact(GeneratorObject *self, PyObject *args) {
    return fill_integers_exact(self, args, ldp_discrete_laplace_exact, "num", "den");
}

/* discrete_gaussian_exact(t, m, out): P(k) ∝ exp(-k^2 / (2 t m)) */
static PyObject *Generator_discrete_gaussian_exact(GeneratorObject *self, PyObject *args) {
    return fill_integers_exact(self, args, ldp_discrete_gaussian_exact, "t", "m");
}

/* ---- SantextTable: borrowed views of a bundle's arrays ------------------------------------ */

enum { T_EMBQ, T_SCALE, T_SQNORM, T_OUT, T_HEAD, T_THR, T_ALIAS, T_GAMMA, T_FLOOR, T_KEEP,
       T_CLUSTER, T_CGAMMA, T_COUNT };

/* The constructor's keywords: the T_COUNT arrays in enum order, then the scalars. The one list in
 * C; exposed as _native.SANTEXT_TABLE_KEYWORDS so that a test can pin it to the Python schema
 * (ldptext.santext_tables.SAMPLER_KEYWORDS), which builds the arguments by these names. */
static char *table_kwlist[] = {"emb_q", "emb_scale", "emb_sqnorm", "outputs", "head_ids",
                               "alias_threshold", "alias_index", "accept_gamma", "tail_floor",
                               "keep_row", "tail_cluster", "cluster_gamma", "dim", "head_size",
                               "epsilon", "p", NULL};

typedef struct {
    PyObject_HEAD
    ldp_santext_table table;
    Py_buffer views[T_COUNT];
    int n_views;
    uint64_t *tail_mass; /* owned: the sampler's derived tail masses */
    void *cluster_order; /* owned: the outputs in cluster order (ldp_santext_cluster_order), or NULL */
} SantextTableObject;

static void SantextTable_dealloc(SantextTableObject *self) {
    int i;
    for (i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
    PyMem_Free(self->tail_mass);
    ldp_refine_store_free(self->table.refined);
    PyMem_Free(self->cluster_order);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int SantextTable_init(SantextTableObject *self, PyObject *args, PyObject *kwds) {
    PyObject *objs[T_COUNT];
    static const char kinds[T_COUNT] = {'i', 'f', 'i', 'i', 'i', 'u', 'u', 'f', 'f', 'b', 'u', 'u'};
    static const Py_ssize_t sizes[T_COUNT] = {1, 4, 4, 4, 4, 4, 2, 8, 8, 1, 1, 1};
    /* the narrower item size a compact bundle may store instead (head ids uint16, alias slots
     * uint8, exponents float32; each widens exactly), 0 = none */
    static const Py_ssize_t narrow[T_COUNT] = {0, 0, 0, 0, 2, 0, 1, 4, 0, 0, 0, 0};
    static const char narrow_kinds[T_COUNT] = {0, 0, 0, 0, 'u', 0, 'u', 'f', 0, 0, 0, 0};
    Py_ssize_t head_w, alias_w, gamma_w;
    int dim, k, i;
    double eps, p;
    Py_ssize_t rows, slots;

    for (i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
    self->n_views = 0;
    PyMem_Free(self->tail_mass);
    self->tail_mass = NULL;
    ldp_refine_store_free(self->table.refined);
    self->table.refined = NULL;
    PyMem_Free(self->cluster_order);
    self->cluster_order = NULL;
    /* the released views may be freed: a failed re-initialisation must not leave the table
     * pointing at them (n_rows = 0 makes every later draw fail with "outside the domain") */
    memset(&self->table, 0, sizeof(self->table));
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOOOOiidd", table_kwlist, &objs[0],
                                     &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6],
                                     &objs[7], &objs[8], &objs[9], &objs[10], &objs[11], &dim, &k,
                                     &eps, &p))
        return -1;
    for (i = 0; i < T_COUNT; i++) {
        /* a compact bundle's narrow arrays are read where they are (no widened copy) */
        Py_ssize_t size = sizes[i];
        char kind = kinds[i];
        if (narrow[i] != 0 && PyObject_CheckBuffer(objs[i])) {
            Py_buffer probe;
            if (PyObject_GetBuffer(objs[i], &probe, PyBUF_FORMAT | PyBUF_ND) == 0) {
                if (probe.itemsize == narrow[i]) {
                    size = narrow[i];
                    kind = narrow_kinds[i];
                }
                PyBuffer_Release(&probe);
            } else {
                PyErr_Clear(); /* get_array reports it */
            }
        }
        if (get_array(objs[i], &self->views[i], kind, size, 0, table_kwlist[i]) != 0)
            return -1;
        self->n_views++;
    }
    head_w = self->views[T_HEAD].itemsize;
    alias_w = self->views[T_ALIAS].itemsize;
    gamma_w = self->views[T_GAMMA].itemsize;
    if (dim <= 0 || dim > 130000 || k <= 0 || k >= 65535 || !(eps > 0.0) ||
        !(p >= 0.0 && p <= 1.0)) {
        PyErr_SetString(PyExc_ValueError, "invalid dim, head_size, epsilon or p");
        return -1;
    }
    rows = self->views[T_FLOOR].len / 8;
    slots = (Py_ssize_t)k + 1;
    if (rows <= 0 || rows > INT32_MAX ||
        self->views[T_EMBQ].len != rows * dim || self->views[T_SCALE].len != rows * 4 ||
        self->views[T_SQNORM].len != rows * 4 || self->views[T_HEAD].len != rows * k * head_w ||
        self->views[T_THR].len != rows * slots * 4 ||
        self->views[T_ALIAS].len != rows * slots * alias_w ||
        self->views[T_GAMMA].len != rows * slots * gamma_w || self->views[T_KEEP].len != rows ||
        self->views[T_CLUSTER].len != rows || self->views[T_CGAMMA].len % rows != 0 ||
        self->views[T_CGAMMA].len / rows < 1 || self->views[T_CGAMMA].len / rows > LDP_MAX_CLUSTERS ||
        self->views[T_OUT].len < (Py_ssize_t)k * 4 || self->views[T_OUT].len / 4 > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "table arrays have inconsistent sizes");
        return -1;
    }
    self->table.n_rows = (int32_t)rows;
    self->table.dim = dim;
    self->table.head_size = k;
    self->table.n_outputs = (int32_t)(self->views[T_OUT].len / 4);
    self->table.emb_q = self->views[T_EMBQ].buf;
    self->table.emb_scale = self->views[T_SCALE].buf;
    self->table.emb_sqnorm = self->views[T_SQNORM].buf;
    self->table.outputs = self->views[T_OUT].buf;
    self->table.alias_threshold = self->views[T_THR].buf;
    /* each of these three in the form it arrives in (the other pointer NULL) */
    self->table.head_ids = head_w == 4 ? self->views[T_HEAD].buf : NULL;
    self->table.head_ids_u16 = head_w == 2 ? self->views[T_HEAD].buf : NULL;
    self->table.alias_index = alias_w == 2 ? self->views[T_ALIAS].buf : NULL;
    self->table.alias_index_u8 = alias_w == 1 ? self->views[T_ALIAS].buf : NULL;
    self->table.accept_gamma = gamma_w == 8 ? self->views[T_GAMMA].buf : NULL;
    self->table.accept_gamma_f32 = gamma_w == 4 ? self->views[T_GAMMA].buf : NULL;
    self->table.tail_floor = self->views[T_FLOOR].buf;
    self->table.keep_row = self->views[T_KEEP].buf;
    self->table.n_clusters = (int32_t)(self->views[T_CGAMMA].len / rows);
    self->table.tail_cluster = self->views[T_CLUSTER].buf;
    self->table.cluster_gamma = self->views[T_CGAMMA].buf;
    self->table.half_epsilon = eps / 2.0;
    self->table.p = p;
    /* ids used as indices must be in range: checked once here rather than on every draw (the
     * same check libldptext runs, santext_sampler.c) */
    if (ldp_santext_table_check(&self->table) != LDP_SAMPLE_OK) goto range;
    self->tail_mass = PyMem_Malloc((size_t)rows * sizeof(uint64_t));
    if (self->tail_mass == NULL) {
        memset(&self->table, 0, sizeof(self->table));
        PyErr_NoMemory();
        return -1;
    }
    ldp_santext_tail_masses(&self->table, self->tail_mass);
    self->table.tail_mass = self->tail_mass;
    if (self->table.n_clusters > 1) { /* as libldptext: the cluster-order tail draw */
        self->cluster_order = PyMem_Malloc(ldp_santext_cluster_order_size(&self->table));
        if (self->cluster_order == NULL) {
            memset(&self->table, 0, sizeof(self->table));
            PyErr_NoMemory();
            return -1;
        }
        ldp_santext_cluster_order(&self->table, self->cluster_order);
        /* as libldptext: refined bounds for the rows drawn (Generator.santext_sample refines a
         * call's new rows first, where libldptext's row check does); none out of memory */
        self->table.refined = ldp_refine_store_new(&self->table, LDP_REFINE_MAX_BYTES);
    }
    return 0;
range:
    memset(&self->table, 0, sizeof(self->table));
    PyErr_SetString(PyExc_ValueError,
                    "table values out of range (ids, alias slots, gammas, norms, scales or clusters)");
    return -1;
}

static PyTypeObject SantextTableType;

/* Generator.santext_sample(table, xs: int32 array, ys: writable int32 array) */
static PyObject *Generator_santext_sample(GeneratorObject *self, PyObject *args) {
    PyObject *tobj, *xobj, *yobj;
    Py_buffer xs, ys;
    size_t failed_at = 0;
    int rc;
    if (!PyArg_ParseTuple(args, "O!OO", &SantextTableType, &tobj, &xobj, &yobj)) return NULL;
    if (get_array(xobj, &xs, 'i', 4, 0, "xs") != 0) return NULL;
    if (get_array(yobj, &ys, 'i', 4, 1, "ys") != 0) {
        PyBuffer_Release(&xs);
        return NULL;
    }
    if (xs.len != ys.len) {
        PyErr_SetString(PyExc_ValueError, "xs and ys must have the same length");
        rc = -1;
    } else {
        const ldp_santext_table *table = &((SantextTableObject *)tobj)->table;
        /* an id out of range refines nothing; the sampler names its position */
        (void)ldp_refine_rows(table, xs.buf, (size_t)(xs.len / 4));
        rc = ldp_santext_sample_many(&self->state, table, xs.buf, ys.buf, (size_t)(xs.len / 4), &failed_at);
        if (rc == LDP_SAMPLE_ERR_ROW)
            PyErr_Format(PyExc_IndexError, "token id at position %zu is outside the domain",
                         failed_at);
        else if (rc != LDP_SAMPLE_OK)
            PyErr_Format(PyExc_RuntimeError,
                         "sampler invariant violated at position %zu (corrupted tables)", failed_at);
    }
    PyBuffer_Release(&xs);
    PyBuffer_Release(&ys);
    if (rc != LDP_SAMPLE_OK) return NULL;
    Py_RETURN_NONE;
}

/* ---- libldptext: Bundle and TextSanitizer -------------------------------------------------- */

/* LibraryError(code, message, doc, token): a libldptext return code (include/ldptext.h), with the
 * document and token position for a batch; ldptext.santext turns it into its own exceptions. The
 * message is ldp_strerror's: it never holds input text. */
static PyObject *LibraryError;

static PyObject *library_error(int code, Py_ssize_t doc, Py_ssize_t token) {
    PyObject *args = Py_BuildValue("(isnn)", code, ldp_strerror(code), doc, token);
    if (args != NULL) {
        PyErr_SetObject(LibraryError, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* safetensors dtype code of a buffer's format, or NULL */
static const char *dtype_code(const Py_buffer *v) {
    static const char *const signed_codes[9] = {NULL, "I8",  "I16", NULL, "I32",
                                                NULL, NULL,  NULL,  "I64"};
    static const char *const unsigned_codes[9] = {NULL, "U8",  "U16", NULL, "U32",
                                                  NULL, NULL,  NULL,  "U64"};
    const char *fmt = v->format ? v->format : "B";
    char c;
    while (*fmt == '<' || *fmt == '=' || *fmt == '@') fmt++;
    c = fmt[0];
    if (c == '\0' || fmt[1] != '\0' || v->itemsize < 1 || v->itemsize > 8) return NULL;
    if (c == '?') return v->itemsize == 1 ? "BOOL" : NULL;
    if (strchr("bhilq", c)) return signed_codes[v->itemsize];
    if (strchr("BHILQ", c)) return unsigned_codes[v->itemsize];
    if (c == 'e') return v->itemsize == 2 ? "F16" : NULL;
    if (c == 'f') return v->itemsize == 4 ? "F32" : NULL;
    if (c == 'd') return v->itemsize == 8 ? "F64" : NULL;
    return NULL; /* big-endian ('>', '!') and anything else */
}

typedef struct {
    PyObject_HEAD
    ldp_bundle *bundle;
    Py_buffer *views; /* the adopted arrays: they keep the verified memory alive */
    Py_ssize_t n_views;
} BundleObject;

static void Bundle_dealloc(BundleObject *self) {
    Py_ssize_t i;
    ldp_bundle_close(self->bundle);
    self->bundle = NULL;
    for (i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
    PyMem_Free(self->views);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Bundle(arrays: dict[str, buffer], manifest: bytes): the verified arrays of a SanText bundle and
 * its exact signed manifest (canonical JSON). See lib/host.h ldp_host_bundle_adopt: everything
 * but the signature, trust and hashes (the Python loader's) is checked again here. The arrays
 * must be read-only buffers (a verified bundle's are: a read-only mapping or immutable bytes), so
 * that nothing in Python changes the tables after they were checked. */
static int Bundle_init(BundleObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"arrays", "manifest", NULL};
    PyObject *given, *arrays = NULL, *key, *value;
    Py_buffer manifest;
    Py_ssize_t pos = 0, n, i = 0;
    ldp_host_array *host = NULL;
    uint64_t *shapes = NULL;
    int rc = LDP_OK, ok = 0;
    if (self->bundle != NULL || self->views != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Bundle is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!y*", kwlist, &PyDict_Type, &given, &manifest))
        return -1;
    /* our own copy: its keys (whose UTF-8 the names point into) live through the call */
    arrays = PyDict_Copy(given);
    if (arrays == NULL) {
        PyBuffer_Release(&manifest);
        return -1;
    }
    n = PyDict_Size(arrays);
    self->views = (Py_buffer *)PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    host = (ldp_host_array *)PyMem_Calloc((size_t)(n ? n : 1), sizeof *host);
    shapes = (uint64_t *)PyMem_Calloc((size_t)(n ? n : 1) * 8, sizeof(uint64_t));
    if (self->views == NULL || host == NULL || shapes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    while (PyDict_Next(arrays, &pos, &key, &value)) {
        Py_buffer *v = &self->views[i];
        Py_ssize_t name_len, d;
        const char *name;
        if (!PyUnicode_Check(key) || (name = PyUnicode_AsUTF8AndSize(key, &name_len)) == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "array names must be str");
            goto done;
        }
        if (PyObject_GetBuffer(value, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) goto done;
        self->n_views = ++i;
        if (!v->readonly) {
            PyErr_Format(PyExc_ValueError, "array %U: must be read-only (a verified bundle's)", key);
            goto done;
        }
        host[i - 1].dtype = dtype_code(v);
        if (host[i - 1].dtype == NULL || v->ndim > 8) {
            PyErr_Format(PyExc_TypeError, "array %U: unsupported dtype or rank", key);
            goto done;
        }
        for (d = 0; d < v->ndim; d++) shapes[(i - 1) * 8 + d] = (uint64_t)v->shape[d];
        host[i - 1].name = name;
        host[i - 1].name_len = (size_t)name_len;
        host[i - 1].ndim = v->ndim;
        host[i - 1].shape = &shapes[(i - 1) * 8];
        host[i - 1].data = v->buf;
        host[i - 1].nbytes = (size_t)v->len;
    }
    /* the names point into the dict's keys and the data into the views: both outlive the call */
    Py_BEGIN_ALLOW_THREADS
    rc = ldp_host_bundle_adopt(host, (size_t)n, (const char *)manifest.buf, (size_t)manifest.len,
                               &self->bundle);
    Py_END_ALLOW_THREADS
    if (rc != LDP_OK) library_error(rc, -1, -1);
    else ok = 1;
done:
    PyBuffer_Release(&manifest);
    Py_XDECREF(arrays);
    PyMem_Free(host);
    PyMem_Free(shapes);
    if (!ok) {
        for (i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
        PyMem_Free(self->views);
        self->views = NULL;
        self->n_views = 0;
        return -1;
    }
    return 0;
}

static int bundle_ready(BundleObject *self) {
    if (self->bundle == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Bundle is not initialised");
        return 0;
    }
    return 1;
}

/* Bundle.distance(a, b) -> float: the sampler's own distance between rows a and b */
static PyObject *Bundle_distance(BundleObject *self, PyObject *args) {
    const ldp_santext_table *t;
    int a, b;
    if (!bundle_ready(self) || !PyArg_ParseTuple(args, "ii", &a, &b)) return NULL;
    t = ldp_host_bundle_table(self->bundle);
    if (a < 0 || b < 0 || a >= t->n_rows || b >= t->n_rows) {
        PyErr_SetString(PyExc_IndexError, "row out of range");
        return NULL;
    }
    return PyFloat_FromDouble(ldp_distance(t, a, b));
}

/* Bundle.check_rows(first, count) -> int: ldp_bundle_check_rows over the range, without the GIL
 * (threads check ranges in parallel): -1 when every row is right, else the first wrong row;
 * LibraryError on any other failure. */
static PyObject *Bundle_check_rows(BundleObject *self, PyObject *args) {
    long long first, count;
    int64_t bad = -1;
    int rc;
    if (!bundle_ready(self) || !PyArg_ParseTuple(args, "LL", &first, &count)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = ldp_bundle_check_rows(self->bundle, (int64_t)first, (int64_t)count, &bad);
    Py_END_ALLOW_THREADS
    if (rc != LDP_OK && rc != LDP_E_PARAMETER_MISMATCH) return library_error(rc, -1, -1);
    return PyLong_FromLongLong((long long)bad);
}

static PyMethodDef Bundle_methods[] = {
    {"distance", (PyCFunction)Bundle_distance, METH_VARARGS,
     "distance(a, b): Euclidean distance of rows a and b as the sampler computes it"},
    {"check_rows", (PyCFunction)Bundle_check_rows, METH_VARARGS,
     "check_rows(first, count): check rows [first, first + count) in full; -1 or the first wrong row"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject BundleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ldptext._native.Bundle",
    .tp_basicsize = sizeof(BundleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "libldptext bundle over arrays the Python loader verified: Bundle(arrays, manifest)",
    .tp_init = (initproc)Bundle_init,
    .tp_methods = Bundle_methods,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)Bundle_dealloc,
};

/* The forks this process descends from, counted in each child (pthread_atfork; Windows has no
 * fork). A TextSanitizer made its lock at one count; another count means a forked child, where a
 * getpid() per call would cost a system call (about 0.3 us on a virtual machine) to learn the same. */
static volatile unsigned long forks_seen;
#ifndef _WIN32
static void count_fork(void) { forks_seen++; }
#endif

/* A libldptext sanitizer: one random stream and scratch buffers. Its calls run without the GIL and
 * are serialised by the sanitizer's own lock (ldptext.santext keeps one per concurrent caller, so
 * threads do not wait on each other unless they share a seeded stream). */
typedef struct {
    PyObject_HEAD
    BundleObject *bundle; /* kept alive: the sanitizer reads its tables */
    ldp_sanitizer *san;
    PyThread_type_lock lock;
    unsigned long lock_forks; /* forks_seen when lock was made */
} TextSanitizerObject;

static void TextSanitizer_dealloc(TextSanitizerObject *self) {
    ldp_sanitizer_free(self->san);
    self->san = NULL;
    if (self->lock != NULL && self->lock_forks == forks_seen) PyThread_free_lock(self->lock);
    Py_XDECREF(self->bundle);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* TextSanitizer(bundle, key: 32 bytes, seeded: bool) */
static int TextSanitizer_init(TextSanitizerObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"bundle", "key", "seeded", NULL};
    PyObject *bobj;
    Py_buffer key;
    int seeded = 0, rc;
    if (self->san != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TextSanitizer is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!y*|p", kwlist, &BundleType, &bobj, &key,
                                     &seeded))
        return -1;
    if (key.len != 32) {
        PyBuffer_Release(&key);
        PyErr_SetString(PyExc_ValueError, "key must be exactly 32 bytes");
        return -1;
    }
    if (!bundle_ready((BundleObject *)bobj)) {
        PyBuffer_Release(&key);
        return -1;
    }
    rc = ldp_host_sanitizer_new(((BundleObject *)bobj)->bundle, (const uint8_t *)key.buf, seeded,
                                &self->san);
    PyBuffer_Release(&key);
    if (rc != LDP_OK) {
        library_error(rc, -1, -1);
        return -1;
    }
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        ldp_sanitizer_free(self->san);
        self->san = NULL;
        PyErr_NoMemory();
        return -1;
    }
    self->lock_forks = forks_seen;
    Py_INCREF(bobj);
    self->bundle = (BundleObject *)bobj;
    return 0;
}

/* Takes the sanitizer's lock, waiting without the GIL. In a forked child the lock may be held by
 * a thread of the parent that does not exist here: the child gets a fresh lock (the old one is
 * left alone), and the sanitizer itself rekeys before its next draw (lib/sanitizer.c). */
static int acquire(TextSanitizerObject *self) {
    if (self->san == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TextSanitizer is not initialised");
        return 0;
    }
    if (self->lock_forks != forks_seen) {
        PyThread_type_lock fresh = PyThread_allocate_lock();
        if (fresh == NULL) {
            PyErr_NoMemory();
            return 0;
        }
        self->lock = fresh;
        self->lock_forks = forks_seen;
    }
    if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(self->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    return 1;
}

static void release(TextSanitizerObject *self) { PyThread_release_lock(self->lock); }

/* The UTF-8 bytes of a str: ASCII text is read in place; other text is encoded into a new bytes
 * object (*holder), so no UTF-8 copy is cached on the caller's string. NULL with an exception
 * (a lone surrogate cannot be encoded). */
static const char *utf8_of(PyObject *text, Py_ssize_t *len, PyObject **holder) {
    *holder = NULL;
    if (PyUnicode_IS_ASCII(text)) return PyUnicode_AsUTF8AndSize(text, len);
    *holder = PyUnicode_AsUTF8String(text);
    if (*holder == NULL) return NULL;
    *len = PyBytes_GET_SIZE(*holder);
    return PyBytes_AS_STRING(*holder);
}

/* TextSanitizer.tokenize(text: str) -> bytearray of int32 ids (native byte order) */
static PyObject *TextSanitizer_tokenize(TextSanitizerObject *self, PyObject *args) {
    PyObject *text, *holder, *out = NULL;
    const char *utf8;
    Py_ssize_t len;
    size_t n = 0, cap;
    int32_t *ids;
    int rc;
    if (!PyArg_ParseTuple(args, "U", &text)) return NULL;
    utf8 = utf8_of(text, &len, &holder);
    if (utf8 == NULL) {
        PyErr_Clear();
        return library_error(LDP_E_INVALID_UTF8, 0, -1);
    }
    cap = (size_t)len + 16;
    ids = (int32_t *)PyMem_RawMalloc(cap * sizeof(int32_t));
    if (ids == NULL) {
        Py_XDECREF(holder);
        return PyErr_NoMemory();
    }
    if (!acquire(self)) {
        PyMem_RawFree(ids);
        Py_XDECREF(holder);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = ldp_tokenize(self->san, utf8, (size_t)len, ids, cap, &n);
    if (rc == LDP_E_CAPACITY) {
        int32_t *bigger = (int32_t *)PyMem_RawRealloc(ids, (n ? n : 1) * sizeof(int32_t));
        if (bigger == NULL) {
            rc = LDP_E_NOMEM;
        } else {
            ids = bigger;
            rc = ldp_tokenize(self->san, utf8, (size_t)len, ids, n, &n);
        }
    }
    Py_END_ALLOW_THREADS
    release(self);
    Py_XDECREF(holder);
    if (rc == LDP_OK) out = PyByteArray_FromStringAndSize((const char *)ids, (Py_ssize_t)(n * 4));
    else library_error(rc, 0, -1);
    PyMem_RawFree(ids);
    return out;
}

/* TextSanitizer.detokenize(ids: int32 buffer) -> str */
static PyObject *TextSanitizer_detokenize(TextSanitizerObject *self, PyObject *args) {
    PyObject *obj, *out;
    Py_buffer ids;
    int32_t *copy;
    char *text = NULL;
    size_t len = 0, n;
    int rc;
    if (self->san == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TextSanitizer is not initialised");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
    if (get_array(obj, &ids, 'i', 4, 0, "ids") != 0) return NULL;
    /* a private copy: another thread may write to the caller's array while this one runs */
    copy = (int32_t *)PyMem_RawMalloc(ids.len ? (size_t)ids.len : 1);
    if (copy == NULL) {
        PyBuffer_Release(&ids);
        return PyErr_NoMemory();
    }
    memcpy(copy, ids.buf, (size_t)ids.len);
    n = (size_t)(ids.len / 4);
    PyBuffer_Release(&ids);
    /* reads only the bundle (immutable): no lock needed */
    Py_BEGIN_ALLOW_THREADS
    rc = ldp_detokenize(self->san, copy, n, &text, &len);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(copy);
    if (rc != LDP_OK) return library_error(rc, -1, -1);
    out = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "strict");
    ldp_free(text);
    return out;
}

/* TextSanitizer.sample(xs: int32 buffer, ys: writable int32 buffer): ys[i] drawn for xs[i] */
static PyObject *TextSanitizer_sample(TextSanitizerObject *self, PyObject *args) {
    PyObject *xobj, *yobj;
    Py_buffer xs, ys;
    int32_t *copy;
    int rc;
    if (!PyArg_ParseTuple(args, "OO", &xobj, &yobj)) return NULL;
    if (get_array(xobj, &xs, 'i', 4, 0, "xs") != 0) return NULL;
    if (get_array(yobj, &ys, 'i', 4, 1, "ys") != 0) {
        PyBuffer_Release(&xs);
        return NULL;
    }
    if (xs.len != ys.len) {
        PyBuffer_Release(&xs);
        PyBuffer_Release(&ys);
        PyErr_SetString(PyExc_ValueError, "xs and ys must have the same length");
        return NULL;
    }
    /* a private copy of the inputs: the sampler reads each id more than once, and another thread
     * may write to the caller's array while this one runs without the GIL */
    copy = (int32_t *)PyMem_RawMalloc(xs.len ? (size_t)xs.len : 1);
    if (copy == NULL) {
        PyBuffer_Release(&xs);
        PyBuffer_Release(&ys);
        return PyErr_NoMemory();
    }
    memcpy(copy, xs.buf, (size_t)xs.len);
    PyBuffer_Release(&xs);
    if (!acquire(self)) {
        PyMem_RawFree(copy);
        PyBuffer_Release(&ys);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = ldp_sample_ids(self->san, copy, (int32_t *)ys.buf, (size_t)(ys.len / 4));
    Py_END_ALLOW_THREADS
    release(self);
    PyMem_RawFree(copy);
    PyBuffer_Release(&ys);
    if (rc != LDP_OK) return library_error(rc, -1, -1);
    Py_RETURN_NONE;
}

/* TextSanitizer.sanitize_batch(texts: sequence of str) -> (list of str, list of int): tokenize,
 * sample (one sampler call for the whole batch) and detokenize, all without the GIL. A failure
 * raises LibraryError(code, message, doc, token) naming the document (and for an invalid id the
 * token position); nothing is returned for any document. */
static PyObject *TextSanitizer_sanitize_batch(TextSanitizerObject *self, PyObject *args) {
    PyObject *seq, *docs = NULL, *holders = NULL, *texts = NULL, *counts = NULL, *result = NULL;
    const char **ptrs = NULL;
    size_t *lens = NULL;
    Py_ssize_t n, i;
    ldp_host_batch batch;
    ldp_host_batch_error err;
    int rc;
    memset(&batch, 0, sizeof batch);
    if (!PyArg_ParseTuple(args, "O", &seq)) return NULL;
    /* a tuple holds every str for the whole call: the caller's list may change meanwhile */
    docs = PySequence_Tuple(seq);
    if (docs == NULL) return NULL;
    n = PyTuple_GET_SIZE(docs);
    holders = PyTuple_New(n);
    ptrs = (const char **)PyMem_Malloc((size_t)(n ? n : 1) * sizeof *ptrs);
    lens = (size_t *)PyMem_Malloc((size_t)(n ? n : 1) * sizeof *lens);
    if (holders == NULL || ptrs == NULL || lens == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(docs, i), *holder;
        Py_ssize_t len;
        if (!PyUnicode_Check(t)) {
            PyErr_Format(PyExc_TypeError, "document %zd is %s, not str", i, Py_TYPE(t)->tp_name);
            goto done;
        }
        ptrs[i] = utf8_of(t, &len, &holder);
        if (ptrs[i] == NULL) { /* a lone surrogate: not UTF-8 text */
            PyErr_Clear();
            library_error(LDP_E_INVALID_UTF8, i, -1);
            goto done;
        }
        lens[i] = (size_t)len;
        PyTuple_SET_ITEM(holders, i, holder != NULL ? holder : Py_NewRef(Py_None));
    }
    if (!acquire(self)) goto done;
    Py_BEGIN_ALLOW_THREADS
    rc = ldp_host_sanitize_batch(self->san, ptrs, lens, (size_t)n, &batch, &err);
    Py_END_ALLOW_THREADS
    release(self);
    if (rc != LDP_OK) {
        library_error(rc, (Py_ssize_t)err.doc, rc == LDP_E_INPUT_ID ? (Py_ssize_t)err.token : -1);
        goto done;
    }
    texts = PyList_New(n);
    counts = PyList_New(n);
    if (texts == NULL || counts == NULL) goto done;
    for (i = 0; i < n; i++) {
        PyObject *t = PyUnicode_DecodeUTF8(batch.text + batch.offsets[i],
                                           (Py_ssize_t)(batch.offsets[i + 1] - batch.offsets[i]),
                                           "strict");
        PyObject *c = PyLong_FromSize_t(batch.n_tokens[i]);
        if (t == NULL || c == NULL) {
            Py_XDECREF(t);
            Py_XDECREF(c);
            goto done;
        }
        PyList_SET_ITEM(texts, i, t);
        PyList_SET_ITEM(counts, i, c);
    }
    result = PyTuple_Pack(2, texts, counts);
done:
    ldp_host_batch_free(&batch);
    Py_XDECREF(texts);
    Py_XDECREF(counts);
    Py_XDECREF(holders);
    Py_XDECREF(docs);
    PyMem_Free(ptrs);
    PyMem_Free(lens);
    return result;
}

static PyObject *TextSanitizer_get_seeded(TextSanitizerObject *self, void *closure) {
    return PyBool_FromLong(ldp_host_sanitizer_seeded(self->san));
}

static PyGetSetDef TextSanitizer_getset[] = {
    {"seeded", (getter)TextSanitizer_get_seeded, NULL, "True for a seeded (not private) stream",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef TextSanitizer_methods[] = {
    {"tokenize", (PyCFunction)TextSanitizer_tokenize, METH_VARARGS,
     "tokenize(text) -> bytearray of int32 ids"},
    {"detokenize", (PyCFunction)TextSanitizer_detokenize, METH_VARARGS,
     "detokenize(ids_int32) -> str"},
    {"sample", (PyCFunction)TextSanitizer_sample, METH_VARARGS, "sample(xs_int32, ys_int32)"},
    {"sanitize_batch", (PyCFunction)TextSanitizer_sanitize_batch, METH_VARARGS,
     "sanitize_batch(texts) -> (list of str, list of int): the whole batch without the GIL"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject TextSanitizerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ldptext._native.TextSanitizer",
    .tp_basicsize = sizeof(TextSanitizerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "libldptext sanitizer: TextSanitizer(bundle, key32, seeded=False)",
    .tp_init = (initproc)TextSanitizer_init,
    .tp_methods = TextSanitizer_methods,
    .tp_getset = TextSanitizer_getset,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)TextSanitizer_dealloc,
};

/* ---- module-level helpers for tests ------------------------------------------------------- */

/* chacha20_block(state: 64 bytes as 16 little-endian words) -> 64 bytes (RFC 8439 §2.3) */
static PyObject *py_chacha20_block(PyObject *mod, PyObject *args) {
    Py_buffer in;
    uint32_t w[16], o[16];
    uint8_t bytes[64];
    int i;
    if (!PyArg_ParseTuple(args, "y*", &in)) return NULL;
    if (in.len != 64) {
        PyBuffer_Release(&in);
        PyErr_SetString(PyExc_ValueError, "state must be 64 bytes");
        return NULL;
    }
    for (i = 0; i < 16; i++) {
        const uint8_t *p = (const uint8_t *)in.buf + 4 * i;
        w[i] = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
               ((uint32_t)p[3] << 24);
    }
    PyBuffer_Release(&in);
    ldp_chacha20_block(w, o);
    for (i = 0; i < 16; i++) {
        bytes[4 * i] = (uint8_t)o[i];
        bytes[4 * i + 1] = (uint8_t)(o[i] >> 8);
        bytes[4 * i + 2] = (uint8_t)(o[i] >> 16);
        bytes[4 * i + 3] = (uint8_t)(o[i] >> 24);
    }
    return PyBytes_FromStringAndSize((const char *)bytes, 64);
}

/* SantextTable.distance(a, b) -> float: the sampler's own distance between rows a and b */
static PyObject *SantextTable_distance(SantextTableObject *self, PyObject *args) {
    int a, b;
    if (!PyArg_ParseTuple(args, "ii", &a, &b)) return NULL;
    if (a < 0 || b < 0 || a >= self->table.n_rows || b >= self->table.n_rows) {
        PyErr_SetString(PyExc_IndexError, "row out of range");
        return NULL;
    }
    return PyFloat_FromDouble(ldp_distance(&self->table, a, b));
}

/* SantextTable.refined(x) -> (bounds, cell_of_outputs, skip) or None: row x's refined bound per
 * cell (bytes), the cell of every output (a list in output order) and its skip flag, where the row
 * is refined (santext_sampler.h); for the tests */
static PyObject *SantextTable_refined(SantextTableObject *self, PyObject *args) {
    const ldp_santext_table *t = &self->table;
    int x, c;
    PyObject *bounds, *cells;
    char *q;
    if (!PyArg_ParseTuple(args, "i", &x)) return NULL;
    if (x < 0 || x >= t->n_rows) {
        PyErr_SetString(PyExc_IndexError, "row out of range");
        return NULL;
    }
    if (t->n_cells <= 0 || ldp_refined_bound(t, x, 0) < 0) Py_RETURN_NONE;
    bounds = PyBytes_FromStringAndSize(NULL, t->n_cells);
    if (bounds == NULL) return NULL;
    q = PyBytes_AS_STRING(bounds);
    for (c = 0; c < t->n_cells; c++) q[c] = (char)ldp_refined_bound(t, x, c);
    cells = PyList_New(t->n_outputs);
    if (cells == NULL) {
        Py_DECREF(bounds);
        return NULL;
    }
    for (c = 0; c < t->n_outputs; c++) PyList_SET_ITEM(cells, c, PyLong_FromLong(t->cell_of[t->outputs[c]]));
    return Py_BuildValue("(NNi)", bounds, cells, ldp_refined_skip(t, x));
}

/* SantextTable.skip_rows() -> bytes: 1 per row that skips its refused rounds, 0 otherwise */
static PyObject *SantextTable_skip_rows(SantextTableObject *self, PyObject *unused) {
    (void)unused;
    if (self->table.skip_row == NULL) return PyBytes_FromStringAndSize(NULL, 0);
    return PyBytes_FromStringAndSize((const char *)self->table.skip_row, self->table.n_rows);
}

static PyMethodDef SantextTable_methods[] = {
    {"distance", (PyCFunction)SantextTable_distance, METH_VARARGS,
     "distance(a, b): Euclidean distance of rows a and b as the sampler computes it"},
    {"refined", (PyCFunction)SantextTable_refined, METH_VARARGS,
     "refined(x): (bounds per cell, cell of each output, skip flag) where row x is refined, else None"},
    {"skip_rows", (PyCFunction)SantextTable_skip_rows, METH_NOARGS,
     "skip_rows(): one byte per row, 1 where the sampler skips refused tail rounds (empty: none)"},
    {NULL, NULL, 0, NULL}};

static PyMethodDef Generator_methods[] = {
    {"rekey", (PyCFunction)Generator_rekey, METH_VARARGS, "rekey(key32, stream=0)"},
    {"random_bytes", (PyCFunction)Generator_random_bytes, METH_VARARGS, "random_bytes(n)"},
    {"uniform_int", (PyCFunction)Generator_uniform_int, METH_VARARGS, "uniform_int(n, out_int64)"},
    {"bernoulli", (PyCFunction)Generator_bernoulli, METH_VARARGS, "bernoulli(p, out_uint8)"},
    {"bernoulli_exp", (PyCFunction)Generator_bernoulli_exp, METH_VARARGS,
     "bernoulli_exp(gamma_float64, out_uint8)"},
    {"discrete_laplace", (PyCFunction)Generator_discrete_laplace, METH_VARARGS,
     "discrete_laplace(scale, out_int64)"},
    {"discrete_gaussian", (PyCFunction)Generator_discrete_gaussian, METH_VARARGS,
     "discrete_gaussian(sigma, out_int64)"},
    {"discrete_laplace_exact", (PyCFunction)Generator_discrete_laplace_exact, METH_VARARGS,
     "discrete_laplace_exact(num, den, out_int64): P(k) ~ exp(-|k| den/num), integer arithmetic"},
    {"discrete_gaussian_exact", (PyCFunction)Generator_discrete_gaussian_exact, METH_VARARGS,
     "discrete_gaussian_exact(t, m, out_int64): P(k) ~ exp(-k^2/(2tm)), integer arithmetic"},
    {"santext_sample", (PyCFunction)Generator_santext_sample, METH_VARARGS,
     "santext_sample(table, xs_int32, ys_int32)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject GeneratorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ldptext._native.Generator",
    .tp_basicsize = sizeof(GeneratorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ChaCha20 generator with exact samplers; Generator(key32, stream=0)",
    .tp_methods = Generator_methods,
    .tp_init = (initproc)Generator_init,
    .tp_new = PyType_GenericNew,
};

static PyTypeObject SantextTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ldptext._native.SantextTable",
    .tp_basicsize = sizeof(SantextTableObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Validated views of a SanText bundle's sampling tables",
    .tp_init = (initproc)SantextTable_init,
    .tp_methods = SantextTable_methods,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)SantextTable_dealloc,
};

static PyMethodDef module_methods[] = {
    {"chacha20_block", py_chacha20_block, METH_VARARGS, "RFC 8439 block function (for tests)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_native",
                                       "ldptext native core: CSPRNG, exact samplers, libldptext",
                                       -1, module_methods, NULL, NULL, NULL, NULL};

/* SANTEXT_TABLE_KEYWORDS: table_kwlist as a tuple of str */
static PyObject *table_keywords(void) {
    Py_ssize_t n = 0, i;
    PyObject *t;
    while (table_kwlist[n] != NULL) n++;
    t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (i = 0; i < n; i++) {
        PyObject *s = PyUnicode_FromString(table_kwlist[i]);
        if (s == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m, *kw;
#ifndef _WIN32
    static int counting;
    if (!counting) counting = pthread_atfork(NULL, NULL, count_fork) == 0;
    if (!counting) return PyErr_NoMemory(); /* pthread_atfork fails only for lack of memory */
#endif
    if (PyType_Ready(&GeneratorType) < 0 || PyType_Ready(&SantextTableType) < 0 ||
        PyType_Ready(&BundleType) < 0 || PyType_Ready(&TextSanitizerType) < 0)
        return NULL;
    m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    LibraryError = PyErr_NewException("ldptext._native.LibraryError", PyExc_Exception, NULL);
    if (LibraryError == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&GeneratorType);
    Py_INCREF(&SantextTableType);
    Py_INCREF(&BundleType);
    Py_INCREF(&TextSanitizerType);
    Py_INCREF(LibraryError);
    if (PyModule_AddObject(m, "Generator", (PyObject *)&GeneratorType) < 0 ||
        PyModule_AddObject(m, "SantextTable", (PyObject *)&SantextTableType) < 0 ||
        PyModule_AddObject(m, "Bundle", (PyObject *)&BundleType) < 0 ||
        PyModule_AddObject(m, "TextSanitizer", (PyObject *)&TextSanitizerType) < 0 ||
        PyModule_AddObject(m, "LibraryError", LibraryError) < 0 ||
        PyModule_AddStringConstant(m, "LIBRARY_VERSION", ldp_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    kw = table_keywords();
    if (kw == NULL || PyModule_AddObject(m, "SANTEXT_TABLE_KEYWORDS", kw) < 0) {
        Py_XDECREF(kw);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
