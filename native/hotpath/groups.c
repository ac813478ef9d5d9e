/*
 * groups.c - share groups in the fast path: the Group type (a group's name,
 * its selection policy and its round-robin counter), the pick callback the
 * engine's cst_route calls once per matching group, the hash of a sticky
 * key, and joining / leaving a group (the registry's bookkeeping around
 * cst_share_subscribe / cst_share_unsubscribe).
 *
 * A group is one Python object per name and family (cstrie/groups.py keeps
 * the table); the engine knows it by its registry id, the word below the
 * share marker (native/nodes.h).  So the id -> object map, rule 3 (a
 * snapshot's ids stay mapped) and rule 4 (a read of a live trie sees no id
 * freed under it) cover groups exactly as they cover subscribers: a group's
 * id is counted once per membership in the handle's counts, and freed when
 * its last membership in the family is gone.
 */
#include "hotpath.h"
#include "mix64.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- Group */

static PyObject *group_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"name", "policy", NULL};
    PyObject *name;
    int policy = POLICY_ROUND_ROBIN;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "U|i:Group", kw, &name, &policy))
        return NULL;
    if (policy < 0 || policy >= POLICY_COUNT) {
        PyErr_Format(PyExc_ValueError, "Group policy must be 0..%d, not %d", POLICY_COUNT - 1,
                     policy);
        return NULL;
    }
    Group *g = (Group *)type->tp_alloc(type, 0);
    if (g == NULL)
        return NULL;
    g->name = Py_NewRef(name);
    atomic_init(&g->policy, policy);
    atomic_init(&g->counter, 0);
    return (PyObject *)g;
}

static void group_dealloc(Group *g)
{
    if (g->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)g);
    Py_CLEAR(g->name);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

static PyObject *group_get_policy(Group *g, void *closure)
{
    (void)closure;
    /* relaxed: a policy is a setting; a route that reads the old one is one
     * that ran before the change. */
    return PyLong_FromLong(atomic_load_explicit(&g->policy, memory_order_relaxed));
}

static int group_set_policy(Group *g, PyObject *v, void *closure)
{
    (void)closure;
    if (v == NULL) {
        PyErr_SetString(PyExc_AttributeError, "a group's policy cannot be deleted");
        return -1;
    }
    long p = PyLong_AsLong(v);
    if (p == -1 && PyErr_Occurred())
        return -1;
    if (p < 0 || p >= POLICY_COUNT) {
        PyErr_Format(PyExc_ValueError, "Group policy must be 0..%d, not %ld", POLICY_COUNT - 1, p);
        return -1;
    }
    atomic_store_explicit(&g->policy, (int)p, memory_order_relaxed);
    return 0;
}

static PyObject *group_get_counter(Group *g, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(atomic_load_explicit(&g->counter, memory_order_relaxed));
}

static PyObject *group_repr(Group *g)
{
    static const char *names[] = {"round-robin", "random", "sticky"};
    int p = atomic_load_explicit(&g->policy, memory_order_relaxed);
    return PyUnicode_FromFormat("<cstrie group %R (%s)>", g->name, names[p]);
}

static PyMemberDef group_members[] = {
    {"name", T_OBJECT_EX, offsetof(Group, name), READONLY, "the group's name"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef group_getset[] = {
    {"policy", (getter)group_get_policy, (setter)group_set_policy,
     "0 round-robin, 1 random, 2 sticky (by key)", NULL},
    {"counter", (getter)group_get_counter, NULL, "round-robin picks made so far", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Final (no subclasses): the pick callback tells a group by its exact type. */
PyTypeObject Group_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cstrie._hotpath.Group",
    .tp_basicsize = sizeof(Group),
    .tp_weaklistoffset = offsetof(Group, weakreflist),
    .tp_new = group_new,
    .tp_dealloc = (destructor)group_dealloc,
    .tp_repr = (reprfunc)group_repr,
    .tp_members = group_members,
    .tp_getset = group_getset,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Group(name, policy=0): one share group (queue group) of a trie family.",
};

/* ------------------------------------------------------------- picking */

/* FNV-1a over the bytes, then mixed: the same key hashes the same in every
 * process and run (Python's str hash is salted per process). */
uint64_t key_hash_bytes(const char *p, size_t n)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return mix64(h);
}

int key_hash(PyObject *key, uint64_t *out)
{
    if (PyUnicode_Check(key)) {
        Py_ssize_t n;
        const char *p = PyUnicode_AsUTF8AndSize(key, &n);
        if (p == NULL) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError,
                            "key is not valid text (a lone surrogate cannot be encoded)");
            return -1;
        }
        *out = key_hash_bytes(p, (size_t)n);
        return 0;
    }
    if (PyBytes_Check(key)) {
        *out = key_hash_bytes(PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key));
        return 0;
    }
    if (PyLong_Check(key) && !PyBool_Check(key)) {
        unsigned long long v = PyLong_AsUnsignedLongLongMask(key);
        if (v == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        *out = mix64((uint64_t)v ^ UINT64_C(0x9e3779b97f4a7c15));
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "key must be a str, bytes or int, not %.100s",
                 Py_TYPE(key)->tp_name);
    return -1;
}

