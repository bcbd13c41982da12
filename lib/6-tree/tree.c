/* The tree core (tree.h): a tree built from a kit of providers, each number found its
 * provider by the layout of its zones (tree_impl.h), and every call of tree.h asked of
 * that provider; the refs a namespace takes (provider.h: tree_ref, tree_ref_child). */
#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guard.h"
#include "node.h"

uint64_t tree_root_no(const struct tree *t, unsigned e)
{
	const struct kit_root *kr = &t->kit->roots[e];
	const bool per_state = t->kit->e[kr->prov].p->roots[kr->root].per_state;
	return per_state ? t->state_first + t->lay->root_no[e] : t->lay->root_no[e];
}

void tree_range_of(const struct tree *t, unsigned i, struct tree_range *r)
{
	const struct tree_layout *lay = t->lay;
	const struct layout_prov *lp = &lay->p[i];
	*r = (struct tree_range){ .stable = lp->stable, .n_stable = lp->n_stable,
	                          .state = t->state_first + lp->state_off, .n_state = lp->n_state,
	                          .prov = i };
	if (i == lay->open_prov) {
		r->open = lay->open;
		r->n_open = lay->n_open;
	}
	unsigned j = 0;
	for (unsigned e = 0; e < t->kit->n_roots && j < TREE_ROOTS_MAX; e++)
		if (t->kit->roots[e].prov == i)
			r->root[j++] = tree_root_no(t, e);
}

const struct modelfile_tensors *tree_tensor_layout(const struct tree *t,
                                                   const struct ggufs_model *m,
                                                   char err[GGUF_ERR_MAX])
{
	struct tree_layout *lay = t->lay;
	pthread_mutex_lock(&lay->tensors_lock);
	if (!lay->tensors) {
		struct modelfile_tensors *mt = calloc(1, sizeof *mt);
		if (!mt)
			gguf_errf(err, "%s: out of memory for model.gguf", model_path(m));
		else if (modelfile_tensors_build(m, mt, err) < 0) {
			free(mt);
			mt = NULL;
		}
		lay->tensors = mt;
	}
	const struct modelfile_tensors *mt = lay->tensors;
	pthread_mutex_unlock(&lay->tensors_lock);
	return mt;
}

/* Builds the tree of m with kit k, whose keys have the ids of state s (or are the file's
 * own, s NULL), with base's layout and shared instances when base is given, and each
 * provider lent prev's instance (the tree of the state s was made from). */
static struct tree *build(const struct ggufs_model *m, const struct tree_kit *k,
                          struct ov_state *s, const struct tree *base, const struct tree *prev,
                          char err[GGUF_ERR_MAX])
{
	struct tree *t = calloc(1, sizeof *t + k->n * sizeof *t->inst);
	guard_install();
	if (!t)
		goto oom;
	atomic_init(&t->refs, 1);
	atomic_store(&((struct tree_kit *)k)->frozen, true);
	t->kit = k;
	t->m = m;
	t->state = s ? ov_get(s) : NULL;
	t->base = base;
	t->lay = base ? base->lay : malloc(sizeof *t->lay);
	if (!t->lay)
		goto oom;
	if (!base && tree_layout_make(k, m, t->lay, err) < 0) {
		free(t->lay);
		t->lay = NULL;
		goto fail;
	}
	if (!tree_zone_state_first(s ? s->gen : 0, t->lay->w, &t->state_first)) {
		gguf_errf(err, "%s: no numbers are left for another edit state", model_path(m));
		goto fail;
	}
	/* a state that holds the model's own metadata is the model's own file, byte for
	 * byte (its padding need not be zeros, as a rebuilt header's is) */
	const bool own = s && base && ov_unchanged(s, base->m);
	const struct ggufs_model *shown = own ? base->m : m;
	const struct modelfile_tensors *mt = NULL;
	if ((model_n_files(shown) > 1 || model_edited(shown)) &&
	    !(mt = tree_tensor_layout(t, shown, err)))
		goto fail;
	if (modelfile_build_with(shown, mt, &t->mf, err) < 0)
		goto fail;
	for (unsigned i = 0; i < k->n; i++, t->n_made++) {
		const struct tree_provider *p = k->e[i].p;
		if (base && (p->flags & TREE_P_SHARED)) {
			t->inst[i] = base->inst[i];
			continue;
		}
		if (!p->make)
			continue;
		struct tree_range r;
		tree_range_of(t, i, &r);
		char why[GGUF_ERR_MAX] = "";
		int rc = p->make(k->e[i].ctx, t, &r, base ? base->inst[i] : NULL,
		                 prev ? prev->inst[i] : NULL, &t->inst[i], why);
		if (rc == -ENOMEM && !why[0])
			goto oom;
		if (rc < 0) {
			gguf_errf(err, "%s: %s: %s", model_path(m), p->name, why[0] ? why : strerror(-rc));
			goto fail;
		}
	}
	return t;
oom:
	gguf_errf(err, "%s: out of memory for the tree of %" PRIu64 " keys and %" PRIu64
	          " tensors", model_path(m), model_meta(m)->n_kv, model_n_tensors(m));
fail:
	tree_free(t);
	return NULL;
}

