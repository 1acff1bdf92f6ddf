/* common — status messages, logging, clock and checked allocation. */
#include "common/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char s_last_error[1024];
static _Thread_local int s_last_status;

int wt_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s_last_error, sizeof s_last_error, fmt, ap);
  va_end(ap);
  s_last_status = code;
  return code;
}

const char *wt_last_error(void) { return s_last_error; }

int wt_last_status(void) { return s_last_status; }

const char *wt_status_name(int code) {
  switch (code) {
  case WT_OK: return "ok";
  case WT_EINVAL: return "invalid input";
  case WT_EIO: return "I/O error";
  case WT_ENOMEM: return "out of memory";
  case WT_ECORRUPT: return "corrupt data";
  case WT_ENOTFOUND: return "not found";
  case WT_EMISMATCH: return "mismatch";
  case WT_ENOTSUP: return "not supported";
  case WT_ETIMEOUT: return "timed out";
  default: return "unknown error";
  }
}

static int threshold = -1; /* read from WT_LOG_LEVEL at the first line logged */

void wt_log_reread_level(void) {
  threshold = -1;
}

static int s_log_threshold(void) {
  if (threshold < 0) {
    const char *env = getenv("WT_LOG_LEVEL");
    threshold = WT_LOG_INFO;
    if (env) {
      if (!strcmp(env, "error")) threshold = WT_LOG_ERROR;
      else if (!strcmp(env, "warn")) threshold = WT_LOG_WARN;
      else if (!strcmp(env, "debug")) threshold = WT_LOG_DEBUG;
    }
  }
  return threshold;
}

int wt_log_enabled(wt_log_level level) { return (int)level <= s_log_threshold(); }

void wt_log(wt_log_level level, const char *fmt, ...) {
  static const char *names[] = {"error", "warn", "info", "debug"};
  if (!wt_log_enabled(level)) return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  char safe[4 * sizeof line];
  fprintf(stderr, "[%s] %s\n", names[level], wt_text_escape(safe, sizeof safe, line));
}

size_t wt_utf8_seq(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  if (n == 0) return 0;
  if (u[0] < 0x80) return 1;
  /* The lead byte fixes the length and the range of the second byte (RFC 3629, section 4),
   * which rules out overlong forms, surrogates and code points above U+10FFFF. */
  size_t len = 0;
  unsigned lo = 0x80, hi = 0xBF;
  if (u[0] >= 0xC2 && u[0] <= 0xDF) len = 2;
  if (u[0] >= 0xE0 && u[0] <= 0xEF) len = 3;
  if (u[0] >= 0xF0 && u[0] <= 0xF4) len = 4;
  if (u[0] == 0xE0) lo = 0xA0;
  if (u[0] == 0xED) hi = 0x9F;
  if (u[0] == 0xF0) lo = 0x90;
  if (u[0] == 0xF4) hi = 0x8F;
  if (len == 0 || n < len || u[1] < lo || u[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (u[i] < 0x80 || u[i] > 0xBF) return 0;
  return len;
}

size_t wt_utf8_printable(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t len = wt_utf8_seq(s, n);
  if (len == 1 && (u[0] < 0x20 || u[0] == 0x7F)) return 0;
  if (len == 2 && u[0] == 0xC2 && u[1] < 0xA0) return 0; /* C1: U+0080..U+009F */
  return len;
}

char *wt_text_escape(char *out, size_t size, const char *in) {
  size_t o = 0, n = strlen(in);
  for (size_t i = 0; i < n;) {
    char esc[8];
    size_t len = wt_utf8_printable(in + i, n - i), w = len;
    const char *from = in + i;
    if (!len) {
      const unsigned char b = (unsigned char)in[i];
      w = (size_t)(b == '\n'   ? snprintf(esc, sizeof esc, "\\n")
                   : b == '\r' ? snprintf(esc, sizeof esc, "\\r")
                   : b == '\t' ? snprintf(esc, sizeof esc, "\\t")
                               : snprintf(esc, sizeof esc, "\\x%02X", b));
      from = esc, len = 1;
    }
    if (o + w >= size) break;
    memcpy(out + o, from, w);
    o += w, i += len;
  }
  out[o] = '\0';
  return out;
}

double wt_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void *wt_xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "wantrain: out of memory allocating %zu bytes\n", bytes);
    abort();
  }
  return p;
}

void *wt_xcalloc(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) {
    fprintf(stderr, "wantrain: out of memory allocating %zu x %zu bytes\n", count, size);
    abort();
  }
  return p;
}

void *wt_xrealloc(void *p, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) {
    fprintf(stderr, "wantrain: out of memory: %zu x %zu bytes overflows\n", count, size);
    abort();
  }
  size_t bytes = count * size;
  void *q = realloc(p, bytes ? bytes : 1);
  if (!q) {
    fprintf(stderr, "wantrain: out of memory reallocating to %zu bytes\n", bytes);
    abort();
  }
  return q;
}

char *wt_xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(wt_xmalloc(n), s, n);
}

int wt_mul_size(size_t a, size_t b, size_t *out) {
  if (a && b > SIZE_MAX / a) return wt_fail(WT_EINVAL, "size %zu x %zu overflows", a, b);
  *out = a * b;
  return WT_OK;
}

void wt_program_init(char **argv) {
  if (getenv("OMP_WAIT_POLICY") || !argv || !argv[0]) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv("/proc/self/exe", argv);
  WT_DEBUG("cannot re-execute with OMP_WAIT_POLICY=PASSIVE: %s", strerror(errno));
}