/* This thread's random stream for the "random" policy (splitmix64 steps
 * from a per-thread seed): no state shared between threads. */
static uint64_t next_random(void)
{
    static _Thread_local uint64_t state;
    if (state == 0) {
        struct timespec ts;
        timespec_get(&ts, TIME_UTC);
        state = mix64((uint64_t)(uintptr_t)&state ^ (uint64_t)ts.tv_nsec ^
                      ((uint64_t)ts.tv_sec << 32)) | 1;
    }
    state += UINT64_C(0x9e3779b97f4a7c15);
    return mix64(state);
}

int pick_init(pick_arg *a, PyObject *objects, PyObject *key, const char *topic, size_t len)
{
    a->objects = objects;
    a->key = 0;
    a->key_ready = 0;
    a->topic = topic;
    a->topic_len = len;
    /* A given key is checked now (TypeError before the route); the topic is
     * hashed only when a sticky group needs it. */
    if (key != NULL && key != Py_None) {
        if (key_hash(key, &a->key) < 0)
            return -1;
        a->key_ready = 1;
    }
    a->torn = 0;
    a->held = a->held_local;
    a->nheld = 0;
    a->heldcap = sizeof a->held_local / sizeof a->held_local[0];
    return 0;
}

void pick_release(pick_arg *a)
{
    for (size_t i = 0; i < a->nheld; i++)
        Py_DECREF(a->held[i]);
    a->nheld = 0;
    if (a->held != a->held_local)
        PyMem_Free(a->held);
    a->held = a->held_local;
    a->heldcap = sizeof a->held_local / sizeof a->held_local[0];
}

/* Keep obj's reference until pick_release (after the engine call); -1 when
 * there is no memory for it (the reference is then dropped: the route is
 * abandoned and the caller raises MemoryError). */
static int hold(pick_arg *a, PyObject *obj)
{
    if (a->nheld == a->heldcap) {
        size_t ncap = a->heldcap * 2;
        PyObject **nh = PyMem_Malloc(ncap * sizeof *nh);
        if (nh == NULL)
            return -1;
        memcpy(nh, a->held, a->nheld * sizeof *nh);
        if (a->held != a->held_local)
            PyMem_Free(a->held);
        a->held = nh;
        a->heldcap = ncap;
    }
    a->held[a->nheld++] = obj;
    return 0;
}

/* cst_pick_fn: called by cst_route inside its walk, once per group.  It
 * calls no Python code: reads of a list item and of the group's fields. */
int pick_member_index(void *argp, uint64_t share, uint64_t n, uint64_t *k)
{
    pick_arg *a = argp;
    walk_disarm(); /* the walk is over; the picks read Python objects */
    PyObject *obj =
        share < (uint64_t)PY_SSIZE_T_MAX ? list_get_ref(a->objects, (Py_ssize_t)share) : NULL;
    if (obj == NULL)
        PyErr_Clear();
    if (obj != NULL && hold(a, obj) < 0) {
        a->torn = 2; /* out of memory */
        Py_DECREF(obj); /* not ours to keep: the caller's objects list holds it */
        return -1;
    }
    if (obj == NULL || !Py_IS_TYPE(obj, &Group_Type)) {
        /* a freed (or reused) id: this read is torn, route again (rule 4) */
        a->torn = 1;
        return -1;
    }
    Group *g = (Group *)obj;
    int policy = atomic_load_explicit(&g->policy, memory_order_relaxed);
    int how = CST_PICK_INDEX;
    switch (policy) {
    case POLICY_RANDOM:
        /* Lemire's multiply-shift: an unbiased-enough index in [0, n) */
        *k = (uint64_t)(((unsigned __int128)next_random() * n) >> 64);
        break;
    case POLICY_STICKY:
        if (!a->key_ready) {
            a->key = key_hash_bytes(a->topic, a->topic_len);
            a->key_ready = 1;
        }
        *k = a->key;
        how = CST_PICK_HASH;
        break;
    default:
        /* relaxed: the counter only has to hand out each value once; the
         * members it indexes come from the walk's own consistent state. */
        *k = atomic_fetch_add_explicit(&g->counter, 1, memory_order_relaxed) % n;
        break;
    }
    return how; /* obj is released by pick_release, after the engine call */
}

/* --------------------------------------------------- join and leave */

/* After an engine call that added no membership: give back an id made for
 * it, or free one no handle holds a pair of any more.  Under its stripe;
 * `registered` is the object registered under id. */
static int unused(Registry *r, Counts *c, Py_hash_t h, int64_t id, PyObject *registered,
                  int fresh)
{
    if (fresh)
        return reg_free(r, h, (uint64_t)id, registered, 0);
    if (!idmap_get(&c->part[STRIPE(h)], (uint64_t)id))
        return reg_maybe_dead(r, c, h, (uint64_t)id, registered);
    return 0;
}

