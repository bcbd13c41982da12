/* The text a writer of metadata/KEY has made so far (with -o edits): the key's text as
 * shown at its open, then written at any offset or truncated, a hole or an extension
 * being zeros, until it becomes the key's value (tree_edits_write) at close. One
 * growable buffer (vbytes.h) holds it; nothing here locks. */
#ifndef GGUFS_EDIT_TEXT_H
#define GGUFS_EDIT_TEXT_H

#include <stdint.h>

#include "tree.h"
#include "vbytes.h"

/* The longest text a key takes: past it a write or a truncation is EFBIG (ggufs(1)
 * states it). The largest values real models hold are a few MB of text (a 262,144-token
 * vocabulary, a 280,000-entry merges list; chat templates tens of KB), so 64 MiB holds
 * any with room, while bounding what each writer and each commit may cost. */
#define EDIT_TEXT_MAX (UINT64_C(64) << 20)

/* text (empty) becomes the text of n (a key) in t as it shows now: 0, -ENOMEM or the
 * read's -errno (then text is empty). */
int edit_text_load(struct vbytes *text, const struct tree *t, const struct tree_node *n);
/* p[0..n) written into text at off, past its end grown with zeros between: 0, -EFBIG
 * past EDIT_TEXT_MAX or -ENOMEM (text unchanged). */
int edit_text_write(struct vbytes *text, uint64_t off, const void *p, uint64_t n);
/* text cut or zero-extended to size bytes: 0, -EFBIG past EDIT_TEXT_MAX or -ENOMEM
 * (text unchanged). */
int edit_text_resize(struct vbytes *text, uint64_t size);
/* The text's bytes (never NULL, "" when empty). */
static inline const char *edit_text_bytes(const struct vbytes *text)
{
	return text->p ? (const char *)text->p : "";
}

#endif
