/*
 * reader.c - Reader and Writer: the C bases of cstrie.Snapshot and
 * cstrie.Trie, holding the engine handle and serving the hot calls.
 *
 * A lookup here is: the topic's UTF-8 (in place for ASCII), one direct call
 * into the engine (no argument tuple, no GIL release, no errno), ids into a
 * buffer on the C stack, and ids mapped to subscriber objects through the
 * registry's list under registry rule 4 (read `freed`, ask, map, read `freed`
 * again; repeat if it moved; after MAX_ATTEMPTS hold the slot lock).  Nothing
 * is allocated but the result list in the common case.
 *
 * Each public method is the one entry point of its operation: it binds its
 * arguments as the Python signature in its docstring would (positional or by
 * keyword), takes a str or a str subclass, and reaches the engine without a
 * Python call.  Two things go to Python: engine statuses, which become
 * exceptions in cstrie._binding.raise_status (the single place that does),
 * and the share-group syntax of a subscribe/unsubscribe (cstrie.groups, via
 * the class's _shared_args), with the family's group table.
 */
#include "hotpath.h"

#include <stdlib.h>
#include <string.h>

#define LOCAL_IDS 256          /* ids that fit the stack buffer */

static PyObject *s_shared_args, *s_groups, *s_get, *s_find;

/* ------------------------------------------------------------------------
 * Arguments
 * ---------------------------------------------------------------------- */

/* A method's parameters as its Python signature has them: names[0 .. npos-1]
 * positional or keyword, names[npos .. nall-1] keyword-only; the first
 * `required` must be given. */
typedef struct params {
    const char *method;
    int npos, nall, required;
    const char *const *names;
} params;

/* Bind a vectorcall's arguments to p's parameters: out[i] borrowed, NULL
 * when not given.  -1 with the TypeError a Python method would raise. */
