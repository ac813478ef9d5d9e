/*
 * registry.c - the subscriber registry in C: subscriber objects <-> the
 * 64-bit ids the engine stores, and each writable handle's pair counts.
 *
 * The rules (numbered as in cstrie/registry.py, whose docstring states them
 * in full) and how this code keeps them:
 *  1. An object has at most one id at a time: `ids` maps it; a freed id's
 *     slot in `objects` holds FREE and the id waits for reuse among its
 *     stripe's freed ids or in the shared ring ("Freed ids"; rule 4: two
 *     epochs later).
 *  2. Each writable handle counts its pairs per id (Counts).  Every change to
 *     the counts of one subscriber happens under that subscriber's stripe
 *     lock, stripes[STRIPE(hash(obj))], shared by the whole family.  The
 *     counts are split by stripe too (Counts.part[s]), so part s is only ever
 *     touched under stripes[s]: no other lock is needed to read or change it.
 *  3. An id is freed once no writable handle holds a pair for it and no
 *     snapshot taken while it was alive is still open (pins; `died` records
 *     when an id died while pins were open).
 *  4. A read of a live trie asks the engine and maps the ids of its answer
 *     inside one read section (the engine's epochs): a freed id's slot holds
 *     FREE at once and is reused only two epochs after the free, when no
 *     read section open then is still open.  A read that maps FREE runs
 *     again, and after MAX_ATTEMPTS it takes a read pin (reader.c).  `freed`
 *     (the shared count plus each stripe's) is a statistic no read checks.
 *
 *
 * Ids are found in `ids[s]`, one table per stripe s, changed and read only
 * under stripes[s]: open addressing over (hash, registered object, id).  A
 * probe compares the object by identity first and calls == only when the
 * hashes agree, so equal objects share one id (rule 1) while a subscriber
 * passed again as the same object (a session object, an interned client id)
 * costs one cache line; a dict of a million subscribers cost its index, its
 * entry and an int object per lookup.  A subscriber that is an exact str of
 * up to KEY_BYTES ASCII characters (a client id) keeps them in its entry, so
 * an equal str passed again as another object (decoded afresh from each
 * packet) is matched by its characters, without the registered object's
 * cache miss (a seventh of a subscribe + unsubscribe at 50k pairs).  The
 * registered object's reference is the one objects[id] holds, so its address
 * cannot be reused while it is in a table.
 *
 * Lock order: a stripe lock (two: in index order), then meta, then the slot
 * lock.  No user code runs while the thread holds any of them: a subscriber's
 * hash is taken before, == runs with the locks dropped (reg_id_of), and a
 * reference dropped under a lock (which could run a __del__ or a weakref
 * callback that calls back into the trie) waits in a per-thread list until
 * the thread's last registry lock is released (reg_defer_decref).  Nothing
 * here allocates a garbage-collected object under a lock either (before
 * CPython 3.12 an allocation could start a collection, and so finalizers,
 * on the spot).  The free-threaded build reads `objects` with
 * PyList_GetItemRef (thread-safe against another thread's store); with the
 * GIL every step here runs under it.
 */
#include "hotpath.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Registry locks and deferred releases
 * ---------------------------------------------------------------------- */

/* This thread's registry locks held, and the references to release once it
 * holds none.  Initial-exec thread-locals: one %fs load per lock. */
typedef struct deferred {
    int depth;
    size_t n, cap;
    PyObject **v;              /* local, or a PyMem_Raw array once it grew */
    PyObject *local[16];
} deferred;
static CST_TLS deferred held;

/* Release the deferred references (no registry lock is held).  A release may
 * run a __del__ that takes registry locks and defers more: they are
 * released by this same loop.  The caller's exception, if any, is kept. */
static void deferred_flush(void)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    while (held.n > 0 && held.depth == 0) {
        PyObject *o = held.v[--held.n];
        Py_DECREF(o);
    }
    if (held.n == 0 && held.v != held.local) {
        PyMem_RawFree(held.v);
        held.v = held.local;
        held.cap = sizeof held.local / sizeof held.local[0];
    }
    PyErr_Restore(et, ev, tb);
}

void reg_defer_decref(PyObject *o)
{
    if (held.depth == 0) {
        Py_DECREF(o);
        return;
    }
    if (held.v == NULL) {
        held.v = held.local;
        held.cap = sizeof held.local / sizeof held.local[0];
    }
    if (held.n == held.cap) {
        size_t ncap = held.cap * 2;
        PyObject **nv = PyMem_RawMalloc(ncap * sizeof *nv);
        if (nv == NULL)
            return; /* no memory: keep the reference (a leak), never release it under a lock */
        memcpy(nv, held.v, held.n * sizeof *nv);
        if (held.v != held.local)
            PyMem_RawFree(held.v);
        held.v = nv;
        held.cap = ncap;
    }
    held.v[held.n++] = o;
}

void reg_lock(cst_mutex *m)
{
    cst_mutex_lock(m);
    held.depth++;
}

void reg_unlock(cst_mutex *m)
{
    cst_mutex_unlock(m);
    if (--held.depth == 0 && held.n > 0)
        deferred_flush();
}

void reg_locks_take(reg_locks *l)
{
    Py_ssize_t lo = l->b < 0 || l->a <= l->b ? l->a : l->b;
    Py_ssize_t hi = l->b < 0 ? -1 : (l->a <= l->b ? l->b : l->a);
    reg_lock(&l->r->stripes[lo].m);
    if (hi >= 0 && hi != lo)
        reg_lock(&l->r->stripes[hi].m);
}

void reg_locks_drop(reg_locks *l)
{
    Py_ssize_t lo = l->b < 0 || l->a <= l->b ? l->a : l->b;
    Py_ssize_t hi = l->b < 0 ? -1 : (l->a <= l->b ? l->b : l->a);
    if (hi >= 0 && hi != lo)
        reg_unlock(&l->r->stripes[hi].m);
    reg_unlock(&l->r->stripes[lo].m);
}

/* ------------------------------------------------------------------------
 * id maps
 * ---------------------------------------------------------------------- */

