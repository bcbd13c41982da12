/* A library's source in an S3 bucket (or a prefix of one): folders listed with
 * ListObjectsV2 (s3_list.h), models opened by URL as `ggufs s3://BUCKET/KEY` opens them
 * (each with its own fetcher and caches), plain files read by range requests through
 * one fetcher of the library's. A folder is listed once for the mount's life (S3 keeps
 * no folder versions to ask about cheaply: listed_once); a changed object is still
 * caught by its ETag when read. An object's version is its ETag and size: a listing's
 * LastModified need not be the second its GET says. The names of all listings
 * together are bounded (S3_NAMES_MAX). */
#include <stdatomic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "copy_or_null.h"
#include "libsource.h"
#include "remote.h"
#include "s3.h"
#include "s3_list.h"

struct s3_source {
	struct remote_opts ro;      /* for each model opened; its strings owned here */
	struct remote_s3 s3;
	struct remote *r;           /* listings and plain files */
	char *endpoint, *bucket, *base;   /* base: the prefix ("" or ending in '/') */
	char *bucket_url;
	bool virtual_host;
	atomic_uint_fast64_t names_left;   /* bytes of names its listings may still take */
	time_t mounted;             /* when the source was made: its folders' time */
};

/* An opened plain file. */
struct s3_file {
	struct remote_file *f;      /* NULL for an empty object */
};

/* base + path + (dir and path not "": "/"), malloc'ed. */
static char *key_of(const struct s3_source *s, const char *path, bool dir)
{
	size_t n = strlen(s->base) + strlen(path) + 2;
	char *k = malloc(n);
	if (k)
		snprintf(k, n, "%s%s%s", s->base, path, dir && *path ? "/" : "");
	return k;
}

/* What the library shows of an entry: mode, owner, size, times: an object's its
 * LastModified, a folder's (S3 keeps none: a prefix is only the keys under it) the
 * time of the mount, folders as mountpoint-s3 dates them. */
static void entry_stat(const struct s3_source *s, const struct s3_entry *e, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_mode = e->is_prefix ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_nlink = e->is_prefix ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = e->is_prefix ? 0 : (off_t)e->size;
	st->st_mtim.tv_sec = e->is_prefix ? s->mounted : e->mtime;
	st->st_atim = st->st_ctim = st->st_mtim;
}

/* The version of an entry called name: an object's is its ETag (hashed, s3_etag_hash)
 * and size (not its time: a listing's LastModified may be absent, or a second off the
 * object's); a folder's, its name. */
static uint64_t version_of(const char *name, bool is_prefix, uint64_t etag, uint64_t size)
{
	XXH3_state_t *x = XXH3_createState();
	if (!x)
		return 0;
	XXH3_64bits_reset(x);
	XXH3_64bits_update(x, name, strlen(name));
	XXH3_64bits_update(x, &is_prefix, sizeof is_prefix);
	if (!is_prefix) {
		XXH3_64bits_update(x, &etag, sizeof etag);
		XXH3_64bits_update(x, &size, sizeof size);
	}
	uint64_t v = XXH3_64bits_digest(x);
	XXH3_freeState(x);
	return v;
}

static uint64_t entry_version(const struct s3_entry *e)
{
	return version_of(e->name, e->is_prefix, e->etag, e->size);
}

/* Takes used bytes of names from the source's bound: false when fewer are left. */
static bool names_take(struct s3_source *s, uint64_t used)
{
	uint_fast64_t left = atomic_load(&s->names_left);
	do {
		if (left < used)
			return false;
	} while (!atomic_compare_exchange_weak(&s->names_left, &left, left - used));
	return true;
}