static int bind_args(Reader *self, const params *p, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, PyObject **out)
{
    const char *cls = Py_TYPE(self)->tp_name;
    for (int i = 0; i < p->nall; i++)
        out[i] = i < nargs ? args[i] : NULL;
    if (nargs > p->npos) {
        PyErr_Format(PyExc_TypeError, "%s.%s() takes %d positional arguments but %zd were given",
                     cls, p->method, p->npos + 1, nargs + 1);
        return -1;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int j = 0;
        while (j < p->nall && PyUnicode_CompareWithASCIIString(key, p->names[j]) != 0)
            j++;
        if (j == p->nall) {
            PyErr_Format(PyExc_TypeError, "%s.%s() got an unexpected keyword argument '%U'", cls,
                         p->method, key);
            return -1;
        }
        if (out[j] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s.%s() got multiple values for argument '%s'", cls,
                         p->method, p->names[j]);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    int missing = 0, first = -1, last = -1;
    for (int i = 0; i < p->required; i++)
        if (out[i] == NULL) {
            missing++;
            first = first < 0 ? i : first;
            last = i;
        }
    if (missing == 1)
        PyErr_Format(PyExc_TypeError, "%s.%s() missing 1 required positional argument: '%s'",
                     cls, p->method, p->names[first]);
    else if (missing > 1) /* the signatures here have at most two required */
        PyErr_Format(PyExc_TypeError,
                     "%s.%s() missing %d required positional arguments: '%s' and '%s'", cls,
                     p->method, missing, p->names[first], p->names[last]);
    return missing ? -1 : 0;
}

/* The method's arguments: the common call forms (positional only, no
 * required one left out) without binding; else bind_args. */
static inline int get_args(Reader *self, const params *p, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    if (nargs >= p->required && nargs <= p->npos &&
        (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
        for (int i = 0; i < p->nall; i++)
            out[i] = i < nargs ? args[i] : NULL;
        return 0;
    }
    return bind_args(self, p, args, nargs, kwnames, out);
}

/* The UTF-8 of `text` (a str or a str subclass: its characters, not what
 * its methods say) in *s, *len, with *keep to release after use.  -1 with
 * TypeError for a non-str, or the dialect's ValueError for text that has no
 * UTF-8 (a lone surrogate); `what` is "topic" or "pattern". */
static inline int text_of(Reader *self, PyObject *text, const char *what, const char **s,
                          Py_ssize_t *len, PyObject **keep)
{
    if (PyUnicode_CheckExact(text) && PyUnicode_IS_ASCII(text)) { /* the common case */
        *keep = NULL;
        *s = (const char *)PyUnicode_DATA(text);
        *len = PyUnicode_GET_LENGTH(text);
        return 0;
    }
    if (!PyUnicode_Check(text)) {
        /* tp_name, not __name__: a metaclass can make __name__ run code */
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.200s", what, Py_TYPE(text)->tp_name);
        return -1;
    }
    if (topic_utf8(text, s, len, keep) == 0)
        return 0;
    PyErr_Clear();
    raise_status(self, CST_EUTF8, what, text);
    return -1;
}

/* A Reader made without _bind (Snapshot.__new__(Snapshot), ...) has no
 * engine handle: every call raises instead of dereferencing NULL. */
static int unbound(Reader *self)
{
    if (self->h != NULL)
        return 0;
    PyErr_Format(PyExc_TypeError, "this %s has no engine handle: make one with %s",
                 Py_TYPE(self)->tp_name,
                 PyObject_TypeCheck((PyObject *)self, &Writer_Type) ? "Trie()" : "Trie.snapshot()");
    return 1;
}

/* Call the race hook (tests) after an engine answer; -1 if it raised. */
static int race(Reader *self, int attempt)
{
    if (self->race_hook == NULL)
        return 0;
    PyObject *r = PyObject_CallFunction(self->race_hook, "i", attempt);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* A new reference to the object of id, cst_FREE for a free or unknown slot. */
static inline PyObject *object_of(PyObject *objects, uint64_t id)
{
#ifdef Py_GIL_DISABLED
    PyObject *o = id < (uint64_t)PY_SSIZE_T_MAX ? PyList_GetItemRef(objects, (Py_ssize_t)id) : NULL;
    if (o == NULL) {
        PyErr_Clear();
        return Py_NewRef(cst_FREE);
    }
    return o;
#else
    if (id >= (uint64_t)PyList_GET_SIZE(objects))
        return Py_NewRef(cst_FREE);
    return Py_NewRef(PyList_GET_ITEM(objects, (Py_ssize_t)id));
#endif
}

/* Map ids[0..n) to new references in dst[0..n); 1 if
 * one was FREE (an id freed meanwhile, rule 4).  At a million subscribers
 * every slot of `objects` and every object (whose count the new reference
 * writes) is a cache miss, and a plain loop takes them one after another.
 * So the slots 2 * MAP_AHEAD ids ahead are requested, and, with the GIL
 * (nothing changes the list meanwhile), the objects of the slots MAP_AHEAD
 * ahead: their misses overlap.  Prefetches only: nothing read for them
 * decides anything (free-threaded, the item array read for them may be one
 * another thread is replacing: a prefetch of a stale address costs a miss,
 * no more). */
#define MAP_AHEAD 8
static inline void map_prefetch_slot(PyObject **items, uint64_t size, uint64_t id)
{
    if (id < size)
        __builtin_prefetch(&items[id]);
}
static inline void map_prefetch_object(PyObject **items, uint64_t size, uint64_t id)
{
#ifndef Py_GIL_DISABLED
    if (id < size)
        __builtin_prefetch(items[id], 1);
#else
    (void)items, (void)size, (void)id;
#endif
}
static int map_ids(PyObject *objects, const uint64_t *ids, int64_t n, PyObject **dst)
{
#ifdef Py_GIL_DISABLED
    /* relaxed: a hint for the prefetches, nothing else reads them */
    PyObject **items = __atomic_load_n(&((PyListObject *)objects)->ob_item, __ATOMIC_RELAXED);
    uint64_t size = (uint64_t)__atomic_load_n(&((PyVarObject *)objects)->ob_size, __ATOMIC_RELAXED);
#else
    PyObject **items = ((PyListObject *)objects)->ob_item;
    uint64_t size = (uint64_t)PyList_GET_SIZE(objects);
#endif
    /* a few ids: prefetching them costs more than it hides */
    int ahead = n > MAP_AHEAD;
    for (int64_t i = 0; ahead && i < n && i < 2 * MAP_AHEAD; i++)
        map_prefetch_slot(items, size, ids[i]);
    for (int64_t i = 0; ahead && i < MAP_AHEAD; i++)
        map_prefetch_object(items, size, ids[i]);
    int torn = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i + 2 * MAP_AHEAD < n) /* never with a few ids */
            map_prefetch_slot(items, size, ids[i + 2 * MAP_AHEAD]);
        if (i + MAP_AHEAD < n)
            map_prefetch_object(items, size, ids[i + MAP_AHEAD]);
        PyObject *o = object_of(objects, ids[i]);
        torn |= o == cst_FREE;
        dst[i] = o;
    }
    return torn;
}

/* A new list's items, for map_ids to fill. */
static inline PyObject **list_items(PyObject *list) { return ((PyListObject *)list)->ob_item; }

/* ------------------------------------------------------------------------
 * lookup
 * ---------------------------------------------------------------------- */

/* The subscribers of the encoded topic (s, len), each once: a new list.
 * `warm`: warm the walk first if the trie is big (one lookup; a batch warms
 * its topics together before). */
static PyObject *lookup_rows(Reader *self, PyObject *topic, const char *s, Py_ssize_t len,
                             int warm)
{
    uint64_t local[LOCAL_IDS];
    uint64_t *ids = local;
    size_t cap = LOCAL_IDS;
    Registry *reg = self->reg;
    PyObject *out = NULL;
    int64_t pin = 0;
    for (int attempt = 0;; attempt++) {
        /* Rule 4's last resort: no free begins after this pin, so the loop
         * ends once the frees already begun (one per thread) are done. */
        if (attempt >= MAX_ATTEMPTS && pin == 0 && (pin = reg_read_pin(reg)) < 0)
            break;
        /* The read section: an id the engine answers with keeps its slot
         * until the section ends (rule 4), so the mapping needs no check but
         * for an id freed meanwhile (FREE: a read of a later state). */
        void *sec = cst_engine->read_enter();
        if (sec == NULL) {
            out = PyErr_NoMemory();
            break;
        }
        walk_arm();
        int64_t n = (warm ? cst_engine->lookup_warm : cst_engine->lookup)(self->h, s, (size_t)len,
                                                                          ids, cap);
        walk_disarm();
        if (n < 0) {
            cst_engine->read_exit(sec);
            out = raise_status(self, n, "topic", topic);
            break;
        }
        if ((size_t)n > cap) {
            cst_engine->read_exit(sec);
            uint64_t *bigger = PyMem_Malloc((size_t)n * sizeof *bigger);
            if (bigger == NULL) {
                out = PyErr_NoMemory();
                break;
            }
            if (ids != local)
                PyMem_Free(ids);
            ids = bigger;
            cap = (size_t)n;
            attempt--; /* not a race: ask again with room */
            continue;
        }
        int torn = 0;
        if (race(self, attempt) == 0 && (out = PyList_New((Py_ssize_t)n)) != NULL)
            torn = map_ids(reg->objects, ids, n, list_items(out));
        cst_engine->read_exit(sec);
        if (out == NULL || !torn)
            break;
        Py_CLEAR(out); /* an id was freed meanwhile: a fresh, later read */
    }
    if (pin > 0 && reg_unpin(reg, pin) < 0)
        Py_CLEAR(out);
    if (ids != local)
        PyMem_Free(ids);
    return out;
}

static PyObject *lookup_encoded(Reader *self, PyObject *topic, const char *s, Py_ssize_t len)
{
    return lookup_rows(self, topic, s, len, 1);
}

PyDoc_STRVAR(lookup_doc,
"lookup(topic) -> list\n--\n\n"
"Every subscriber whose pattern matches ``topic``, each once.\n\n"
"Raises ``TypeError`` for a non-str and ``ValueError`` for a topic the\n"
"dialect rejects.  Lock-free.  O(w * b + m): w words, b wildcard branches\n"
"tried per level, m matches (below AMQP '#': each node once).\n\n"
">>> t = Trie(\"mqtt\"); t.subscribe(\"a/+\", 1); t.lookup(\"a/b\")\n"
"True\n[1]");

typedef PyObject *(*encoded_read)(Reader *self, PyObject *topic, const char *s, Py_ssize_t len);

static const char *const TOPIC[] = {"topic"};

/* A read of one topic: bind, encode, read.  Inlined into each method, so
 * that `read` is a direct call there (an indirect one costs lookup() 2-3%). */
static inline __attribute__((always_inline)) PyObject *
read_topic(Reader *self, const params *p, encoded_read read, PyObject *const *args,
           Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *topic;
    const char *s;
    Py_ssize_t len;
    PyObject *keep;
    if (get_args(self, p, args, nargs, kwnames, &topic) < 0 || unbound(self) ||
        text_of(self, topic, "topic", &s, &len, &keep) < 0)
        return NULL;
    PyObject *out = read(self, topic, s, len);
    Py_XDECREF(keep);
    return out;
}

static const params P_LOOKUP = {"lookup", 1, 1, 1, TOPIC};

static PyObject *reader_lookup(Reader *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    return read_topic(self, &P_LOOKUP, lookup_encoded, args, nargs, kwnames);
}

/* ------------------------------------------------------------------------
 * has_subscribers
 * ---------------------------------------------------------------------- */

static PyObject *has_encoded(Reader *self, PyObject *topic, const char *s, Py_ssize_t len)
{
    walk_arm();
    int r = cst_engine->has_subscribers(self->h, s, (size_t)len);
    walk_disarm();
    if (r < 0)
        return raise_status(self, r, "topic", topic);
    return PyBool_FromLong(r);
}

PyDoc_STRVAR(has_doc,
"has_subscribers(topic) -> bool\n--\n\n"
"True when at least one pattern matches ``topic``; the walk stops at the\n"
"first match.  Same errors as lookup().");

static const params P_HAS = {"has_subscribers", 1, 1, 1, TOPIC};

static PyObject *reader_has_subscribers(Reader *self, PyObject *const *args, Py_ssize_t nargs,
                                        PyObject *kwnames)
{
    return read_topic(self, &P_HAS, has_encoded, args, nargs, kwnames);
}

/* ------------------------------------------------------------------------
 * match
 * ---------------------------------------------------------------------- */

typedef struct chunk_buf {
    cst_chunk g;
    char pat_local[2048];
    uint64_t ids_local[LOCAL_IDS];
    int64_t ends_local[2][64];
    int heap;
} chunk_buf;

static void cb_init(chunk_buf *b)
{
    memset(&b->g, 0, sizeof b->g);
    b->g.pat = b->pat_local;
    b->g.pat_cap = sizeof b->pat_local;
    b->g.ids = b->ids_local;
    b->g.ids_cap = LOCAL_IDS;
    b->g.pat_end = b->ends_local[0];
    b->g.ids_end = b->ends_local[1];
    b->g.entries_cap = 64;
    b->heap = 0;
}

static void cb_free(chunk_buf *b)
{
    if (b->heap) {
        PyMem_Free(b->g.pat);
        PyMem_Free(b->g.ids);
        PyMem_Free(b->g.pat_end);
        PyMem_Free(b->g.ids_end);
    }
}

/* Room for what the engine said it needs (twice that). */
static int cb_grow(chunk_buf *b)
{
    size_t pc = b->g.need_pat * 2 + 16, ic = b->g.need_ids * 2 + 16,
           gc = b->g.need_entries * 2 + 16;
    cb_free(b);
    b->g.pat = PyMem_Malloc(pc);
    b->g.ids = PyMem_Malloc(ic * sizeof(uint64_t));
    b->g.pat_end = PyMem_Malloc(gc * sizeof(int64_t));
    b->g.ids_end = PyMem_Malloc(gc * sizeof(int64_t));
    b->heap = 1;
    if (!b->g.pat || !b->g.ids || !b->g.pat_end || !b->g.ids_end) {
        PyErr_NoMemory();
        return -1;
    }
    b->g.pat_cap = pc;
    b->g.ids_cap = ic;
    b->g.entries_cap = gc;
    return 0;
}

static PyObject *match_encoded(Reader *self, PyObject *topic, const char *s, Py_ssize_t len)
{
    chunk_buf b;
    cb_init(&b);
    Registry *reg = self->reg;
    PyObject *out = NULL;
    int64_t pin = 0;
    for (int attempt = 0;; attempt++) {
        /* Rule 4's last resort: no free begins after this pin, so the loop
         * ends once the frees already begun (one per thread) are done. */
        if (attempt >= MAX_ATTEMPTS && pin == 0 && (pin = reg_read_pin(reg)) < 0)
            break;
        void *sec = cst_engine->read_enter(); /* as in lookup_encoded */
        if (sec == NULL) {
            out = PyErr_NoMemory();
            break;
        }
        walk_arm();
        int r = cst_engine->match(self->h, s, (size_t)len, &b.g);
        walk_disarm();
        if (r == CST_ETRUNC) {
            cst_engine->read_exit(sec);
            if (cb_grow(&b) < 0)
                break;
            attempt--;
            continue;
        }
        if (r < 0) {
            cst_engine->read_exit(sec);
            out = raise_status(self, r, "topic", topic);
            break;
        }
        if (race(self, attempt) < 0) {
            cst_engine->read_exit(sec);
            break;
        }
        size_t ng = b.g.nentries;
        out = PyList_New(ng ? (Py_ssize_t)b.g.ids_end[ng - 1] : 0);
        if (out == NULL) {
            cst_engine->read_exit(sec);
            break;
        }
        int torn = 0, failed = 0;
        int64_t p0 = 0, i0 = 0;
        for (size_t g = 0; g < ng && !failed; g++) {
            PyObject *pat = PyUnicode_DecodeUTF8(b.g.pat + p0, b.g.pat_end[g] - p0, "strict");
            if (pat == NULL) {
                failed = 1;
                break;
            }
            for (int64_t i = i0; i < b.g.ids_end[g]; i++) {
                PyObject *o = object_of(reg->objects, b.g.ids[i]);
                torn |= o == cst_FREE;
                PyObject *pair = PyTuple_Pack(2, pat, o);
                Py_DECREF(o);
                if (pair == NULL) {
                    failed = 1;
                    break;
                }
                PyList_SET_ITEM(out, (Py_ssize_t)i, pair);
            }
            Py_DECREF(pat);
            p0 = b.g.pat_end[g];
            i0 = b.g.ids_end[g];
        }
        cst_engine->read_exit(sec);
        if (failed) {
            /* fill the holes so the list can be freed */
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(out); i++)
                if (PyList_GET_ITEM(out, i) == NULL)
                    PyList_SET_ITEM(out, i, Py_NewRef(Py_None));
            Py_CLEAR(out);
            break;
        }
        if (!torn)
            break;
        Py_CLEAR(out);
    }
    if (pin > 0 && reg_unpin(reg, pin) < 0)
        Py_CLEAR(out);
    cb_free(&b);
    return out;
}

