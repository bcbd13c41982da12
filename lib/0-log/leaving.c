/* One mount's hand-over at its end (leaving.h). */
#include "leaving.h"

#include <pthread.h>
#include <stdlib.h>

/* Entries in the order added, linked through their prev and next. */
struct leaving_list {
	struct leaving_entry *first, *last;
};

struct leaving {
	pthread_mutex_t lock;      /* everything here and in its entries' l, links, flags */
	pthread_cond_t changed;    /* an entry's fn returned, or the run ended */
	bool run;                  /* leaving_run has begun: adds run at once */
	bool finished;             /* the run has called every pending entry's fn */
	struct leaving_list pending;   /* not run yet */
	struct leaving_list ran;       /* run, or being run */
};

/* Appends e to list (lock held). */
static void leaving_list_push(struct leaving_list *list, struct leaving_entry *e)
{
	e->next = NULL;
	e->prev = list->last;
	if (list->last)
		list->last->next = e;
	else
		list->first = e;
	list->last = e;
}

/* Takes e out of list, which holds it (lock held). */
static void leaving_list_unlink(struct leaving_list *list, struct leaving_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		list->first = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		list->last = e->prev;
	e->prev = e->next = NULL;
}

/* Calls e's fn without l's lock (held on entry and on return), e marked running
 * meanwhile so that leaving_remove waits for it. e is on l's ran list. */
static void leaving_call(struct leaving *l, struct leaving_entry *e)
{
	e->running = true;
	pthread_mutex_unlock(&l->lock);
	e->fn(e->ctx);
	pthread_mutex_lock(&l->lock);
	e->running = false;
	pthread_cond_broadcast(&l->changed);
}

struct leaving *leaving_new(void)
{
	struct leaving *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	if (pthread_mutex_init(&l->lock, NULL) != 0) {
		free(l);
		return NULL;
	}
	if (pthread_cond_init(&l->changed, NULL) != 0) {
		pthread_mutex_destroy(&l->lock);
		free(l);
		return NULL;
	}
	return l;
}

void leaving_free(struct leaving *l)
{
	if (!l)
		return;
	struct leaving_list *lists[] = { &l->pending, &l->ran };
	for (unsigned i = 0; i < 2; i++)
		while (lists[i]->first) {
			struct leaving_entry *e = lists[i]->first;
			leaving_list_unlink(lists[i], e);
			e->l = NULL;
		}
	pthread_cond_destroy(&l->changed);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

void leaving_add(struct leaving *l, struct leaving_entry *e)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	e->l = l;
	e->ran = l->run;
	e->running = false;
	leaving_list_push(e->ran ? &l->ran : &l->pending, e);
	if (e->ran)   /* the mount is ending already */
		leaving_call(l, e);
	pthread_mutex_unlock(&l->lock);
}

void leaving_remove(struct leaving_entry *e)
{
	struct leaving *l = e->l;
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	while (e->running)
		pthread_cond_wait(&l->changed, &l->lock);
	leaving_list_unlink(e->ran ? &l->ran : &l->pending, e);
	e->l = NULL;
	pthread_mutex_unlock(&l->lock);
}

void leaving_run(struct leaving *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	if (l->run) {   /* another call's: wait for its end */
		while (!l->finished)
			pthread_cond_wait(&l->changed, &l->lock);
		pthread_mutex_unlock(&l->lock);
		return;
	}
	l->run = true;
	/* an entry removed meanwhile leaves pending; one added goes straight to ran */
	for (struct leaving_entry *e; (e = l->pending.first);) {
		leaving_list_unlink(&l->pending, e);
		e->ran = true;
		leaving_list_push(&l->ran, e);
		leaving_call(l, e);
	}
	l->finished = true;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
}
