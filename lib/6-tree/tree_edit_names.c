/* The names of metadata/ under edits (tree_edit.h): creating, removing and renaming
 * its files, with their rules: a file name to a key's name and back, scratch files and
 * keys moved aside into them, a rename over a key as a write of its value, the last
 * keys deleted made again by a create of their name. */
#include "tree_edit_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edit_text.h"
#include "names.h"
#include "render_value.h"
#include "scratch.h"

/* File name name for an error line (gguf_quote: printable, cut at 64 bytes). */
static const char *quoted(const char *name, char q[80])
{
	struct gguf_str s = { .ptr = name, .len = strlen(name) };
	return gguf_quote(&s, q);
}

/* The key whose file name is name (names_decode), into key (NAMES_BUF bytes) and *len.
 * 0, or -ENAMETOOLONG / -EINVAL with err. */
static int key_of_name(const char *name, char key[NAMES_BUF], uint64_t *len,
                       char err[GGUF_ERR_MAX])
{
	char q[80];
	int r = names_decode(name, key, len);
	if (r == -ENAMETOOLONG)
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: longer than any key's file name "
		         "(%d bytes at most)", quoted(name, q), NAMES_BUF - 1);
	else if (r < 0)
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: not the file name of any key GGUF can "
		         "hold (a cut name with a hash, or an escape the names do not use)",
		         quoted(name, q));
	return r;
}

/* The id of the key at position k of t (an edit state's tree). */
static uint64_t id_at(const struct tree *t, uint64_t k)
{
	return t->state->keys[k].id;
}

/* The position in cur of the key whose file is name, listed or moved aside into a
 * scratch file (*aside says which), or UINT64_MAX. Lock held. */
static uint64_t key_named(struct tree_edits *e, const char *name, bool *aside)
{
	const struct tree_node *n = tree_lookup(e->cur, TREE_METADATA_DIR_INO, name);
	*aside = n && scratch_holds(e->scratch, id_at(e->cur, n->index));
	return n ? n->index : UINT64_MAX;
}

/* What metadata/ shows of key k of t, into a new buffer (NUL after it). 0 or -ENOMEM. */
static int key_text(const struct tree *t, uint64_t k, char **text, uint64_t *len)
{
	const struct gguf_value *v = &model_meta(t->m)->kv[k].value;
	struct sink c = sink_counter();
	render_value(&c, v);
	*text = malloc(c.pos + 1);
	if (!*text)
		return -ENOMEM;
	struct sink w = sink_window(*text, 0, c.pos);
	render_value(&w, v);
	(*text)[c.pos] = '\0';
	*len = c.pos;
	return 0;
}

/* Key target of cur takes text parsed by its type, in place (text that is exactly its
 * rendering keeps it as it is), and the key at position gone (UINT64_MAX: none) is
 * removed, in one commit. EINVAL when the text does not parse (nothing changes). Lock
 * held. */
static int set_key_text(struct tree_edits *e, uint64_t target, const char *text, uint64_t len,
                        uint64_t gone, char err[GGUF_ERR_MAX])
{
	const struct tree *cur = e->cur;
	struct value_type t;
	struct value_buf b;
	char why[GGUF_ERR_MAX];
	int r = edit_refused(cur, target, err);
	if (r < 0)
		return r;
	if (len > EDIT_TEXT_MAX) {
		edit_key_err(cur, target, "the text is longer than a key takes (64 MiB)", err);
		return -EFBIG;
	}
	if (edit_type_of(e, target, &t) < 0) {
		edit_key_err(cur, target, "a value of an unknown type cannot be written", err);
		return -EINVAL;
	}
	bool same = edit_is_rendering(&model_meta(cur->m)->kv[target].value, text, len);
	if (!same && (r = edit_parse_bounded(text, len, &t, &b, why)) < 0) {
		edit_key_err(cur, target, why, err);
		return r;
	}
	if (same && gone == UINT64_MAX)
		return 0;
	struct ov_state *set = same ? ov_get(cur->state) : ov_set(cur->state, target, &b.v);
	struct ov_state *s = set && gone != UINT64_MAX ? ov_delete(set, gone) : set ? ov_get(set) : NULL;
	ov_put(set);
	if (!same)
		value_buf_free(&b);
	r = edit_commit_key(e, s, target, err);
	return r;
}