PyDoc_STRVAR(match_doc,
"match(topic) -> list[tuple[str, object]]\n--\n\n"
"The matching (pattern, subscriber) pairs for ``topic``, pattern by pattern.\n"
"Same errors as lookup().\n\n"
">>> t = Trie(); t.subscribe(\"a.*\", \"x\"); t.match(\"a.b\")\n"
"True\n[('a.*', 'x')]");

static const params P_MATCH = {"match", 1, 1, 1, TOPIC};

static PyObject *reader_match(Reader *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    return read_topic(self, &P_MATCH, match_encoded, args, nargs, kwnames);
}

/* ------------------------------------------------------------------------
 * route (share groups: one member per matching group)
 * ---------------------------------------------------------------------- */

/* The deliveries of the encoded topic: the ordinary subscribers (each once,
 * as lookup) then one member per matching group, picked by the group's
 * policy (groups.c); by_group: (that list's ordinary part, {group name:
 * member}).  key (NULL or None: the topic) is hashed for sticky groups. */
static PyObject *route_encoded(Reader *self, PyObject *topic, const char *s, Py_ssize_t len,
                               PyObject *key, int by_group)
{
    uint64_t local[LOCAL_IDS], slocal[LOCAL_IDS];
    uint64_t *ids = local, *shares = slocal;
    size_t cap = LOCAL_IDS;
    Registry *reg = self->reg;
    pick_arg a;
    if (pick_init(&a, reg->objects, key, s, (size_t)len) < 0)
        return NULL;
    PyObject *out = NULL;
    int64_t pin = 0;
    for (int attempt = 0;; attempt++) {
        /* Rule 4's last resort: no free begins after this pin, so the loop
         * ends once the frees already begun (one per thread) are done. */
        if (attempt >= MAX_ATTEMPTS && pin == 0 && (pin = reg_read_pin(reg)) < 0)
            break;
        void *sec = cst_engine->read_enter(); /* as in lookup_encoded */
        if (sec == NULL) {
            out = PyErr_NoMemory();
            break;
        }
        size_t nplain = 0;
        a.torn = 0;
        walk_arm();
        int64_t n = cst_engine->route(self->h, s, (size_t)len, pick_member_index, &a, ids, shares,
                                      cap, &nplain);
        walk_disarm();
        pick_release(&a);
        if (n == CST_EPICK && a.torn == 2) {
            cst_engine->read_exit(sec);
            out = PyErr_NoMemory();
            break;
        }
        if (n == CST_EPICK && a.torn == 1) {
            cst_engine->read_exit(sec);
            continue; /* a group id was freed under the walk: a later read */
        }
        if (n < 0) {
            cst_engine->read_exit(sec);
            out = raise_status(self, n, "topic", topic);
            break;
        }
        if ((size_t)n > cap) {
            cst_engine->read_exit(sec);
            uint64_t *bigger = PyMem_Malloc(2 * (size_t)n * sizeof *bigger);
            if (bigger == NULL) {
                out = PyErr_NoMemory();
                break;
            }
            if (ids != local)
                PyMem_Free(ids);
            ids = bigger;
            shares = bigger + n;
            cap = (size_t)n;
            attempt--; /* not a race: ask again with room */
            continue;
        }
        if (race(self, attempt) < 0) {
            cst_engine->read_exit(sec);
            break;
        }
        int torn = 0;
        Py_ssize_t nl = by_group ? (Py_ssize_t)nplain : (Py_ssize_t)n;
        PyObject *list = PyList_New(nl);
        PyObject *groups = by_group ? PyDict_New() : NULL;
        if (list == NULL || (by_group && groups == NULL)) {
            cst_engine->read_exit(sec);
            Py_XDECREF(list);
            Py_XDECREF(groups);
            break;
        }
        torn = map_ids(reg->objects, ids, nl, list_items(list));
        int failed = 0;
        for (size_t i = nplain; by_group && i < (size_t)n && !failed; i++) {
            PyObject *g = object_of(reg->objects, shares[i - nplain]);
            PyObject *o = object_of(reg->objects, ids[i]);
            if (!Py_IS_TYPE(g, &Group_Type) || o == cst_FREE)
                torn = 1;
            else
                failed = PyDict_SetItem(groups, ((Group *)g)->name, o) < 0;
            Py_DECREF(g);
            Py_DECREF(o);
        }
        cst_engine->read_exit(sec);
        if (failed) {
            Py_DECREF(list);
            Py_DECREF(groups);
            break;
        }
        out = list;
        if (by_group) {
            out = PyTuple_Pack(2, list, groups);
            Py_DECREF(list);
            Py_DECREF(groups);
            if (out == NULL)
                break;
        }
        if (!torn)
            break;
        Py_CLEAR(out); /* an id was freed meanwhile: a fresh, later read */
    }
    if (pin > 0 && reg_unpin(reg, pin) < 0)
        Py_CLEAR(out);
    if (ids != local)
        PyMem_Free(ids);
    return out;
}

