/* A parallel scan of whole models: a list of jobs (a tensor of one model, or a pair of
 * tensors of two models read side by side), each cut into its segments (STATS_SEGMENT
 * values, as stats.h cuts them, unless the scan says fewer), handed to worker threads in
 * order, one visitor call per segment. Workers take the next segment as they finish one,
 * so every core stays busy to the end and each file is read front to back once; a
 * reader thread touches the pages of a mapped model a few megabytes ahead (see
 * stats_scan.c for why). A scan holds no tensor whole, and nothing per segment: what a
 * visitor keeps per segment is its own business. */
#ifndef GGUFS_STATS_SCAN_H
#define GGUFS_STATS_SCAN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct ggufs_model;

/* One job: tensor[0] of model[0], and for a scan of two models tensor[1] of model[1],
 * which has the same number of elements. Set by stats_scan_plan: its segments and the
 * index of its first segment among all of the scan's (its items). */
struct stats_scan_job {
	uint64_t tensor[2];
	uint64_t segments;
	uint64_t first_item;
};

/* Computes segment seg of job (values [seg * segment, + segment) of its tensors; item,
 * its index among all segments in order), 0 or -errno; advances *progress by the stored
 * bytes it has read (atomically). Called from several threads at once, each item once,
 * taken in order (item k only once items 0 .. k - 1 have been taken). */
typedef int (*stats_scan_visit_fn)(void *ctx, const struct stats_scan_job *job, uint64_t seg,
                                   uint64_t item, _Atomic uint64_t *progress);

/* Told the stored bytes done so far and the seconds since the scan started, every
 * 200 ms and once at the end. */
typedef void (*stats_scan_progress_fn)(void *ctx, uint64_t done, double elapsed);

struct stats_scan {
	const struct ggufs_model *model[2];   /* model[1] NULL: a scan of one model */
	struct stats_scan_job *jobs;
	uint64_t n_jobs;
	stats_scan_visit_fn visit;
	void *ctx;
	stats_scan_progress_fn progress;      /* or NULL */
	void *progress_ctx;
	/* values per segment: 0 for STATS_SEGMENT, else a divisor of it that is a multiple
	 * of 65536 (so of every block size). Smaller segments keep the threads' reads of
	 * one file close together (a remote file has one sequential reader's read-ahead). */
	uint64_t segment;
	/* at most this many worker threads; 0: one per core, at most 8. One for a model
	 * streamed (stream.h), which must be read in order */
	unsigned threads;
};

/* Fills in each job's segments and first item (segments of model[0]'s tensor) and
 * returns the number of items. */
uint64_t stats_scan_plan(struct stats_scan *sc);

/* Runs the visitor over every item of a planned scan on every core (at most 8 threads,
 * or this one when no thread can be had), and waits for all. 0, or the -errno of the
 * first item in order whose visit failed, with *failed its job's index; no item is taken
 * after a visit failed, and every item before the failed one has been visited. */
int stats_scan_run(struct stats_scan *sc, uint64_t *failed);

#endif
