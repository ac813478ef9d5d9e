/*
 * compat.h - the few CPython C-API differences the fast path spans, from
 * CPython 3.10 to 3.13 and the free-threaded 3.13t.
 *
 *  - cst_mutex: PyMutex on 3.13+ (one byte, parks and detaches the thread
 *    state when contended, so it never deadlocks with the GIL or a
 *    stop-the-world pause); before 3.13 a flag guarded by the GIL, whose
 *    waiters release the GIL (see below).
 *  - list_get_ref / dict_get_ref: strong references to a shared list's item
 *    or a dict's value.  On free-threaded builds only the 3.13 *Ref
 *    functions are safe against another thread changing the container
 *    (PyList_GET_ITEM would return a borrowed pointer the other thread may
 *    free).  With the GIL the borrowed read plus Py_INCREF is the same thing.
 *  - topic_utf8: a str's UTF-8 bytes, in place for ASCII strings (no copy on
 *    any version), from CPython's cached UTF-8 otherwise - except on
 *    free-threaded builds before 3.13.2, where filling that cache raced
 *    (gh-128013): there a temporary bytes object holds the encoding.
 */
#ifndef CSTRIE_HOTPATH_COMPAT_H
#define CSTRIE_HOTPATH_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_LONGLONG, READONLY before 3.12 */
#include <time.h>

#if PY_VERSION_HEX >= 0x030D0000
#define CST_HAVE_PYMUTEX 1
#endif

/* A spin-wait hint to the CPU (x86 pause, arm yield). */
static inline void cst_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ------------------------------------------------------------------ mutex */
#ifdef CST_HAVE_PYMUTEX
typedef PyMutex cst_mutex;

static inline int cst_mutex_init(cst_mutex *m)
{
    memset(m, 0, sizeof *m);
    return 0;
}
/* The registry's critical sections are a few hundred nanoseconds, shorter
 * than PyMutex's first step when it finds the lock taken (sched_yield, a
 * system call of about a microsecond, then parking): spin on the lock bit
 * first, then leave it to PyMutex.  The fast path is PyMutex_Lock's own
 * inline one (cpython/lock.h: a CAS of _bits from unlocked, 0, to locked,
 * 1); a lock taken here is released by PyMutex_Unlock as any other. */
#define CST_MUTEX_SPINS 128 /* a few microseconds at most */
static inline void cst_mutex_lock(cst_mutex *m)
{
    for (int spins = 0; spins < CST_MUTEX_SPINS; spins++) {
        uint8_t expected = 0;
        /* acquire: the critical section's loads and stores stay after the
         * lock is taken (as PyMutex's own CAS) */
        if (__atomic_compare_exchange_n(&m->_bits, &expected, 1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        while ((__atomic_load_n(&m->_bits, __ATOMIC_RELAXED) & 1) != 0 &&
               ++spins < CST_MUTEX_SPINS)
            cst_cpu_relax();
    }
    PyMutex_Lock(m);
}
static inline void cst_mutex_unlock(cst_mutex *m) { PyMutex_Unlock(m); }
static inline void cst_mutex_fini(cst_mutex *m) { (void)m; }
/* For tests and debugging only: a racy look at the lock bit. */
static inline int cst_mutex_held(cst_mutex *m)
{
    return (__atomic_load_n(&m->_bits, __ATOMIC_RELAXED) & 1) != 0;
}
#else
/* Before 3.13 every caller holds the GIL, so the lock is a flag that only GIL
 * holders read and write: taking a free lock is one load and one store.  A
 * holder can only lose the GIL inside Python code it calls while holding the
 * lock (a subscriber's __hash__ or __eq__); a waiter then gives the GIL up
 * (sleeping 50 microseconds between looks) until the holder is done. */
typedef struct cst_mutex {
    int locked;
} cst_mutex;

static inline int cst_mutex_init(cst_mutex *m)
{
    m->locked = 0;
    return 0;
}
static inline void cst_mutex_lock(cst_mutex *m)
{
    while (m->locked) {
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
    }
    m->locked = 1;
}
static inline void cst_mutex_unlock(cst_mutex *m) { m->locked = 0; }
static inline void cst_mutex_fini(cst_mutex *m) { (void)m; }
static inline int cst_mutex_held(cst_mutex *m) { return m->locked; }
#endif

/* ------------------------------------------------------- container reads */
/* A new reference to list[i], or NULL with IndexError set. */
static inline PyObject *list_get_ref(PyObject *list, Py_ssize_t i)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyList_GetItemRef(list, i);
#else
    if (i < 0 || i >= PyList_GET_SIZE(list)) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    PyObject *o = PyList_GET_ITEM(list, i);
    Py_INCREF(o);
    return o;
#endif
}

/* dict[key] as a new reference in *out: 1 found, 0 missing, -1 error. */
static inline int dict_get_ref(PyObject *dict, PyObject *key, PyObject **out)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyDict_GetItemRef(dict, key, out);
#else
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (v == NULL) {
        *out = NULL;
        return PyErr_Occurred() ? -1 : 0;
    }
    Py_INCREF(v);
    *out = v;
    return 1;
#endif
}

/* ------------------------------------------------------------ topic text */
/* The UTF-8 bytes of the exact str s: *data and *len, and in *keep a
 * reference to release after use (NULL when none).  Returns -1 with the
 * exception set when s cannot be encoded (a lone surrogate). */
static inline int topic_utf8(PyObject *s, const char **data, Py_ssize_t *len, PyObject **keep)
{
    *keep = NULL;
    if (PyUnicode_IS_ASCII(s)) {
        *data = (const char *)PyUnicode_DATA(s);
        *len = PyUnicode_GET_LENGTH(s);
        return 0;
    }
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX < 0x030D0200
    PyObject *b = PyUnicode_AsUTF8String(s);
    if (b == NULL)
        return -1;
    *keep = b;
    *data = PyBytes_AS_STRING(b);
    *len = PyBytes_GET_SIZE(b);
    return 0;
#else
    *data = PyUnicode_AsUTF8AndSize(s, len);
    return *data ? 0 : -1;
#endif
}

#endif
