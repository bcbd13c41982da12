/* Surviving a model file that shrinks under the mount. A read of a mapped page that the
 * file no longer has raises SIGBUS; a thread that is about to touch the mapping arms a
 * jump buffer, and the handler jumps back there instead of killing the daemon.
 *
 *   sigjmp_buf jb;
 *   if (sigsetjmp(jb, 0)) { guard_disarm(); return -EIO; }
 *   guard_arm(&jb);
 *   ... touch the mapping ...
 *   guard_disarm();
 *
 * The handler is installed with SA_NODEFER, so no signal mask needs restoring and
 * sigsetjmp(jb, 0) costs no system call. */
#ifndef GGUFS_GUARD_H
#define GGUFS_GUARD_H

#include <setjmp.h>

/* Installs the process-wide SIGBUS handler; again after anyone else replaced it. */
void guard_install(void);
/* From now on a SIGBUS in this thread jumps to jb (armed per thread). */
void guard_arm(sigjmp_buf *jb);
/* A SIGBUS in this thread kills the process again, as a real bug should. */
void guard_disarm(void);

/* The pattern above as one call: fn(ctx) with the guard armed. 0, or -EIO when a page
 * it touched had gone (fn then stopped part way). fn must neither lock nor allocate: a
 * jump out of it would leave the lock held or the memory lost. */
int guard_call(void (*fn)(void *ctx), void *ctx);

#endif
