/* Memory freed in many small pieces given back to the system: malloc keeps what a burst
 * of small allocations freed (a heap's free pages amid the live ones, in every thread's
 * arena) unless asked, so a daemon's RSS stays at its peak otherwise. */
#ifndef GGUFS_MEM_GIVE_BACK_H
#define GGUFS_MEM_GIVE_BACK_H

/* Gives the free pages of every malloc arena back (glibc's malloc_trim; nothing with
 * another C library). It walks the heaps: call it after a large release, not under a
 * lock others wait on. */
void mem_give_back(void);

#endif