struct tree *tree_build(const struct ggufs_model *m, const struct tree_kit *k,
                        char err[GGUF_ERR_MAX])
{
	return build(m, k, NULL, NULL, NULL, err);
}

struct tree *tree_build_state(const struct tree *base, struct ov_state *s,
                              const struct tree *prev, char err[GGUF_ERR_MAX])
{
	return build(s->view, base->kit, s, base, prev, err);
}

struct tree *tree_hold(struct tree *t)
{
	atomic_fetch_add(&t->refs, 1);
	return t;
}

void tree_release(struct tree *t)
{
	if (t && atomic_fetch_sub(&t->refs, 1) == 1)
		tree_free(t);
}

void tree_free(struct tree *t)
{
	if (!t)
		return;
	for (unsigned i = t->n_made; i-- > 0;) {
		const struct tree_provider *p = t->kit->e[i].p;
		if (!(t->base && (p->flags & TREE_P_SHARED)) && p->free && t->inst[i])
			p->free(t->inst[i]);
	}
	ov_put(t->state);
	free(t->key_time);
	modelfile_free(&t->mf);
	if (!t->base && t->lay) {
		tree_layout_free(t->lay);
		free(t->lay);
	}
	free(t);
}

uint64_t tree_held_bytes(const struct tree *t)
{
	uint64_t b = sizeof *t + t->kit->n * sizeof *t->inst + modelfile_bytes(&t->mf);
	for (unsigned i = 0; i < t->n_made; i++) {
		const struct tree_provider *p = t->kit->e[i].p;
		if (!(t->base && (p->flags & TREE_P_SHARED)) && p->bytes && t->inst[i])
			b += p->bytes(t->inst[i]);
	}
	if (t->key_time)
		b += t->state->n * sizeof *t->key_time;
	if (t->state)
		b += ov_state_bytes(t->state);
	if (!t->base)
		b += sizeof *t->lay + (t->lay->tensors ? modelfile_tensors_bytes(t->lay->tensors) : 0);
	return b;
}

const struct ggufs_model *tree_model(const struct tree *t)
{
	return t->m;
}

const struct ov_state *tree_state(const struct tree *t)
{
	return t->state;
}

uint64_t tree_key_ino(const struct tree *t, uint64_t k)
{
	const struct tree_node *n = tree_meta_key(t, k);
	return n ? n->ino : 0;
}

/* The place in t's kit of the provider of number ino, or -1 for a number t has not. */
static int owner_of(const struct tree *t, uint64_t ino)
{
	const struct tree_layout *lay = t->lay;
	if (ino == TREE_ROOT_INO)
		return KIT_ROOT;
	if (ino < TREE_ZONE_ROOT)
		return -1;
	if (ino < TREE_ZONE_S) {
		const uint8_t o = lay->root_owner[ino - TREE_ZONE_ROOT];
		return o == TREE_LAYOUT_NONE ? -1 : o;
	}
	const unsigned n = t->kit->n;
	if (ino < TREE_ZONE_P) {
		for (unsigned i = 0; i < n; i++)
			if (ino >= lay->p[i].stable && ino - lay->p[i].stable < lay->p[i].n_stable)
				return (int)i;
		return lay->open_prov < n && ino >= lay->open ? (int)lay->open_prov : -1;
	}
	if (ino < t->state_first || ino - t->state_first >= lay->w)
		return -1;   /* another state's, or no tree's */
	const uint64_t off = ino - t->state_first;
	for (unsigned i = 0; i < n; i++)
		if (off >= lay->p[i].state_off && off - lay->p[i].state_off < lay->p[i].n_state)
			return (int)i;
	return -1;
}

