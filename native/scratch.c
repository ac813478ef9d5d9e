/*
 * scratch.c - per-thread scratch buffers (scratch.h): made on a thread's
 * first engine call, freed by a pthread key destructor when it exits.
 */
#include "scratch.h"

#include <pthread.h>
#include "tls.h"
#include <stdlib.h>

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
CST_TLS scratch *cst_tls_scratch;

static void scratch_free(void *p)
{
    scratch *sc = p;
    if (sc == NULL)
        return;
    free(sc->w);
    free(sc->ids);
    free(sc->uniq);
    free(sc->matched);
    free(sc->shares);
    free(sc->shares_tmp);
    free(sc->path);
    free(sc->upath);
    free(sc->mstack);
    free(sc->sstack);
    free(sc->bits);
    free(sc->kids);
    free(sc->pbits);
    free(sc->twid);
    free(sc->tnext);
    free(sc->tw);
    free(sc->tstamp);
    free(sc->thash);
    free(sc->reads);
    free(sc->warm_w);
    free(sc->warm_front);
    free(sc->rmatch);
    free(sc->bmatched);
    free(sc);
    cst_tls_scratch = NULL;
}

static void scratch_key_init(void) { (void)pthread_key_create(&scratch_key, scratch_free); }

scratch *scratch_make(void)
{
    scratch *sc;
    pthread_once(&scratch_once, scratch_key_init);
    sc = calloc(1, sizeof *sc);
    if (sc == NULL)
        return NULL;
    cst_tls_scratch = sc;
    pthread_setspecific(scratch_key, sc);
    return sc;
}

int scratch_reserve(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*buf, ncap * elem);
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = ncap;
    return 0;
}
