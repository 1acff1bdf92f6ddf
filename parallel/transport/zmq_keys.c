/* zmq_keys — CURVE key pairs for the ZeroMQ transport: make one, keep it in a private file,
 * read it back (format and rules in zmq.h). */
#include "parallel/transport/zmq.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

int parallel_zmq_keypair_new(char public_z85[41], char secret_z85[41]) {
  if (zmq_curve_keypair(public_z85, secret_z85) != 0)
    return wt_fail(WT_ENOTSUP, "zmq: cannot make a CURVE key pair: %s (libzmq without CURVE?)",
                   zmq_strerror(errno));
  return WT_OK;
}

int parallel_zmq_keypair_save(const char *path, const char *public_z85, const char *secret_z85) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return wt_fail(WT_EINVAL, "key file path too long: %s", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return wt_fail(WT_EIO, "cannot create key file %s: %s", tmp, strerror(errno));
  char text[128];
  int n = snprintf(text, sizeof text, "public %s\nsecret %s\n", public_z85, secret_z85);
  /* fchmod too: an existing .tmp file keeps its old mode through O_CREAT. */
  int ok = fchmod(fd, 0600) == 0 && write(fd, text, (size_t)n) == n && fsync(fd) == 0;
  memset(text, 0, sizeof text);
  if (close(fd) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return wt_fail(WT_EIO, "cannot write key file %s: %s", path, strerror(errno));
  }
  return WT_OK;
}

int parallel_zmq_keypair_load(const char *path, char public_z85[41], char secret_z85[41]) {
  struct stat st;
  if (stat(path, &st) != 0)
    return wt_fail(errno == ENOENT ? WT_ENOTFOUND : WT_EIO, "key file %s: %s", path,
                   strerror(errno));
  if (st.st_mode & 077)
    return wt_fail(WT_EINVAL, "key file %s is readable by others (mode %03o); run chmod 600 %s",
                   path, (unsigned)(st.st_mode & 0777), path);
  FILE *f = fopen(path, "r");
  if (!f) return wt_fail(WT_EIO, "cannot open key file %s: %s", path, strerror(errno));
  char pub[64] = "", sec[64] = "";
  int got = fscanf(f, "public %63s secret %63s", pub, sec);
  fclose(f);
  uint8_t bin[32];
  if (got != 2 || strlen(pub) != 40 || strlen(sec) != 40 || !zmq_z85_decode(bin, pub) ||
      !zmq_z85_decode(bin, sec)) {
    memset(sec, 0, sizeof sec);
    return wt_fail(WT_ECORRUPT,
                   "key file %s is malformed: expected 'public <40 Z85 chars>' and "
                   "'secret <40 Z85 chars>' lines",
                   path);
  }
  char derived[41];
  if (zmq_curve_public(derived, sec) != 0 || strcmp(derived, pub) != 0) {
    memset(sec, 0, sizeof sec);
    return wt_fail(WT_EMISMATCH, "key file %s: the public key does not belong to the secret key",
                   path);
  }
  memcpy(public_z85, pub, 41);
  memcpy(secret_z85, sec, 41);
  memset(sec, 0, sizeof sec);
  return WT_OK;
}
