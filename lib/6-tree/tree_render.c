/* gguf.json and summary.txt as a provider: the model rendered whole (render_json.h,
 * render_summary.h), sized by rendering once into a counter. The tree of the model's own
 * metadata sizes them when it is built; an edit state's when they are first asked for (a
 * lookup, a listing, a read), so that an edit costs what it changed, not a rendering of
 * every tensor. gguf.json keeps marks to start a read from (render_mark.h). */
#include "tree_impl.h"

#include <errno.h>
#include <stdlib.h>

#include "guard.h"
#include "render_json.h"
#include "render_summary.h"

/* The roles of its nodes. */
enum { RENDER_JSON, RENDER_SUMMARY };

/* gguf.json and summary.txt of one tree. */
struct tree_render {
	const struct tree *t;
	struct tree_node files[2];      /* by role */
	pthread_mutex_t size_lock;
	atomic_bool sized;              /* files' sizes are known */
	struct render_marks json_marks;
};

/* What emit renders: file role of tree t. */
struct rendered {
	const struct tree *t;
	unsigned role;
};

static void emit(const void *arg, struct sink *s, const struct render_mark *from)
{
	const struct rendered *r = arg;
	if (r->role == RENDER_JSON)
		render_json_from(s, r->t->m, &r->t->mf, from);
	else
		render_summary(s, r->t->m);
}

/* Sizes both files (rendered: they describe every key and tensor), keeping gguf.json's
 * marks for the reads, as guard_call runs it. */
static void run_sizing(void *ctx)
{
	struct tree_render *ri = ctx;
	for (unsigned role = RENDER_JSON; role <= RENDER_SUMMARY; role++) {
		struct sink s = sink_counter();
		if (role == RENDER_JSON)
			render_marks_record(&s, &ri->json_marks);
		const struct rendered r = { ri->t, role };
		emit(&r, &s, NULL);
		ri->files[role].size = s.pos;
	}
}

/* Makes sure the sizes are known (done once per tree, by the first caller; the others
 * wait). They render the header, which lies in the shards' mappings: under the SIGBUS
 * guard, and when a page has gone the sizes stay unknown (0) for a later call to try
 * again. */
static void size_rendered(struct tree_render *ri)
{
	if (atomic_load_explicit(&ri->sized, memory_order_acquire))
		return;
	pthread_mutex_lock(&ri->size_lock);
	if (!atomic_load_explicit(&ri->sized, memory_order_relaxed)) {
		bool held = model_header_holds(ri->t->m, NULL) == 0;
		render_marks_free(&ri->json_marks);
		if (held && guard_call(run_sizing, ri) == 0)
			atomic_store_explicit(&ri->sized, true, memory_order_release);
	}
	pthread_mutex_unlock(&ri->size_lock);
}

static void render_free(void *inst)
{
	struct tree_render *ri = inst;
	if (!ri)
		return;
	render_marks_free(&ri->json_marks);
	pthread_mutex_destroy(&ri->size_lock);
	free(ri);
}

static int render_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                       void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	(void)ctx, (void)prev, (void)why;
	struct tree_render *ri = calloc(1, sizeof *ri);
	if (!ri)
		return -ENOMEM;
	ri->t = t;
	pthread_mutex_init(&ri->size_lock, NULL);
	atomic_init(&ri->sized, false);
	ri->files[RENDER_JSON] = (struct tree_node){ .ino = r->root[0], .parent = TREE_ROOT_INO,
		.kind = TREE_JSON, .prov = (uint16_t)r->prov, .role = RENDER_JSON,
		.name = "gguf.json" };
	ri->files[RENDER_SUMMARY] = (struct tree_node){ .ino = r->root[1],
		.parent = TREE_ROOT_INO, .kind = TREE_SUMMARY, .prov = (uint16_t)r->prov,
		.role = RENDER_SUMMARY, .name = "summary.txt" };
	if (!base)   /* the model's own tree, made at mount: sized now */
		size_rendered(ri);
	*inst = ri;
	return 0;
}

static uint64_t render_bytes(const void *inst)
{
	const struct tree_render *ri = inst;
	return sizeof *ri + ri->json_marks.cap * sizeof *ri->json_marks.v;
}

/* A file handed out sized. */
static const struct tree_node *render_node(void *inst, uint64_t ino)
{
	struct tree_render *ri = inst;
	for (unsigned role = RENDER_JSON; role <= RENDER_SUMMARY; role++)
		if (ino == ri->files[role].ino) {
			size_rendered(ri);
			return &ri->files[role];
		}
	return NULL;
}

/* Dated by the edit state, its bytes the state's. */
static void render_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	tree_node_attr(r->tree, r->n, true, a);
	a->flags = NODE_BYTES_FOLLOW_EDITS;
}

static int64_t render_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                           uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open;
	if (!tree_clamp(r->n, off, &len))
		return 0;
	const struct tree_render *ri = r->inst;
	const struct rendered what = { r->tree, r->n->role };
	return tree_read_rendered(r->tree, emit, &what,
	                          r->n->role == RENDER_JSON ? &ri->json_marks : NULL, buf, len,
	                          off, why);
}

const struct render_marks *tree_render_json_marks(const struct tree *t,
                                                  const struct tree_node *n)
{
	const struct tree_render *ri = t->inst[KIT_RENDER];
	return n->role == RENDER_JSON ? &ri->json_marks : NULL;
}

static const struct tree_root render_roots[] = {
	{ "gguf.json", false, false }, { "summary.txt", false, false },
};

const struct tree_provider tree_render_provider = {
	.name = "render",
	.roots = render_roots,
	.n_roots = 2,
	.make = render_make,
	.free = render_free,
	.bytes = render_bytes,
	.node = render_node,
	.attr = render_attr,
	.read = render_read,
};
