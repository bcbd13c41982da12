#include "edit_text.h"

#include <errno.h>
#include <string.h>

/* After a failed growth: the text as it was, and usable again (vbytes' failure is
 * sticky; a writer may try again with less). */
static int out_of_memory(struct vbytes *text)
{
	text->failed = false;
	return -ENOMEM;
}

int edit_text_load(struct vbytes *text, const struct tree *t, const struct tree_node *n)
{
	vbytes_resize(text, n->size);
	if (text->failed)
		return out_of_memory(text);
	int64_t r = n->size ? tree_read(t, n, (char *)text->p, n->size, 0, NULL) : 0;
	vbytes_resize(text, r < 0 ? 0 : (uint64_t)r);
	return r < 0 ? (int)r : 0;
}

int edit_text_resize(struct vbytes *text, uint64_t size)
{
	if (size > EDIT_TEXT_MAX)
		return -EFBIG;
	vbytes_resize(text, size);
	return text->failed ? out_of_memory(text) : 0;
}

int edit_text_write(struct vbytes *text, uint64_t off, const void *p, uint64_t n)
{
	uint64_t end;
	if (__builtin_add_overflow(off, n, &end) || end > EDIT_TEXT_MAX)
		return -EFBIG;
	if (end > text->len && edit_text_resize(text, end) != 0)
		return -ENOMEM;
	if (n)
		memcpy(text->p + off, p, (size_t)n);
	return 0;
}