PyDoc_STRVAR(route_doc,
"route(topic, key=None) -> list\n--\n\n"
"The deliveries of one message: every ordinary subscriber whose pattern\n"
"matches ``topic`` (each once, as lookup()), then one member of each share\n"
"group with a member on a matching filter, picked by the group's policy\n"
"(round-robin, random, or sticky by ``key``: a str, bytes or int; the topic\n"
"when None).  A group on several matching filters delivers once.  One walk\n"
"of the trie: every member returned was a member at that moment.\n"
"Lock-free.  O(lookup + g log m) for g groups of m members (sticky, or a\n"
"group on several matching filters: O(m) to O(m log m)).");

static const char *const ROUTE[] = {"topic", "key"};

static PyObject *route_call(Reader *self, const params *p, int by_group, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *a[2];
    const char *s;
    Py_ssize_t len;
    PyObject *keep;
    if (get_args(self, p, args, nargs, kwnames, a) < 0 || unbound(self) ||
        text_of(self, a[0], "topic", &s, &len, &keep) < 0)
        return NULL;
    PyObject *out = route_encoded(self, a[0], s, len, a[1], by_group);
    Py_XDECREF(keep);
    return out;
}

static const params P_ROUTE = {"route", 2, 2, 1, ROUTE};

static PyObject *reader_route(Reader *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    return route_call(self, &P_ROUTE, 0, args, nargs, kwnames);
}

PyDoc_STRVAR(route_by_group_doc,
"route_by_group(topic, key=None) -> tuple[list, dict]\n--\n\n"
"``route(topic, key)`` split in two: the ordinary subscribers, and\n"
"``{group name: chosen member}``.  Same walk, same picks.\n\n"
">>> t = Trie(\"nats\"); t.subscribe(\"orders.*\", \"w1\", group=\"billing\")\n"
"True\n"
">>> t.route_by_group(\"orders.new\")\n"
"([], {'billing': 'w1'})");

static const params P_ROUTE_BY_GROUP = {"route_by_group", 2, 2, 1, ROUTE};

static PyObject *reader_route_by_group(Reader *self, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    return route_call(self, &P_ROUTE_BY_GROUP, 1, args, nargs, kwnames);
}

/* ------------------------------------------------------------------------
 * lookup_many
 * ---------------------------------------------------------------------- */

PyDoc_STRVAR(many_doc,
"lookup_many(topics) -> list[list]\n--\n\n"
"``[self.lookup(t) for t in topics]``, without a Python call per topic.\n"
"Each row is one lookup: answered by one walk of the trie (never split\n"
"between two states of a trie that changes meanwhile).  A non-str topic\n"
"raises TypeError before anything is matched; an invalid one raises the\n"
"ValueError lookup() would, for the first invalid topic.");

static const char *const TOPICS[] = {"topics"};
static const params P_MANY = {"lookup_many", 1, 1, 1, TOPICS};

/* The rows of items[0..k) (k <= CST_WARM_TOPICS) into out[base..base + k),
 * in one read section: the engine walks them together (cst_lookup_many:
 * in a big trie, in the same rounds, so that their misses overlap), then
 * every id is mapped in one pipelined pass (map_ids), whose prefetches run
 * across the rows.  1 when the chunk is left to lookup_rows, row by row
 * (nothing set in out): a topic that is not plain ASCII, an engine status
 * (an invalid topic: lookup_rows raises it in order), more ids than `room`,
 * an id freed meanwhile (FREE: rule 4's retries are lookup_rows'), or a
 * race hook (tests); 0 when done, -1 with an exception (no memory). */
#define MANY_IDS 4096
static int many_chunk(Reader *self, PyObject *const *items, Py_ssize_t k, PyObject *out,
                      Py_ssize_t base, uint64_t *ids, size_t room)
{
    if (self->race_hook != NULL)
        return 1;
    size_t end[CST_WARM_TOPICS];
    const char *s[CST_WARM_TOPICS];
    size_t lens[CST_WARM_TOPICS];
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *t = items[j];
        if (!PyUnicode_CheckExact(t) || !PyUnicode_IS_ASCII(t))
            return 1;
        s[j] = (const char *)PyUnicode_DATA(t);
        lens[j] = (size_t)PyUnicode_GET_LENGTH(t);
    }
    void *sec = cst_engine->read_enter();
    if (sec == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    walk_arm();
    int64_t got = cst_engine->lookup_many(self->h, s, lens, (size_t)k, ids, room, end);
    walk_disarm();
    if (got < 0 || (size_t)got > room) {
        cst_engine->read_exit(sec);
        return 1;
    }
    size_t n = (size_t)got;
    /* every id's object, then handed to the rows (references moved) */
    PyObject **objs = n ? PyMem_Malloc(n * sizeof *objs) : NULL;
    if (n && objs == NULL) {
        cst_engine->read_exit(sec);
        PyErr_NoMemory();
        return -1;
    }
    int torn = map_ids(self->reg->objects, ids, (int64_t)n, objs);
    cst_engine->read_exit(sec);
    PyObject *rows[CST_WARM_TOPICS];
    Py_ssize_t made = 0;
    size_t start = 0;
    for (; !torn && made < k; made++) {
        rows[made] = PyList_New((Py_ssize_t)(end[made] - start));
        if (rows[made] == NULL)
            break;
        if (end[made] > start)
            memcpy(list_items(rows[made]), objs + start, (end[made] - start) * sizeof *objs);
        start = end[made];
    }
    if (torn || made < k) { /* give back what no row took */
        for (size_t i = start; i < n; i++)
            Py_DECREF(objs[i]);
        for (Py_ssize_t j = 0; j < made; j++)
            Py_DECREF(rows[j]);
        PyMem_Free(objs);
        return torn && made == 0 ? 1 : -1;
    }
    for (Py_ssize_t j = 0; j < k; j++)
        PyList_SET_ITEM(out, base + j, rows[j]);
    PyMem_Free(objs);
    return 0;
}

