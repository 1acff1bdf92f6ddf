/* common — status codes, the last-error message, logging, CHECK macros and a clock.
 *
 * Two error regimes, chosen on purpose:
 *  - a programming error is an assert() with file:line;
 *  - anything from outside (a file, a flag, a peer, the network) is a returned wt_status.
 *    The function that detects it calls wt_fail(code, "what was wrong; what to do"), which
 *    records a message for this thread and returns the code; callers propagate with WT_CHECK.
 *    One-shot tools print wt_last_error() and exit nonzero; daemons log it and keep serving.
 */
#ifndef WT_COMMON_H
#define WT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
  WT_OK = 0,
  WT_EINVAL = -1,   /* bad argument, flag, config value or malformed input */
  WT_EIO = -2,      /* a file or socket operation failed */
  WT_ENOMEM = -3,   /* allocation failed */
  WT_ECORRUPT = -4, /* a checksum, magic or size check failed: the data is damaged */
  WT_ENOTFOUND = -5,/* a file, key or name does not exist */
  WT_EMISMATCH = -6,/* well-formed but does not match what was expected (config, version) */
  WT_ENOTSUP = -7,  /* not supported in this build or on this machine */
  WT_ETIMEOUT = -8, /* a deadline or budget ran out */
} wt_status;

/* Records a printf-style message for this thread and returns `code` (so `return wt_fail(...)`
 * reads naturally). The message replaces any earlier one. */
int wt_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last message recorded by wt_fail on this thread, or "" if none. Owned by the library;
 * valid until the next wt_fail on this thread. */
const char *wt_last_error(void);

/* The code of the last wt_fail on this thread (WT_OK if none): what a constructor that returned
 * NULL failed with, so its caller can propagate it (WT_CHECK_NEW). */
int wt_last_status(void);

/* A short name for a status code ("invalid input", "I/O error", ...). Never NULL. */
const char *wt_status_name(int code);

/* Logging to stderr, one line per call. Level from WT_LOG_LEVEL (error, warn, info, debug;
 * default info). The message is written through wt_text_escape, so text from outside that it
 * quotes (a peer's label, a reason) cannot start a line of its own or break the log's UTF-8. */
typedef enum { WT_LOG_ERROR, WT_LOG_WARN, WT_LOG_INFO, WT_LOG_DEBUG } wt_log_level;
void wt_log(wt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int wt_log_enabled(wt_log_level level);
/* Reads WT_LOG_LEVEL again at the next line logged (after a program set it for itself). */
void wt_log_reread_level(void);
#define WT_ERROR(...) wt_log(WT_LOG_ERROR, __VA_ARGS__)
#define WT_WARN(...) wt_log(WT_LOG_WARN, __VA_ARGS__)
#define WT_INFO(...) wt_log(WT_LOG_INFO, __VA_ARGS__)
#define WT_DEBUG(...) wt_log(WT_LOG_DEBUG, __VA_ARGS__)

/* Propagate a failing status, logging (at debug level) where it passed through. */
#define WT_CHECK(call)                                                                       \
  do {                                                                                       \
    int wt_rc_ = (call);                                                                     \
    if (wt_rc_ != WT_OK) {                                                                   \
      WT_DEBUG("%s:%d: %s -> %s", __FILE__, __LINE__, #call, wt_status_name(wt_rc_));      \
      return wt_rc_;                                                                         \
    }                                                                                        \
  } while (0)

/* Same, but store the status in `rc` and jump to `label` (for functions that clean up). */
#define WT_CHECK_GOTO(call, rc, label)                                                       \
  do {                                                                                       \
    (rc) = (call);                                                                           \
    if ((rc) != WT_OK) {                                                                     \
      WT_DEBUG("%s:%d: %s -> %s", __FILE__, __LINE__, #call, wt_status_name(rc));          \
      goto label;                                                                            \
    }                                                                                        \
  } while (0)

/* Assigns a constructor's result (T *T_new(...), NULL with wt_last_error() set on failure) and
 * propagates its status when it is NULL. */
#define WT_CHECK_NEW(lhs, call)                                                              \
  do {                                                                                       \
    if (!((lhs) = (call))) {                                                                 \
      WT_DEBUG("%s:%d: %s -> NULL (%s)", __FILE__, __LINE__, #call,                        \
               wt_status_name(wt_last_status()));                                            \
      return wt_last_status();                                                               \
    }                                                                                        \
  } while (0)

/* Monotonic wall clock in seconds. */
double wt_now_s(void);

/* The one out-of-memory policy: allocation that aborts with a message on failure (running out
 * of memory is a resource failure, not outside input), used for sizes the program chose
 * itself. Sizes that come from outside (a file header, a message) must be checked first.
 * Zero sizes give a unique pointer; count x size overflowing aborts like a failed allocation.
 * wt_xrealloc keeps the contents (p may be NULL); wt_xstrdup copies a string (s not NULL). */
void *wt_xmalloc(size_t bytes);
void *wt_xcalloc(size_t count, size_t size);
void *wt_xrealloc(void *p, size_t count, size_t size);
char *wt_xstrdup(const char *s);

/* For a program's main(), before anything else — never called by a library. libgomp's idle
 * threads spin by default (OMP_WAIT_POLICY=ACTIVE), holding cores that the other processes of a
 * launch or a demo need, and libgomp reads the variable only when it loads, before main. When
 * the user has not set it, this sets OMP_WAIT_POLICY=PASSIVE and re-executes the program once
 * with the same arguments; if that fails it returns and the program runs as it is. */
void wt_program_init(char **argv);

/* Text from outside as UTF-8. wt_utf8_seq: the length (1..4) of the well-formed UTF-8 sequence
 * that starts at s[0] within n bytes, or 0 when none does (a stray continuation byte, an
 * overlong form, a surrogate, a code point above U+10FFFF, a sequence cut short, n == 0).
 * wt_utf8_printable: the same, but 0 also for a control character (C0, DEL, C1). */
size_t wt_utf8_seq(const char *s, size_t n);
size_t wt_utf8_printable(const char *s, size_t n);

/* Copies `in` into out (size >= 1; always NUL-terminated, cut before a whole escape or character)
 * as one line of valid UTF-8: printable characters as they are, every other byte as \n, \r,
 * \t or \xHH. Returns out. */
char *wt_text_escape(char *out, size_t size, const char *in);

/* Checked size arithmetic for sizes read from outside: returns WT_EINVAL on overflow. */
int wt_mul_size(size_t a, size_t b, size_t *out);

#define WT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define WT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define WT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
