#include "names.h"
#include "scratch.h"
#include "tree_ino.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct scratch_file {
	struct scratch_set *set;
	uint64_t refs;              /* the set's (while named) and each holder's; set lock */
	uint64_t ino;
	char name[256];
	uint64_t key;               /* the key moved aside into it, or SCRATCH_NO_KEY */
	char *text;
	uint64_t len, cap;
	struct timespec mtime;
};

struct scratch_set {
	pthread_mutex_t lock;       /* everything here and in every file */
	struct scratch_file **files;   /* named ones, in the order they were made */
	uint64_t n, cap;
	uint64_t next_ino;
	uint64_t bytes;             /* cap of every file, named or still held */
};

bool scratch_is_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0)
		return false;
	return name[0] == '.' || name[n - 1] == '~' ||
	       (n >= 2 && name[0] == '#' && name[n - 1] == '#') || names_vim_probe(name, n);
}

struct scratch_set *scratch_new(void)
{
	struct scratch_set *s = calloc(1, sizeof *s);
	if (s)
		pthread_mutex_init(&s->lock, NULL);
	return s;
}

/* Drops a reference to f; the last frees it. Set lock held. */
static void unref(struct scratch_file *f)
{
	if (--f->refs)
		return;
	f->set->bytes -= f->cap;
	free(f->text);
	free(f);
}

