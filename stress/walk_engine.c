/*
 * walk_engine.c - the cost of one lookup's walk, through the engine's public
 * C API only (cstrie.h): a C loop with no Python around it, for before/after
 * pairs of engine changes.
 *
 *   walk_engine FILTERS TOPICS [--dialect mqtt|amqp] [--passes N]
 *               [--mode plain|warm|batch]
 *
 * FILTERS and TOPICS are text files, one pattern or topic a line
 * (stress/lab/walk_files.py writes the benchmark suite's workloads).  Pattern
 * j is subscribed with subscriber j + 1 into one trie, in file order; then
 * every topic is looked up, --passes times (default 10), and the best pass is
 * printed in ns per lookup with the ids per lookup.  Modes:
 *
 *   plain   cst_lookup;
 *   warm    cst_lookup_warm (what Trie.lookup calls: on a trie of over 50,000
 *           pairs the walk runs in rounds that overlap its misses);
 *   batch   cst_lookup_many over 16 topics at a time (what Trie.lookup_many
 *           does per group of 16: their walks in the same rounds).
 *
 * Run it under `valgrind --tool=callgrind` or cachegrind for instruction and
 * miss counts per lookup (the difference of a 3-pass and a 1-pass run, halved,
 * over the topics): unlike times on a shared machine they repeat to a percent
 * or two.  docs/benchmarks.md, "The walk as one loop", has the method.
 *
 * Build: make -C stress walk   (-O2 -mpopcnt like the Python build)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "walk_engine"
#include "lines.h" /* die, read_lines, dialect_of */

#define BATCH 16
#define OUT_CAP 65536

int main(int argc, char **argv)
{
    const char *dname = "mqtt", *mode = "warm";
    int passes = 10;
    if (argc < 3)
        die("usage: walk_engine FILTERS TOPICS [--dialect mqtt|amqp] [--passes N] "
            "[--mode plain|warm|batch]");
    for (int a = 3; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "--dialect") == 0)
            dname = argv[a + 1];
        else if (strcmp(argv[a], "--passes") == 0)
            passes = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "--mode") == 0)
            mode = argv[a + 1];
        else
            die("unknown option");
    }
    int m = strcmp(mode, "plain") == 0 ? 0 : strcmp(mode, "warm") == 0 ? 1
          : strcmp(mode, "batch") == 0 ? 2 : -1;
    if (m < 0 || passes < 1)
        die("--mode is plain, warm or batch; --passes at least 1");
    cst_dialect d = dialect_of(dname);
    size_t nf, nt, *flen, *tlen;
    char **fs = read_lines(argv[1], &nf, &flen), **ts = read_lines(argv[2], &nt, &tlen);
    cst_trie *t = cst_new(&d);
    if (t == NULL)
        die("cst_new failed");
    for (size_t i = 0; i < nf; i++)
        if (cst_subscribe(t, fs[i], flen[i], (uint64_t)i + 1) < 0)
            die("a pattern of FILTERS is invalid in the dialect");
    uint64_t *out = xcalloc(OUT_CAP, sizeof *out);
    double best = 1e30;
    int64_t ids = 0;
    for (int p = 0; p < passes; p++) {
        int64_t got = 0;
        double t0 = now_s();
        for (size_t i = 0; i < nt; i++) {
            int64_t r;
            if (m == 2) {
                size_t k = nt - i < BATCH ? nt - i : BATCH, ends[BATCH];
                r = cst_lookup_many(t, (const char *const *)ts + i, tlen + i, k, out, OUT_CAP,
                                    ends);
                if (r > OUT_CAP)
                    die("a batch's answers outgrew the buffer");
                i += k - 1;
            } else {
                r = m == 1 ? cst_lookup_warm(t, ts[i], tlen[i], out, OUT_CAP)
                           : cst_lookup(t, ts[i], tlen[i], out, OUT_CAP);
            }
            if (r < 0)
                die("a topic of TOPICS is invalid in the dialect");
            got += r;
        }
        double dt = now_s() - t0;
        if (dt < best)
            best = dt;
        ids = got;
    }
    printf("%s %s: %zu filters, %zu topics, %.2f ids per lookup, best of %d passes: %.1f ns per "
           "lookup\n",
           mode, dname, nf, nt, nt ? (double)ids / (double)nt : 0.0, passes,
           nt ? best / (double)nt * 1e9 : 0.0);
    cst_free(t);
    free(out);
    for (size_t i = 0; i < nf; i++)
        free(fs[i]);
    for (size_t i = 0; i < nt; i++)
        free(ts[i]);
    free(fs), free(ts), free(flen), free(tlen);
    return 0;
}
