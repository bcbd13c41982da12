#include "errline.h"

#include <stdarg.h>
#include <stdio.h>

void gguf_errf(char err[GGUF_ERR_MAX], const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, GGUF_ERR_MAX, fmt, ap);
	va_end(ap);
}