void scratch_free(struct scratch_set *s)
{
	if (!s)
		return;
	for (uint64_t i = 0; i < s->n; i++)
		unref(s->files[i]);
	free(s->files);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* The position of the file called name, or UINT64_MAX. Set lock held. */
static uint64_t find(const struct scratch_set *s, const char *name)
{
	for (uint64_t i = 0; i < s->n; i++)
		if (strcmp(s->files[i]->name, name) == 0)
			return i;
	return UINT64_MAX;
}

/* Removes the file at position i from the names (it lives on while held). Lock held. */
static void remove_at(struct scratch_set *s, uint64_t i)
{
	struct scratch_file *f = s->files[i];
	memmove(s->files + i, s->files + i + 1, (s->n - i - 1) * sizeof *s->files);
	s->n--;
	unref(f);
}

/* Makes f's buffer hold at least need bytes, counted against the set's bound. Lock held. */
static int reserve(struct scratch_file *f, uint64_t need)
{
	if (need <= f->cap)
		return 0;
	if (need > SCRATCH_BYTES_MAX)
		return -EFBIG;
	uint64_t cap = f->cap ? f->cap : 256;
	while (cap < need)
		cap *= 2;
	if (cap > SCRATCH_BYTES_MAX)
		cap = need;
	if (f->set->bytes - f->cap + cap > SCRATCH_BYTES_MAX)
		return -ENOSPC;
	char *t = realloc(f->text, cap);
	if (!t)
		return -ENOMEM;
	f->set->bytes = f->set->bytes - f->cap + cap;
	f->text = t;
	f->cap = cap;
	return 0;
}

/* A new named file, or -ENOSPC / -ENOMEM. One called name must not exist. Lock held. */
static int add(struct scratch_set *s, const char *name, const char *text, uint64_t len,
               uint64_t key, uint64_t *ino)
{
	if (s->n >= SCRATCH_FILES_MAX || strlen(name) >= sizeof s->files[0]->name)
		return s->n >= SCRATCH_FILES_MAX ? -ENOSPC : -ENAMETOOLONG;
	if (s->n == s->cap) {
		uint64_t cap = s->cap ? 2 * s->cap : 8;
		struct scratch_file **a = realloc(s->files, cap * sizeof *a);
		if (!a)
			return -ENOMEM;
		s->files = a;
		s->cap = cap;
	}
	struct scratch_file *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	f->set = s;
	f->refs = 1;
	strcpy(f->name, name);
	f->key = key;
	int r = reserve(f, len + 1);
	if (r < 0) {
		free(f);
		return r;
	}
	if (len)
		memcpy(f->text, text, len);
	f->len = len;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	f->ino = TREE_ZONE_X + s->next_ino++;
	s->files[s->n++] = f;
	*ino = f->ino;
	return 0;
}

int scratch_put_file(struct scratch_set *s, const char *name, const char *text, uint64_t len,
                     uint64_t key, uint64_t *ino)
{
	pthread_mutex_lock(&s->lock);
	uint64_t i = find(s, name);
	if (i != UINT64_MAX)
		remove_at(s, i);
	int r = add(s, name, text, len, key, ino);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int scratch_create(struct scratch_set *s, const char *name, uint64_t *ino)
{
	pthread_mutex_lock(&s->lock);
	int r = find(s, name) != UINT64_MAX ? -EEXIST : add(s, name, NULL, 0, SCRATCH_NO_KEY, ino);
	pthread_mutex_unlock(&s->lock);
	return r;
}

int scratch_unlink(struct scratch_set *s, const char *name, uint64_t *key)
{
	pthread_mutex_lock(&s->lock);
	uint64_t i = find(s, name);
	*key = i == UINT64_MAX ? SCRATCH_NO_KEY : s->files[i]->key;
	if (i != UINT64_MAX)
		remove_at(s, i);
	pthread_mutex_unlock(&s->lock);
	return i == UINT64_MAX ? -ENOENT : 0;
}

int scratch_rename(struct scratch_set *s, const char *from, const char *to)
{
	if (strlen(to) >= sizeof s->files[0]->name)
		return -ENAMETOOLONG;
	pthread_mutex_lock(&s->lock);
	uint64_t i = find(s, from), j = find(s, to);
	int r = i == UINT64_MAX ? -ENOENT : 0;
	if (r == 0 && i != j) {
		struct scratch_file *f = s->files[i];
		if (j != UINT64_MAX)
			remove_at(s, j);
		strcpy(f->name, to);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

uint64_t scratch_key(struct scratch_set *s, const char *name)
{
	pthread_mutex_lock(&s->lock);
	uint64_t i = find(s, name);
	uint64_t key = i == UINT64_MAX ? SCRATCH_NO_KEY : s->files[i]->key;
	pthread_mutex_unlock(&s->lock);
	return key;
}

bool scratch_holds(struct scratch_set *s, uint64_t key)
{
	bool held = false;
	pthread_mutex_lock(&s->lock);
	for (uint64_t i = 0; i < s->n && !held; i++)
		held = s->files[i]->key == key;
	pthread_mutex_unlock(&s->lock);
	return held;
}

void scratch_release_key(struct scratch_set *s, uint64_t key)
{
	pthread_mutex_lock(&s->lock);
	for (uint64_t i = 0; i < s->n; i++)
		if (s->files[i]->key == key)
			s->files[i]->key = SCRATCH_NO_KEY;
	pthread_mutex_unlock(&s->lock);
}

/* Holds the file at position i, or returns NULL past the end. Lock held. */
static struct scratch_file *hold_at(struct scratch_set *s, uint64_t i)
{
	if (i >= s->n)
		return NULL;
	s->files[i]->refs++;
	return s->files[i];
}

struct scratch_file *scratch_by_ino(struct scratch_set *s, uint64_t ino)
{
	pthread_mutex_lock(&s->lock);
	uint64_t i = 0;
	while (i < s->n && s->files[i]->ino != ino)
		i++;
	struct scratch_file *f = hold_at(s, i);
	pthread_mutex_unlock(&s->lock);
	return f;
}

struct scratch_file *scratch_by_name(struct scratch_set *s, const char *name)
{
	pthread_mutex_lock(&s->lock);
	struct scratch_file *f = hold_at(s, find(s, name));
	pthread_mutex_unlock(&s->lock);
	return f;
}

void scratch_drop(struct scratch_file *f)
{
	if (!f)
		return;
	struct scratch_set *s = f->set;
	pthread_mutex_lock(&s->lock);
	unref(f);
	pthread_mutex_unlock(&s->lock);
}

uint64_t scratch_ino(const struct scratch_file *f)
{
	return f->ino;   /* fixed at its making */
}

void scratch_stat(struct scratch_file *f, uint64_t *size, struct timespec *mtime)
{
	pthread_mutex_lock(&f->set->lock);
	*size = f->len;
	*mtime = f->mtime;
	pthread_mutex_unlock(&f->set->lock);
}

uint64_t scratch_read(struct scratch_file *f, char *buf, uint64_t len, uint64_t off)
{
	pthread_mutex_lock(&f->set->lock);
	uint64_t n = off < f->len ? (f->len - off < len ? f->len - off : len) : 0;
	if (n)
		memcpy(buf, f->text + off, n);
	pthread_mutex_unlock(&f->set->lock);
	return n;
}

/* Makes f len bytes long (zeros past the old end). Lock held. */
static int resize(struct scratch_file *f, uint64_t len)
{
	int r = reserve(f, len + 1);
	if (r < 0)
		return r;
	if (len > f->len)
		memset(f->text + f->len, 0, len - f->len);
	f->len = len;
	clock_gettime(CLOCK_REALTIME, &f->mtime);
	return 0;
}

int scratch_write(struct scratch_file *f, const char *text, uint64_t len, uint64_t off)
{
	uint64_t end;
	if (__builtin_add_overflow(off, len, &end) || end >= SCRATCH_BYTES_MAX)
		return -EFBIG;
	pthread_mutex_lock(&f->set->lock);
	int r = end > f->len ? resize(f, end) : 0;
	if (r == 0) {
		memcpy(f->text + off, text, len);
		clock_gettime(CLOCK_REALTIME, &f->mtime);
	}
	pthread_mutex_unlock(&f->set->lock);
	return r;
}

int scratch_truncate(struct scratch_file *f, uint64_t size)
{
	if (size >= SCRATCH_BYTES_MAX)
		return -EFBIG;
	pthread_mutex_lock(&f->set->lock);
	int r = resize(f, size);
	pthread_mutex_unlock(&f->set->lock);
	return r;
}

int scratch_text(struct scratch_file *f, char **text, uint64_t *len)
{
	pthread_mutex_lock(&f->set->lock);
	*len = f->len;
	*text = malloc(f->len + 1);
	if (*text) {
		memcpy(*text, f->text, f->len);
		(*text)[f->len] = '\0';
	}
	pthread_mutex_unlock(&f->set->lock);
	return *text ? 0 : -ENOMEM;
}

uint64_t scratch_count(struct scratch_set *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t n = s->n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

bool scratch_entry(struct scratch_set *s, uint64_t i, char name[256], uint64_t *ino)
{
	pthread_mutex_lock(&s->lock);
	bool ok = i < s->n;
	if (ok) {
		strcpy(name, s->files[i]->name);
		*ino = s->files[i]->ino;
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}
