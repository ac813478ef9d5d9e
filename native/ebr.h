/*
 * ebr.h - epoch-based reclamation for the cstrie engine.
 *
 * Every engine call that reads shared nodes runs inside one epoch section,
 * opened by ebr_enter() and closed by ebr_exit() before the call returns.  A
 * node that has been unlinked is handed to ebr_retire(), which runs the given
 * release function once no thread can still hold a pointer it read before the
 * unlink.  Nothing here takes a lock or waits for another thread.  The
 * correctness argument and the invariants are at the top of ebr.c.
 */
#ifndef CSTRIE_EBR_H
#define CSTRIE_EBR_H

#include <stdint.h>

typedef struct ebr_record ebr_record;
typedef void (*ebr_release_fn)(void *obj);

/* Open an epoch section for the calling thread (registering it lazily).
 * Sections nest: an inner enter/exit pair only counts, the outermost one
 * publishes the section and reclaims at its end.
 * Returns NULL only if a new thread record could not be allocated. */
ebr_record *ebr_enter(void);
/* Close the section opened by ebr_enter(); may free retired objects. */
void ebr_exit(ebr_record *rec);
/* Try to move the global epoch one step (outside any section of the
 * caller's; inside one it only reads it); the epoch after the try. */
uint64_t ebr_try_advance(void);
/* Defer release(obj) until every section that could have read obj is closed.
 * Must be called inside a section (rec from ebr_enter). */
void ebr_retire(ebr_record *rec, void *obj, ebr_release_fn release);
/* The same from anywhere on the calling thread, inside a section or not (a
 * release function that frees something others may still be reading). */
void ebr_retire_any(void *obj, ebr_release_fn release);
/* The same, for something big (a dropped trie): reclamation runs at the end
 * of this section and at every other thread's next section exit until obj is
 * released (see "Prompt reclamation" in ebr.c). */
void ebr_retire_prompt(ebr_record *rec, void *obj, ebr_release_fn release);
/* Small dense index of the calling thread's record (for striped counters). */
unsigned ebr_record_index(const ebr_record *rec);

/*
 * Test/maintenance helper, called OUTSIDE any section: advance the epoch and
 * free everything any thread (running, idle or finished) retired, as far as
 * other threads' open sections allow.  Returns the number of objects still
 * pending over all records.
 */
int64_t ebr_barrier(void);
/* Objects retired and not yet released, over all records
 * (approximate while other threads run). */
int64_t ebr_pending(void);
/* The global epoch (for tests and the tree dump). */
uint64_t ebr_epoch(void);
/* Release this thread's record now (as thread exit does). Outside sections. */
void ebr_thread_detach(void);

#endif