/* Remembers key (of cur, being deleted) among the last TOMBSTONES gone. Lock held. */
static void remember_gone(struct tree_edits *e, const struct ov_key *key)
{
	if (e->n_gone == TOMBSTONES) {
		ov_key_drop(&e->gone[0]);
		memmove(&e->gone[0], &e->gone[1], (TOMBSTONES - 1) * sizeof e->gone[0]);
		e->n_gone--;
	}
	ov_key_hold(key, &e->gone[e->n_gone++]);
}

/* The position in gone of the key whose file name is name, newest first, or UINT64_MAX. */
static uint64_t find_gone(const struct tree_edits *e, const char *name)
{
	char file[NAMES_BUF];
	for (uint64_t i = e->n_gone; i-- > 0;) {
		const struct gguf_str *k = &e->gone[i].kv.key;
		names_encode(k->ptr, k->len, false, file);
		if (strcmp(file, name) == 0)
			return i;
	}
	return UINT64_MAX;
}

/* Forgets gone[i]. Lock held. */
static void forget_gone(struct tree_edits *e, uint64_t i)
{
	ov_key_drop(&e->gone[i]);
	memmove(&e->gone[i], &e->gone[i + 1], (e->n_gone - i - 1) * sizeof e->gone[0]);
	e->n_gone--;
}

/* Key k of cur deleted, and remembered for a create of its name. Lock held. */
static int delete_key(struct tree_edits *e, uint64_t k, char err[GGUF_ERR_MAX])
{
	struct ov_key key;
	ov_key_hold(&e->cur->state->keys[k], &key);
	struct ov_state *s = ov_delete(e->cur->state, k);
	int r = edit_commit_key(e, s, k, err);
	if (r == 0)
		remember_gone(e, &key);
	ov_key_drop(&key);
	return r;
}

/* When no scratch file holds key id any more (it was moved aside into one that went),
 * the key is deleted: its file went with the scratch file. Lock held. */
static int drop_if_orphan(struct tree_edits *e, uint64_t id, char err[GGUF_ERR_MAX])
{
	if (id == SCRATCH_NO_KEY || scratch_holds(e->scratch, id))
		return 0;
	uint64_t k = ov_find_id(e->cur->state, id);
	return k == UINT64_MAX ? 0 : delete_key(e, k, err);
}

struct scratch_set *tree_edits_scratch(struct tree_edits *e)
{
	return e->scratch;
}

bool tree_edits_aside(struct tree_edits *e, const struct tree *t, const struct tree_node *n)
{
	return tree_is_key(n) && t->state &&
	       scratch_holds(e->scratch, id_at(t, n->index));
}

bool tree_edits_taken(struct tree_edits *e, const char *name)
{
	if (scratch_is_name(name)) {
		struct scratch_file *f = scratch_by_name(e->scratch, name);
		scratch_drop(f);
		return f != NULL;
	}
	pthread_mutex_lock(&e->lock);
	bool aside;
	bool taken = key_named(e, name, &aside) != UINT64_MAX && !aside;
	pthread_mutex_unlock(&e->lock);
	return taken;
}

/* An error line for a call on file name that failed with r; returns r. */
static int name_err(const char *name, int r, char err[GGUF_ERR_MAX])
{
	char q[80];
	snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), strerror(-r));
	return r;
}

