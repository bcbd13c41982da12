/* A mount's kit of providers (provider.h: tree_kit_new, tree_kit_add, tree_kit_replace)
 * and the layout of one model's numbers over it (tree_impl.h: tree_layout_make), in the
 * zones of tree_ino.h: the stable root entries in root-table order from 2, each
 * provider's stable range in registration order from 16, then the one open-ended range
 * to zone P; a state's range the providers' per-state widths in registration order. */
#include "tree_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The core's root entries in the root's listing, by (provider, its root): today's order,
 * the providers' roots interleaved. */
static const struct kit_root core_roots[] = {
	{ KIT_META, 0 },        /* metadata */
	{ KIT_TENSORS, 0 },     /* tensors */
	{ KIT_RENDER, 0 },      /* gguf.json */
	{ KIT_RENDER, 1 },      /* summary.txt */
	{ KIT_TENSORS, 1 },     /* stats */
	{ KIT_TENSORS, 2 },     /* stats.tsv */
	{ KIT_MODELFILE, 0 },   /* model.gguf */
};

/* The root entry of k's root table e. */
static const struct tree_root *kit_root_of(const struct tree_kit *k, const struct kit_root *e)
{
	return &k->e[e->prov].p->roots[e->root];
}

/* How many of k's root entries are stable (numbered in [2, 16)). */
static unsigned kit_stable_roots(const struct tree_kit *k)
{
	unsigned n = 0;
	for (unsigned i = 0; i < k->n_roots; i++)
		n += !kit_root_of(k, &k->roots[i])->per_state;
	return n;
}

/* True when name can be a root entry's: a file name, not "." or "..". */
static bool root_name_ok(const char *name)
{
	return name && name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0;
}

/* Why p cannot join k as it is (besides its root names), or NULL. */
static const char *kit_refusal(const struct tree_kit *k, const struct tree_provider *p)
{
	if (atomic_load(&k->frozen))
		return "the kit is in use: a tree was built with it";
	if (!p->node)
		return "a provider without node";
	if (p->n_roots > TREE_ROOTS_MAX || (p->n_roots && !p->roots))
		return "more root entries than a provider has (4)";
	for (unsigned i = 0; i < k->n; i++) {
		if (k->e[i].p == p || strcmp(k->e[i].p->name, p->name) == 0)
			return "a provider of that name is there already";
		if ((k->e[i].p->flags & p->flags & TREE_P_OPEN_END))
			return "a second provider of the open-ended range";
	}
	return NULL;
}

/* Adds p with ctx to k, its root entries to the root table unless core (the core
 * interleaves its own). False with why. */
static bool kit_put(struct tree_kit *k, const struct tree_provider *p, void *ctx, bool core,
                    char why[GGUF_ERR_MAX])
{
	const char *no = !p || !p->name || !p->name[0] ? "a provider without a name"
	               : kit_refusal(k, p);
	if (!no && k->n == TREE_KIT_MAX)
		no = "the kit is full (16 providers)";
	unsigned stable = kit_stable_roots(k);
	for (unsigned j = 0; !no && j < p->n_roots; j++) {
		const char *name = p->roots[j].name;
		if (!root_name_ok(name))
			no = "a root entry's name is no file name";
		for (unsigned i = 0; !no && i < k->n_roots; i++)
			if (strcmp(kit_root_of(k, &k->roots[i])->name, name) == 0)
				no = "a root entry's name is taken";
		for (unsigned i = 0; !no && i < j; i++)
			if (strcmp(p->roots[i].name, name) == 0)
				no = "a root entry's name is taken";
		stable += !p->roots[j].per_state;
	}
	if (!no && !core && stable > TREE_ROOT_ENTRIES_MAX)
		no = "more stable root entries than the root has numbers for (14)";
	if (no) {
		gguf_errf(why, "%s: %s", p && p->name ? p->name : "provider", no);
		return false;
	}
	k->e[k->n] = (struct kit_entry){ .p = p, .ctx = ctx };
	for (unsigned j = 0; !core && j < p->n_roots; j++)
		k->roots[k->n_roots++] = (struct kit_root){ .prov = (uint8_t)k->n, .root = (uint8_t)j };
	k->n++;
	return true;
}

struct tree_kit *tree_kit_new(char why[GGUF_ERR_MAX])
{
	static const struct tree_provider *const core[KIT_CORE] = {
		[KIT_ROOT] = &tree_root_provider, [KIT_META] = &tree_meta_provider,
		[KIT_TENSORS] = &tree_tensors_provider, [KIT_MODELFILE] = &tree_modelfile_provider,
		[KIT_RENDER] = &tree_render_provider,
	};
	struct tree_kit *k = calloc(1, sizeof *k);
	if (!k) {
		gguf_errf(why, "out of memory for a kit of providers");
		return NULL;
	}
	atomic_init(&k->frozen, false);
	for (unsigned i = 0; i < KIT_CORE; i++)
		if (!kit_put(k, core[i], NULL, true, why)) {
			free(k);
			return NULL;
		}
	memcpy(k->roots, core_roots, sizeof core_roots);
	k->n_roots = sizeof core_roots / sizeof core_roots[0];
	return k;
}

void tree_kit_free(struct tree_kit *k)
{
	free(k);
}

bool tree_kit_add(struct tree_kit *k, const struct tree_provider *p, void *ctx,
                  char why[GGUF_ERR_MAX])
{
	return kit_put(k, p, ctx, false, why);
}

