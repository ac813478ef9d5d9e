/*
 * hotpath_api.c - the table of engine entry points handed to the CPython fast
 * path (see hotpath_api.h).
 */
#include "hotpath_api.h"

static const cst_hot_api table = {
    .size = sizeof(cst_hot_api),
    .version = CST_HOT_API_VERSION,
    .lookup = cst_lookup,
    .has_subscribers = cst_has_subscribers,
    .match = cst_match,
    .subscribe = cst_subscribe,
    .unsubscribe = cst_unsubscribe,
    .validate = cst_validate,
    .is_readonly = cst_is_readonly,
    .free = cst_free,
    .share_subscribe = cst_share_subscribe,
    .share_unsubscribe = cst_share_unsubscribe,
    .route = cst_route,
    .set_walk_yield = cst_set_walk_yield,
    .snapshot = cst_snapshot,
    .read_enter = cst_read_enter,
    .read_exit = cst_read_exit,
    .epoch = cst_epoch,
    .epoch_advance = cst_epoch_advance,
    .warm = cst_warm,
    .warm_wanted = cst_warm_wanted,
    .lookup_warm = cst_lookup_warm,
    .lookup_many = cst_lookup_many,
};

const void *cst_hot_api_table(void) { return &table; }
