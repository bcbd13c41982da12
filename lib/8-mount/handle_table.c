#include "handle_table.h"

#include <stdlib.h>
#include <string.h>

struct handle_slot {
	void *p;            /* NULL: free */
	uint64_t id;
	unsigned refs;      /* the open's (until released) and each request's */
	bool released;
};

uint64_t handle_table_add(struct handle_table *tab, void *p)
{
	pthread_mutex_lock(&tab->lock);
	size_t i = 0;
	while (i < tab->cap && tab->slots[i].p)
		i++;
	if (i == tab->cap) {
		size_t cap = tab->cap ? 2 * tab->cap : 64;
		struct handle_slot *s = cap < UINT32_MAX ? realloc(tab->slots, cap * sizeof *s) : NULL;
		if (!s) {
			pthread_mutex_unlock(&tab->lock);
			return 0;
		}
		memset(s + tab->cap, 0, (cap - tab->cap) * sizeof *s);
		tab->slots = s;
		tab->cap = cap;
	}
	if (++tab->generation == 0)   /* id 0 is "none" */
		tab->generation = 1;
	tab->slots[i] = (struct handle_slot){ .p = p, .refs = 1,
	                                      .id = (uint64_t)tab->generation << 32 | i };
	uint64_t id = tab->slots[i].id;
	pthread_mutex_unlock(&tab->lock);
	return id;
}

void *handle_table_slot(struct handle_table *tab, size_t i)
{
	return i < tab->cap ? tab->slots[i].p : NULL;
}

/* The slot of id, or NULL. Lock held. */
static struct handle_slot *slot_of(struct handle_table *tab, uint64_t id)
{
	size_t i = (size_t)(id & 0xffffffffu);
	return i < tab->cap && tab->slots[i].p && tab->slots[i].id == id ? &tab->slots[i] : NULL;
}

void *handle_table_take(struct handle_table *tab, uint64_t id)
{
	pthread_mutex_lock(&tab->lock);
	struct handle_slot *s = slot_of(tab, id);
	void *p = s && !s->released ? s->p : NULL;
	if (p)
		s->refs++;
	pthread_mutex_unlock(&tab->lock);
	return p;
}

bool handle_table_drop(struct handle_table *tab, uint64_t id, bool release)
{
	pthread_mutex_lock(&tab->lock);
	struct handle_slot *s = slot_of(tab, id);
	bool last = false;
	if (s) {
		if (release && !s->released) {
			s->released = true;
			s->refs--;
		}
		if (!release)
			s->refs--;
		last = s->refs == 0;
		if (last)
			*s = (struct handle_slot){ 0 };
	}
	pthread_mutex_unlock(&tab->lock);
	return last;
}