int tree_edits_create(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX])
{
	char key[NAMES_BUF], q[80];
	uint64_t len;
	if (scratch_is_name(name)) {
		int r = scratch_create(e->scratch, name, ino);
		return r < 0 ? name_err(name, r, err) : 0;
	}
	int r = key_of_name(name, key, &len, err);
	if (r < 0)
		return r;
	const char *why;
	if ((r = ov_refusal(key, len, &why)) < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), why);
		return r;
	}
	pthread_mutex_lock(&e->lock);
	bool aside;
	uint64_t k = key_named(e, name, &aside);
	if (k != UINT64_MAX && aside) {
		/* a key moved aside, made again (vim: KEY renamed to KEY~, then KEY
		 * created): the key itself, listed again, its text written anew */
		scratch_release_key(e->scratch, id_at(e->cur, k));
		*ino = tree_key_ino(e->cur, k);
		pthread_mutex_unlock(&e->lock);
		return 1;
	}
	uint64_t g = find_gone(e, name);
	struct ov_state *back;
	if (g != UINT64_MAX && ov_restore(e->cur->state, &e->gone[g], &back) == 0) {
		/* a key deleted a moment ago, made again (install removes its target first):
		 * the key itself, in its place and type, its text written anew */
		uint64_t id = e->gone[g].id;
		forget_gone(e, g);
		r = edit_commit(e, back, err);
		if (r == 0)
			*ino = tree_key_ino(e->cur, ov_find_id(e->cur->state, id));
		pthread_mutex_unlock(&e->lock);
		return r < 0 ? r : 1;
	}
	struct gguf_value empty = { .type = GGUF_TYPE_STRING, .data = (const uint8_t *)"\0\0\0\0\0\0\0\0",
	                            .size = 8 };
	struct ov_state *s;
	r = ov_create(e->cur->state, key, len, &empty, &s);
	if (r < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), strerror(-r));
	} else {
		r = edit_commit(e, s, err);
		if (r == 0)   /* new keys come last */
			*ino = tree_key_ino(e->cur, model_meta(e->cur->m)->n_kv - 1);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

int tree_edits_unlink(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX])
{
	char q[80];
	int r;
	pthread_mutex_lock(&e->lock);
	if (scratch_is_name(name)) {
		uint64_t held;
		struct scratch_file *f = scratch_by_name(e->scratch, name);
		*ino = f ? scratch_ino(f) : 0;
		scratch_drop(f);
		r = scratch_unlink(e->scratch, name, &held);
		if (r < 0)
			name_err(name, r, err);
		else   /* a key moved aside into it goes with it */
			r = drop_if_orphan(e, held, err);
		pthread_mutex_unlock(&e->lock);
		return r;
	}
	bool aside;
	uint64_t k = key_named(e, name, &aside);
	if (k == UINT64_MAX || aside) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: no such key", quoted(name, q));
		r = -ENOENT;
	} else if ((r = edit_refused(e->cur, k, err)) < 0) {
	} else {
		*ino = tree_key_ino(e->cur, k);
		r = delete_key(e, k, err);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

/* Key j of cur renamed [key, len), keeping its id and place, and given text parsed by its
 * type, in one commit (a key moved aside into a scratch file that is then renamed to a
 * new name: as if it had been renamed there). Lock held. */
static int rename_with_text(struct tree_edits *e, uint64_t j, const char *key, uint64_t len,
                            const char *text, uint64_t text_len, char err[GGUF_ERR_MAX])
{
	const struct tree *cur = e->cur;
	struct value_type t;
	struct value_buf b;
	char why[GGUF_ERR_MAX];
	if (text_len > EDIT_TEXT_MAX) {
		edit_key_err(cur, j, "the text is longer than a key takes (64 MiB)", err);
		return -EFBIG;
	}
	bool same = edit_is_rendering(&model_meta(cur->m)->kv[j].value, text, text_len);
	if (!same && edit_type_of(e, j, &t) < 0) {
		edit_key_err(cur, j, "a value of an unknown type cannot be written", err);
		return -EINVAL;
	}
	int r = same ? 0 : edit_parse_bounded(text, text_len, &t, &b, why);
	if (r < 0) {
		edit_key_err(cur, j, why, err);
		return r;
	}
	struct ov_state *named = ov_rename(cur->state, j, key, len);
	struct ov_state *s = named && !same ? ov_set(named, j, &b.v) : named ? ov_get(named) : NULL;
	ov_put(named);
	if (!same)
		value_buf_free(&b);
	r = edit_commit_key(e, s, j, err);
	return r;
}

/* A new key [key, len) holding text as a string (a scratch file renamed to a new name,
 * as rsync and editors save a new file): one commit. Lock held. */
static int create_with_text(struct tree_edits *e, const char *name, const char *key,
                            uint64_t len, const char *text, uint64_t text_len,
                            char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX], q[80];
	struct value_type t = { .depth = 0, .leaf = GGUF_TYPE_STRING };
	struct value_buf b;
	if (text_len > EDIT_TEXT_MAX) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: the text is longer than a key takes "
		         "(64 MiB)", quoted(name, q));
		return -EFBIG;
	}
	if (parse_value(text, text_len, &t, &b, why) < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %.400s", quoted(name, q), why);
		return -EINVAL;
	}
	struct ov_state *s;
	int r = ov_create(e->cur->state, key, len, &b.v, &s);
	value_buf_free(&b);
	if (r < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), strerror(-r));
		return r;
	}
	return edit_commit(e, s, err);
}

