/* quiet: see quiet.h. */
#include "quiet.h"

#include "unit.h"

#include "config/config.h"
#include "engine/caps.h"
#include "engine/engine.h"
#include "site/site.h"
#include "server/worker.h"

static int quiet_init(struct runtime *w)
{
    (void)w;
    return 0;
}

static void quiet_fini(struct runtime *w)
{
    (void)w;
}

static const struct engine_ops quiet_engine = {
    .name = "quiet", .init = quiet_init, .fini = quiet_fini};

struct worker *unit_quiet_worker(struct config *cfg, struct site_slot *slot)
{
    site_slot_init(slot, site_adopt(cfg));
    static const struct engine_caps caps;
    struct listener ls = {.fd = -1};
    struct worker *w = NULL;
    const struct worker_parts parts = {
        .cfg = cfg, .eng = &quiet_engine, .caps = &caps, .ls = &ls, .n = 1, .sites = slot};
    CHECK_INT(worker_new(&w, 0, &parts), 0);
    return w;
}

void unit_quiet_worker_free(struct worker *w, struct site_slot *slot)
{
    worker_free(w);
    site_slot_fini(slot);
}
