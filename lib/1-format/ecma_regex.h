/* A tensor-name pattern as llama-quantize's --tensor-type compiles it: std::regex with
 * its default grammar, ECMAScript (libstdc++'s, in the classic locale), searched with
 * std::regex_search; here through PCRE2 (8-bit, no UTF), after a translation that keeps
 * the ECMAScript meaning where the two grammars part:
 * - escapes: \b (a word boundary; a backspace inside [...]), \d \s \w, \0 \f \n \r \t \v
 *   (\v a vertical tab, not PCRE2's class), \xHH, \uHHHH (its low byte), \cX (libstdc++
 *   reads it as X), a backreference \N; any other escaped character is itself
 *   (libstdc++'s reading: \a \e \g \h \k \o \p \z are PCRE2 escapes, not here);
 * - refused as std::regex refuses them: "(?" other than (?: (?= (?!, "(*", a "{" that
 *   does not open {N} {N,} {N,M}, a quantifier after nothing, "|", "(", an anchor or a
 *   lookahead, a backreference to a group not yet opened, a range starting at \d \s
 *   \w, \B inside [...], unbalanced parentheses or brackets, a lone trailing
 *   backslash, \x and \u without their hex digits;
 * - a quantifier after a quantifier (a{2}{3}, a*+: PCRE2's possessive) repeats the whole,
 *   as libstdc++ does; "." matches anything but \n and \r, "$" only at the end, "[]"
 *   matches nothing and "[^]" anything, a backreference to a group that did not take
 *   part matches nothing.
 * What still differs (man/ggufs.1 says it): [.name.] and [=name=] inside a bracket
 * naming a character by its name ("hyphen", "zero"), which libstdc++ takes and this
 * refuses ([.a.] of a letter is read); a pattern too large for libstdc++'s automaton
 * (100000 states: a{99999}) but not for PCRE2, or the other way round. A search gives
 * up after a bound of backtracking steps (libstdc++ has none and may run for ever): the
 * caller refuses then. */
#ifndef GGUFS_ECMA_REGEX_H
#define GGUFS_ECMA_REGEX_H

#include <stddef.h>

#include "errline.h"

struct ecma_regex;

/* Compiles pattern (len bytes, NULs allowed) as std::regex(pattern) would. NULL with one
 * line in err when std::regex would throw (or PCRE2 refuses: the line says why), or out of
 * memory. The result is read-only: searched from any thread at once. */
struct ecma_regex *ecma_regex_compile(const char *pattern, size_t len, char err[GGUF_ERR_MAX]);

/* std::regex_search(s, re): 1 when re matches somewhere in s (len bytes), 0 when not, -1
 * when the search passed its bound of steps or ran out of memory. */
int ecma_regex_search(const struct ecma_regex *re, const char *s, size_t len);

void ecma_regex_free(struct ecma_regex *re);

#endif
