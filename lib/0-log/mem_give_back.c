/* mem_give_back.h over glibc's malloc_trim. */
#include <stdlib.h>   /* (features.h: __GLIBC__) */

#include "mem_give_back.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

void mem_give_back(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}
