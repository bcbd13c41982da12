/* What library.c (slots, folders, models), its providers (lib_*.c, library_compare.c)
 * and library_table.c (models.tsv and .json) share. Nothing outside lib/7-library/
 * includes this. */
#ifndef GGUFS_LIBRARY_IMPL_H
#define GGUFS_LIBRARY_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "library.h"
#include "library_names.h"

struct lib_slot;

/* One line of models.tsv: what the model's header says, kept once known. */
struct lib_row {
	bool broken;
	char *arch, *name;          /* general.architecture and general.name, or NULL */
	size_t arch_len, name_len;
	bool has_ftype, has_ctx, has_layers, has_kv;
	uint64_t ftype, params, bytes, ctx, layers, kv, tensor_bytes;
	uint64_t files;             /* the files it is in (models.tsv's "shards") */
	char sha256[65];            /* the source's for the first file, or "" */
};

/* The row of model m (malloc'ed, lib_row_free), or NULL out of memory; sha256 the
 * source's hash of its first file, or NULL. */
struct lib_row *lib_row_of(const struct ggufs_model *m, const char *sha256);
/* The source's sha256 of slot s's file, or NULL. */
const char *lib_slot_sha256(const struct library *lib, const struct lib_slot *s);
struct lib_row *lib_row_broken(void);
void lib_row_free(struct lib_row *row);

enum model_state { MODEL_UNBUILT, MODEL_BUILDING, MODEL_BUILT, MODEL_BROKEN, MODEL_STALE };

/* What the library shows of an entry beside its name and number: its mode, owner, size
 * and times (a slot is kept for every name of every folder listed, and struct stat is
 * twice this size). */
struct lib_attr {
	mode_t mode;
	uid_t uid;
	gid_t gid;
	off_t size;
	struct timespec atim, mtim, ctim;
};

struct lib_child {
	struct lib_slot *slot;
};

struct lib_slot {
	uint64_t no;              /* generation << LIB_INDEX_BITS | its place in lib->slots */
	/* what holds it beside its folder's listing (it is freed when nothing does and no
	 * listing has it): each ref in use, each computation's, walk's and listing's
	 * hold, and the kernel's lookups not yet forgotten (kernel of them); the root: the
	 * library itself */
	uint64_t holds;
	uint64_t kernel;
	/* the folder whose listing has it: NULL for the root, and once it is not in that
	 * listing any more (a folder does not hold it otherwise, nor it its folder) */
	struct lib_slot *folder;
	/* the slots of its listing in use: held, or (a folder) with such slots in its own
	 * listing. A slot is in use while held or while this is not 0; a folder not in use
	 * is idle, and its listing may be let go (lib_listings_trim) */
	uint64_t busy_children;
	/* an idle folder with a listing kept: its place in lib's list of them */
	struct lib_slot *idle_prev, *idle_next;
	bool in_idle;
	struct lib_slot *next_free;   /* a list of slots being freed (lib_slot_drop), then of
	                               * those freed whose model waits for lib_unlock */
	enum lib_node_type type;
	/* its names, each kept once: src the entry's path in the source (the folder, the
	 * file, a model's first file), taken from its listing (owns_src) or lent by a
	 * source that keeps its paths (a hub listing); path the same string when equal
	 * (every folder and plain file), else made (owns_path: a model shown as NAME); name
	 * the end of path */
	const char *name;
	const char *path;         /* in the library ("" for the root) */
	const char *src;
	bool owns_src, owns_path; /* which of them the slot frees */
	uint64_t parent;          /* the number of the folder holding it */
	uint64_t version;         /* of the entry (a model: of all its files) */
	uint64_t first_version;   /* a model: of its first file alone */
	struct lib_attr st;       /* of the entry (a model: its first file's) */
	/* its device and inode (a model: its first file's, as listed; a folder: now, while
	 * st may be older, since a folder keeps its slot while its name stays a folder),
	 * 0 for a source without them */
	dev_t dev;
	ino_t ino;
	uint32_t files;           /* a model: its files in the folder */
	/* a folder: its listing, sorted by name, and the version it was read at */
	bool listed;
	bool listing;             /* a thread is listing it, without the lock */
	uint64_t lists_done;      /* listings read into it so far */
	uint64_t dir_version;
	struct lib_slot **children;
	size_t n_children;
	/* a model */
	enum model_state state;
	struct ggufs_model *m;
	struct tree *t;
	char *error;              /* a broken model's "ggufs: LINE\n" */
	uint64_t users;           /* requests and open files that hold it built */
	uint64_t last_used;       /* the library's clock at its last use */
	struct lib_row *row;
};

