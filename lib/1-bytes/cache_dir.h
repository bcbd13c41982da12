/* Where the disk cache (of remote files and computed ones alike) lives when the command
 * line does not say: the XDG cache directory's ggufs/, as llama.cpp's -hf and
 * huggingface_hub keep theirs. */
#ifndef GGUFS_CACHE_DIR_H
#define GGUFS_CACHE_DIR_H

/* The disk cache directory for -o cache_dir given (NULL: not given): given itself; NULL
 * (no disk cache) for "none"; else the default, $XDG_CACHE_HOME/ggufs (an absolute
 * XDG_CACHE_HOME only) or ~/.cache/ggufs, its parents made mode 0700 when missing, found
 * once per process (NULL without a home or when they cannot be made: a cache the user
 * did not ask for never stops a mount). The disk cache (dc_open) holds any of them to
 * its rules. Not freed: given's, or the process's own. Thread-safe. */
const char *cache_dir_default(const char *given);

#endif
