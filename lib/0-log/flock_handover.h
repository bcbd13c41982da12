/* An exclusive flock that a mount holds for its life (a disk cache entry, an edits file)
 * and hands over at its end. A mount that is ending makes its lock shared
 * (flock_leave); another process that finds the lock taken asks whether its holder is
 * ending (flock_holder_leaving), and if so waits a moment for it instead of giving up
 * (a quick remount while the old daemon still exits).
 *
 * flock turns a lock shared by letting go of it first, so a waiter may take it in
 * between: a holder stores nothing once it has left, and never blocks to leave (it would
 * wait for the new mount to end). */
#ifndef GGUFS_FLOCK_HANDOVER_H
#define GGUFS_FLOCK_HANDOVER_H

#include <stdbool.h>

/* flock(fd, op), tried again when a signal interrupts it: 0, or -1 with errno. */
int flock_retry(int fd, int op);

/* The holder of fd's exclusive lock is ending: the lock made shared, without blocking
 * (taken by a waiter meanwhile, it is the waiter's). */
void flock_leave(int fd);

/* After an exclusive try on fd failed: true when its holder is ending (its lock is
 * shared, which a shared try joins, or it has let go meanwhile and the next exclusive
 * try takes it). Holds nothing after. */
bool flock_holder_leaving(int fd);

#endif
