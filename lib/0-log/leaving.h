/* One mount's hand-over at its end: what must let go of a file for a quick remount (the
 * edits file), or stop adding to what the next mount shares (a disk cache's stores),
 * registers one entry where it is made, and the mount runs them all at once when the
 * kernel ends its session, while its last requests may still be served.
 *
 * An entry is the owner's (embedded in what it hands over; nothing is allocated): its
 * fn and ctx set, then leaving_add; leaving_remove before the owner is freed. A list
 * runs once (leaving_run): each entry's fn called once, in the order added, without
 * the list's lock held; an entry added after the list has run is run at once by
 * leaving_add, since the mount is ending already (a library's model built while it
 * ends). Thread-safe: adds, removes and the run from any threads at once. */
#ifndef GGUFS_LEAVING_H
#define GGUFS_LEAVING_H

#include <stdbool.h>

struct leaving;

struct leaving_entry {
	void (*fn)(void *ctx);   /* lets go; must not call leaving_* on its own list */
	void *ctx;
	/* leaving.c's (zero until added) */
	struct leaving *l;       /* its list; NULL: not in one */
	struct leaving_entry *prev, *next;
	bool ran;                /* on the list's run side (fn called, or being called) */
	bool running;            /* fn being called */
};

/* An empty list, not run; NULL when out of memory. */
struct leaving *leaving_new(void);
/* Frees l (NULL: nothing); every entry removed first (one left is detached). */
void leaving_free(struct leaving *l);

/* Puts e (fn and ctx set, not in a list) in l, to be run with it; when l has run
 * already, calls e->fn now, in this thread. l NULL: nothing (a file opened outside a
 * mount: --check, a test). */
void leaving_add(struct leaving *l, struct leaving_entry *e);
/* Takes e out of its list, first waiting for its fn when it is being called (the owner
 * may then free what fn uses). An entry never added, or removed already: nothing. Not
 * from an entry's fn. */
void leaving_remove(struct leaving_entry *e);
/* Calls every entry's fn once, in the order added, and marks l run (later adds run at
 * once). Only the first call runs them; another, meanwhile or later, returns once they
 * have all been called. l NULL: nothing. Not from an entry's fn. */
void leaving_run(struct leaving *l);

#endif