const struct tree_node *tree_node(const struct tree *t, uint64_t ino)
{
	const int i = owner_of(t, ino);
	return i < 0 ? NULL : t->kit->e[i].p->node(t->inst[i], ino);
}

/* The directory of number dir of t, or NULL. */
static const struct tree_node *dir_node(const struct tree *t, uint64_t dir)
{
	const struct tree_node *d = tree_node(t, dir);
	return d && (d->flags & TREE_NODE_DIR) ? d : NULL;
}

const struct tree_node *tree_lookup(const struct tree *t, uint64_t dir, const char *name)
{
	const struct tree_node *d = dir_node(t, dir);
	if (!d)
		return NULL;
	struct node_ref r;
	tree_ref_of(t, d, &r);
	return r.p->lookup ? r.p->lookup(&r, name) : NULL;
}

uint64_t tree_dir_count(const struct tree *t, uint64_t dir)
{
	const struct tree_node *d = dir_node(t, dir);
	if (!d)
		return 0;
	struct node_ref r;
	tree_ref_of(t, d, &r);
	return r.p->count ? r.p->count(&r, NULL) : 0;
}

const struct tree_node *tree_dir_child(const struct tree *t, uint64_t dir, uint64_t i)
{
	const struct tree_node *d = dir_node(t, dir);
	if (!d)
		return NULL;
	struct node_ref r;
	tree_ref_of(t, d, &r);
	struct node_dirent e;
	if (!r.p->count || i >= r.p->count(&r, NULL) || !r.p->entry(&r, NULL, i, &e))
		return NULL;
	return tree_node(t, e.ino);
}

bool tree_is_dir(const struct tree_node *n)
{
	return n->flags & TREE_NODE_DIR;
}

mode_t tree_mode(const struct tree_node *n, mode_t gguf_mode)
{
	mode_t r = gguf_mode & 0444;
	if (tree_is_dir(n))
		return S_IFDIR | r | (r >> 2);
	return S_IFREG | r;
}

void tree_node_attr(const struct tree *t, const struct tree_node *n, bool dated,
                    struct node_attr *a)
{
	const struct stat *gs = model_stat(t->m);
	a->dir = tree_is_dir(n);
	a->size = a->dir ? 0 : n->size;
	a->read_bits = gs->st_mode & 0444;
	a->uid = gs->st_uid;
	a->gid = gs->st_gid;
	a->atim = gs->st_atim;
	a->mtim = gs->st_mtim;
	a->ctim = gs->st_ctim;
	if (dated && t->key_time)
		a->mtim = a->ctim = t->made;
}

void tree_stat(const struct tree *t, const struct tree_node *n, bool editable, struct stat *st)
{
	struct node_ref r;
	tree_ref_of(t, n, &r);
	node_stat(&r, NULL, st);
	if (editable && n->prov == KIT_META) {   /* writable by the mount's owner alone */
		st->st_mode |= S_IWUSR;
		st->st_uid = getuid();
		st->st_gid = getgid();
	}
}

int64_t tree_read(const struct tree *t, const struct tree_node *n, char *buf, uint64_t len,
                  uint64_t off, char why[GGUF_ERR_MAX])
{
	char own[GGUF_ERR_MAX];
	char *w = why ? why : own;
	w[0] = 0;
	if (tree_is_dir(n))
		return -EISDIR;
	if (!tree_clamp(n, off, &len))
		return 0;
	struct node_ref r;
	tree_ref_of(t, n, &r);
	return r.p->read ? r.p->read(&r, NULL, buf, len, off, w) : -EIO;
}

