/* What the tests' tools (diff_pair, quant_plan_dump, render_dump) share: the model named
 * on their command line, opened. */
#ifndef GGUFS_TEST_TOOL_MODEL_H
#define GGUFS_TEST_TOOL_MODEL_H

struct ggufs_model;

/* The model at path opened for the tool named tool, its mapped reads guarded (guard.h's
 * SIGBUS guard installed): the model, or NULL with "TOOL: why" said on stderr. */
struct ggufs_model *tool_model_open(const char *tool, const char *path);

#endif
