/* token — join tokens: "wt1." + base64url(id[8] | expires[8] | uses[4] | tag[16]), where tag is
 * a BLAKE2b keyed hash (crypto_generichash) of the first 20 bytes under the coordinator's
 * 32-byte token key. Verification recomputes the tag and compares it in constant time
 * (crypto_verify_16); expiry is in the signed part; the remaining uses live in the database. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S_BODY 20
#define S_TAG 16
#define S_PREFIX "wt1."

int coord_token_key_load(const char *dir, unsigned char key[32]) {
  char path[1300];
  snprintf(path, sizeof path, "%s/token.key", dir);
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    struct stat sb;
    ssize_t got = read(fd, key, 32);
    int ok = fstat(fd, &sb) == 0 && got == 32 && (sb.st_mode & 077) == 0;
    close(fd);
    if (!ok)
      return wt_fail(WT_ECORRUPT,
                     "%s is not a 32-byte file readable by its owner only; "
                     "remove it to make a new token key (old tokens stop working)",
                     path);
    return WT_OK;
  }
  if (errno != ENOENT) return wt_fail(WT_EIO, "cannot read %s: %s", path, strerror(errno));
  randombytes_buf(key, 32);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || write(fd, key, 32) != 32 || fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(e));
  }
  close(fd);
  return WT_OK;
}

static void s_tag(const unsigned char key[32], const unsigned char *body, unsigned char *tag) {
  crypto_generichash(tag, S_TAG, body, S_BODY, key, 32);
}

static void s_put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t s_get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

int coordinator_token_new(const char *state_dir, double expires_s, int uses, char *out,
                          size_t size) {
  if (sodium_init() < 0) return wt_fail(WT_EIO, "libsodium failed to initialise");
  if (expires_s < 0 || uses < 0) return wt_fail(WT_EINVAL, "token expiry and uses must be >= 0");
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s", state_dir);
  coordinator c = {0};
  c.cfg = cfg;
  snprintf(c.dir, sizeof c.dir, "%s", state_dir);
  if (mkdir(state_dir, 0700) != 0 && errno != EEXIST)
    return wt_fail(WT_EIO, "cannot create the state directory %s: %s", state_dir, strerror(errno));
  WT_CHECK(coord_token_key_load(state_dir, c.token_key));
  unsigned char raw[S_BODY + S_TAG];
  randombytes_buf(raw, 8);
  uint64_t expires = expires_s > 0 ? (uint64_t)time(NULL) + (uint64_t)expires_s : 0;
  s_put64(raw + 8, expires);
  for (int i = 0; i < 4; i++) raw[16 + i] = (unsigned char)((unsigned)uses >> (8 * i));
  s_tag(c.token_key, raw, raw + S_BODY);
  char id[17];
  sodium_bin2hex(id, sizeof id, raw, 8);
  WT_CHECK(coord_state_open(&c));
  sqlite3_stmt *st = NULL;
  int ok = sqlite3_prepare_v2(c.db,
                              "INSERT INTO tokens(id, expires, uses_left, created) "
                              "VALUES(?, ?, ?, ?)",
                              -1, &st, NULL) == SQLITE_OK;
  if (ok) {
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, (double)expires);
    sqlite3_bind_int(st, 3, uses > 0 ? uses : -1);
    sqlite3_bind_double(st, 4, (double)time(NULL));
    ok = sqlite3_step(st) == SQLITE_DONE;
  }
  sqlite3_finalize(st);
  coord_state_close(&c);
  if (!ok) return wt_fail(WT_EIO, "cannot record the token in %s/state.db", state_dir);
  char b64[128];
  sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  if (strlen(S_PREFIX) + strlen(b64) + 1 > size)
    return wt_fail(WT_EINVAL, "token buffer too small");
  snprintf(out, size, "%s%s", S_PREFIX, b64);
  return WT_OK;
}

/* Checks the token and, when it is good, spends one use. Returns WT_OK or WT_EINVAL with the
 * reason (for the peer) in why. */
int coord_token_verify(coordinator *c, const char *token, char *why, size_t why_size) {
  unsigned char raw[S_BODY + S_TAG], tag[S_TAG];
  size_t n = 0;
  if (!token || !token[0]) {
    snprintf(why, why_size,
             "no join token: ask the operator for one (coordinator token new) "
             "and pass it with --token");
    return WT_EINVAL;
  }
  if (strncmp(token, S_PREFIX, strlen(S_PREFIX)) ||
      sodium_base642bin(raw, sizeof raw, token + strlen(S_PREFIX), strlen(token + strlen(S_PREFIX)),
                        NULL, &n, NULL, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
      n != sizeof raw) {
    snprintf(why, why_size,
             "the join token is malformed (expected wt1.<44 characters>); copy it "
             "again from `coordinator token new`");
    return WT_EINVAL;
  }
  s_tag(c->token_key, raw, tag);
  if (crypto_verify_16(tag, raw + S_BODY) != 0) {
    snprintf(why, why_size,
             "the join token does not verify: it was not issued by this "
             "coordinator or was altered");
    return WT_EINVAL;
  }
  uint64_t expires = s_get64(raw + 8);
  if (expires && (uint64_t)time(NULL) >= expires) {
    snprintf(why, why_size, "the join token expired %llu s ago; ask the operator for a new one",
             (unsigned long long)((uint64_t)time(NULL) - expires));
    return WT_EINVAL;
  }
  char id[17];
  sodium_bin2hex(id, sizeof id, raw, 8);
  sqlite3_stmt *st = NULL;
  int left = -2;
  if (sqlite3_prepare_v2(c->db, "SELECT uses_left FROM tokens WHERE id = ?", -1, &st, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) left = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  if (left == -2) {
    snprintf(why, why_size,
             "the join token %s was revoked or this coordinator's state was reset; "
             "ask the operator for a new one",
             id);
    return WT_EINVAL;
  }
  if (left == 0) {
    snprintf(why, why_size,
             "the join token %s is used up (no uses left); ask the operator for a "
             "new one",
             id);
    return WT_EINVAL;
  }
  if (left > 0 &&
      sqlite3_prepare_v2(c->db, "UPDATE tokens SET uses_left = uses_left - 1 WHERE id = ?", -1, &st,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_step(st);
    sqlite3_finalize(st);
  }
  return WT_OK;
}

int coordinator_duration_parse(const char *text, double *seconds) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno || !(v >= 0) || v > 1e10)
    return wt_fail(WT_EINVAL, "duration '%s' is not a number followed by s, m, h or d", text);
  double unit = 1;
  if (!strcmp(end, "m"))
    unit = 60;
  else if (!strcmp(end, "h"))
    unit = 3600;
  else if (!strcmp(end, "d"))
    unit = 86400;
  else if (strcmp(end, "") && strcmp(end, "s"))
    return wt_fail(WT_EINVAL, "duration '%s': unknown unit '%s' (use s, m, h or d)", text, end);
  *seconds = v * unit;
  return WT_OK;
}
