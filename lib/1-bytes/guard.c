#include "guard.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>

static _Thread_local sigjmp_buf *armed;

/* A SIGBUS outside a guarded section is a real bug: die of it as if unhandled. */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (armed) {
		sigjmp_buf *jb = armed;
		armed = NULL;
		siglongjmp(*jb, 1);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void guard_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

void guard_arm(sigjmp_buf *jb)
{
	armed = jb;
}

void guard_disarm(void)
{
	armed = NULL;
}

int guard_call(void (*fn)(void *ctx), void *ctx)
{
	sigjmp_buf jb;
	if (sigsetjmp(jb, 0)) {
		guard_disarm();
		return -EIO;
	}
	guard_arm(&jb);
	fn(ctx);
	guard_disarm();
	return 0;
}