static int s3src_list(void *ctx, const char *dir, struct lib_entry **out, size_t *n,
                      uint64_t *version, char err[GGUF_ERR_MAX])
{
	struct s3_source *s = ctx;
	*out = NULL;
	*n = 0;
	char *prefix = key_of(s, dir, true);
	struct s3_entry *e = NULL;
	size_t ne = 0;
	if (!prefix) {
		snprintf(err, GGUF_ERR_MAX, "out of memory");
		return -ENOMEM;
	}
	/* as much as is left now; taken for good once listed (another folder listed
	 * meanwhile may have taken some: then this one is refused) */
	const uint64_t budget = atomic_load(&s->names_left);
	uint64_t left = budget;
	if (s3_list(s->r, s->bucket_url, prefix, &left, &e, &ne, err) < 0) {
		free(prefix);
		return -EIO;
	}
	/* a prefix whose keys were all left out (a/../../x, a control byte) is an empty
	 * folder: its parent showed it, and it stays what it was shown as (the names left
	 * out were logged by s3_list) */
	free(prefix);
	if (!names_take(s, budget - left)) {
		s3_entries_free(e, ne);
		gguf_errf(err, "the library's names take more than %u MiB", S3_NAMES_MAX >> 20);
		return -EIO;
	}
	struct lib_entry *le = calloc(ne ? ne : 1, sizeof *le);
	uint64_t v = 0;
	if (!le) {
		s3_entries_free(e, ne);
		snprintf(err, GGUF_ERR_MAX, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < ne; i++) {
		le[i].type = e[i].is_prefix ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
		le[i].version = entry_version(&e[i]);
		entry_stat(s, &e[i], &le[i].st);
		v = XXH3_64bits_withSeed(&le[i].version, sizeof le[i].version, v);
		/* its whole path made as the listing's name goes: one copy at a time */
		bool ok = lib_entry_name(&le[i], dir, e[i].name, strlen(e[i].name));
		free(e[i].name);
		e[i].name = NULL;
		if (!ok) {
			s3_entries_free(e, ne);
			lib_entries_free(le, i);
			snprintf(err, GGUF_ERR_MAX, "out of memory");
			return -ENOMEM;
		}
	}
	s3_entries_free(e, ne);
	*out = le;
	*n = ne;
	*version = v;
	return 0;
}

static bool s3src_unchanged(void *ctx, const char *dir, uint64_t version)
{
	(void)ctx, (void)dir, (void)version;
	return true;   /* listed once for the mount's life (see the top of this file) */
}

/* The root alone: every other entry is known from its folder's listing (listed_once). */
static int s3src_stat(void *ctx, const char *path, struct lib_entry *e)
{
	const struct s3_source *s = ctx;
	memset(e, 0, sizeof *e);
	if (*path)
		return -ENOENT;
	struct s3_entry root = { .name = (char *)"", .is_prefix = true };
	e->type = LIB_ENTRY_DIR;
	e->version = entry_version(&root);
	entry_stat(s, &root, &e->st);
	return 0;
}

/* The model's first file has the ETag and size the listing gave it. */
static bool s3src_same_version(void *ctx, const char *path, uint64_t version,
                               const struct ggufs_model *m)
{
	(void)ctx;
	struct model_file_info info = { 0 };
	if (model_n_files(m))
		model_file(m, 0, &info);
	const struct remote_file *f = info.remote;
	const char *slash = strrchr(path, '/');
	const char *etag = f ? remote_etag(f) : NULL;
	return f && version_of(slash ? slash + 1 : path, false,
	                       etag ? s3_etag_hash(etag, strlen(etag)) : 0, remote_size(f)) == version;
}

/* The URL of the object at path (raw key base + path) and its s3:// name. */
static int object_names(const struct s3_source *s, const char *path, char **url, char **shown,
                        char err[GGUF_ERR_MAX])
{
	char *key = key_of(s, path, false);
	*url = key ? s3_object_url(s->endpoint, s->bucket, key, s->virtual_host, err,
	                           GGUF_ERR_MAX) : NULL;
	size_t n = key ? strlen(s->bucket) + strlen(key) + 8 : 0;
	*shown = key ? malloc(n) : NULL;
	if (*shown)
		snprintf(*shown, n, "s3://%s/%s", s->bucket, key);
	free(key);
	if (!*url || !*shown) {
		if (*url && !*shown)
			snprintf(err, GGUF_ERR_MAX, "out of memory");
		free(*url);
		free(*shown);
		return -1;
	}
	return 0;
}

static struct ggufs_model *s3src_open_model(void *ctx, const char *path, char err[GGUF_ERR_MAX])
{
	struct s3_source *s = ctx;
	char *url, *shown;
	if (object_names(s, path, &url, &shown, err) < 0)
		return NULL;
	struct ggufs_model *m = model_open_remote(url, shown, &s->ro, err, NULL);
	free(url);
	free(shown);
	return m;
}

static int s3src_open_file(void *ctx, const char *path, uint64_t version, void **handle,
                           char why[GGUF_ERR_MAX])
{
	(void)version;   /* the remote layer pins the ETag its first read sees */
	struct s3_source *s = ctx;
	char err[GGUF_ERR_MAX], *url, *shown;
	struct s3_file *file = calloc(1, sizeof *file);
	*handle = NULL;
	if (!file || object_names(s, path, &url, &shown, err) < 0) {
		free(file);
		return -ENOMEM;
	}
	long status;
	int r = 0;
	file->f = remote_open(s->r, url, shown, 1, err, &status);
	if (!file->f && status != 416) {   /* 416: an empty object, read as nothing */
		r = status == 404 ? -ENOENT : status == 403 ? -EACCES : -EIO;
		gguf_errf(why, "%s: %s", shown, err);   /* the server's answer, kept */
		free(file);
		file = NULL;
	}
	free(url);
	free(shown);
	*handle = file;
	return r;
}

static int64_t s3src_read_file(void *ctx, void *handle, char *buf, uint64_t len, uint64_t off)
{
	(void)ctx;
	struct s3_file *file = handle;
	uint64_t size = file->f ? remote_size(file->f) : 0;
	if (off >= size)
		return 0;
	if (len > size - off)
		len = size - off;
	int r = source_read(remote_source(file->f), off, len, buf, NULL);
	return r < 0 ? r : (int64_t)len;
}

static void s3src_close_file(void *ctx, void *handle)
{
	(void)ctx;
	struct s3_file *file = handle;
	if (file->f)
		source_close(remote_source(file->f));
	free(file);
}

/* Frees s's copies, the secrets wiped first. */
static void s3src_free(void *ctx)
{
	struct s3_source *s = ctx;
	remote_free(s->r);
	remote_s3_free(&s->s3);
	free((char *)s->ro.cafile);
	free((char *)s->ro.cache_dir);
	free(s->endpoint);
	free(s->bucket);
	free(s->base);
	free(s->bucket_url);
	free(s);
}

static const struct lib_source_ops s3_ops = {
	.list = s3src_list,
	.unchanged = s3src_unchanged,
	.stat = s3src_stat,
	.same_version = s3src_same_version,
	.open_model = s3src_open_model,
	.open_file = s3src_open_file,
	.read_file = s3src_read_file,
	.close_file = s3src_close_file,
	.free = s3src_free,
};

struct lib_source *lib_source_s3(const struct remote_opts *ro, const char *endpoint,
                                 const char *bucket, const char *prefix, bool virtual_host,
                                 char err[GGUF_ERR_MAX])
{
	struct lib_source *src = calloc(1, sizeof *src);
	struct s3_source *s = calloc(1, sizeof *s);
	bool ok = src && s;
	if (ok) {
		s->ro = *ro;
		ok = remote_s3_copy(&s->s3, ro->s3);
		s->ro.s3 = &s->s3;
		s->ro.cafile = copy_or_null(ro->cafile, &ok);
		s->ro.cache_dir = copy_or_null(ro->cache_dir, &ok);
		s->endpoint = copy_or_null(endpoint, &ok);
		s->bucket = copy_or_null(bucket, &ok);
		s->base = copy_or_null(prefix, &ok);
		s->virtual_host = virtual_host;
		atomic_init(&s->names_left, S3_NAMES_MAX);
		s->mounted = time(NULL);
	}
	if (!ok) {
		snprintf(err, GGUF_ERR_MAX, "out of memory");
		goto fail;
	}
	s->bucket_url = s3_object_url(endpoint, bucket, "", virtual_host, err, GGUF_ERR_MAX);
	if (!s->bucket_url)
		goto fail;
	/* listings and plain files: no disk cache of their own (models have theirs) */
	struct remote_opts lo = s->ro;
	lo.cache_dir = NULL;
	char why[GGUF_ERR_MAX];
	s->r = remote_new(&lo, why);
	if (!s->r) {
		gguf_errf(err, "s3://%s/%s: %s", bucket, prefix, why);
		goto fail;
	}
	src->ops = &s3_ops;
	src->ctx = s;
	src->listed_once = true;
	return src;
fail:
	if (s)
		s3src_free(s);
	free(src);
	return NULL;
}