/* A comparison kept (library_compare.c): compare/OTHER of model slot this. */
struct lib_compare {
	uint64_t this_no, other_no;
	char *text;
	size_t len;
	uint64_t last_used;       /* the library's clock at its last read */
};

/* Built models taken out of their slots by trim, released at lib_unlock. */
#define LIB_TRIM_MAX 4
struct lib_trimmed {
	struct tree *t[LIB_TRIM_MAX];
	struct ggufs_model *m[LIB_TRIM_MAX];
	unsigned n;
};

struct library {
	struct lib_source *src;
	pthread_mutex_t lock;      /* everything below, and every slot's fields */
	pthread_cond_t built;      /* a model finished building */
	pthread_cond_t listed;     /* a folder's listing ended */
	struct lib_slot **slots;   /* by place (NULL: free); [0] is the root */
	/* the root's slot, set at open: it lives as long as the library, while the table
	 * above moves when it grows, so threads without the lock read the root here */
	struct lib_slot *root;
	size_t n_slots, cap;       /* places used so far, and room */
	/* the numbers freed places take next (their next generation), oldest first: a ring
	 * of cap_free, n_free of them from first_free */
	uint32_t *free_nos;
	size_t first_free, n_free, cap_free;
	uint64_t clock;
	size_t idle_built;         /* built models without users */
	/* the idle folders whose listings are kept, least recently idle first, and the
	 * slots of those listings (a source whose folders may show under many paths,
	 * lib_source.links, keeps at most LIB_KEEP_IDLE_ENTRIES of them) */
	struct lib_slot *idle_first, *idle_last;
	size_t idle_entries;
	atomic_uint_fast64_t live_slots;   /* slots now, the root's among them */
	uint64_t slots_peak;       /* the most live slots since memory was last given back */
	atomic_uint_fast64_t opened, tsv_size, json_size;
	/* the comparisons kept, and their texts' bytes (under lock) */
	struct lib_compare *compares;
	size_t n_compares, cap_compares;
	uint64_t compare_bytes;
	pthread_mutex_t compare_lock;   /* held while a comparison is computed */
	atomic_uint_fast64_t compares_made;
	const struct tree_kit *kit;   /* every model's tree's providers */
	struct tree_kit *own_kit;     /* kit, when library_open was given none */
	/* what the lock's holder let go and lib_unlock releases once it is let go: slots
	 * freed with a built model (by next_free), models trimmed */
	struct lib_slot *gone;
	struct lib_trimmed trimmed;
};

/* The library's number of low number low of slot number no. */
static inline uint64_t lib_ino(uint64_t no, uint64_t low)
{
	return no << LIB_LOW_BITS | low;
}

/* A library ref's slot (NULL: the root's own files), and compare/OTHER's other. */
static inline struct lib_slot *lib_ref_slot(const struct node_ref *r)
{
	return (struct lib_slot *)r->hold[LIB_HOLD_SLOT];
}
static inline struct lib_slot *lib_ref_other(const struct node_ref *r)
{
	return (struct lib_slot *)r->hold[LIB_HOLD_OTHER];
}

/* Copies [off, off + len) of text (n bytes, NULL when n is 0) into buf: the count
 * copied, 0 past its end (the reads of the library's own texts). */
static inline int64_t lib_text_read(const char *text, uint64_t n, char *buf, uint64_t len,
                                    uint64_t off)
{
	if (off >= n)
		return 0;
	const uint64_t k = n - off < len ? n - off : len;
	memcpy(buf, text + off, k);
	return (int64_t)k;
}

/* Lets go of lib->lock, then releases the models slots freed or trim took meanwhile
 * (lib->gone, lib->trimmed): closing a model waits for its quants/ blocks in flight and
 * unmaps its files, which no request should wait for under the lock. Every holder of
 * the lock lets go of it here. */
void lib_unlock(struct library *lib);

/* One more hold on slot s, and one less (under lib->lock): a slot let go by its last
 * hold and in no listing is freed, and so, in turn, what it alone held (its listing's
 * slots not in use). A folder's last hold let go leaves its listing idle (kept, up to
 * the bound of lib_listings_trim). */
void lib_slot_hold(struct library *lib, struct lib_slot *s);
void lib_slot_drop(struct library *lib, struct lib_slot *s);
/* Lets go of the listings of the least recently idle folders while more than
 * LIB_KEEP_IDLE_ENTRIES slots are in them (under lib->lock; nothing for a source whose
 * folders each have one path): their slots are freed, numbers and all, and listed again
 * (with new numbers) when next used. */
