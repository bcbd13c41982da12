/* The bundled model, tests/data/tinyllama-q4km.gguf, as the unit tests that read a real
 * model open it. */
#ifndef GGUFS_TEST_TINY_MODEL_H
#define GGUFS_TEST_TINY_MODEL_H

struct ggufs_model;

/* The bundled model opened (model_close it); fails the test (cmocka) where it does not
 * open, saying why. */
struct ggufs_model *tiny_model_open(void);

#endif