static PyObject *reader_lookup_many(Reader *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames)
{
    PyObject *topics;
    if (get_args(self, &P_MANY, args, nargs, kwnames, &topics) < 0 || unbound(self))
        return NULL;
#ifdef Py_GIL_DISABLED
    /* Another thread may change a list while we read it: read a copy (its
     * items borrowed from our own list are safe).  A tuple cannot change. */
    PyObject *seq = PyTuple_CheckExact(topics) ? Py_NewRef(topics) : PySequence_List(topics);
#else
    /* With the GIL nothing runs between our reads of the list. */
    PyObject *seq = (PyList_CheckExact(topics) || PyTuple_CheckExact(topics))
                        ? Py_NewRef(topics)
                        : PySequence_List(topics);
#endif
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    /* A non-str anywhere raises before anything is matched; then the rows
     * in order, so the first invalid topic is the one reported. */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_Check(items[i])) {
            const char *s;
            Py_ssize_t len;
            PyObject *keep;
            text_of(self, items[i], "topic", &s, &len, &keep); /* the TypeError */
            Py_DECREF(seq);
            return NULL;
        }
    }
    PyObject *out = PyList_New(n);
    int warming = n > 1 && cst_engine->warm_wanted(self->h);
    uint64_t *many = warming ? PyMem_Malloc(MANY_IDS * sizeof *many) : NULL;
    for (Py_ssize_t i = 0; out && i < n; i++) {
        const char *s;
        Py_ssize_t len;
        PyObject *keep;
        PyObject *row = NULL;
        if (warming && i % CST_WARM_TOPICS == 0) {
            Py_ssize_t k = n - i < CST_WARM_TOPICS ? n - i : CST_WARM_TOPICS;
            int r = many != NULL ? many_chunk(self, items + i, k, out, i, many, MANY_IDS) : 1;
            if (r < 0) {
                for (Py_ssize_t j = i; j < n; j++)
                    PyList_SET_ITEM(out, j, Py_NewRef(Py_None));
                Py_CLEAR(out);
                break;
            }
            if (r == 0) {
                i += k - 1; /* those rows are set */
                continue;
            }
        }
        if (text_of(self, items[i], "topic", &s, &len, &keep) == 0) {
            row = lookup_rows(self, items[i], s, len, 1); /* warm: if the trie is big */
            Py_XDECREF(keep);
        }
        if (row == NULL) {
            for (Py_ssize_t j = i; j < n; j++)
                PyList_SET_ITEM(out, j, Py_NewRef(Py_None));
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, row);
    }
    PyMem_Free(many);
    Py_DECREF(seq);
    return out;
}

/* ------------------------------------------------------------------------
 * subscribe / unsubscribe (Writer)
 * ---------------------------------------------------------------------- */