/* True when a and b are the same root entries. */
static bool same_roots(const struct tree_provider *a, const struct tree_provider *b)
{
	if (a->n_roots != b->n_roots)
		return false;
	for (unsigned j = 0; j < a->n_roots; j++)
		if (strcmp(a->roots[j].name, b->roots[j].name) != 0 ||
		    a->roots[j].dir != b->roots[j].dir ||
		    a->roots[j].per_state != b->roots[j].per_state)
			return false;
	return true;
}

bool tree_kit_replace(struct tree_kit *k, const struct tree_provider *was,
                      const struct tree_provider *p, void *ctx, char why[GGUF_ERR_MAX])
{
	unsigned i = 0;
	while (i < k->n && k->e[i].p != was)
		i++;
	const char *no = atomic_load(&k->frozen) ? "the kit is in use: a tree was built with it"
	               : i == k->n ? "the provider it replaces is not in the kit"
	               : !p || !p->name || !p->node ? "a provider without a name or node"
	               : !same_roots(was, p) ? "its root entries are not the ones it replaces"
	               : (was->flags & TREE_P_OPEN_END) != (p->flags & TREE_P_OPEN_END)
	                 ? "it takes the open-ended range where the other does not, or the reverse"
	               : NULL;
	for (unsigned j = 0; !no && j < k->n; j++)
		if (j != i && (k->e[j].p == p || strcmp(k->e[j].p->name, p->name) == 0))
			no = "a provider of that name is there already";
	if (no) {
		gguf_errf(why, "%s: %s", p && p->name ? p->name : "provider", no);
		return false;
	}
	k->e[i] = (struct kit_entry){ .p = p, .ctx = ctx };
	return true;
}

/* ---- the layout of one model's numbers ---- */

/* Provider i's widths for m into *w, its per-state root entries counted: 0, or -1 with
 * err. */
static int layout_widths(const struct tree_kit *k, unsigned i, const struct ggufs_model *m,
                         struct tree_widths *w, char err[GGUF_ERR_MAX])
{
	const struct tree_provider *p = k->e[i].p;
	unsigned per_state_roots = 0;
	for (unsigned j = 0; j < p->n_roots; j++)
		per_state_roots += p->roots[j].per_state;
	*w = (struct tree_widths){ .per_state = per_state_roots };
	char why[GGUF_ERR_MAX] = "";
	if (p->widths && p->widths(k->e[i].ctx, m, w, why) < 0) {
		gguf_errf(err, "%s: %s: %s", model_path(m), p->name, why[0] ? why : "refused");
		return -1;
	}
	if (w->per_state < per_state_roots) {
		gguf_errf(err, "%s: %s: fewer numbers a state (%" PRIu64 ") than root entries a "
		          "state (%u)", model_path(m), p->name, w->per_state, per_state_roots);
		return -1;
	}
	return 0;
}

int tree_layout_make(const struct tree_kit *k, const struct ggufs_model *m,
                     struct tree_layout *lay, char err[GGUF_ERR_MAX])
{
	memset(lay, 0, sizeof *lay);
	memset(lay->root_owner, TREE_LAYOUT_NONE, sizeof lay->root_owner);
	lay->open_prov = TREE_KIT_MAX;
	uint64_t next_s = TREE_ZONE_S, w = 0;
	for (unsigned i = 0; i < k->n; i++) {
		struct tree_widths wd;
		if (layout_widths(k, i, m, &wd, err) < 0)
			return -1;
		struct layout_prov *lp = &lay->p[i];
		if (!tree_zone_place(&next_s, wd.stable, TREE_ZONE_P, &lp->stable)) {
			gguf_errf(err, "%s: too many keys and tensors: their files need more than the "
			          "%" PRIu64 " numbers a tree has", model_path(m),
			          TREE_ZONE_P - TREE_ZONE_S);
			return -1;
		}
		lp->n_stable = wd.stable;
		if (!tree_zone_place(&w, wd.per_state, TREE_STATE_WIDTH_MAX, &lp->state_off)) {
			gguf_errf(err, "%s: %s: more numbers a state than a tree has", model_path(m),
			          k->e[i].p->name);
			return -1;
		}
		lp->n_state = wd.per_state;
		if (k->e[i].p->flags & TREE_P_OPEN_END)
			lay->open_prov = i;
	}
	if (lay->open_prov < TREE_KIT_MAX) {
		lay->open = next_s;
		lay->n_open = TREE_ZONE_P - next_s;
	}
	lay->w = w ? w : 1;
	/* the root entries: stable ones numbered from 2 in the listing's order, per-state
	 * ones the first numbers of their provider's state range */
	uint64_t next_root = TREE_ZONE_ROOT;
	unsigned per_state_seen[TREE_KIT_MAX] = { 0 };
	for (unsigned e = 0; e < k->n_roots; e++) {
		const struct kit_root *kr = &k->roots[e];
		if (kit_root_of(k, kr)->per_state) {
			lay->root_no[e] = lay->p[kr->prov].state_off + per_state_seen[kr->prov]++;
		} else {
			lay->root_owner[next_root - TREE_ZONE_ROOT] = kr->prov;
			lay->root_no[e] = next_root++;
		}
	}
	pthread_mutex_init(&lay->tensors_lock, NULL);
	return 0;
}

void tree_layout_free(struct tree_layout *lay)
{
	if (lay->tensors)
		modelfile_tensors_free(lay->tensors);
	free(lay->tensors);
	pthread_mutex_destroy(&lay->tensors_lock);
}
