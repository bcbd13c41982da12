/* The kit of providers a mount makes, for tests (test_kit.h). */
#include "test_kit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "provider.h"
#include "quants_provider.h"

static struct tree_kit *kit;
static pthread_once_t kit_once = PTHREAD_ONCE_INIT;

/* Makes the kit, or ends the test. */
static void kit_make(void)
{
	char err[GGUF_ERR_MAX];
	const struct quants_opts o = { 0 };
	struct quants_mount *qm = quants_mount_new(&o, NULL, err);
	kit = qm ? tree_kit_new(err) : NULL;
	if (!kit || !tree_kit_add(kit, &quants_provider, qm, err)) {
		fprintf(stderr, "test_kit: %s\n", err);
		exit(1);
	}
}

const struct tree_kit *test_kit(void)
{
	pthread_once(&kit_once, kit_make);
	return kit;
}
