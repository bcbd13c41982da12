/* What ggufs --diff compares: two models' tensors paired by name, and their metadata
 * keys, with what does not pair. Names are matched as bytes (any bytes, as the file has
 * them), through a seeded hash table (hash.h), so a hostile file cannot make it slow. */
#ifndef GGUFS_DIFF_PLAN_H
#define GGUFS_DIFF_PLAN_H

#include <stdbool.h>
#include <stdint.h>

struct ggufs_model;

/* A tensor or key of model a (index in a) and its namesake in model b. */
struct diff_pair {
	uint64_t a, b;
};

struct diff_plan {
	struct diff_pair *same;   /* tensors of the same name and dims, in a's order */
	uint64_t n_same;
	struct diff_pair *dims;   /* same name, other dims, in a's order */
	uint64_t n_dims;
	uint64_t *only_a;         /* tensors of a that b has not, in a's order */
	uint64_t n_only_a;
	uint64_t *only_b;         /* tensors of b that a has not, in b's order */
	uint64_t n_only_b;
	uint64_t *keys_removed;   /* keys of a that b has not, in a's order */
	uint64_t n_keys_removed;
	uint64_t *keys_added;     /* keys of b that a has not, in b's order */
	uint64_t n_keys_added;
	struct diff_pair *keys_changed;  /* same key, another type or value, in a's order */
	uint64_t n_keys_changed;
};

/* Pairs the tensors and keys of a (the reference) and b. The values of both models'
 * metadata are compared in their headers, which the caller has checked are still there
 * (source_holds). 0, or -ENOMEM. */
int diff_plan_make(const struct ggufs_model *a, const struct ggufs_model *b,
                   struct diff_plan *p);
void diff_plan_free(struct diff_plan *p);

#endif
