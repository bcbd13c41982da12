/* Bearer tokens for remote models: which server a token goes to, and how one is read.
 * A token is a secret: never echoed, never in an error line, wiped when freed.
 *
 * The policy, as the hub's own client has it: -o token_file's token goes to the URL
 * given, whatever its server; $HF_TOKEN's only to the hub (an hf:// name, or a URL on
 * $HF_ENDPOINT's scheme, host and port), so that a hub token set in a shell never goes
 * to some other server named on the command line. Either goes only to the origin of the
 * URL as given, never to where a redirect leads (remote_fetch.c). */
#ifndef GGUFS_TOKEN_H
#define GGUFS_TOKEN_H

#include <stdbool.h>

#include "errline.h"
#include "remote.h"

/* The token for url (http or https; an hf:// name already expanded, hf saying it was
 * one), from token_file (may be NULL) or hf_token ($HF_TOKEN's value, may be NULL),
 * with endpoint ($HF_ENDPOINT, NULL or "": HF_ENDPOINT_DEFAULT) naming the hub. Sets
 * ro->hub, and ro->token_from_env or ro->token_withheld (HF_TOKEN set, but not for this
 * server). *token: malloc'ed, or NULL for none. 0, or -1 with err (a token file that
 * token_read_file refuses, out of memory). */
int token_choose(const char *url, bool hf, const char *endpoint, const char *token_file,
                 const char *hf_token, struct remote_opts *ro, char **token,
                 char err[GGUF_ERR_MAX]);

/* The token in the file at path, without its trailing newline (LF or CR LF): malloc'ed,
 * or NULL with err ("PATH: ..."). Refused, as ssh refuses a private key others can
 * read: a file readable by group or others (the token is as good as theirs), an empty
 * one, and a NUL byte in the line (it would cut the token short, silently). */
char *token_read_file(const char *path, char err[GGUF_ERR_MAX]);

/* Whether token can be a bearer token: visible ASCII only (RFC 6750's characters are
 * fewer). Anything else, a CR LF above all, would make a header of its own. */
bool token_ok(const char *token);

/* Wipes and frees a token, or any other secret string (an S3 key, a signed header
 * line, a credentials file's text): nothing of it stays in freed memory. NULL: nothing. */
void token_free(char *token);

#endif