static PyObject *subscribe_encoded(Reader *self, PyObject *pattern, const char *s,
                                   Py_ssize_t len, PyObject *sub)
{
    Registry *reg = self->reg;
    Counts *c = self->counts;
    Py_hash_t h = reg_hash(sub);
    if (h == -1)
        return NULL; /* unhashable: TypeError, nothing changed */
    Py_ssize_t stripe = STRIPE(h);
    reg_locks l = {reg, stripe, -1, 0};
    reg_locks_take(&l);
    int fresh;
    PyObject *registered; /* the object registered under id: sub or one equal to it */
    int64_t id = reg_id_for(&l, h, sub, &fresh, &registered);
    if (id < 0) {
        reg_locks_drop(&l);
        return NULL;
    }
    /* Room for the count first: once the engine added the pair, the
     * bookkeeping must not fail. */
    if (idmap_reserve(&c->part[stripe]) < 0) {
        if (fresh)
            reg_free(reg, h, (uint64_t)id, registered, 0);
        else if (!idmap_get(&c->part[stripe], (uint64_t)id))
            reg_maybe_dead(reg, c, h, (uint64_t)id, registered);
        reg_locks_drop(&l);
        PyErr_Clear();
        return PyErr_NoMemory();
    }
    int r = cst_engine->subscribe(self->h, s, (size_t)len, (uint64_t)id);
    int err = 0;
    if (r > 0)
        err = reg_added(c, h, (uint64_t)id);
    else if (fresh) /* never in the engine, so in no snapshot: free it now */
        err = reg_free(reg, h, (uint64_t)id, registered, 0);
    else if (!idmap_get(&c->part[stripe], (uint64_t)id))
        err = reg_maybe_dead(reg, c, h, (uint64_t)id, registered);
    reg_locks_drop(&l);
    if (r < 0) {
        if (err)
            PyErr_Clear();
        return raise_status(self, r, "pattern", pattern);
    }
    if (err)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *unsubscribe_encoded(Reader *self, PyObject *pattern, const char *s,
                                     Py_ssize_t len, PyObject *sub)
{
    Registry *reg = self->reg;
    Py_hash_t h = reg_hash(sub);
    if (h == -1)
        return NULL;
    reg_locks l = {reg, STRIPE(h), -1, 0};
    reg_locks_take(&l);
    PyObject *registered;
    int64_t id = reg_id_of(&l, h, sub, &registered);
    if (id <= 0) {
        reg_locks_drop(&l);
        if (id < 0)
            return NULL;
        /* an unknown subscriber holds no pair; the pattern is still checked */
        int64_t v = cst_engine->validate(self->h, s, (size_t)len, 1);
        if (v < 0)
            return raise_status(self, v, "pattern", pattern);
        Py_RETURN_FALSE;
    }
    int r = cst_engine->unsubscribe(self->h, s, (size_t)len, (uint64_t)id);
    int err = 0;
    if (r > 0)
        err = reg_removed(reg, self->counts, h, (uint64_t)id, registered);
    reg_locks_drop(&l);
    if (r < 0)
        return raise_status(self, r, "pattern", pattern);
    if (err)
        return NULL;
    return PyBool_FromLong(r);
}

/* ------------------------------------------------------------------------
 * The public update calls
 * ---------------------------------------------------------------------- */

/* True when `pattern` (a str) may be in the dialect's share-group syntax
 * (MQTT's $share/...): a dialect with one and a pattern starting with '$'. */
static inline int maybe_shared(Reader *self, PyObject *pattern)
{
    return self->share_syntax && PyUnicode_GET_LENGTH(pattern) > 0 &&
           PyUnicode_READ_CHAR(pattern, 0) == '$';
}

/* subscribe (insert) or unsubscribe an ordinary pattern. */
static inline PyObject *update_plain(Reader *self, int insert, PyObject *pattern,
                                     PyObject *sub)
{
    const char *s;
    Py_ssize_t len;
    PyObject *keep;
    if (text_of(self, pattern, "pattern", &s, &len, &keep) < 0)
        return NULL;
    PyObject *out = insert ? subscribe_encoded(self, pattern, s, len, sub)
                           : unsubscribe_encoded(self, pattern, s, len, sub);
    Py_XDECREF(keep);
    return out;
}

/* Join (insert) or leave the share group `name` on the filter `filt`.  The
 * subscriber is hashed before a group is made (unhashable: TypeError and no
 * group); leaving a group that does not exist checks the filter and is
 * False. */
static PyObject *update_shared(Reader *self, int insert, PyObject *filt, PyObject *name,
                               PyObject *sub)
{
    const char *s;
    Py_ssize_t len;
    PyObject *keep;
    if (text_of(self, filt, "pattern", &s, &len, &keep) < 0)
        return NULL;
    PyObject *out = NULL, *group = NULL;
    PyObject *table = PyObject_GetAttr((PyObject *)self->reg, s_groups);
    if (table == NULL)
        goto done;
    if (insert) {
        if (PyObject_Hash(sub) == -1)
            goto done;
        group = PyObject_CallMethodOneArg(table, s_get, name);
    } else {
        group = PyObject_CallMethodOneArg(table, s_find, name);
    }
    if (group == NULL)
        goto done;
    if (group == Py_None) { /* leave a group that does not exist */
        int64_t v = cst_engine->validate(self->h, s, (size_t)len, 1);
        if (v < 0)
            raise_status(self, v, "pattern", filt);
        else if (PyObject_Hash(sub) != -1)
            out = Py_NewRef(Py_False);
        goto done;
    }
    out = share_update_encoded(self, filt, s, len, sub, group, insert);
done:
    Py_XDECREF(group);
    Py_XDECREF(table);
    Py_XDECREF(keep);
    return out;
}

static const char *const UPDATE[] = {"pattern", "subscriber", "group"};

/* subscribe/unsubscribe(pattern, subscriber, *, group=None): an ordinary
 * pattern straight to the engine; a share group (group=, a Shared, or the
 * dialect's syntax) parsed by the class's _shared_args first. */
static PyObject *update_call(Reader *self, const params *p, int insert, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *a[3];
    if (get_args(self, p, args, nargs, kwnames, a) < 0 || unbound(self))
        return NULL;
    PyObject *pattern = a[0], *sub = a[1], *group = a[2] ? a[2] : Py_None;
    if (group == Py_None && PyUnicode_Check(pattern) && !maybe_shared(self, pattern))
        return update_plain(self, insert, pattern, sub);
    PyObject *parsed =
        PyObject_CallMethodObjArgs((PyObject *)self, s_shared_args, pattern, group, NULL);
    if (parsed == NULL)
        return NULL;
    if (!PyTuple_Check(parsed) || PyTuple_GET_SIZE(parsed) != 2) {
        Py_DECREF(parsed);
        PyErr_SetString(PyExc_RuntimeError, "_shared_args must return (filter, name)");
        return NULL;
    }
    PyObject *filt = PyTuple_GET_ITEM(parsed, 0), *name = PyTuple_GET_ITEM(parsed, 1);
    PyObject *out = name == Py_None ? update_plain(self, insert, filt, sub)
                                    : update_shared(self, insert, filt, name, sub);
    Py_DECREF(parsed);
    return out;
}

PyDoc_STRVAR(subscribe_doc,
"subscribe(pattern, subscriber, *, group=None) -> bool\n--\n\n"
"Add the pair; True if it was new.  With a group (``group=``, a\n"
"``Shared`` or the dialect's ``$share/g/filter``), join that share group\n"
"on the filter instead: each message goes to one member of the group.\n\n"
"Raises ``TypeError`` (non-str pattern, unhashable subscriber) or\n"
"``ValueError`` (pattern invalid in the dialect), leaving the trie as it\n"
"was.  Lock-free in the engine: O(w + log n) copied nodes (w words, n\n"
"subscribers on the pattern or words on a level).\n\n"
">>> t = Trie(); t.subscribe(\"a.#\", \"x\"), t.subscribe(\"a.#\", \"x\")\n"
"(True, False)");

static const params P_SUBSCRIBE = {"subscribe", 2, 3, 2, UPDATE};

static PyObject *writer_subscribe(Reader *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    return update_call(self, &P_SUBSCRIBE, 1, args, nargs, kwnames);
}

PyDoc_STRVAR(unsubscribe_doc,
"unsubscribe(pattern, subscriber, *, group=None) -> bool\n--\n\n"
"Remove the pair (or the group membership); True if it was there.  Same\n"
"errors as subscribe().  O(w + log n).");

static const params P_UNSUBSCRIBE = {"unsubscribe", 2, 3, 2, UPDATE};

static PyObject *writer_unsubscribe(Reader *self, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames)
{
    return update_call(self, &P_UNSUBSCRIBE, 0, args, nargs, kwnames);
}

/* _subscribe_many(patterns, subscribers): subscribe(pattern, subscriber)
 * for each pair of the two lists, in order, without a Python call per pair,
 * after every pattern has been checked (type, dialect) and every subscriber
 * hashed: an invalid pattern or an unhashable subscriber raises before
 * anything changes.  The number of new pairs; an error after that (out of
 * memory) raises at the pair it stops at (the pairs before it stay). */
static PyObject *writer_subscribe_many(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (unbound(self))
        return NULL;
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[1]) ||
        PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "_subscribe_many(patterns, subscribers): two lists of one length");
        return NULL;
    }
    /* Our own copies: the caller's lists may change meanwhile. */
    PyObject *pats = PyList_GetSlice(args[0], 0, PY_SSIZE_T_MAX);
    PyObject *subs = pats ? PyList_GetSlice(args[1], 0, PY_SSIZE_T_MAX) : NULL;
    PyObject *out = NULL;
    if (subs == NULL || PyList_GET_SIZE(pats) != PyList_GET_SIZE(subs)) {
        if (subs != NULL)
            PyErr_SetString(PyExc_RuntimeError, "_subscribe_many: a list changed size");
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(pats), added = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pattern = PyList_GET_ITEM(pats, i);
        const char *s;
        Py_ssize_t len;
        PyObject *keep;
        if (text_of(self, pattern, "pattern", &s, &len, &keep) < 0)
            goto done;
        int64_t v = cst_engine->validate(self->h, s, (size_t)len, 1);
        Py_XDECREF(keep);
        if (v < 0) {
            raise_status(self, v, "pattern", pattern);
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyObject_Hash(PyList_GET_ITEM(subs, i)) == -1)
            goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = update_plain(self, 1, PyList_GET_ITEM(pats, i), PyList_GET_ITEM(subs, i));
        if (r == NULL)
            goto done;
        added += r == Py_True;
        Py_DECREF(r);
    }
    out = PyLong_FromSsize_t(added);
done:
    Py_XDECREF(pats);
    Py_XDECREF(subs);
    return out;
}

/* _copy(): a writable copy of this trie, made with every stripe lock of the
 * family held (no update in between): (address of its engine handle, its
 * Counts, already in the family). */
static PyObject *writer_copy(Reader *self, PyObject *Py_UNUSED(ignored))
{
    if (unbound(self))
        return NULL;
    cst_trie *copy;
    Counts *c = reg_copy_handle(self->reg, self->counts, self->h, &copy);
    if (c == NULL)
        return NULL;
    PyObject *addr = PyLong_FromVoidPtr(copy);
    PyObject *out = addr ? PyTuple_Pack(2, addr, (PyObject *)c) : NULL;
    Py_XDECREF(addr);
    if (out == NULL) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        cst_engine->free(copy);
        if (reg_drop_handle(self->reg, c->serial) < 0)
            PyErr_WriteUnraisable((PyObject *)self);
        PyErr_Restore(et, ev, tb);
    }
    Py_DECREF(c);
    return out;
}

/* ------------------------------------------------------------------------
 * Binding, lifetime
 * ---------------------------------------------------------------------- */

