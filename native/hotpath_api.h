/*
 * hotpath_api.h - the engine's entry points for the CPython fast path.
 *
 * The engine is compiled once, into the cffi module cstrie._native.  The
 * hottest calls (lookups, subscribe, unsubscribe) come from a small CPython
 * extension, cstrie._hotpath, which must call THE SAME engine instance: a
 * second copy would have its own epochs, hash seed and allocator counters.
 * So the engine publishes this table of function pointers
 * (cst_hot_api_table()); the binding layer hands its address to the
 * extension once at import (cstrie/_binding.py), and the extension checks
 * `size` and `version` before using it.  Add members at the end only, and
 * bump CST_HOT_API_VERSION when a signature changes.
 */
#ifndef CSTRIE_HOTPATH_API_H
#define CSTRIE_HOTPATH_API_H

#include <stddef.h>
#include <stdint.h>

#include "cstrie.h"

#define CST_HOT_API_VERSION 6

typedef struct cst_hot_api {
    uint32_t size;     /* sizeof(cst_hot_api) of the engine that made it */
    uint32_t version;  /* CST_HOT_API_VERSION */
    int64_t (*lookup)(cst_trie *t, const char *topic, size_t len, uint64_t *out, size_t cap);
    int (*has_subscribers)(cst_trie *t, const char *topic, size_t len);
    int (*match)(cst_trie *t, const char *topic, size_t len, cst_chunk *out);
    int (*subscribe)(cst_trie *t, const char *pattern, size_t len, uint64_t sub);
    int (*unsubscribe)(cst_trie *t, const char *pattern, size_t len, uint64_t sub);
    int64_t (*validate)(cst_trie *t, const char *s, size_t len, int is_pattern);
    int (*is_readonly)(const cst_trie *t);
    void (*free)(cst_trie *t);  /* the handle's owner (Reader) frees it */
    /* version 3: share groups */
    int (*share_subscribe)(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                           uint64_t sub);
    int (*share_unsubscribe)(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                             uint64_t sub);
    int64_t (*route)(cst_trie *t, const char *topic, size_t len, cst_pick_fn pick, void *arg,
                     uint64_t *out, uint64_t *shares, size_t cap, size_t *nplain);
    /* version 4: long walks call the fast path's hook (cst_set_walk_yield);
     * copies made under the registry's locks */
    void (*set_walk_yield)(cst_yield_fn fn);
    cst_trie *(*snapshot)(cst_trie *t, int readonly);
    /* ... and reads whose ids stay valid until they end (registry slots) */
    void *(*read_enter)(void);
    void (*read_exit)(void *section);
    uint64_t (*epoch)(void);
    uint64_t (*epoch_advance)(void);
    /* version 5: a batch's walks warmed together (lookup_many) */
    int (*warm)(cst_trie *t, const char *const *topics, const size_t *lens, size_t k);
    int (*warm_wanted)(const cst_trie *t);
    int64_t (*lookup_warm)(cst_trie *t, const char *topic, size_t len, uint64_t *out, size_t cap);
    /* version 6: a batch's walks in the same rounds (lookup_many) */
    int64_t (*lookup_many)(cst_trie *t, const char *const *topics, const size_t *lens, size_t k,
                           uint64_t *out, size_t cap, size_t *ends);
} cst_hot_api;

#endif
