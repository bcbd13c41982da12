/* A lock handed over at a mount's end (lib/0-log/flock_handover.h), between two open
 * file descriptions of one file, which flock treats as two holders: a holder that is
 * not ending is told apart from one that is, and the waiter takes the lock once the
 * ending holder lets go. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "flock_handover.h"

static void test_handover(void **state)
{
	(void)state;
	char path[] = "/tmp/ggufs-flock-XXXXXX";
	int holder = mkstemp(path);
	assert_true(holder >= 0);
	int waiter = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(waiter >= 0);
	unlink(path);

	assert_int_equal(flock_retry(holder, LOCK_EX | LOCK_NB), 0);
	/* held and not ending: the waiter is refused and told so */
	assert_int_not_equal(flock_retry(waiter, LOCK_EX | LOCK_NB), 0);
	assert_false(flock_holder_leaving(waiter));
	/* ending: shared now, which the waiter's question sees, and takes nothing */
	flock_leave(holder);
	assert_true(flock_holder_leaving(waiter));
	assert_true(flock_holder_leaving(waiter));
	assert_int_not_equal(flock_retry(waiter, LOCK_EX | LOCK_NB), 0);
	/* let go: the waiter has it */
	close(holder);
	assert_int_equal(flock_retry(waiter, LOCK_EX | LOCK_NB), 0);
	close(waiter);
}

UNIT_TESTS(cmocka_unit_test(test_handover))