static inline size_t id_slot(uint64_t id, size_t cap)
{
    return (size_t)((id * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (cap - 1);
}

int64_t idmap_get(const idmap *m, uint64_t id)
{
    if (m->cap == 0)
        return 0;
    for (size_t h = id_slot(id, m->cap);; h = (h + 1) & (m->cap - 1)) {
        if (m->slots[h].id == id)
            return m->slots[h].count;
        if (m->slots[h].id == 0)
            return 0;
    }
}

static int idmap_grow(idmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 8;
    idcount *ns = PyMem_RawCalloc(ncap, sizeof *ns);
    if (ns == NULL)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].id == 0)
            continue;
        size_t h = id_slot(m->slots[i].id, ncap);
        while (ns[h].id != 0)
            h = (h + 1) & (ncap - 1);
        ns[h] = m->slots[i];
    }
    PyMem_RawFree(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

/* Remove slot h (backward-shift deletion keeps probe chains unbroken). */
static void idmap_delete_at(idmap *m, size_t h)
{
    size_t mask = m->cap - 1;
    for (size_t j = (h + 1) & mask; m->slots[j].id != 0; j = (j + 1) & mask) {
        size_t home = id_slot(m->slots[j].id, m->cap);
        /* move j back to h if its home is not in (h, j] (cyclically) */
        if (((j - home) & mask) >= ((j - h) & mask)) {
            m->slots[h] = m->slots[j];
            h = j;
        }
    }
    m->slots[h].id = 0;
    m->slots[h].count = 0;
    m->used--;
}

int idmap_reserve(idmap *m)
{
    if ((m->used + 1) * 4 > m->cap * 3)
        return idmap_grow(m);
    return 0;
}

int idmap_reserve_for(idmap *m, size_t more)
{
    while ((m->used + more) * 4 > m->cap * 3)
        if (idmap_grow(m) < 0)
            return -1;
    return 0;
}

int idmap_add(idmap *m, uint64_t id, int64_t delta)
{
    if (idmap_reserve(m) < 0)
        return -1;
    size_t h = id_slot(id, m->cap);
    while (m->slots[h].id != 0 && m->slots[h].id != id)
        h = (h + 1) & (m->cap - 1);
    if (m->slots[h].id == 0) {
        if (delta == 0)
            return 0;
        m->slots[h].id = id;
        m->slots[h].count = 0;
        m->used++;
    }
    m->slots[h].count += delta;
    if (m->slots[h].count == 0)
        idmap_delete_at(m, h);
    return 0;
}

void idmap_clear(idmap *m)
{
    PyMem_RawFree(m->slots);
    m->slots = NULL;
    m->cap = m->used = 0;
}

/* ------------------------------------------------------------------------
 * Id tables (subscriber -> id, per stripe)
 * ---------------------------------------------------------------------- */

static inline size_t tab_slot(Py_hash_t h, size_t cap)
{
    return (size_t)(((uint64_t)h * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (cap - 1);
}

/* Whether o is an exact str of at most KEY_BYTES ASCII characters, and if so
 * its characters and their count.  Two such strs are equal exactly when
 * their characters are (an exact str with only ASCII characters is always
 * stored compact and ASCII; one stored otherwise just takes the == path). */
static inline int ascii_key(PyObject *o, const char **p, Py_ssize_t *n)
{
    if (!PyUnicode_CheckExact(o) || !PyUnicode_IS_COMPACT_ASCII(o) ||
        PyUnicode_GET_LENGTH(o) > KEY_BYTES)
        return 0;
    *p = (const char *)PyUnicode_1BYTE_DATA(o);
    *n = PyUnicode_GET_LENGTH(o);
    return 1;
}

/* == between a registered object and another of the same hash that runs no
 * user code: both exact str, bytes or int (the types subscribers most often
 * are when they are equal without being the same object). */
static int builtin_eq(PyObject *a, PyObject *b)
{
    return Py_TYPE(a) == Py_TYPE(b) &&
           (PyUnicode_CheckExact(a) || PyBytes_CheckExact(a) || PyLong_CheckExact(a));
}

/* The entry of obj (hash h) in t by identity, or NULL. */
static idslot *idtab_same(const idtab *t, PyObject *obj, Py_hash_t h)
{
    if (t->cap == 0)
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = tab_slot(h, t->cap);; i = (i + 1) & mask) {
        idslot *e = &t->slots[i];
        if (e->obj == NULL)
            return NULL;
        if (e->obj == obj)
            return e;
    }
}

/* The id of obj (hash h) in t, comparing with == where hashes agree: > 0,
 * 0 when absent, -1 when == raised.  Runs user code: only where t is not
 * shared yet (adopt) or its lock is not held. */
static int64_t idtab_find(const idtab *t, PyObject *obj, Py_hash_t h)
{
    if (t->cap == 0)
        return 0;
    size_t mask = t->cap - 1;
    for (size_t i = tab_slot(h, t->cap);; i = (i + 1) & mask) {
        const idslot *e = &t->slots[i];
        if (e->obj == NULL)
            return 0;
        if (e->obj == obj)
            return (int64_t)e->id;
        if (e->hash != h)
            continue;
        int eq = PyObject_RichCompareBool(e->obj, obj, Py_EQ);
        if (eq < 0)
            return -1;
        if (eq)
            return (int64_t)e->id;
    }
}

static int idtab_insert(idtab *t, PyObject *obj, Py_hash_t h, uint64_t id, int64_t birth)
{
    if ((t->used + 1) * 4 > t->cap * 3) {
        size_t ncap = t->cap ? t->cap * 2 : 16;
        idslot *ns = PyMem_RawCalloc(ncap, sizeof *ns);
        if (ns == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < t->cap; i++) {
            if (t->slots[i].obj == NULL)
                continue;
            size_t j = tab_slot(t->slots[i].hash, ncap);
            while (ns[j].obj != NULL)
                j = (j + 1) & (ncap - 1);
            ns[j] = t->slots[i];
        }
        PyMem_RawFree(t->slots);
        t->slots = ns;
        t->cap = ncap;
    }
    size_t i = tab_slot(h, t->cap);
    while (t->slots[i].obj != NULL)
        i = (i + 1) & (t->cap - 1);
    idslot *e = &t->slots[i];
    *e = (idslot){h, obj, id, birth, 0, {0}};
    const char *kp;
    Py_ssize_t kn;
    if (ascii_key(obj, &kp, &kn)) {
        e->klen = (uint8_t)(kn + 1);
        memcpy(e->key, kp, (size_t)kn);
    }
    t->used++;
    t->version++;
    return 0;
}

/* Remove the entry of id (hash h); backward-shift deletion. */
static void idtab_remove(idtab *t, Py_hash_t h, uint64_t id)
{
    if (t->cap == 0)
        return;
    size_t mask = t->cap - 1, i = tab_slot(h, t->cap);
    while (t->slots[i].id != id || t->slots[i].obj == NULL) {
        if (t->slots[i].obj == NULL)
            return;
        i = (i + 1) & mask;
    }
    for (size_t j = (i + 1) & mask; t->slots[j].obj != NULL; j = (j + 1) & mask) {
        size_t home = tab_slot(t->slots[j].hash, t->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i] = (idslot){0, NULL, 0, 0, 0, {0}};
    t->used--;
    t->version++;
}

static void idtab_clear(idtab *t)
{
    PyMem_RawFree(t->slots);
    t->slots = NULL;
    t->cap = t->used = 0;
    t->version++;
}

/* ------------------------------------------------------------------------
 * Counts
 * ---------------------------------------------------------------------- */

static Counts *counts_new(void)
{
    Counts *c = PyObject_New(Counts, &Counts_Type);
    if (c == NULL)
        return NULL;
    c->serial = -1;
    memset(c->part, 0, sizeof c->part);
    return c;
}

static void counts_dealloc(Counts *c)
{
    for (size_t s = 0; s < STRIPES; s++)
        idmap_clear(&c->part[s]);
    PyObject_Free(c);
}

static Py_ssize_t counts_len(Counts *c)
{
    /* relaxed reads of sizes that other stripes change: exact whenever no
     * update runs, a momentary estimate otherwise (like len() of a dict). */
    size_t n = 0;
    for (size_t s = 0; s < STRIPES; s++)
        n += __atomic_load_n(&c->part[s].used, __ATOMIC_RELAXED);
    return (Py_ssize_t)n;
}

static int64_t counts_find(Counts *c, uint64_t id)
{
    for (size_t s = 0; s < STRIPES; s++) {
        int64_t v = idmap_get(&c->part[s], id);
        if (v)
            return v;
    }
    return 0;
}

static int counts_contains(Counts *c, PyObject *key)
{
    uint64_t id = PyLong_AsUnsignedLongLong(key);
    if (id == (uint64_t)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return counts_find(c, id) != 0;
}

static PyObject *counts_get(Counts *c, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(id[, default])");
        return NULL;
    }
    uint64_t id = PyLong_AsUnsignedLongLong(args[0]);
    if (id == (uint64_t)-1 && PyErr_Occurred())
        return NULL;
    int64_t v = counts_find(c, id);
    if (v == 0)
        return Py_NewRef(nargs == 2 ? args[1] : Py_None);
    return PyLong_FromLongLong(v);
}

/* [(id, count), ...] in no particular order (tests, copies, drop_handle). */
static PyObject *counts_items(Counts *c, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (size_t s = 0; s < STRIPES; s++) {
        idmap *m = &c->part[s];
        for (size_t i = 0; i < m->cap; i++) {
            if (m->slots[i].id == 0)
                continue;
            PyObject *t = Py_BuildValue("(KL)", (unsigned long long)m->slots[i].id,
                                        (long long)m->slots[i].count);
            if (t == NULL || PyList_Append(out, t) < 0) {
                Py_XDECREF(t);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(t);
        }
    }
    return out;
}

static PyObject *counts_iter(Counts *c)
{
    PyObject *items = counts_items(c, NULL);
    if (items == NULL)
        return NULL;
    PyObject *ids = PyList_New(PyList_GET_SIZE(items));
    if (ids == NULL) {
        Py_DECREF(items);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++)
        PyList_SET_ITEM(ids, i, Py_NewRef(PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0)));
    Py_DECREF(items);
    PyObject *it = PyObject_GetIter(ids);
    Py_DECREF(ids);
    return it;
}

static PyMethodDef counts_methods[] = {
    {"get", (PyCFunction)(void (*)(void))counts_get, METH_FASTCALL,
     "get(id, default=None): the number of pairs of id, or default."},
    {"items", (PyCFunction)counts_items, METH_NOARGS, "[(id, pairs), ...]"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef counts_members[] = {
    {"serial", T_LONGLONG, offsetof(Counts, serial), READONLY, "the handle's serial"},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods counts_as_sequence = {
    .sq_length = (lenfunc)counts_len,
    .sq_contains = (objobjproc)counts_contains,
};

PyTypeObject Counts_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cstrie._hotpath.Counts",
    .tp_basicsize = sizeof(Counts),
    .tp_dealloc = (destructor)counts_dealloc,
    .tp_as_sequence = &counts_as_sequence,
    .tp_iter = (getiterfunc)counts_iter,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The (pattern, subscriber) pairs of one writable handle, per subscriber id.",
    .tp_methods = counts_methods,
    .tp_members = counts_members,
};

/* ------------------------------------------------------------------------
 * Registry: ids
 * ---------------------------------------------------------------------- */

/* Every registry, so that the child of a fork can reset their locks. */
static cst_mutex all_lock;
static Registry *all_head;

static PyObject *slot_get(Registry *r, uint64_t id)
{
    if (id >= (uint64_t)PY_SSIZE_T_MAX)
        return Py_NewRef(cst_FREE);
    PyObject *o = list_get_ref(r->objects, (Py_ssize_t)id);
    if (o == NULL) {
        PyErr_Clear();
        return Py_NewRef(cst_FREE);
    }
    return o;
}

/* The registry's order of births, pins and deaths (rule 3).  A birth or a
 * death while pins are open takes a new number (an increment); pins only read
 * the count, so that snapshots write no shared line.  seq_cst: one order with
 * the engine calls around them.  A pin's `done` read before an id's birth
 * increment (done < birth) was read after its engine snapshot and before the
 * id existed, so before any engine pair named it; a pin whose start was read
 * after a death's increment (start >= death) took its engine snapshot after
 * the id's last pair left.  An event that only reads the count compares
 * equal to whatever read it after it: "may hold", the safe side. */
static int64_t seq_next(Registry *r)
{
    return atomic_fetch_add_explicit(&r->seq, 1, memory_order_seq_cst) + 1;
}

static int64_t seq_now(Registry *r)
{
    return atomic_load_explicit(&r->seq, memory_order_seq_cst);
}

/* Is a pin open (a momentary answer: the sets' counts, read without locks)? */
static int pins_open(Registry *r)
{
    for (size_t i = 0; i < PIN_STRIPES; i++)
        /* acquire: pairs with the release of the count in pin_open */
        if (atomic_load_explicit(&r->pins[i].count, memory_order_acquire) != 0)
            return 1;
    return 0;
}

/* How often reg_id_of compares with the locks dropped before it gives up on
 * a stripe whose table keeps changing meanwhile. */
#define EQ_ROUNDS 64

/* Candidates for == collected under the lock (new references). */
typedef struct cands {
    PyObject **v;
    size_t n, cap;
    PyObject *local[8];
} cands;

static int cands_add(cands *c, PyObject *o)
{
    if (c->n == c->cap) {
        size_t ncap = c->cap * 2;
        PyObject **nv = PyMem_RawMalloc(ncap * sizeof *nv);
        if (nv == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(nv, c->v, c->n * sizeof *nv);
        if (c->v != c->local)
            PyMem_RawFree(c->v);
        c->v = nv;
        c->cap = ncap;
    }
    c->v[c->n++] = Py_NewRef(o);
    return 0;
}

static void cands_release(cands *c)
{
    for (size_t k = 0; k < c->n; k++)
        reg_defer_decref(c->v[k]);
    if (c->v != c->local)
        PyMem_RawFree(c->v);
    c->v = c->local;
    c->n = 0;
    c->cap = sizeof c->local / sizeof c->local[0];
}

int64_t reg_id_of(reg_locks *l, Py_hash_t h, PyObject *obj, PyObject **registered)
{
    Registry *r = l->r;
    idtab *t = &r->ids[STRIPE(h)];
    cands c = {.n = 0};
    c.v = c.local;
    c.cap = sizeof c.local / sizeof c.local[0];
    const char *kp = NULL;
    Py_ssize_t kn = 0;
    int keyed = ascii_key(obj, &kp, &kn);
    for (int round = 0;; round++) {
        idslot *hit = NULL;
        if (t->cap > 0) {
            size_t mask = t->cap - 1;
            for (size_t i = tab_slot(h, t->cap);; i = (i + 1) & mask) {
                idslot *e = &t->slots[i];
                if (e->obj == NULL)
                    break;
                if (e->obj == obj) {
                    hit = e;
                    break;
                }
                if (e->hash != h)
                    continue;
                if (keyed && e->klen != 0) {
                    /* two short ASCII strs: equal exactly when their
                     * characters are, read from the slot, not the object */
                    if (e->klen == kn + 1 && memcmp(e->key, kp, (size_t)kn) == 0) {
                        hit = e;
                        break;
                    }
                    continue;
                }
                if (builtin_eq(e->obj, obj)) {
                    int eq = PyObject_RichCompareBool(e->obj, obj, Py_EQ); /* no user code */
                    if (eq < 0) {
                        cands_release(&c);
                        return -1;
                    }
                    if (eq) {
                        hit = e;
                        break;
                    }
                } else if (cands_add(&c, e->obj) < 0) {
                    cands_release(&c);
                    return -1;
                }
            }
        }
        if (hit != NULL || c.n == 0) {
            cands_release(&c);
            *registered = hit ? hit->obj : NULL;
            return hit ? (int64_t)hit->id : 0;
        }
        /* == may run user code (which may even call the trie): no lock held. */
        uint64_t version = t->version;
        reg_locks_drop(l);
        l->dropped++;
        PyObject *equal = NULL;
        int err = 0;
        for (size_t k = 0; k < c.n && equal == NULL && !err; k++) {
            int eq = PyObject_RichCompareBool(c.v[k], obj, Py_EQ);
            if (eq < 0)
                err = 1;
            else if (eq)
                equal = c.v[k];
        }
        reg_locks_take(l);
        /* Unchanged table: the comparisons still stand, and an equal object
         * found is still registered (its entry holds the same object). */
        int changed = t->version != version;
        idslot *e = equal != NULL && !changed ? idtab_same(t, equal, h) : NULL;
        cands_release(&c);
        if (err)
            return -1;
        if (!changed) {
            *registered = e ? e->obj : NULL;
            return e ? (int64_t)e->id : 0;
        }
        if (round + 1 >= EQ_ROUNDS) {
            PyErr_SetString(PyExc_RuntimeError,
                            "cstrie registry: the subscribers with this hash kept changing "
                            "while == compared them (try again)");
            return -1;
        }
    }
}

/* ------------------------------------------------------------------------
 * Freed ids
 *
 * A freed id waits two epochs before its slot is reused (rule 4).  Each
 * stripe keeps its own few freed ids (stripe_lock.local, LOCAL_FREE of them,
 * oldest first), touched only under that stripe's lock, which every free and
 * every new id of a subscriber of the stripe holds anyway: so a subscriber's
 * last pair going and another's first coming, the churn of a broker's
 * clients, free and reuse ids without the one slot lock every thread would
 * otherwise take (16 threads: `trie-update-free-id` waited on it 25 times in
 * 1,000 operations).  The slot lock and the shared ring below take what does
 * not fit: a free when the stripe's ids are all in use, a new id when none
 * of the stripe's is ready (then the shared ring, or a new slot).  So the
 * slots waiting for reuse are at most LOCAL_FREE per stripe (1,792) plus the
 * shared ring's, and an id no read ever saw (a failed subscribe's) goes
 * straight to the shared ring, reusable at once by any stripe.  The slot
 * itself (objects[id]) is written with PyList_SetItem, which the list's own
 * lock makes safe against the appends under the slot lock; no two threads
 * ever write one slot, since an id is in one place at a time: a subscriber's
 * table entry, a stripe's ids or the shared ring.
 * ---------------------------------------------------------------------- */

/* Under stripe lock sl: keep freed id (freed at `epoch`) if there is room. */
static int local_push(stripe_lock *sl, uint64_t id, uint64_t epoch)
{
    if (sl->nfree == LOCAL_FREE)
        return 0;
    sl->local[sl->nfree++] = (freed_slot){id, epoch};
    return 1;
}

/* Under stripe lock sl: its oldest freed id if no read can map it any more
 * (rule 4: freed two epochs ago), or 0. */
static uint64_t local_take(stripe_lock *sl)
{
    if (sl->nfree == 0)
        return 0;
    freed_slot f = sl->local[0];
    if (f.epoch != 0 && cst_engine->epoch() < f.epoch + 2)
        return 0;
    sl->nfree--;
    memmove(&sl->local[0], &sl->local[1], sl->nfree * sizeof sl->local[0]);
    return f.id;
}

/* No thread can use the registry (the GC clears it, or its last handle is
 * gone): forget every stripe's freed ids with the slots they name. */
static void local_clear(Registry *r)
{
    for (size_t s = 0; s < STRIPES; s++)
        r->stripes[s].nfree = 0;
}

/* Under the slot lock: remember freed id (freed at `epoch`, 0 when no read
 * can have it) for reuse.  -1 when out of memory. */
static int free_ring_push(Registry *r, uint64_t id, uint64_t epoch)
{
    if (r->nfree == r->free_cap) {
        size_t ncap = r->free_cap ? r->free_cap * 2 : 64;
        freed_slot *nr = PyMem_RawMalloc(ncap * sizeof *nr);
        if (nr == NULL)
            return -1;
        for (size_t i = 0; i < r->nfree; i++)
            nr[i] = r->free_ring[(r->free_head + i) & (r->free_cap - 1)];
        PyMem_RawFree(r->free_ring);
        r->free_ring = nr;
        r->free_cap = ncap;
        r->free_head = 0;
    }
    r->free_ring[(r->free_head + r->nfree) & (r->free_cap - 1)] = (freed_slot){id, epoch};
    if (r->nfree++ == 0)
        atomic_store_explicit(&r->free_oldest, epoch + 1, memory_order_relaxed);
    return 0;
}

/* Under the slot lock: the oldest freed id that no read can map any more
 * (rule 4: freed two epochs ago), or 0. */
static uint64_t free_ring_take(Registry *r)
{
    if (r->nfree == 0)
        return 0;
    freed_slot *f = &r->free_ring[r->free_head];
    if (f->epoch != 0 && cst_engine->epoch() < f->epoch + 2)
        return 0;
    uint64_t id = f->id;
    r->free_head = (r->free_head + 1) & (r->free_cap - 1);
    r->nfree--;
    /* relaxed: a hint for free_ring_nudge, read without the lock */
    atomic_store_explicit(&r->free_oldest,
                          r->nfree ? r->free_ring[r->free_head].epoch + 1 : 0,
                          memory_order_relaxed);
    return id;
}

/* Before the slot lock: when the oldest freed id is one or two epochs short
 * of reuse, try to move the epoch (a scan of the threads' states; done here,
 * not under the lock every new id takes). */
static void epoch_nudge(uint64_t oldest)
{
    uint64_t now = cst_engine->epoch();
    for (int tries = 0; tries < 2 && now < oldest + 2; tries++)
        now = cst_engine->epoch_advance();
}

static void free_ring_nudge(Registry *r)
{
    uint64_t hint = atomic_load_explicit(&r->free_oldest, memory_order_relaxed);
    if (hint <= 1)
        return; /* nothing freed, or reusable at once */
    epoch_nudge(hint - 1);
}

int64_t reg_id_for(reg_locks *l, Py_hash_t h, PyObject *obj, int *fresh, PyObject **registered)
{
    Registry *r = l->r;
    int64_t id = reg_id_of(l, h, obj, registered);
    if (fresh)
        *fresh = 0;
    if (id != 0)
        return id;
    if (r->cleared || PyList_GET_SIZE(r->objects) < 1) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the garbage collector released this trie's subscribers "
                        "(it is being destroyed)");
        return -1;
    }
    int64_t birth = pins_open(r) ? seq_next(r) : seq_now(r);
    stripe_lock *sl = &r->stripes[STRIPE(h)];
    uint64_t own = local_take(sl); /* the stripe's own freed id: no slot lock */
    if (own == 0 && sl->nfree == LOCAL_FREE) {
        /* all the stripe's ids are too young: move the epoch rather than
         * spill the next free to the shared ring */
        epoch_nudge(sl->local[0].epoch);
        own = local_take(sl);
    }
    if (own != 0) {
        id = (int64_t)own;
        if (PyList_SetItem(r->objects, (Py_ssize_t)id, Py_NewRef(obj)) < 0) {
            local_push(sl, own, 0); /* the room it just left */
            return -1;
        }
    } else {
        free_ring_nudge(r);
        reg_lock(&r->slot_lock);
        uint64_t reuse = free_ring_take(r);
        if (reuse != 0) {
            id = (int64_t)reuse;
            if (PyList_SetItem(r->objects, (Py_ssize_t)id, Py_NewRef(obj)) < 0) {
                free_ring_push(r, reuse, 0);
                id = -1;
            }
        } else {
            id = PyList_GET_SIZE(r->objects);
            if (PyList_Append(r->objects, obj) < 0)
                id = -1;
        }
        reg_unlock(&r->slot_lock);
    }
    if (id < 0)
        return -1;
    /* objects[id] holds the reference the table's entry relies on */
    if (idtab_insert(&r->ids[STRIPE(h)], obj, h, (uint64_t)id, birth) < 0) {
        /* give the slot back: nothing refers to it yet */
        reg_lock(&r->slot_lock);
        PyObject *mine = list_get_ref(r->objects, (Py_ssize_t)id);
        PyList_SetItem(r->objects, (Py_ssize_t)id, Py_NewRef(cst_FREE));
        if (mine != NULL)
            reg_defer_decref(mine);
        free_ring_push(r, (uint64_t)id, 0); /* no read can have it (a leak on no memory) */
        reg_unlock(&r->slot_lock);
        return -1;
    }
    if (fresh)
        *fresh = 1;
    *registered = obj;
    return id;
}

/* The id of obj under its stripe lock (Python's existing_id). */
static int64_t reg_existing_id(Registry *r, PyObject *obj)
{
    Py_hash_t h = reg_hash(obj);
    if (h == -1)
        return -1;
    reg_locks l = {r, STRIPE(h), -1, 0};
    PyObject *registered;
    reg_locks_take(&l);
    int64_t id = reg_id_of(&l, h, obj, &registered);
    reg_locks_drop(&l);
    return id;
}

/* The ids in use: the sum of the stripes' table sizes, each read once
 * without its lock (exact when no update runs, like len() of a dict). */
static Py_ssize_t registry_len(Registry *r)
{
    size_t n = 0;
    for (size_t s = 0; s < STRIPES; s++)
        n += __atomic_load_n(&r->ids[s].used, __ATOMIC_RELAXED);
    return (Py_ssize_t)n;
}

/* Count a free (a statistic: `freed`; no read checks it). */
static void count_free(Registry *r)
{
    /* relaxed: nothing is ordered by it */
    atomic_fetch_add_explicit(r->freed, 1, memory_order_relaxed);
}

/* Count a free under stripe lock sl, its only writer (a statistic). */
static void count_free_in(stripe_lock *sl)
{
    atomic_store_explicit(&sl->freed, atomic_load_explicit(&sl->freed, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Free id (registered object `registered`, hash h): under its stripe lock,
 * like every free of its id: if `registered` no longer owns id, id was freed
 * already and its slot may name another object now.  -1 on error (nothing
 * freed). */
int reg_free(Registry *r, Py_hash_t h, uint64_t id, PyObject *registered, int visible)
{
    idslot *e = idtab_same(&r->ids[STRIPE(h)], registered, h);
    if (e == NULL || e->id != id)
        return 0;
    stripe_lock *sl = &r->stripes[STRIPE(h)];
    if (visible && sl->nfree < LOCAL_FREE && (Py_ssize_t)id < PyList_GET_SIZE(r->objects)) {
        /* Room among the stripe's own freed ids: no slot lock, nothing to
         * allocate, so nothing can fail once the id is out of its table.
         * (An id no read ever saw, a failed subscribe's, goes to the shared
         * ring: reusable at once, by any stripe.) */
        idtab_remove(&r->ids[STRIPE(h)], h, id);
        count_free_in(sl);
        PyObject *old = list_get_ref(r->objects, (Py_ssize_t)id);
        PyList_SetItem(r->objects, (Py_ssize_t)id, Py_NewRef(cst_FREE));
        if (old != NULL)
            reg_defer_decref(old); /* released once no registry lock is held */
        else
            PyErr_Clear();
        local_push(sl, id, cst_engine->epoch());
        return 0;
    }
    /* The free ring is shared by every stripe: it grows under the slot lock
     * (two frees of different stripes once reallocated it at the same time);
     * room first, so that nothing is freed without a place in it. */
    reg_lock(&r->slot_lock);
    if (r->nfree == r->free_cap) {
        if (free_ring_push(r, 0, 0) < 0) {
            reg_unlock(&r->slot_lock);
            PyErr_NoMemory();
            return -1;
        }
        r->nfree--; /* only the room was wanted */
    }
    idtab_remove(&r->ids[STRIPE(h)], h, id);
    if (visible)
        count_free(r);
    if ((Py_ssize_t)id < PyList_GET_SIZE(r->objects)) { /* else: cleared by the GC */
        /* The slot's reference may be the object's last: released once this
         * thread holds no registry lock (its __del__ may call the trie). */
        PyObject *old = list_get_ref(r->objects, (Py_ssize_t)id);
        PyList_SetItem(r->objects, (Py_ssize_t)id, Py_NewRef(cst_FREE));
        if (old != NULL)
            reg_defer_decref(old);
        else
            PyErr_Clear();
        /* A read of a live trie may have this id from the engine and map it
         * until its read section ends: the slot is reused two epochs later
         * (rule 4).  An id no engine pair ever named is reusable at once. */
        free_ring_push(r, id, visible ? cst_engine->epoch() : 0);
    }
    reg_unlock(&r->slot_lock);
    return 0;
}

int reg_added(Counts *c, Py_hash_t h, uint64_t id)
{
    if (idmap_add(&c->part[STRIPE(h)], id, 1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Rule 3: may the open pin p hold a pair of an id born at `birth` that died
 * at `death`?  Not when p started after the death (its snapshot came after
 * the last pair left the engine), nor when p's snapshot existed before the
 * birth (no pair of the id was in the engine yet).  Under meta. */
static int pin_may_hold(const pin_rec *p, int64_t birth, int64_t death)
{
    if (p->all)
        return 1;
    if (p->start >= death)
        return 0;
    return !(p->done != 0 && p->done < birth);
}

/* Under meta: each pin set is locked in turn.  A pin opened meanwhile
 * started after the death (it cannot hold the id); one closed meanwhile
 * only makes the answer safer. */
static int any_pin_may_hold(Registry *r, int64_t birth, int64_t death)
{
    int may = 0;
    for (size_t i = 0; i < PIN_STRIPES && !may; i++) {
        pin_set *ps = &r->pins[i];
        if (atomic_load_explicit(&ps->count, memory_order_acquire) == 0)
            continue;
        reg_lock(&ps->lock);
        for (size_t k = 0; k < ps->n && !may; k++)
            may = pin_may_hold(&ps->pins[k], birth, death);
        reg_unlock(&ps->lock);
    }
    return may;
}

/* No pair of id may be left in any handle of the family: free it now, or when
 * no open pin may hold it any more (rule 3).  c is the handle the caller
 * just changed (NULL: a handle that is gone).  Under the stripe lock of
 * `registered`, the object registered under id. */
int reg_maybe_dead(Registry *r, Counts *c, Py_hash_t h, uint64_t id, PyObject *registered)
{
    Py_ssize_t stripe = STRIPE(h);
    /* Fast path: no open pin and c is the family's only handle.  Safe
     * without meta: a snapshot pins before it takes the engine snapshot
     * (which then cannot hold the pair just removed), a copy holds every
     * stripe lock, ours included, while it is made, and a copy of a snapshot
     * is made while that snapshot's pin is open. */
    size_t nh = __atomic_load_n(&r->nhandles, __ATOMIC_ACQUIRE);
    if (nh == (c ? 1u : 0u) && !pins_open(r)) {
        if (c && idmap_get(&c->part[stripe], id))
            return 0;
        return reg_free(r, h, id, registered, 1);
    }
    idslot *e = idtab_same(&r->ids[stripe], registered, h);
    if (e == NULL || e->id != id)
        return 0; /* freed already */
    int64_t birth = e->birth;
    reg_lock(&r->meta);
    for (size_t i = 0; i < r->nhandles; i++) {
        if (idmap_get(&r->handles[i]->part[stripe], id)) {
            reg_unlock(&r->meta);
            return 0;
        }
    }
    int64_t death = seq_next(r);
    /* In `died` first, then the pins: an unpin that removes a pin this look
     * still sees reads died_count after it (the pin set's lock orders the
     * two), so either this thread or that unpin frees the id. */
    if (idmap_add(&r->died, id, death - idmap_get(&r->died, id)) < 0 ||
        idmap_add(&r->died_birth, id, birth - idmap_get(&r->died_birth, id)) < 0) {
        idmap_add(&r->died, id, -idmap_get(&r->died, id));
        reg_unlock(&r->meta);
        PyErr_NoMemory();
        return -1;
    }
    /* release: pairs with the acquire in reg_unpin */
    atomic_store_explicit(&r->died_count, r->died.used, memory_order_release);
    if (any_pin_may_hold(r, birth, death)) {
        reg_unlock(&r->meta);
        return 0;
    }
    idmap_add(&r->died, id, -idmap_get(&r->died, id));
    idmap_add(&r->died_birth, id, -idmap_get(&r->died_birth, id));
    atomic_store_explicit(&r->died_count, r->died.used, memory_order_release);
    reg_unlock(&r->meta);
    return reg_free(r, h, id, registered, 1);
}

int reg_removed(Registry *r, Counts *c, Py_hash_t h, uint64_t id, PyObject *registered)
{
    if (idmap_add(&c->part[STRIPE(h)], id, -1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    if (idmap_get(&c->part[STRIPE(h)], id) > 0)
        return 0;
    return reg_maybe_dead(r, c, h, id, registered);
}

/* ------------------------------------------------------------------------
 * Registry: the Python type
 * ---------------------------------------------------------------------- */

static PyObject *registry_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args;
    (void)kwds;
    Registry *r = (Registry *)type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    r->objects = PyList_New(1);
    /* own cache line: read by every lookup, written only when an id is freed */
    r->freed_block = PyMem_RawCalloc(1, 384);
    if (r->objects == NULL || r->freed_block == NULL) {
        int nomem = r->freed_block == NULL;
        Py_DECREF(r);
        return nomem ? PyErr_NoMemory() : NULL;
    }
    PyList_SET_ITEM(r->objects, 0, Py_NewRef(cst_FREE));
    r->freed = (_Atomic int64_t *)(((uintptr_t)r->freed_block + 127) & ~(uintptr_t)127);
    atomic_init(r->freed, 0);
    atomic_init(&r->seq, 1); /* a pin's done of 0 means "not yet" */
    atomic_init(&r->free_oldest, 0);
    atomic_init(&r->died_count, 0);
    r->pins_block = PyMem_RawCalloc(1, PIN_STRIPES * sizeof(pin_set) + 127);
    if (r->pins_block == NULL) {
        Py_DECREF(r);
        return PyErr_NoMemory();
    }
    r->pins = (pin_set *)(((uintptr_t)r->pins_block + 127) & ~(uintptr_t)127);
    for (size_t i = 0; i < PIN_STRIPES; i++) {
        atomic_init(&r->pins[i].count, 0);
        if (cst_mutex_init(&r->pins[i].lock) < 0) {
            Py_DECREF(r);
            return PyErr_NoMemory();
        }
    }
    if (cst_mutex_init(&r->slot_lock) < 0 || cst_mutex_init(&r->meta) < 0) {
        Py_DECREF(r);
        return PyErr_NoMemory();
    }
    for (size_t s = 0; s < STRIPES; s++) {
        r->stripes[s].nfree = 0;
        atomic_init(&r->stripes[s].freed, 0);
        if (cst_mutex_init(&r->stripes[s].m) < 0) {
            Py_DECREF(r);
            return PyErr_NoMemory();
        }
    }
    cst_mutex_lock(&all_lock);
    r->fork_next = all_head;
    if (all_head)
        all_head->fork_prev = r;
    all_head = r;
    cst_mutex_unlock(&all_lock);
    return (PyObject *)r;
}

static int registry_traverse(Registry *r, visitproc visit, void *arg)
{
    Py_VISIT(r->objects);
    for (size_t i = 0; i < r->nhandles; i++)
        Py_VISIT(r->handles[i]);
    return 0;
}

/* The garbage collector breaks a cycle through the registry (a subscriber
 * that refers to its trie): drop every subscriber reference and id, but keep
 * the registry usable, since handles of the family may still be deallocated
 * after this (they find every slot free, and a new id raises). */
static int registry_clear(Registry *r)
{
    r->cleared = 1;
    if (r->objects != NULL && PyList_GET_SIZE(r->objects) > 1)
        PyList_SetSlice(r->objects, 1, PyList_GET_SIZE(r->objects), NULL);
    for (size_t s = 0; s < STRIPES; s++)
        idtab_clear(&r->ids[s]);
    local_clear(r);
    r->nfree = 0;
    atomic_store_explicit(&r->free_oldest, 0, memory_order_relaxed);
    for (size_t i = 0; i < r->nhandles; i++)
        Py_CLEAR(r->handles[i]);
    r->nhandles = 0;
    return 0;
}

static void registry_dealloc(Registry *r)
{
    r->cleared = 1;
    PyObject_GC_UnTrack(r);
    if (r->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)r);
    cst_mutex_lock(&all_lock);
    if (r->fork_prev)
        r->fork_prev->fork_next = r->fork_next;
    else if (all_head == r)
        all_head = r->fork_next;
    if (r->fork_next)
        r->fork_next->fork_prev = r->fork_prev;
    cst_mutex_unlock(&all_lock);
    registry_clear(r);
    Py_CLEAR(r->objects);
    PyMem_RawFree(r->handles);
    if (r->pins != NULL) {
        for (size_t i = 0; i < PIN_STRIPES; i++) {
            PyMem_RawFree(r->pins[i].pins);
            cst_mutex_fini(&r->pins[i].lock);
        }
    }
    PyMem_RawFree(r->pins_block);
    PyMem_RawFree(r->free_ring);
    PyMem_RawFree(r->freed_block);
    idmap_clear(&r->died);
    idmap_clear(&r->died_birth);
    for (size_t s = 0; s < STRIPES; s++)
        idtab_clear(&r->ids[s]);
    cst_mutex_fini(&r->slot_lock);
    cst_mutex_fini(&r->meta);
    for (size_t s = 0; s < STRIPES; s++)
        cst_mutex_fini(&r->stripes[s].m);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

void registry_after_fork_child(void)
{
    /* Only this thread exists: locks held by others at the fork are free. */
    cst_mutex_init(&all_lock);
    for (Registry *r = all_head; r; r = r->fork_next) {
        cst_mutex_init(&r->slot_lock);
        cst_mutex_init(&r->meta);
        for (size_t s = 0; s < STRIPES; s++)
            cst_mutex_init(&r->stripes[s].m);
    }
}

/* -- handles -------------------------------------------------------------- */

static int add_handle(Registry *r, Counts *c)
{
    if (r->nhandles == r->handles_cap) {
        size_t ncap = r->handles_cap ? r->handles_cap * 2 : 4;
        Counts **nh = PyMem_RawRealloc(r->handles, ncap * sizeof *nh);
        if (nh == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        r->handles = nh;
        r->handles_cap = ncap;
    }
    c->serial = r->next_serial++;
    r->handles[r->nhandles] = (Counts *)Py_NewRef(c);
    __atomic_store_n(&r->nhandles, r->nhandles + 1, __ATOMIC_RELEASE);
    return 0;
}

/* Remove the handle with this serial (under meta); its reference, or NULL. */
static Counts *take_handle(Registry *r, int64_t serial)
{
    for (size_t i = 0; i < r->nhandles; i++) {
        if (r->handles[i]->serial != serial)
            continue;
        Counts *c = r->handles[i];
        r->handles[i] = r->handles[r->nhandles - 1];
        __atomic_store_n(&r->nhandles, r->nhandles - 1, __ATOMIC_RELEASE);
        return c;
    }
    return NULL;
}

/* c's parts become copies of src's (the same ids, the same stripes): no
 * subscriber is hashed, nothing but raw memory is allocated, so it may run
 * under the stripe locks (registry_copy_counts). */
static int counts_copy(Counts *c, const Counts *src)
{
    for (size_t s = 0; s < STRIPES; s++) {
        const idmap *m = &src->part[s];
        if (m->used == 0)
            continue;
        if (idmap_reserve_for(&c->part[s], m->used) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].id != 0 && idmap_add(&c->part[s], m->slots[i].id,
                                                 m->slots[i].count) < 0) {
                PyErr_NoMemory();
                return -1;
            }
    }
    return 0;
}

/* Fill c from (id, count) pairs; each id goes to the part of its object's
 * stripe.  The caller makes sure nothing changes those ids meanwhile; it
 * holds no registry lock (a subscriber's __hash__ runs here). */
static int counts_fill(Registry *r, Counts *c, PyObject *source)
{
    PyObject *items;
    if (Py_IS_TYPE(source, &Counts_Type))
        return counts_copy(c, (const Counts *)source);
    if (PyDict_Check(source))
        items = PyDict_Items(source);
    else
        items = PySequence_List(source);
    if (items == NULL)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items) && rc == 0; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        unsigned long long id;
        long long n;
        if (!PyArg_ParseTuple(item, "KL;counts are (id, pairs) pairs", &id, &n)) {
            rc = -1;
            break;
        }
        PyObject *obj = slot_get(r, id);
        Py_hash_t h;
        if (obj == cst_FREE) {
            PyErr_Format(PyExc_ValueError, "counts name id %llu, which is not in use", id);
            rc = -1;
        } else if ((h = reg_hash(obj)) == -1 || idmap_add(&c->part[STRIPE(h)], id, n) < 0) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            rc = -1;
        }
        Py_DECREF(obj);
    }
    Py_DECREF(items);
    return rc;
}

static PyObject *registry_new_counts(Registry *r, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "new_counts(source=None)");
        return NULL;
    }
    Counts *c = counts_new();
    if (c == NULL)
        return NULL;
    if (nargs == 1 && args[0] != Py_None && counts_fill(r, c, args[0]) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    reg_lock(&r->meta);
    int rc = add_handle(r, c);
    reg_unlock(&r->meta);
    if (rc < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return (PyObject *)c;
}

static PyObject *registry_discard_handle(Registry *r, PyObject *arg)
{
    int64_t serial = PyLong_AsLongLong(arg);
    if (serial == -1 && PyErr_Occurred())
        return NULL;
    reg_lock(&r->meta);
    Counts *c = take_handle(r, serial);
    reg_unlock(&r->meta);
    Py_XDECREF(c);
    Py_RETURN_NONE;
}

int reg_drop_handle(Registry *r, int64_t serial)
{
    reg_lock(&r->meta);
    Counts *c = take_handle(r, serial);
    if (c != NULL && r->nhandles == 0 && !pins_open(r)) {
        /* The last handle and no snapshot: every id is dead at once (nothing
         * can make a handle of this family again).  The slots' references
         * are released once no registry lock is held. */
        reg_lock(&r->slot_lock);
        count_free(r);
        for (size_t s = 0; s < STRIPES; s++)
            idtab_clear(&r->ids[s]); /* no handle left: no update reads them */
        Py_ssize_t n = PyList_GET_SIZE(r->objects);
        for (Py_ssize_t i = n; i-- > 1;) {
            PyObject *o = list_get_ref(r->objects, i);
            if (o != NULL)
                reg_defer_decref(o);
        }
        int rc = PyList_SetSlice(r->objects, 1, n, NULL);
        local_clear(r);
        r->nfree = 0;
        atomic_store_explicit(&r->free_oldest, 0, memory_order_relaxed);
        reg_unlock(&r->slot_lock);
        reg_unlock(&r->meta);
        Py_DECREF(c);
        return rc;
    }
    reg_unlock(&r->meta);
    if (c == NULL)
        return 0;
    PyObject *items = counts_items(c, NULL);
    Py_DECREF(c);
    if (items == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        uint64_t id = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0));
        PyObject *obj = slot_get(r, id);
        Py_hash_t h;
        if (obj != cst_FREE && (h = reg_hash(obj)) != -1) {
            reg_lock(&r->stripes[STRIPE(h)].m);
            int rc = reg_maybe_dead(r, NULL, h, id, obj);
            reg_unlock(&r->stripes[STRIPE(h)].m);
            if (rc < 0)
                PyErr_WriteUnraisable((PyObject *)r);
        }
        PyErr_Clear();
        Py_DECREF(obj);
    }
    Py_DECREF(items);
    return 0;
}

static PyObject *registry_drop_handle(Registry *r, PyObject *arg)
{
    int64_t serial = PyLong_AsLongLong(arg);
    if (serial == -1 && PyErr_Occurred())
        return NULL;
    if (reg_drop_handle(r, serial) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* -- pins ----------------------------------------------------------------- */

/* This thread's pin set (one per thread, round robin over the sets). */
static unsigned pin_home(void) { return hp_thread_number() % PIN_STRIPES; }

static int64_t pin_open(Registry *r, int all)
{
    unsigned k = pin_home();
    pin_set *ps = &r->pins[k];
    reg_lock(&ps->lock);
    if (ps->n == ps->cap) {
        size_t ncap = ps->cap ? ps->cap * 2 : 8;
        pin_rec *np = PyMem_RawRealloc(ps->pins, ncap * sizeof *np);
        if (np == NULL) {
            reg_unlock(&ps->lock);
            PyErr_NoMemory();
            return -1;
        }
        ps->pins = np;
        ps->cap = ncap;
    }
    /* the set's index in the low bits: unpin and pin_done find it at once */
    int64_t token = (++ps->serial * PIN_STRIPES) + (int64_t)k;
    /* The pin is in its set (a death from now on sees it) before its start
     * is read, and both before the caller's engine snapshot. */
    ps->pins[ps->n++] = (pin_rec){token, 0, 0, all};
    /* release: a reader of the count (pins_open) sees the pin's set as busy */
    atomic_store_explicit(&ps->count, ps->n, memory_order_release);
    ps->pins[ps->n - 1].start = seq_now(r);
    reg_unlock(&ps->lock);
    return token;
}

int64_t reg_pin(Registry *r) { return pin_open(r, 0); }
int64_t reg_read_pin(Registry *r) { return pin_open(r, 1); }

void reg_pin_done(Registry *r, int64_t token)
{
    pin_set *ps = &r->pins[(size_t)token % PIN_STRIPES];
    reg_lock(&ps->lock);
    for (size_t i = 0; i < ps->n; i++)
        if (ps->pins[i].token == token)
            ps->pins[i].done = seq_now(r);
    reg_unlock(&ps->lock);
}

static PyObject *registry_pin(Registry *r, PyObject *Py_UNUSED(ignored))
{
    int64_t token = reg_pin(r);
    return token < 0 ? NULL : PyLong_FromLongLong(token);
}

static PyObject *registry_pin_done(Registry *r, PyObject *arg)
{
    int64_t token = PyLong_AsLongLong(arg);
    if (token == -1 && PyErr_Occurred())
        return NULL;
    reg_pin_done(r, token);
    Py_RETURN_NONE;
}

int reg_unpin(Registry *r, int64_t token)
{
    if (token <= 0)
        return 0;
    pin_set *ps = &r->pins[(size_t)token % PIN_STRIPES];
    reg_lock(&ps->lock);
    for (size_t i = 0; i < ps->n; i++) {
        if (ps->pins[i].token == token) {
            ps->pins[i] = ps->pins[--ps->n];
            atomic_store_explicit(&ps->count, ps->n, memory_order_release);
            break;
        }
    }
    reg_unlock(&ps->lock);
    /* acquire: an id put in `died` by a thread that then saw this pin in its
     * set (reg_maybe_dead) is counted here: its store came before its look
     * at the set, which came before the removal above.  A death whose look
     * did not see this pin frees its id itself. */
    if (atomic_load_explicit(&r->died_count, memory_order_acquire) == 0)
        return 0;
    reg_lock(&r->meta);
    /* The ids that died while pins were open and that no open pin may hold
     * any more. */
    uint64_t *ready = NULL;
    size_t nready = 0;
    if (r->died.used) {
        ready = PyMem_RawMalloc(r->died.used * sizeof *ready);
        if (ready == NULL) {
            reg_unlock(&r->meta);
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < r->died.cap; i++) {
            uint64_t id = r->died.slots[i].id;
            if (id && !any_pin_may_hold(r, idmap_get(&r->died_birth, id),
                                        r->died.slots[i].count))
                ready[nready++] = id;
        }
        for (size_t i = 0; i < nready; i++) {
            idmap_add(&r->died, ready[i], -idmap_get(&r->died, ready[i]));
            idmap_add(&r->died_birth, ready[i], -idmap_get(&r->died_birth, ready[i]));
        }
        atomic_store_explicit(&r->died_count, r->died.used, memory_order_release);
    }
    reg_unlock(&r->meta);
    for (size_t k = 0; k < nready; k++) {
        PyObject *obj = slot_get(r, ready[k]);
        Py_hash_t h;
        if (obj != cst_FREE && (h = reg_hash(obj)) != -1) {
            Py_ssize_t stripe = STRIPE(h);
            reg_lock(&r->stripes[stripe].m);
            reg_lock(&r->meta);
            int alive = idmap_get(&r->died, ready[k]) != 0;
            for (size_t i = 0; i < r->nhandles && !alive; i++)
                alive = idmap_get(&r->handles[i]->part[stripe], ready[k]) != 0;
            reg_unlock(&r->meta);
            if (!alive)
                reg_free(r, h, ready[k], obj, 1);
            reg_unlock(&r->stripes[stripe].m);
        }
        if (PyErr_Occurred())
            PyErr_WriteUnraisable((PyObject *)r);
        Py_DECREF(obj);
    }
    PyMem_RawFree(ready);
    return 0;
}

static PyObject *registry_unpin(Registry *r, PyObject *arg)
{
    int64_t token = PyLong_AsLongLong(arg);
    if (token == -1 && PyErr_Occurred())
        return NULL;
    if (reg_unpin(r, token) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* -- a writable copy ------------------------------------------------------- */

Counts *reg_copy_handle(Registry *r, Counts *src, cst_trie *h, cst_trie **copy)
{
    Counts *c = counts_new();
    if (c == NULL)
        return NULL;
    *copy = NULL;
    /* Every stripe lock: no update of the family between the counts and the
     * engine copy; the new handle joins the family before any of them is
     * released (else an id only the copy holds could be freed meanwhile).
     * Nothing under them runs user code or makes a Python object. */
    for (size_t s = 0; s < STRIPES; s++)
        reg_lock(&r->stripes[s].m);
    int rc = counts_copy(c, src);
    if (rc == 0 && (*copy = cst_engine->snapshot(h, 0)) == NULL) {
        PyErr_NoMemory();
        rc = -1;
    }
    if (rc == 0) {
        reg_lock(&r->meta);
        rc = add_handle(r, c);
        reg_unlock(&r->meta);
        if (rc < 0) {
            cst_engine->free(*copy);
            *copy = NULL;
        }
    }
    for (size_t s = STRIPES; s-- > 0;)
        reg_unlock(&r->stripes[s].m);
    if (rc < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return c;
}

/* -- ids from Python ------------------------------------------------------- */

static PyObject *registry_adopt(Registry *r, PyObject *objs)
{
    if (registry_len(r) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "adopt() needs an empty registry");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(objs, "adopt() needs a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    /* A new registry, not shared yet: its tables need no lock (== and
     * __hash__ run here, with none held). */
    int rc = 0;
    int64_t birth = seq_now(r);
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        Py_hash_t h = reg_hash(items[i]);
        int64_t seen = h == -1 ? -1 : idtab_find(&r->ids[STRIPE(h)], items[i], h);
        if (seen > 0)
            PyErr_Format(PyExc_ValueError, "subscriber %R appears twice in the subscriber table",
                         items[i]);
        if (seen != 0 ||
            idtab_insert(&r->ids[STRIPE(h)], items[i], h, (uint64_t)(i + 1), birth) < 0)
            rc = -1;
    }
    if (rc == 0) {
        reg_lock(&r->slot_lock);
        rc = PyList_SetSlice(r->objects, 1, PyList_GET_SIZE(r->objects), seq);
        reg_unlock(&r->slot_lock);
    }
    if (rc < 0) {
        for (size_t s = 0; s < STRIPES; s++)
            idtab_clear(&r->ids[s]);
    }
    Py_DECREF(seq);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *registry_existing_id(Registry *r, PyObject *obj)
{
    int64_t id = reg_existing_id(r, obj);
    if (id < 0)
        return NULL;
    if (id == 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(id);
}

static PyObject *registry_get(Registry *r, PyObject *arg)
{
    long long i = PyLong_AsLongLong(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    return i < 0 ? Py_NewRef(cst_FREE) : slot_get(r, (uint64_t)i);
}

static PyObject *registry_maps(Registry *r, PyObject *arg)
{
    PyObject *o = registry_get(r, arg);
    if (o == NULL)
        return NULL;
    int m = o != cst_FREE;
    Py_DECREF(o);
    return PyBool_FromLong(m);
}

static PyObject *registry_live_objects(Registry *r, PyObject *Py_UNUSED(ignored))
{
    PyObject *copy = PySequence_List(r->objects);
    if (copy == NULL)
        return NULL;
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < PyList_GET_SIZE(copy); i++) {
        PyObject *o = PyList_GET_ITEM(copy, i);
        if (o != cst_FREE && PyList_Append(out, o) < 0)
            Py_CLEAR(out);
    }
    Py_DECREF(copy);
    return out;
}

/* removed_ids(counts, ids): each id lost one pair in the handle owning
 * counts (Trie.clear); takes each subscriber's stripe lock itself. */
static PyObject *registry_removed_ids(Registry *r, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !Py_IS_TYPE(args[0], &Counts_Type)) {
        PyErr_SetString(PyExc_TypeError, "removed_ids(counts, ids)");
        return NULL;
    }
    Counts *c = (Counts *)args[0];
    PyObject *it = PyObject_GetIter(args[1]);
    if (it == NULL)
        return NULL;
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        uint64_t id = PyLong_AsUnsignedLongLong(item);
        Py_DECREF(item);
        if (id == (uint64_t)-1 && PyErr_Occurred())
            break;
        PyObject *obj = slot_get(r, id);
        int rc = 0;
        if (obj != cst_FREE) {
            Py_hash_t h = reg_hash(obj);
            if (h == -1) {
                rc = -1;
            } else {
                reg_lock(&r->stripes[STRIPE(h)].m);
                if (idmap_get(&c->part[STRIPE(h)], id))
                    rc = reg_removed(r, c, h, id, obj);
                reg_unlock(&r->stripes[STRIPE(h)].m);
            }
        }
        Py_DECREF(obj);
        if (rc < 0)
            break;
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* Does the list `out` hold FREE (an id freed between the engine's answer and
 * the mapping)? */
static int holds_free(PyObject *out)
{
    if (!PyList_Check(out))
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(out);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_GET_ITEM(out, i) == cst_FREE)
            return 1;
    return 0;
}

/* stable(read): read() (an engine read of a live handle that maps ids through
 * objects into a list) inside a read section, so that no slot it maps is
 * reused meanwhile (rule 4); repeated while it met a freed id (FREE in its
 * answer).  After MAX_ATTEMPTS it pins first (reg_read_pin): no free begins
 * after that, so the loop ends once the frees that had begun (one per thread
 * at most) are done. */
static PyObject *registry_stable(Registry *r, PyObject *read)
{
    int64_t pin = 0;
    PyObject *out = NULL;
    for (int attempt = 0;; attempt++) {
        if (attempt == MAX_ATTEMPTS && (pin = reg_read_pin(r)) < 0)
            return NULL;
        void *sec = cst_engine->read_enter();
        if (sec == NULL)
            return PyErr_NoMemory();
        out = PyObject_CallNoArgs(read);
        cst_engine->read_exit(sec);
        if (out == NULL || !holds_free(out))
            break;
        Py_CLEAR(out);
    }
    if (pin > 0 && reg_unpin(r, pin) < 0)
        Py_CLEAR(out);
    return out;
}

static PyObject *registry_pinned(Registry *r, PyObject *Py_UNUSED(ignored))
{
    size_t n = 0;
    for (size_t i = 0; i < PIN_STRIPES; i++)
        n += atomic_load_explicit(&r->pins[i].count, memory_order_acquire);
    return PyLong_FromSize_t(n);
}

/* Tests: the freed ids waiting for reuse, (in the shared ring, in the
 * stripes), each part read under its lock. */
static PyObject *registry_waiting(Registry *r, PyObject *Py_UNUSED(ignored))
{
    size_t stripes = 0;
    for (size_t s = 0; s < STRIPES; s++) {
        reg_lock(&r->stripes[s].m);
        stripes += r->stripes[s].nfree;
        reg_unlock(&r->stripes[s].m);
    }
    reg_lock(&r->slot_lock);
    size_t ring = r->nfree;
    reg_unlock(&r->slot_lock);
    return Py_BuildValue("(nn)", (Py_ssize_t)ring, (Py_ssize_t)stripes);
}

static PyObject *registry_get_objects(Registry *r, void *closure)
{
    (void)closure;
    return Py_NewRef(r->objects);
}

static PyObject *registry_get_freed(Registry *r, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong(reg_freed(r));
}



static PyMethodDef registry_methods[] = {
    {"new_counts", (PyCFunction)(void (*)(void))registry_new_counts, METH_FASTCALL,
     "new_counts(source=None) -> Counts: the counts of a new writable handle (a copy starts "
     "from its source's: a Counts or (id, pairs) items).  Call drop_handle(counts.serial) "
     "when the handle is collected."},
    {"discard_handle", (PyCFunction)registry_discard_handle, METH_O,
     "Forget counts that never belonged to a live handle (a failed copy); frees nothing."},
    {"drop_handle", (PyCFunction)registry_drop_handle, METH_O,
     "A writable handle is gone: free the ids that only it held (rule 3)."},
    {"pin", (PyCFunction)registry_pin, METH_NOARGS,
     "Record that a snapshot (or a read) starts now; returns its pin token."},
    {"pin_done", (PyCFunction)registry_pin_done, METH_O,
     "The snapshot of this pin token exists now: it holds no pair of an id born later."},
    {"unpin", (PyCFunction)registry_unpin, METH_O,
     "A snapshot is gone: free the ids that only older snapshots kept."},
    {"adopt", (PyCFunction)registry_adopt, METH_O,
     "Give objs the ids 1, 2, ... in order, in a new empty registry (ValueError for two "
     "equal objects, TypeError for an unhashable one)."},
    {"existing_id", (PyCFunction)registry_existing_id, METH_O, "The id of obj, or None."},
    {"get", (PyCFunction)registry_get, METH_O, "The object of id i, or FREE."},
    {"maps", (PyCFunction)registry_maps, METH_O, "True when id i names an object now."},
    {"live_objects", (PyCFunction)registry_live_objects, METH_NOARGS,
     "Every object that has an id now."},
    {"removed_ids", (PyCFunction)(void (*)(void))registry_removed_ids, METH_FASTCALL,
     "removed_ids(counts, ids): each id lost one pair (takes the stripe locks itself)."},
    {"stable", (PyCFunction)registry_stable, METH_O,
     "read() repeated until no id was freed while it ran (rule 4)."},
    {"_pinned", (PyCFunction)registry_pinned, METH_NOARGS,
     "Tests: how many pins are open now (snapshots, iterations, reads that pinned)."},
    {"_waiting", (PyCFunction)registry_waiting, METH_NOARGS,
     "Tests: the freed ids waiting for reuse, (in the shared ring, in the stripes)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef registry_getset[] = {
    {"objects", (getter)registry_get_objects, NULL,
     "The id -> object list (FREE where unused); read it, never change it.", NULL},
    {"freed", (getter)registry_get_freed, NULL, "The number of ids freed so far (rule 4).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods registry_as_sequence = {.sq_length = (lenfunc)registry_len};

PyTypeObject Registry_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cstrie._hotpath.Registry",
    .tp_basicsize = sizeof(Registry),
    .tp_dealloc = (destructor)registry_dealloc,
    .tp_as_sequence = &registry_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Ids for the subscribers of one family of handles (see cstrie.registry).",
    .tp_traverse = (traverseproc)registry_traverse,
    .tp_clear = (inquiry)registry_clear,
    .tp_weaklistoffset = offsetof(Registry, weakreflist),
    .tp_methods = registry_methods,
    .tp_getset = registry_getset,
    .tp_new = registry_new,
};

int registry_module_init(PyObject *m)
{
    if (cst_mutex_init(&all_lock) < 0)
        return -1;
    if (PyType_Ready(&Counts_Type) < 0 || PyType_Ready(&Registry_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Counts", (PyObject *)&Counts_Type) < 0 ||
        PyModule_AddObjectRef(m, "Registry", (PyObject *)&Registry_Type) < 0)
        return -1;
    return 0;
}