int tree_read_iov(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                  struct iovec *iov, int max, char why[GGUF_ERR_MAX])
{
	char own[GGUF_ERR_MAX];
	char *w = why ? why : own;
	w[0] = 0;
	if (!(n->flags & TREE_NODE_IOV) || max < 1 || off > n->size || len > n->size - off ||
	    len == 0)
		return 0;
	struct node_ref r;
	tree_ref_of(t, n, &r);
	return r.p->read_iov ? r.p->read_iov(&r, NULL, off, len, iov, max, w) : 0;
}

/* The place in t's root table of model.gguf's entry (the core's, always there). */
static unsigned model_root(const struct tree *t)
{
	unsigned e = 0;
	while (e < t->kit->n_roots && t->kit->roots[e].prov != KIT_MODELFILE)
		e++;
	return e;
}

uint64_t tree_model_ino(const struct tree *t)
{
	return tree_root_no(t, model_root(t));
}

bool tree_ino_state_root(const struct tree *t, uint64_t ino)
{
	uint64_t gen, off;
	if (!tree_zone_state_of(ino, t->lay->w, &gen, &off))
		return false;
	for (unsigned e = 0; e < t->kit->n_roots; e++) {
		const struct kit_root *kr = &t->kit->roots[e];
		if (t->kit->e[kr->prov].p->roots[kr->root].per_state && t->lay->root_no[e] == off)
			return true;
	}
	return false;
}

int tree_model_file_fd(const struct tree *t)
{
	const struct tree_node *n = tree_node(t, tree_model_ino(t));
	if (!n)
		return -1;
	struct node_ref r;
	tree_ref_of(t, n, &r);
	const char *not_file, *path;
	return r.p->file_fd ? r.p->file_fd(&r, &not_file, &path) : -1;
}

bool tree_quants_changed(const struct tree *t, const struct tree_node *n)
{
	struct node_ref r;
	tree_ref_of(t, n, &r);
	return r.p->stale && r.p->stale(&r);
}

uint64_t tree_render_marks(const struct tree *t, const struct tree_node *n)
{
	const struct render_marks *ms = n->prov == KIT_META ? tree_meta_marks(t, n)
	                              : n->prov == KIT_RENDER ? tree_render_json_marks(t, n)
	                              : NULL;
	return ms ? ms->n : 0;
}

int tree_ref(const struct tree *t, uint64_t ino, struct node_ref *r)
{
	const struct tree_node *n = tree_node(t, ino);
	if (!n)
		return -ENOENT;
	tree_ref_of(t, n, r);
	return 0;
}

int tree_ref_child(const struct tree *t, const struct node_ref *dir, const char *name,
                   struct node_ref *r)
{
	if (!dir->n || !tree_is_dir(dir->n))
		return -ENOTDIR;
	const struct tree_node *n = dir->p->lookup ? dir->p->lookup(dir, name) : NULL;
	if (!n)
		return -ENOENT;
	tree_ref_of(t, n, r);
	return 0;
}

/* A rendering of a file into a sink's window, as guard_call runs it. */
struct rendering {
	tree_emit_fn emit;
	const void *arg;
	const struct render_mark *from;
	struct sink s;
};

static void run_render(void *ctx)
{
	struct rendering *r = ctx;
	r->emit(r->arg, &r->s, r->from);
}

int64_t tree_read_rendered(const struct tree *t, tree_emit_fn emit, const void *arg,
                           const struct render_marks *marks, char *buf, uint64_t len,
                           uint64_t off, char why[GGUF_ERR_MAX])
{
	if (model_header_holds(t->m, why) < 0)
		return -EIO;
	/* start at the last mark before off */
	struct rendering r = { .emit = emit, .arg = arg, .from = render_mark_find(marks, off),
	                       .s = sink_window(buf, off, len) };
	if (r.from)
		r.s.pos = r.from->pos;
	int e = guard_call(run_render, &r);
	if (e < 0)   /* a page went while it rendered: which file shrank under it */
		model_header_holds(t->m, why);
	return e < 0 ? e : (int64_t)len;
}
