/*
 * write_engine.c - the cost of one subscribe and one unsubscribe through the
 * engine's public C API only (cstrie.h): a C loop with no Python and no
 * registry around it, for before/after pairs of engine changes.
 *
 *   write_engine PAIRS [--dialect mqtt|amqp] [--rounds N]
 *
 * PAIRS is a text file of "pattern<TAB>subscriber" lines, the subscriber a
 * number >= 1 (stress/lab/walk_files.py writes the `vs-dict` write pairs).
 * Each round makes a fresh trie, subscribes every pair in file order, then
 * unsubscribes them in the same order (what `cstrie bench --scenario
 * vs-dict` times from Python); the best round of each phase is printed in ns
 * per call.  Under `valgrind --tool=callgrind` the instructions per call are
 * the total over 2 * rounds * pairs.
 *
 * Build: make -C stress write   (-O2 -mpopcnt like the Python build)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "write_engine"
#include "lines.h" /* die, read_lines, dialect_of */

int main(int argc, char **argv)
{
    const char *dname = "mqtt";
    int rounds = 7;
    if (argc < 2)
        die("usage: write_engine PAIRS [--dialect mqtt|amqp] [--rounds N]");
    for (int a = 2; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "--dialect") == 0)
            dname = argv[a + 1];
        else if (strcmp(argv[a], "--rounds") == 0)
            rounds = atoi(argv[a + 1]);
        else
            die("unknown option");
    }
    if (rounds < 1)
        die("--rounds at least 1");
    cst_dialect d = dialect_of(dname);
    size_t n, *len;
    char **lines = read_lines(argv[1], &n, &len);
    uint64_t *sub = xcalloc(n ? n : 1, sizeof *sub);
    for (size_t i = 0; i < n; i++) {
        char *tab = memchr(lines[i], '\t', len[i]);
        if (tab == NULL || (sub[i] = strtoull(tab + 1, NULL, 10)) == 0)
            die("a line of PAIRS is not pattern<TAB>subscriber (>= 1)");
        len[i] = (size_t)(tab - lines[i]);
    }
    double best_sub = 1e30, best_unsub = 1e30;
    for (int r = 0; r < rounds; r++) {
        cst_trie *t = cst_new(&d);
        if (t == NULL)
            die("cst_new failed");
        double t0 = now_s();
        for (size_t i = 0; i < n; i++)
            if (cst_subscribe(t, lines[i], len[i], sub[i]) < 0)
                die("a pattern of PAIRS is invalid in the dialect");
        double t1 = now_s();
        for (size_t i = 0; i < n; i++)
            if (cst_unsubscribe(t, lines[i], len[i], sub[i]) < 0)
                die("an unsubscribe failed");
        double t2 = now_s();
        if (cst_len(t) != 0)
            die("pairs left after unsubscribing every one");
        cst_free(t);
        best_sub = t1 - t0 < best_sub ? t1 - t0 : best_sub;
        best_unsub = t2 - t1 < best_unsub ? t2 - t1 : best_unsub;
    }
    double per = n ? 1e9 / (double)n : 0.0;
    printf("%s: %zu pairs, best of %d rounds: subscribe %.1f ns, unsubscribe %.1f ns, pair %.1f "
           "ns\n",
           dname, n, rounds, best_sub * per, best_unsub * per, (best_sub + best_unsub) * per);
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines), free(len), free(sub);
    return 0;
}
