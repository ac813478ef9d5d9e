/*
 * content.c - the content index's hit counting (cstrie/content/index.py,
 * _Reader._matching), in C.
 *
 * A message's field keys, looked up in the content index's internal trie,
 * give rows of codes: each code names one clause of one binding,
 *
 *     code = binding << 16 | clauses << 8 | clause      (clause < clauses)
 *
 * and a binding is a candidate once every one of its clauses was hit.  A
 * clause may be hit through several keys (a OneOf, a prefix and an equality
 * on one field), so the distinct codes are counted per binding.  In Python
 * (a set, a Counter, a comprehension) that cost about 150 ns per hit: at
 * 100,000 bindings, with 25 hits per message, more than the engine's walks.
 * Here: two open-addressing tables of machine words, sized for the hits
 * (every code and binding nonzero: binding numbers start at 1).
 */
#include "hotpath.h"

#include <string.h>

/* A table of nonzero 64-bit keys and a count each, open addressing. */
typedef struct wtab {
    uint64_t *keys;
    uint32_t *counts;
    size_t mask;
} wtab;

static inline size_t wslot(uint64_t k, size_t mask)
{
    return (size_t)((k * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & mask;
}

/* The slot of k (found, or the empty one where it goes). */
static inline size_t wfind(const wtab *t, uint64_t k)
{
    size_t i = wslot(k, t->mask);
    while (t->keys[i] != 0 && t->keys[i] != k)
        i = (i + 1) & t->mask;
    return i;
}

/* One code from a row: a nonnegative int below 2**63, else -1 with an
 * exception (the index stores nothing else under a message key). */
static int code_of(PyObject *o, uint64_t *out)
{
    if (!PyLong_CheckExact(o)) {
        PyErr_Format(PyExc_TypeError, "content code must be an int, not %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < (1 << 16)) {
        PyErr_SetString(PyExc_ValueError, "content code out of range");
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

PyDoc_STRVAR(content_candidates_doc,
"content_candidates(rows) -> list[int]\n--\n\n"
"The content index's candidates: each binding whose every clause has a code\n"
"among ``rows`` (lists of codes ``binding << 16 | clauses << 8 | clause``),\n"
"once, in no particular order.  O(codes).  TypeError/ValueError for a row\n"
"item that is not such a code.");

static PyObject *content_candidates(PyObject *module, PyObject *rows)
{
    (void)module;
    if (!PyList_CheckExact(rows)) {
        PyErr_SetString(PyExc_TypeError, "content_candidates: rows must be a list");
        return NULL;
    }
    /* The rows are the caller's own new lists (lookup_many's answer): no
     * other thread holds them, so their sizes and items stay put. */
    size_t n = 0;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (!PyList_CheckExact(row)) {
            PyErr_SetString(PyExc_TypeError, "content_candidates: each row must be a list");
            return NULL;
        }
        n += (size_t)PyList_GET_SIZE(row);
    }
    PyObject *out = PyList_New(0);
    if (out == NULL || n == 0)
        return out;
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    /* codes, then bindings (binding << 8 | clauses) with their counts */
    uint64_t *keys = PyMem_Calloc(2 * cap, sizeof *keys);
    uint32_t *counts = PyMem_Calloc(cap, sizeof *counts);
    if (keys == NULL || counts == NULL) {
        PyMem_Free(keys);
        PyMem_Free(counts);
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    wtab codes = {keys, NULL, cap - 1}, bindings = {keys + cap, counts, cap - 1};
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(row); j++) {
            uint64_t c;
            if (code_of(PyList_GET_ITEM(row, j), &c) < 0)
                goto fail;
            size_t i = wfind(&codes, c);
            if (codes.keys[i] == c)
                continue; /* this clause was hit already */
            codes.keys[i] = c;
            size_t b = wfind(&bindings, c >> 8);
            bindings.keys[b] = c >> 8;
            bindings.counts[b]++;
        }
    }
    for (size_t b = 0; b < cap; b++) {
        uint64_t k = bindings.keys[b];
        if (k == 0 || bindings.counts[b] != (k & 0xFF))
            continue;
        PyObject *m = PyLong_FromUnsignedLongLong((unsigned long long)(k >> 8));
        if (m == NULL || PyList_Append(out, m) < 0) {
            Py_XDECREF(m);
            goto fail;
        }
        Py_DECREF(m);
    }
    PyMem_Free(keys);
    PyMem_Free(counts);
    return out;
fail:
    PyMem_Free(keys);
    PyMem_Free(counts);
    Py_DECREF(out);
    return NULL;
}

PyMethodDef content_methods[] = {
    {"content_candidates", content_candidates, METH_O, content_candidates_doc},
    {NULL, NULL, 0, NULL},
};
