/*
 * main.c - the unit tests of the cstrie C engine (native/): runs the tests
 * of every tests/native/test_*.c in one program, in the order below, or
 * those named on the command line.
 *
 * The program ends with the line "N passed, M failed" and exits non-zero
 * when M > 0.  Every test frees what it creates; at the end, after
 * cst_reclaim(), the engine's live allocation count must be back to where
 * it started.
 *
 * Tests that can hang on an engine bug (forced hash collisions) run in a
 * forked child guarded by a progress watchdog (run_isolated, unit.c), so a
 * livelock is reported as a failure instead of stalling CI.
 *
 * Build: see stress/Makefile (gcc -std=c11 -D_GNU_SOURCE -I native ...).
 */
#include "unit.h"

typedef struct test {
    const char *name;
    void (*fn)(void);
} test;

int main(int argc, char **argv)
{
    static const test tests[] = {
        {"subscribe_unsubscribe", test_subscribe_unsubscribe},
        {"forbidden_and_max_levels", test_forbidden_and_max_levels},
        {"amqp_lookup", test_amqp_lookup},
        {"mqtt_lookup", test_mqtt_lookup},
        {"has_subscribers", test_has_subscribers},
        {"match_chunk", test_match_chunk},
        {"subscribers", test_subscribers},
        {"count_only_null_buffer", test_count_only_null_buffer},
        {"lookup_batch", test_lookup_batch},
        {"answer_each_once", test_answer_each_once},
        {"snapshots", test_snapshots},
        {"clear", test_clear},
        {"len_and_iteration", test_len_and_iteration},
        {"big_subscriber_set", test_big_subscriber_set},
        {"wide_level", test_wide_level},
        {"collisions", test_collisions},
        {"multi_wildcards", test_multi_wildcards},
        {"oom", test_oom},
        {"numbering", test_numbering},
        {"alloc_counters", test_alloc_counters},
        {"block_build", test_block_build},
        {"build_offsets", test_build_offsets},
        {"deep_levels", test_deep_levels},
        {"prompt_reclaim", test_prompt_reclaim},
        {"share_groups", test_share_groups},
        {"walk_one_state", test_walk_one_state},
        {"topic_index", test_topic_index},
        {"cache", test_cache},
        {"warm", test_warm},
        {"fork_reclaims", test_fork_reclaims},
        {"idle_thread_garbage", test_idle_thread_garbage}, /* last: starts a thread */
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    int64_t start = cst_live_allocations();
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
        if (argc > 1) {
            int wanted = 0;
            for (int a = 1; a < argc; a++)
                wanted |= strcmp(argv[a], tests[i].name) == 0;
            if (!wanted)
                continue;
        }
        long f0 = g_fail;
        double t0 = now_s();
        tests[i].fn();
        printf("%-24s %s (%.2f s)\n", tests[i].name, g_fail == f0 ? "ok" : "FAILED",
               now_s() - t0);
    }
    /* Leaks: every trie and snapshot is freed. */
    CHECK_EQ(cst_reclaim(), 0);
    CHECK_EQ(cst_live_allocations(), start);
    if (g_iter_empty_entries)
        printf("note: cst_iter_next returned %ld partial entries with no ids\n",
               g_iter_empty_entries);
    printf("%ld passed, %ld failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