/* _bind(handle, address, dialect, registry, counts, pin): done once by the
 * Python class, before the object is shared.  The object owns the engine
 * handle at `address` from then on, and its registry bookkeeping (its counts'
 * drop_handle, or a snapshot's unpin): both are released in tp_dealloc, after
 * any finalizer or __del__ that may still read the object, never by a weakref
 * callback that can run while the object is still reachable.  `handle` is a
 * non-owning cdata of the same pointer, for the Python layer's cffi calls. */
static PyObject *reader_bind(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyObject_TypeCheck(args[3], &Registry_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "_bind(handle, address, dialect, registry, counts, pin)");
        return NULL;
    }
    if (self->h != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this handle is bound already");
        return NULL;
    }
    if (cst_engine == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the engine is not bound (cstrie._binding)");
        return NULL;
    }
    void *h = PyLong_AsVoidPtr(args[1]);
    if (h == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a NULL engine handle");
        return NULL;
    }
    if (args[4] != Py_None && !Py_IS_TYPE(args[4], &Counts_Type)) {
        PyErr_SetString(PyExc_TypeError, "counts must be a Counts or None");
        return NULL;
    }
    if (args[4] == Py_None && PyObject_TypeCheck((PyObject *)self, &Writer_Type)) {
        PyErr_SetString(PyExc_TypeError, "a writable handle needs its Counts");
        return NULL;
    }
    int64_t pin = PyLong_AsLongLong(args[5]);
    if (pin == -1 && PyErr_Occurred())
        return NULL;
    /* A dialect with a share-group syntax (MQTT's $share/): patterns that
     * start with '$' are parsed by _shared_args (cstrie.groups). */
    PyObject *prefix = PyObject_GetAttrString(args[2], "share_prefix");
    if (prefix == NULL)
        PyErr_Clear();
    self->share_syntax = prefix != NULL && prefix != Py_None;
    Py_XDECREF(prefix);
    self->handle = Py_NewRef(args[0]);
    self->dialect = Py_NewRef(args[2]);
    self->reg = (Registry *)Py_NewRef(args[3]);
    self->counts = args[4] == Py_None ? NULL : (Counts *)Py_NewRef(args[4]);
    self->pin = pin;
    self->h = h;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(snapshot_doc,
"snapshot() -> Snapshot\n--\n\n"
"A read-only, O(1) snapshot of the current subscriptions.  Its ids stay\n"
"mapped while it is open (registry rule 3).");

/* -- anchors ---------------------------------------------------------------- */

/* Free-threaded builds only: with the GIL no reference count is contended,
 * and a snapshot holds its dialect and registry itself. */
#ifdef Py_GIL_DISABLED

static int anchor_traverse(Anchor *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dialect);
    Py_VISIT(self->reg);
    return 0;
}

/* No tp_clear: a snapshot that holds the anchor reads dialect and reg
 * through it until its dealloc.  A cycle through an anchor (a subscriber
 * that holds a snapshot) is broken by registry_clear. */
static void anchor_dealloc(Anchor *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->dialect);
    Py_CLEAR(self->reg);
    PyObject_GC_Del(self);
}

static PyTypeObject Anchor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cstrie._hotpath.Anchor",
    .tp_basicsize = sizeof(Anchor),
    .tp_dealloc = (destructor)anchor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One thread's reference to a handle's dialect and registry (hotpath.h).",
    .tp_traverse = (traverseproc)anchor_traverse,
};

/* This thread's anchor of self (borrowed: self's table holds it until self
 * is freed), made on first use.  A slot is filled once and never replaced,
 * so a thread that read an anchor from it may take a reference to it at any
 * time while self lives.  Two threads whose numbers agree modulo
 * ANCHOR_SLOTS share one: still correct, only their counts are atomic. */