/* Key gone[g] (deleted a moment ago) back in its place and type, holding text parsed by
 * that type (or its value as it was, text being its rendering), in one commit: a
 * scratch file renamed to its name, as vim undoes a save refused (the KEY it made
 * again removed, then KEY~ renamed back to KEY). EINVAL when the text does not parse
 * (nothing changes). Lock held. */
static int restore_with_text(struct tree_edits *e, uint64_t g, const char *text,
                             uint64_t text_len, char err[GGUF_ERR_MAX])
{
	const struct ov_key *key = &e->gone[g];
	char why[GGUF_ERR_MAX], q[80];
	struct value_type t;
	struct value_buf b;
	int r = 0;
	if (text_len > EDIT_TEXT_MAX) {
		snprintf(why, sizeof why, "the text is longer than a key takes (64 MiB)");
		r = -EFBIG;
	}
	bool same = r == 0 && edit_is_rendering(&key->kv.value, text, text_len);
	if (r == 0 && !same && edit_type_of_key(e, key, &t) < 0) {
		snprintf(why, sizeof why, "a value of an unknown type cannot be written");
		r = -EINVAL;
	}
	if (r == 0 && !same)
		r = edit_parse_bounded(text, text_len, &t, &b, why);
	if (r < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %.400s", gguf_quote(&key->kv.key, q), why);
		return r;
	}
	struct ov_state *back, *s = NULL;
	r = ov_restore(e->cur->state, key, &back);
	if (r == 0) {
		s = same ? back : ov_set(back, ov_find_id(back, key->id), &b.v);
		if (!same)
			ov_put(back);
	}
	if (!same)
		value_buf_free(&b);
	if (r < 0 || !s) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", gguf_quote(&key->kv.key, q),
		         strerror(r < 0 ? -r : ENOMEM));
		return r < 0 ? r : -ENOMEM;
	}
	r = edit_commit(e, s, err);
	if (r == 0)
		forget_gone(e, g);
	return r;
}

/* A rename of scratch file from to file name to: over a key's (listed or moved aside),
 * its value; to a new name, the new key [key, len); to another scratch name, only the
 * name. Lock held. */
static int rename_scratch(struct tree_edits *e, const char *from, const char *to,
                          const char *key, uint64_t len, char err[GGUF_ERR_MAX])
{
	struct scratch_file *f = scratch_by_name(e->scratch, from);
	if (!f)
		return name_err(from, -ENOENT, err);
	uint64_t held = scratch_key(e->scratch, from);
	int r;
	if (scratch_is_name(to)) {
		uint64_t replaced = strcmp(from, to) ? scratch_key(e->scratch, to) : SCRATCH_NO_KEY;
		scratch_drop(f);
		r = scratch_rename(e->scratch, from, to);
		return r < 0 ? name_err(from, r, err) : drop_if_orphan(e, replaced, err);
	}
	char *text;
	uint64_t text_len;
	r = scratch_text(f, &text, &text_len);
	scratch_drop(f);
	if (r < 0)
		return name_err(from, r, err);
	bool aside;
	uint64_t k = key_named(e, to, &aside);
	uint64_t j = held == SCRATCH_NO_KEY ? UINT64_MAX : ov_find_id(e->cur->state, held);
	uint64_t target_id = k != UINT64_MAX ? id_at(e->cur, k) : SCRATCH_NO_KEY, g;
	if (k != UINT64_MAX)        /* over a key: its value, in place */
		r = set_key_text(e, k, text, text_len, j == k ? UINT64_MAX : j, err);
	else if (j != UINT64_MAX)   /* a key moved aside, now under a new name */
		r = rename_with_text(e, j, key, len, text, text_len, err);
	else if ((g = find_gone(e, to)) != UINT64_MAX)   /* a key deleted a moment ago */
		r = restore_with_text(e, g, text, text_len, err);
	else
		r = create_with_text(e, to, key, len, text, text_len, err);
	free(text);
	if (r == 0) {
		uint64_t none;
		scratch_unlink(e->scratch, from, &none);
		if (target_id != SCRATCH_NO_KEY)
			scratch_release_key(e->scratch, target_id);
	}
	return r;
}

