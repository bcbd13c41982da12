/* One mount's hand-over at its end (lib/0-log/leaving.h): each entry's fn runs once, in
 * the order added; one removed first never runs; one added after the run runs at once;
 * a remove, or a second run, waits for a fn being called; adds, removes and the run from
 * several threads at once (under TSan in CI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
#include <time.h>
#include <cmocka.h>

#include "unit.h"

#include "leaving.h"

/* What an entry's fn records: how often it ran, and in which place of all the calls. */
struct counted {
	struct leaving_entry e;
	atomic_int calls;
	int order;
};

static atomic_int calls_so_far;

static void count_call(void *ctx)
{
	struct counted *c = ctx;
	atomic_fetch_add(&c->calls, 1);
	c->order = atomic_fetch_add(&calls_so_far, 1);
}

static void counted_init(struct counted *c)
{
	*c = (struct counted){ .e = { .fn = count_call, .ctx = c }, .order = -1 };
}

/* Sleeps ms milliseconds (no timing is asserted: a pause that lets a wrong order show). */
static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void test_runs_once_in_order(void **state)
{
	(void)state;
	struct leaving *l = leaving_new();
	assert_non_null(l);
	struct counted c[3];
	atomic_store(&calls_so_far, 0);
	for (int i = 0; i < 3; i++) {
		counted_init(&c[i]);
		leaving_add(l, &c[i].e);
	}
	assert_int_equal(atomic_load(&c[0].calls), 0);   /* nothing before the run */
	leaving_run(l);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&c[i].calls), 1);
		assert_int_equal(c[i].order, i);
	}
	leaving_run(l);   /* once */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&c[i].calls), 1);
		leaving_remove(&c[i].e);
		leaving_remove(&c[i].e);   /* twice: nothing */
	}
	leaving_free(l);
}

static void test_removed_never_runs(void **state)
{
	(void)state;
	struct leaving *l = leaving_new();
	assert_non_null(l);
	struct counted kept, gone, never, outside;
	counted_init(&kept);
	counted_init(&gone);
	counted_init(&never);
	counted_init(&outside);
	leaving_add(l, &kept.e);
	leaving_add(l, &gone.e);
	leaving_remove(&gone.e);
	leaving_remove(&never.e);          /* never added: nothing */
	leaving_add(NULL, &outside.e);     /* no list: nothing, and nothing to remove */
	leaving_remove(&outside.e);
	leaving_run(l);
	leaving_run(NULL);
	assert_int_equal(atomic_load(&kept.calls), 1);
	assert_int_equal(atomic_load(&gone.calls), 0);
	assert_int_equal(atomic_load(&never.calls), 0);
	assert_int_equal(atomic_load(&outside.calls), 0);
	leaving_remove(&kept.e);
	leaving_free(l);
	leaving_free(NULL);
}

static void test_added_after_run_runs_at_once(void **state)
{
	(void)state;
	struct leaving *l = leaving_new();
	assert_non_null(l);
	leaving_run(l);   /* an empty list runs too */
	struct counted late;
	counted_init(&late);
	leaving_add(l, &late.e);
	assert_int_equal(atomic_load(&late.calls), 1);   /* in leaving_add itself */
	leaving_run(l);
	assert_int_equal(atomic_load(&late.calls), 1);
	leaving_remove(&late.e);
	/* one left in the list at its free is detached: its remove does nothing */
	struct counted left;
	counted_init(&left);
	leaving_add(l, &left.e);
	leaving_free(l);
	leaving_remove(&left.e);
	assert_int_equal(atomic_load(&left.calls), 1);
}

/* An entry whose fn holds until released, and says when it has entered and returned. */
struct gated {
	struct leaving_entry e;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool entered, released;
	atomic_bool returned;
	struct leaving *l;
	bool saw_returned;   /* what the thread that waited for it saw on its way out */
};

static void gated_fn(void *ctx)
{
	struct gated *g = ctx;
	pthread_mutex_lock(&g->lock);
	g->entered = true;
	pthread_cond_broadcast(&g->cond);
	while (!g->released)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
	atomic_store(&g->returned, true);
}

static void gated_init(struct gated *g, struct leaving *l)
{
	*g = (struct gated){ .e = { .fn = gated_fn, .ctx = g }, .l = l };
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
}

/* Whether g's fn has been entered within 10 s (a hang guard: it is at once). */
static bool gated_wait_entered(struct gated *g)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&g->lock);
	int r = 0;
	while (!g->entered && r == 0)
		r = pthread_cond_timedwait(&g->cond, &g->lock, &until);
	const bool entered = g->entered;
	pthread_mutex_unlock(&g->lock);
	return entered;
}