PyObject *share_update_encoded(Reader *self, PyObject *pattern, const char *s, Py_ssize_t len,
                               PyObject *member, PyObject *group, int insert)
{
    if (!Py_IS_TYPE(group, &Group_Type)) {
        PyErr_Format(PyExc_TypeError, "group must be a cstrie group, not %.100s",
                     Py_TYPE(group)->tp_name);
        return NULL;
    }
    Registry *reg = self->reg;
    Counts *c = self->counts;
    Py_hash_t hm = reg_hash(member), hg = reg_hash(group);
    if (hm == -1 || hg == -1)
        return NULL; /* unhashable member: TypeError, nothing changed */
    Py_ssize_t sm = STRIPE(hm), sg = STRIPE(hg);
    /* Both stripes (index order).  The two lookups are made again when the
     * second dropped the locks for an == (reg_id_of): the first one's answer
     * may be stale then (an id made by an earlier round is found as an
     * existing one, which is always safe to treat so). */
    reg_locks l = {reg, sm, sg, 0};
    reg_locks_take(&l);
    int r, err = 0;
    PyObject *rm = NULL, *rg = NULL; /* the registered member (or one equal to it), group */
    if (insert) {
        int fresh_m = 0, fresh_g = 0;
        int64_t im, ig;
        for (int round = 0;; round++) {
            im = reg_id_for(&l, hm, member, &fresh_m, &rm);
            unsigned d = l.dropped;
            ig = im < 0 ? -1 : reg_id_for(&l, hg, group, &fresh_g, &rg);
            if (ig < 0 || l.dropped == d)
                break;
            if (fresh_g && unused(reg, c, hg, ig, rg, fresh_g) < 0)
                PyErr_Clear(); /* made in this round: give it back, make it again */
            if (round == 64) {
                reg_locks_drop(&l);
                PyErr_SetString(PyExc_RuntimeError,
                                "cstrie registry: the subscribers with this hash kept changing "
                                "while == compared them (try again)");
                return NULL;
            }
        }
        if (ig < 0) {
            if (im > 0 && unused(reg, c, hm, im, rm, fresh_m) < 0)
                PyErr_Clear();
            reg_locks_drop(&l);
            return NULL;
        }
        /* Room for both counts first: once the engine added the membership
         * the bookkeeping must not fail. */
        if (idmap_reserve_for(&c->part[sm], sm == sg ? 2 : 1) < 0 ||
            idmap_reserve_for(&c->part[sg], sm == sg ? 2 : 1) < 0) {
            if (unused(reg, c, hm, im, rm, fresh_m) < 0 ||
                unused(reg, c, hg, ig, rg, fresh_g) < 0)
                PyErr_Clear();
            reg_locks_drop(&l);
            return PyErr_NoMemory();
        }
        r = cst_engine->share_subscribe(self->h, s, (size_t)len, (uint64_t)ig, (uint64_t)im);
        if (r > 0) {
            err = reg_added(c, hm, (uint64_t)im) | reg_added(c, hg, (uint64_t)ig);
        } else {
            err = unused(reg, c, hm, im, rm, fresh_m);
            err |= unused(reg, c, hg, ig, rg, fresh_g);
        }
    } else {
        int64_t im, ig;
        for (int round = 0;; round++) {
            im = reg_id_of(&l, hm, member, &rm);
            unsigned d = l.dropped;
            ig = im > 0 ? reg_id_of(&l, hg, group, &rg) : im;
            if (ig < 0 || l.dropped == d)
                break;
            if (round == 64) {
                PyErr_SetString(PyExc_RuntimeError,
                                "cstrie registry: the subscribers with this hash kept changing "
                                "while == compared them (try again)");
                ig = -1;
                break;
            }
        }
        if (im < 0 || ig < 0) {
            reg_locks_drop(&l);
            return NULL;
        }
        if (im == 0 || ig == 0) {
            reg_locks_drop(&l);
            /* an unknown member or group holds no membership; the pattern
             * is still checked */
            int64_t v = cst_engine->validate(self->h, s, (size_t)len, 1);
            if (v < 0)
                return raise_status(self, v, "pattern", pattern);
            Py_RETURN_FALSE;
        }
        r = cst_engine->share_unsubscribe(self->h, s, (size_t)len, (uint64_t)ig, (uint64_t)im);
        if (r > 0) {
            err = reg_removed(reg, c, hm, (uint64_t)im, rm);
            err |= reg_removed(reg, c, hg, (uint64_t)ig, rg);
        }
    }
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

int groups_module_init(PyObject *m)
{
    if (PyType_Ready(&Group_Type) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Group", (PyObject *)&Group_Type) < 0)
        return -1;
    if (PyModule_AddIntConstant(m, "POLICY_ROUND_ROBIN", POLICY_ROUND_ROBIN) < 0 ||
        PyModule_AddIntConstant(m, "POLICY_RANDOM", POLICY_RANDOM) < 0 ||
        PyModule_AddIntConstant(m, "POLICY_STICKY", POLICY_STICKY) < 0)
        return -1;
    return 0;
}