/* A rename of key k of cur to scratch name to: the key moved aside (unlisted, still in
 * the metadata) into a scratch file holding its text; a scratch file of that name is
 * replaced (a key moved aside into it goes). Lock held. */
static int move_aside(struct tree_edits *e, uint64_t k, const char *to, char err[GGUF_ERR_MAX])
{
	char *text;
	uint64_t len, ino;
	uint64_t replaced = scratch_key(e->scratch, to);
	int r = key_text(e->cur, k, &text, &len);
	if (r == 0) {
		r = scratch_put_file(e->scratch, to, text, len, id_at(e->cur, k), &ino);
		free(text);
	}
	if (r < 0)
		return name_err(to, r, err);
	return drop_if_orphan(e, replaced, err);
}

/* A rename of key k over key target, as an editor or a tool saves (sed -i writes a new
 * file and renames it over the old): target's value becomes k's text (what metadata/
 * shows of it) parsed by target's type, at target's place and with its ino, and k is
 * gone, leaving no trace of its own name. One commit. Lock held. EINVAL when the text
 * does not parse as target's type (nothing changes). */
static int replace_value(struct tree_edits *e, uint64_t k, uint64_t target,
                         char err[GGUF_ERR_MAX])
{
	char *text;
	uint64_t len;
	if (key_text(e->cur, k, &text, &len) < 0) {
		edit_key_err(e->cur, target, "out of memory", err);
		return -ENOMEM;
	}
	int r = set_key_text(e, target, text, len, k, err);
	free(text);
	return r;
}

int tree_edits_rename(struct tree_edits *e, const char *from, const char *to,
                      char err[GGUF_ERR_MAX])
{
	char key[NAMES_BUF], q[80];
	uint64_t len = 0;
	int r;
	bool to_scratch = scratch_is_name(to);
	if (!to_scratch) {
		if ((r = key_of_name(to, key, &len, err)) < 0)
			return r;
		const char *why;
		if ((r = ov_refusal(key, len, &why)) < 0) {
			snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(to, q), why);
			return r;
		}
	}
	pthread_mutex_lock(&e->lock);
	if (scratch_is_name(from)) {
		r = rename_scratch(e, from, to, key, len, err);
		pthread_mutex_unlock(&e->lock);
		return r;
	}
	bool aside, target_aside = false;
	uint64_t k = key_named(e, from, &aside);
	uint64_t target = to_scratch ? UINT64_MAX : key_named(e, to, &target_aside);
	if (k == UINT64_MAX || aside) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: no such key", quoted(from, q));
		r = -ENOENT;
	} else if ((r = edit_refused(e->cur, k, err)) < 0) {
	} else if (to_scratch) {
		r = move_aside(e, k, to, err);
	} else if (target != UINT64_MAX && (r = edit_refused(e->cur, target, err)) < 0) {
	} else if (k == target) {
		r = 0;
	} else if (target != UINT64_MAX) {
		uint64_t target_id = id_at(e->cur, target);
		r = replace_value(e, k, target, err);
		if (r == 0 && target_aside)   /* a key moved aside is made again */
			scratch_release_key(e->scratch, target_id);
	} else {
		struct ov_state *s = ov_rename(e->cur->state, k, key, len);
		r = edit_commit_key(e, s, k, err);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}