static void gated_release(struct gated *g)
{
	pthread_mutex_lock(&g->lock);
	g->released = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

static void gated_destroy(struct gated *g)
{
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
}

static void *run_thread(void *arg)
{
	struct gated *g = arg;
	leaving_run(g->l);
	return NULL;
}

static void *remove_thread(void *arg)
{
	struct gated *g = arg;
	leaving_remove(&g->e);
	g->saw_returned = atomic_load(&g->returned);
	return NULL;
}

static void *run_again_thread(void *arg)
{
	struct gated *g = arg;
	leaving_run(g->l);
	g->saw_returned = atomic_load(&g->returned);
	return NULL;
}

/* A remove (or a second run) while the entry's fn is being called returns only after
 * it has returned: the owner may free what fn uses. */
static void check_waits_for_running(void *(*waiter)(void *))
{
	struct leaving *l = leaving_new();
	assert_non_null(l);
	struct gated g;
	gated_init(&g, l);
	leaving_add(l, &g.e);
	pthread_t runner, other;
	assert_int_equal(pthread_create(&runner, NULL, run_thread, &g), 0);
	assert_true(gated_wait_entered(&g));
	assert_int_equal(pthread_create(&other, NULL, waiter, &g), 0);
	pause_ms(50);   /* room for a waiter that does not wait to return too early */
	gated_release(&g);
	assert_int_equal(pthread_join(other, NULL), 0);
	assert_int_equal(pthread_join(runner, NULL), 0);
	assert_true(g.saw_returned);
	leaving_remove(&g.e);
	leaving_free(l);
	gated_destroy(&g);
}

static void test_remove_waits_for_running(void **state)
{
	(void)state;
	check_waits_for_running(remove_thread);
}

static void test_second_run_waits_for_first(void **state)
{
	(void)state;
	check_waits_for_running(run_again_thread);
}

/* A remove that waits for an entry run by leaving_add (added after the run, in another
 * thread) as for one run by leaving_run. */
static void *add_thread(void *arg)
{
	struct gated *g = arg;
	leaving_add(g->l, &g->e);
	return NULL;
}

static void test_remove_waits_for_late_add(void **state)
{
	(void)state;
	struct leaving *l = leaving_new();
	assert_non_null(l);
	leaving_run(l);
	struct gated g;
	gated_init(&g, l);
	pthread_t adder, remover;
	assert_int_equal(pthread_create(&adder, NULL, add_thread, &g), 0);
	const bool entered = gated_wait_entered(&g);
	if (!entered)
		gated_release(&g);   /* (the adder, should its fn come late) */
	assert_true(entered);
	assert_int_equal(pthread_create(&remover, NULL, remove_thread, &g), 0);
	pause_ms(50);
	gated_release(&g);
	assert_int_equal(pthread_join(remover, NULL), 0);
	assert_int_equal(pthread_join(adder, NULL), 0);
	assert_true(g.saw_returned);
	leaving_free(l);
	gated_destroy(&g);
}

/* Several threads add entries and remove some while the list runs: every entry still
 * in the list at the end ran exactly once, none ran twice. */
#define STRESS_THREADS 4
#define STRESS_ENTRIES 400

struct stress {
	struct leaving *l;
	struct counted c[STRESS_ENTRIES];
	bool removed[STRESS_ENTRIES];
	atomic_int *added;   /* entries added so far by every thread */
};

static void *stress_thread(void *arg)
{
	struct stress *s = arg;
	for (int i = 0; i < STRESS_ENTRIES; i++) {
		leaving_add(s->l, &s->c[i].e);
		atomic_fetch_add(s->added, 1);
		if (i % 3 == 1) {   /* some go again at once, some later */
			leaving_remove(&s->c[i].e);
			s->removed[i] = true;
		}
		if (i % 3 == 2 && i >= 5) {
			leaving_remove(&s->c[i - 5].e);
			s->removed[i - 5] = true;
		}
	}
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	struct leaving *l = leaving_new();
	assert_non_null(l);
	atomic_int added = 0;
	struct stress *s = calloc(STRESS_THREADS, sizeof *s);
	assert_non_null(s);
	pthread_t t[STRESS_THREADS];
	for (int k = 0; k < STRESS_THREADS; k++) {
		s[k].l = l;
		s[k].added = &added;
		for (int i = 0; i < STRESS_ENTRIES; i++)
			counted_init(&s[k].c[i]);
		assert_int_equal(pthread_create(&t[k], NULL, stress_thread, &s[k]), 0);
	}
	/* the run meets adds and removes under way (bounded: 10 s at most) */
	for (int tries = 0; atomic_load(&added) < STRESS_THREADS * STRESS_ENTRIES / 4 &&
	                    tries < 10000; tries++)
		pause_ms(1);
	leaving_run(l);
	for (int k = 0; k < STRESS_THREADS; k++)
		assert_int_equal(pthread_join(t[k], NULL), 0);
	for (int k = 0; k < STRESS_THREADS; k++)
		for (int i = 0; i < STRESS_ENTRIES; i++) {
			const int calls = atomic_load(&s[k].c[i].calls);
			assert_true(calls <= 1);
			if (!s[k].removed[i]) {
				assert_int_equal(calls, 1);
				leaving_remove(&s[k].c[i].e);
			}
		}
	leaving_free(l);
	free(s);
}

UNIT_TESTS(cmocka_unit_test(test_runs_once_in_order),
           cmocka_unit_test(test_removed_never_runs),
           cmocka_unit_test(test_added_after_run_runs_at_once),
           cmocka_unit_test(test_remove_waits_for_running),
           cmocka_unit_test(test_second_run_waits_for_first),
           cmocka_unit_test(test_remove_waits_for_late_add),
           cmocka_unit_test(test_threads))