void lib_listings_trim(struct library *lib);
/* True, once, when the slots freed since the last time are worth giving their memory
 * back for (mem_give_back, after the lock is let go): fewer than half the most there
 * were since, and LIB_KEEP_IDLE_ENTRIES fewer at least (under lib->lock). */
bool lib_shrunk(struct library *lib);

/* Lists folder (when it changed, or always with force) under lib->lock, as
 * library.c's folder_list does, its error said in the log: 0 or -errno. */
int lib_folder_refresh(struct library *lib, struct lib_slot *folder, bool force);
/* Model slot s built and held for a computation, called without the lock: 0 with its
 * model in *m (lib_slot_release lets go); -EIO for a model that does not parse, with
 * its "ggufs: LINE\n" in *error; -ESTALE, -ENOMEM. */
int lib_slot_acquire(struct library *lib, struct lib_slot *s, const struct ggufs_model **m,
                     const char **error);
void lib_slot_release(struct library *lib, struct lib_slot *s);
/* The length of compare/OTHER r's text into *size, computing the comparison when no
 * length is kept (its first lookup; others of the same pair wait for it, and the text
 * is kept): 0, or -EIO when a model does not parse or cannot be read (said in the log
 * and in why), -ESTALE, -ENOMEM. The length stays known for the mount even when the
 * text is let go. */
int lib_compare_size(struct library *lib, const struct node_ref *r, uint64_t *size,
                     char why[GGUF_ERR_MAX]);
/* Frees the comparisons kept (library_free). */
void lib_compares_free(struct library *lib);
/* Lets go of the comparisons kept of slot number no, freed (under lib->lock). */
void lib_compares_forget(struct library *lib, uint64_t no);

/* The model of slot s opened from the source (without the lock), if its files are the
 * versions the slot was listed with (the source's open_listed, checked before they are
 * read; else its open_model, its first file compared after): the model, or NULL with
 * *stale (err empty: nothing of another file is said) or with one line in err. */
struct ggufs_model *lib_slot_open(struct library *lib, const struct lib_slot *s, bool *stale,
                                  char err[GGUF_ERR_MAX]);

/* A listing of a folder or compare/, as it was when listed (the per-open state of
 * their providers): names, numbers, and which are directories. A name is not copied:
 * the listing holds the slot it names (a folder of 200,000 files listed while open
 * costs no second copy of their names). */
struct lib_list_entry {
	const char *name;
	uint64_t ino;
	bool dir;
	struct lib_slot *held;    /* the slot whose name it is, or NULL (a constant) */
};
struct lib_listing {
	size_t n;
	struct lib_list_entry e[];
};
/* A listing of room entries, none yet (under lib->lock), or NULL out of memory. */
struct lib_listing *lib_listing_new(size_t room);
/* Appends the entry naming slot c, numbered ino, to l, holding c (under lib->lock). */
void lib_listing_add(struct library *lib, struct lib_listing *l, struct lib_slot *c,
                     uint64_t ino, bool dir);
/* Lets go of l and the slots it holds (without the lock: it takes it). */
void lib_listing_free(struct library *lib, struct lib_listing *l);
/* A listing's provider operations (the folder's and compare/'s): its entries, from the
 * open's listing. */
uint64_t lib_listing_count(const struct node_ref *dir, void *open);
bool lib_listing_entry(const struct node_ref *dir, void *open, uint64_t i,
                       struct node_dirent *e);
void lib_listing_close(const struct node_ref *dir, void *open);

/* A node of a built model's tree (not its root: the model directory's) as r's
 * provider, context and node (lib_tree.c): the rest of r is the library's. */
void lib_tree_ref(const struct tree *t, const struct tree_node *n, struct node_ref *r);
/* r's attributes and listing as the tree's node n of t gives them (the model
 * directory's, from its tree's root). */
void lib_tree_attr(const struct tree *t, const struct tree_node *n, struct node_attr *a);
uint64_t lib_tree_count(const struct tree *t, const struct tree_node *n);
void lib_tree_entry(const struct tree *t, const struct tree_node *n, uint64_t i,
                    struct node_dirent *e);

/* The attributes a library's own entry of slot s shows: its read bits, owner and times
 * (the root's files: the root's). */
void lib_attr_of_slot(const struct lib_slot *s, struct node_attr *a);

/* The row of model slot s, opening the model for it when not known yet; called without
 * the lock. NULL out of memory. */
const struct lib_row *lib_slot_row(struct library *lib, struct lib_slot *s);

#endif