static Anchor *reader_anchor(Reader *self)
{
    /* acquire: pairs with the release CAS below that published the table,
     * so its zeroed slots are seen as zero */
    _Atomic(Anchor *) *tab = atomic_load_explicit(&self->anchors, memory_order_acquire);
    if (tab == NULL) {
        _Atomic(Anchor *) *mine = PyMem_RawCalloc(ANCHOR_SLOTS, sizeof *mine);
        if (mine == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        for (size_t i = 0; i < ANCHOR_SLOTS; i++)
            atomic_init(&mine[i], NULL);
        tab = NULL;
        /* release: the slots' initial NULLs before the table is seen;
         * acquire on failure: as the load above, for the winner's table */
        if (atomic_compare_exchange_strong_explicit(&self->anchors, &tab, mine,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            tab = mine;
        else
            PyMem_RawFree(mine);
    }
    _Atomic(Anchor *) *slot = &tab[hp_thread_number() % ANCHOR_SLOTS];
    /* acquire: pairs with the release CAS below, so the anchor's fields
     * (and its object header) are seen as they were made */
    Anchor *a = atomic_load_explicit(slot, memory_order_acquire);
    if (a != NULL)
        return a;
    /* No registry lock is held here: the allocation may collect garbage and
     * run finalizers, and one may fill this slot first (then its anchor is
     * used and this one dropped). */
    Anchor *made = PyObject_GC_New(Anchor, &Anchor_Type);
    if (made == NULL)
        return NULL;
    made->dialect = Py_NewRef(self->dialect);
    made->reg = (Registry *)Py_NewRef(self->reg);
    PyObject_GC_Track(made);
    /* release: the anchor's fields before it is seen in the slot;
     * acquire on failure: as the load above, for the other one's anchor */
    if (atomic_compare_exchange_strong_explicit(slot, &a, made, memory_order_acq_rel,
                                                memory_order_acquire))
        return made;
    Py_DECREF(made);
    return a;
}
#endif /* Py_GIL_DISABLED */

static PyObject *reader_snapshot(Reader *self, PyObject *Py_UNUSED(ignored))
{
    if (unbound(self))
        return NULL;
    if (snapshot_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cstrie._hotpath is not configured");
        return NULL;
    }
#ifdef Py_GIL_DISABLED
    Anchor *anchor = reader_anchor(self);
    if (anchor == NULL)
        return NULL;
#endif
    Registry *reg = self->reg;
    /* the pin before the engine snapshot (rule 3), done once it exists */
    int64_t pin = reg_pin(reg);
    if (pin < 0)
        return NULL;
    cst_trie *h = cst_engine->snapshot(self->h, 1);
    if (h == NULL) {
        reg_unpin(reg, pin);
        return PyErr_NoMemory();
    }
    reg_pin_done(reg, pin);
    Reader *snap = (Reader *)snapshot_type->tp_alloc(snapshot_type, 0);
    if (snap == NULL) {
        cst_engine->free(h);
        reg_unpin(reg, pin);
        return NULL;
    }
    snap->h = h;
    snap->handle = NULL; /* made on first use (_h) */
#ifdef Py_GIL_DISABLED
    /* The dialect and the registry are borrowed from this thread's anchor,
     * whose count this thread changes without an atomic operation. */
    snap->anchor = (Anchor *)Py_NewRef(anchor);
    snap->dialect = anchor->dialect;
    snap->reg = anchor->reg;
#else
    /* With the GIL no count is contended: the snapshot holds its own. */
    snap->dialect = Py_NewRef(self->dialect);
    snap->reg = (Registry *)Py_NewRef(reg);
#endif
    snap->counts = NULL;
    snap->pin = pin;
    snap->share_syntax = self->share_syntax;
    return (PyObject *)snap;
}

static PyObject *reader_set_race_hook(Reader *self, PyObject *hook)
{
    Py_XSETREF(self->race_hook, hook == Py_None ? NULL : Py_NewRef(hook));
    Py_RETURN_NONE;
}

static int reader_traverse(Reader *self, visitproc visit, void *arg)
{
    Py_VISIT(self->handle);
    if (self->anchor != NULL) {
        Py_VISIT(self->anchor); /* dialect and reg are borrowed from it */
    } else {
        Py_VISIT(self->dialect);
        Py_VISIT(self->reg);
    }
    _Atomic(Anchor *) *tab = atomic_load_explicit(&self->anchors, memory_order_acquire);
    for (size_t i = 0; tab != NULL && i < ANCHOR_SLOTS; i++) {
        Anchor *a = atomic_load_explicit(&tab[i], memory_order_acquire);
        Py_VISIT(a);
    }
    Py_VISIT(self->counts);
    Py_VISIT(self->race_hook);
    return 0;
}

static int reader_clear(Reader *self)
{
    Py_CLEAR(self->race_hook);
    /* The engine handle stays until dealloc: a finalizer may still read. */
    return 0;
}

/* Also the base dealloc of the Python subclasses (subtype_dealloc decrefs
 * their heap type itself). */
static void reader_dealloc(Reader *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->h != NULL) {
        /* Nothing can read this object any more: give its ids and its
         * engine handle back (see reader_bind). */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        int rc = 0;
        if (self->counts != NULL)
            rc = reg_drop_handle(self->reg, self->counts->serial);
        else if (self->pin > 0)
            rc = reg_unpin(self->reg, self->pin);
        if (rc < 0)
            PyErr_WriteUnraisable((PyObject *)self);
        cst_engine->free(self->h);
        self->h = NULL;
        PyErr_Restore(et, ev, tb);
    }
    Py_CLEAR(self->race_hook);
    Py_CLEAR(self->counts);
    if (self->anchor != NULL) {
        /* borrowed from the anchor, released last */
        self->reg = NULL;
        self->dialect = NULL;
    }
    Py_CLEAR(self->reg);
    Py_CLEAR(self->dialect);
    /* nothing else can read self: the table's plain loads are enough */
    _Atomic(Anchor *) *tab = atomic_load_explicit(&self->anchors, memory_order_relaxed);
    if (tab != NULL) {
        atomic_store_explicit(&self->anchors, NULL, memory_order_relaxed);
        for (size_t i = 0; i < ANCHOR_SLOTS; i++)
            Py_XDECREF(atomic_load_explicit(&tab[i], memory_order_relaxed));
        PyMem_RawFree(tab);
    }
    Py_CLEAR(self->anchor);
    Py_CLEAR(self->handle);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _h: the engine handle as a cffi cdata, for the Python layer's calls; made
 * on first use for the handles made here (snapshot()).  It does not own the
 * handle: this object does. */
static PyObject *reader_get_h(Reader *self, void *closure)
{
    (void)closure;
    if (unbound(self))
        return NULL;
    PyObject *h;
#ifdef Py_GIL_DISABLED
    Py_BEGIN_CRITICAL_SECTION(self);
#endif
    h = self->handle;
    if (h == NULL) {
        PyObject *addr = PyLong_FromVoidPtr(self->h);
        h = addr ? PyObject_CallOneArg(py_make_handle, addr) : NULL;
        Py_XDECREF(addr);
        if (h != NULL)
            self->handle = h;
    }
    Py_XINCREF(h);
#ifdef Py_GIL_DISABLED
    Py_END_CRITICAL_SECTION();
#endif
    return h;
}

static PyGetSetDef reader_getset[] = {
    {"_h", (getter)reader_get_h, NULL, "the engine handle (cffi cdata)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef reader_members[] = {
    {"_dialect", T_OBJECT, offsetof(Reader, dialect), READONLY, "the Dialect"},
    {"_reg", T_OBJECT, offsetof(Reader, reg), READONLY, "the family's Registry"},
    {"_counts", T_OBJECT, offsetof(Reader, counts), READONLY,
     "this handle's pair counts (writable handles), else None"},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef reader_methods[] = {
    {"lookup", (PyCFunction)(void (*)(void))reader_lookup, METH_FASTCALL | METH_KEYWORDS,
     lookup_doc},
    {"has_subscribers", (PyCFunction)(void (*)(void))reader_has_subscribers,
     METH_FASTCALL | METH_KEYWORDS, has_doc},
    {"match", (PyCFunction)(void (*)(void))reader_match, METH_FASTCALL | METH_KEYWORDS,
     match_doc},
    {"lookup_many", (PyCFunction)(void (*)(void))reader_lookup_many,
     METH_FASTCALL | METH_KEYWORDS, many_doc},
    {"route", (PyCFunction)(void (*)(void))reader_route, METH_FASTCALL | METH_KEYWORDS,
     route_doc},
    {"route_by_group", (PyCFunction)(void (*)(void))reader_route_by_group,
     METH_FASTCALL | METH_KEYWORDS, route_by_group_doc},
    {"_bind", (PyCFunction)(void (*)(void))reader_bind, METH_FASTCALL, NULL},
    {"snapshot", (PyCFunction)reader_snapshot, METH_NOARGS, snapshot_doc},
    {"_set_race_hook", (PyCFunction)reader_set_race_hook, METH_O,
     "Tests: hook(attempt) runs after each engine answer of a read, before its ids are "
     "mapped (replays registry rule 4's races); None removes it."},
    {NULL, NULL, 0, NULL},
};




PyTypeObject Reader_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cstrie._hotpath.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The read calls of an engine handle (C base of cstrie.Snapshot).",
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_weaklistoffset = offsetof(Reader, weakreflist),
    .tp_methods = reader_methods,
    .tp_members = reader_members,
    .tp_getset = reader_getset,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef writer_methods[] = {
    {"subscribe", (PyCFunction)(void (*)(void))writer_subscribe,
     METH_FASTCALL | METH_KEYWORDS, subscribe_doc},
    {"unsubscribe", (PyCFunction)(void (*)(void))writer_unsubscribe,
     METH_FASTCALL | METH_KEYWORDS, unsubscribe_doc},
    {"_subscribe_many", (PyCFunction)(void (*)(void))writer_subscribe_many, METH_FASTCALL, NULL},
    {"_copy", (PyCFunction)writer_copy, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

PyTypeObject Writer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cstrie._hotpath.Writer",
    .tp_basicsize = sizeof(Reader),
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_weaklistoffset = offsetof(Reader, weakreflist),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The read and write calls of a writable engine handle (C base of cstrie.Trie).",
    .tp_methods = writer_methods,
    .tp_new = PyType_GenericNew,
};

int reader_module_init(PyObject *m)
{
    Writer_Type.tp_base = &Reader_Type;
#ifdef Py_GIL_DISABLED
    if (PyType_Ready(&Anchor_Type) < 0)
        return -1;
#endif
    if (PyType_Ready(&Reader_Type) < 0 || PyType_Ready(&Writer_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Reader", (PyObject *)&Reader_Type) < 0 ||
        PyModule_AddObjectRef(m, "Writer", (PyObject *)&Writer_Type) < 0)
        return -1;
#define INTERN(var, text)                                \
    if ((var = PyUnicode_InternFromString(text)) == NULL) \
        return -1;
    INTERN(s_shared_args, "_shared_args");
    INTERN(s_groups, "groups");
    INTERN(s_get, "get");
    INTERN(s_find, "find");
#undef INTERN
    return 0;
}
