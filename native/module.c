/* CPython bindings of ldptext._native: a thin layer over chacha20.c, samplers.c and
 * santext_sampler.c. Arrays are passed with the buffer protocol (numpy arrays work), so the extension
 * needs no numpy headers. Every entry point holds the GIL, which is what makes a shared Generator
 * safe to use from several threads. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include "chacha20.h"
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
       T_COUNT };

/* The constructor's keywords: the T_COUNT arrays in enum order, then the scalars. The one list in
 * C; exposed as _native.SANTEXT_TABLE_KEYWORDS so that a test can pin it to the Python schema
 * (ldptext.santext_tables.SAMPLER_KEYWORDS), which builds the arguments by these names. */
static char *table_kwlist[] = {"emb_q", "emb_scale", "emb_sqnorm", "outputs", "head_ids",
                               "alias_threshold", "alias_index", "accept_gamma", "tail_floor",
                               "keep_row", "dim", "head_size", "epsilon", "p", NULL};

typedef struct {
    PyObject_HEAD
    ldp_santext_table table;
    Py_buffer views[T_COUNT];
    int n_views;
} SantextTableObject;

static void SantextTable_dealloc(SantextTableObject *self) {
    int i;
    for (i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int SantextTable_init(SantextTableObject *self, PyObject *args, PyObject *kwds) {
    PyObject *objs[T_COUNT];
    static const char kinds[T_COUNT] = {'i', 'f', 'i', 'i', 'i', 'u', 'u', 'f', 'f', 'b'};
    static const Py_ssize_t sizes[T_COUNT] = {1, 4, 4, 4, 4, 4, 2, 8, 8, 1};
    int dim, k, i;
    double eps, p;
    Py_ssize_t rows, slots;

    for (i = 0; i < self->n_views; i++) PyBuffer_Release(&self->views[i]);
    self->n_views = 0;
    /* the released views may be freed: a failed re-initialisation must not leave the table
     * pointing at them (n_rows = 0 makes every later draw fail with "outside the domain") */
    memset(&self->table, 0, sizeof(self->table));
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOOOOiidd", table_kwlist, &objs[0],
                                     &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6],
                                     &objs[7], &objs[8], &objs[9], &dim, &k, &eps, &p))
        return -1;
    for (i = 0; i < T_COUNT; i++) {
        if (get_array(objs[i], &self->views[i], kinds[i], sizes[i], 0, table_kwlist[i]) != 0)
            return -1;
        self->n_views++;
    }
    if (dim <= 0 || dim > 130000 || k <= 0 || k >= 65535 || !(eps > 0.0) ||
        !(p >= 0.0 && p <= 1.0)) {
        PyErr_SetString(PyExc_ValueError, "invalid dim, head_size, epsilon or p");
        return -1;
    }
    rows = self->views[T_FLOOR].len / 8;
    slots = (Py_ssize_t)k + 1;
    if (rows <= 0 || rows > INT32_MAX ||
        self->views[T_EMBQ].len != rows * dim || self->views[T_SCALE].len != rows * 4 ||
        self->views[T_SQNORM].len != rows * 4 || self->views[T_HEAD].len != rows * k * 4 ||
        self->views[T_THR].len != rows * slots * 4 || self->views[T_ALIAS].len != rows * slots * 2 ||
        self->views[T_GAMMA].len != rows * slots * 8 || self->views[T_KEEP].len != rows ||
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
    self->table.head_ids = self->views[T_HEAD].buf;
    self->table.alias_threshold = self->views[T_THR].buf;
    self->table.alias_index = self->views[T_ALIAS].buf;
    self->table.accept_gamma = self->views[T_GAMMA].buf;
    self->table.tail_floor = self->views[T_FLOOR].buf;
    self->table.keep_row = self->views[T_KEEP].buf;
    self->table.half_epsilon = eps / 2.0;
    self->table.p = p;
    /* ids used as indices must be in range: checked once here rather than on every draw (the
     * same check libldptext runs, santext_sampler.c) */
    if (ldp_santext_table_check(&self->table) != LDP_SAMPLE_OK) goto range;
    return 0;
range:
    memset(&self->table, 0, sizeof(self->table));
    PyErr_SetString(PyExc_ValueError,
                    "table values out of range (ids, alias slots, gammas, norms or scales)");
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
        rc = ldp_santext_sample_many(&self->state, &((SantextTableObject *)tobj)->table, xs.buf,
                                     ys.buf, (size_t)(xs.len / 4), &failed_at);
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

static PyMethodDef SantextTable_methods[] = {
    {"distance", (PyCFunction)SantextTable_distance, METH_VARARGS,
     "distance(a, b): Euclidean distance of rows a and b as the sampler computes it"},
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
                                       "ldptext native core: CSPRNG and exact samplers", -1,
                                       module_methods, NULL, NULL, NULL, NULL};

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
    if (PyType_Ready(&GeneratorType) < 0 || PyType_Ready(&SantextTableType) < 0) return NULL;
    m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    Py_INCREF(&GeneratorType);
    Py_INCREF(&SantextTableType);
    if (PyModule_AddObject(m, "Generator", (PyObject *)&GeneratorType) < 0 ||
        PyModule_AddObject(m, "SantextTable", (PyObject *)&SantextTableType) < 0) {
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
