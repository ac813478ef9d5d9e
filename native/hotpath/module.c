/*
 * module.c - cstrie._hotpath: the CPython fast path's module.
 *
 * At import the binding layer (cstrie/_binding.py) calls
 *   bind_engine(address of cst_hot_api_table())   - the engine's entry points,
 *   configure(raise_status, make_handle, Snapshot) - where engine errors go,
 * and registers after_fork_child with os.register_at_fork.  The module
 * declares that it does not need the GIL: its state is set once at import,
 * and its types synchronise with the registry's locks and the 3.13 *Ref
 * APIs (see compat.h).
 */
#include "hotpath.h"

const cst_hot_api *cst_engine;
CST_TLS walk_state hp_walk;

/* cst_yield_fn: a walk armed by a hot read has run long; give the GIL up
 * until the read disarms (once per call). */
static void walk_yield(void)
{
    if (hp_walk.armed && hp_walk.saved == NULL)
        hp_walk.saved = PyEval_SaveThread();
}
PyObject *cst_FREE;

CST_TLS unsigned hp_thread_number_1;

unsigned hp_thread_number_new(void)
{
    static _Atomic unsigned next;
    hp_thread_number_1 = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1;
    return hp_thread_number_1 - 1;
}
static PyObject *py_raise_status;

/* ---------------------------------------------------------------- FREE */
static PyObject *free_repr(PyObject *self)
{
    (void)self;
    return PyUnicode_FromString("<free id slot>");
}

static PyTypeObject Free_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cstrie._hotpath.Free",
    .tp_basicsize = sizeof(PyObject),
    .tp_repr = free_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The content of a registry slot whose id is not in use (registry rule 1).",
};

/* ------------------------------------------------------------- errors */
PyObject *raise_status(Reader *self, int64_t status, const char *what, PyObject *text)
{
    if (py_raise_status == NULL) {
        PyErr_Format(PyExc_RuntimeError, "cstrie engine: status %lld", (long long)status);
        return NULL;
    }
    PyObject *r = PyObject_CallFunction(py_raise_status, "LOsO", (long long)status,
                                        self->dialect ? self->dialect : Py_None, what, text);
    if (r != NULL) {
        Py_DECREF(r);
        PyErr_Format(PyExc_RuntimeError, "cstrie engine: status %lld was not raised",
                     (long long)status);
    }
    return NULL;
}

/* ----------------------------------------------------------- functions */
static PyObject *bind_engine(PyObject *module, PyObject *arg)
{
    (void)module;
    const cst_hot_api *api = PyLong_AsVoidPtr(arg);
    if (api == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "bind_engine: a NULL table");
        return NULL;
    }
    if (api->size < sizeof(cst_hot_api) || api->version != CST_HOT_API_VERSION) {
        PyErr_Format(PyExc_ImportError,
                     "cstrie._hotpath was built for engine table version %d (%zu bytes); the "
                     "engine has version %u (%u bytes): rebuild the package",
                     CST_HOT_API_VERSION, sizeof(cst_hot_api), api->version, api->size);
        return NULL;
    }
    cst_engine = api;
    api->set_walk_yield(walk_yield);
    Py_RETURN_NONE;
}

PyObject *py_make_handle;
PyTypeObject *snapshot_type;

static PyObject *configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyCallable_Check(args[0]) || !PyCallable_Check(args[1]) ||
        !PyType_Check(args[2]) || !PyType_IsSubtype((PyTypeObject *)args[2], &Reader_Type)) {
        PyErr_SetString(PyExc_TypeError,
                        "configure(raise_status, make_handle, snapshot_type): two callables "
                        "and a subclass of Reader");
        return NULL;
    }
    Py_XSETREF(py_raise_status, Py_NewRef(args[0]));
    Py_XSETREF(py_make_handle, Py_NewRef(args[1]));
    Py_XSETREF(snapshot_type, (PyTypeObject *)Py_NewRef(args[2]));
    Py_RETURN_NONE;
}

static PyObject *after_fork_child(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    (void)module;
    registry_after_fork_child();
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"bind_engine", bind_engine, METH_O,
     "bind_engine(address): the engine's cst_hot_api table (from cstrie._native)."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(raise_status, make_handle, snapshot_type): the function that turns engine "
     "statuses into exceptions, the one that makes a cffi handle of an address, and the "
     "class of the snapshots snapshot() makes."},
    {"after_fork_child", after_fork_child, METH_NOARGS,
     "Reset every registry lock in the child of a fork (other threads are gone)."},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *m)
{
    if (PyModule_AddFunctions(m, content_methods) < 0)
        return -1;
    if (PyType_Ready(&Free_Type) < 0)
        return -1;
    cst_FREE = PyObject_New(PyObject, &Free_Type);
    if (cst_FREE == NULL || PyModule_AddObjectRef(m, "FREE", cst_FREE) < 0)
        return -1;
    if (PyModule_AddIntConstant(m, "MAX_ATTEMPTS", MAX_ATTEMPTS) < 0 ||
        PyModule_AddIntConstant(m, "STRIPES", STRIPES) < 0 ||
        PyModule_AddIntConstant(m, "LOCAL_FREE", LOCAL_FREE) < 0)
        return -1;
    if (registry_module_init(m) < 0 || reader_module_init(m) < 0 || groups_module_init(m) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#ifdef Py_GIL_DISABLED
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cstrie._hotpath",
    .m_doc = "The CPython fast path of cstrie: lookups and updates straight into the engine.",
    .m_size = 0,
    .m_methods = module_methods,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__hotpath(void) { return PyModuleDef_Init(&module_def); }
