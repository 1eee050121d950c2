/* libFuzzer target for the --config YAML reader (cfgfile.c) and the option parser behind it
 * (options_set): any bytes give either a configuration (top level and sites, freed without a
 * leak) or an exit status of 1 or 2 after messages, never a crash, a hang on aliases, or a read
 * past the input. (Every rejected key prints a line on stderr: the fuzz log holds them.) */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfgfile.h"
#include "config/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1); /* exactly size bytes: ASan flags any over-read */
    memcpy(text, data, size);
    struct config cfg;
    struct cfgfile *doc = NULL;
    options_init(&cfg);
    int rc = cfgfile_load_buffer(&cfg, "fuzz.yaml", text, size, &doc);
    assert(rc == 0 || rc == 1 || rc == 2);
    assert((rc == 0) == (doc != NULL) || (rc == 0 && size == 0));
    if (rc == 0 && doc) {
        rc = cfgfile_sites(&cfg, doc);
        assert(rc == 0 || rc == 2);
        for (int i = 0; rc == 0 && i < cfg.num_sites; i++)
            assert(cfg.sites[i].pool_owner == &cfg && cfg.sites[i].num_hosts <= CONFIG_MAX_RULES);
    }
    cfgfile_free(doc);
    options_free(&cfg);
    free(text);
    return 0;
}
