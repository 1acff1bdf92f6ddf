/* data_fetch — URLs into a local cache with libcurl, and SHA-256 of files with OpenSSL EVP.
 *
 * A download is written to a temporary file beside the cached name and only renamed onto it
 * once complete and verified, so an interrupted or corrupt download never becomes the cache.
 */
#include "model/data_internal.h"

#include "common/common.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void s_hex(const unsigned char *md, unsigned n, char *hex) {
  for (unsigned i = 0; i < n; i++) sprintf(hex + 2 * i, "%02x", md[i]);
  hex[2 * n] = 0;
}

static int s_sha256_bytes(const void *data, size_t len, char hex[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (!EVP_Digest(data, len, md, &n, EVP_sha256(), NULL))
    return wt_fail(WT_EIO, "OpenSSL SHA-256 failed");
  s_hex(md, n, hex);
  return WT_OK;
}

int data_file_sha256(const char *path, char hex[65]) {
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(WT_EIO, "cannot read %s: %s", path, strerror(errno));
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  unsigned char buf[1 << 16];
  size_t got;
  while (ok && (got = fread(buf, 1, sizeof buf, f)) > 0) ok = EVP_DigestUpdate(ctx, buf, got);
  ok = ok && !ferror(f);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  ok = ok && EVP_DigestFinal_ex(ctx, md, &n);
  EVP_MD_CTX_free(ctx);
  fclose(f);
  if (!ok) return wt_fail(WT_EIO, "cannot compute the SHA-256 of %s", path);
  s_hex(md, n, hex);
  return WT_OK;
}

int data_sha256_check(const char *hex) {
  size_t n = strlen(hex);
  int ok = n == 64;
  for (size_t i = 0; ok && i < n; i++) ok = isxdigit((unsigned char)hex[i]);
  if (!ok) return wt_fail(WT_EINVAL, "--data-sha256 '%s' is not 64 hexadecimal digits", hex);
  return WT_OK;
}

int data_fetch_verify(const char *path, const char *sha256_hex) {
  char got[65];
  WT_CHECK(data_sha256_check(sha256_hex));
  WT_CHECK(data_file_sha256(path, got));
  if (strcasecmp(got, sha256_hex) != 0)
    return wt_fail(WT_ECORRUPT,
                   "%s: SHA-256 is %s but %s was expected; the file is corrupt or "
                   "not the one intended — fetch it again or fix --data-sha256",
                   path, got, sha256_hex);
  return WT_OK;
}

void data_default_cache_dir(char *buf, size_t size) {
  const char *env = getenv("WANTRAIN_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (env && *env)
    snprintf(buf, size, "%s", env);
  else if (xdg && *xdg)
    snprintf(buf, size, "%s/wantrain", xdg);
  else if (home && *home)
    snprintf(buf, size, "%s/.cache/wantrain", home);
  else
    snprintf(buf, size, "/tmp/wantrain-cache");
}

/* mkdir -p for the cache directory. */
static int s_mkdirs(const char *dir) {
  char tmp[2048];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) break;
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return wt_fail(WT_EIO, "cannot create cache directory %s: %s", dir, strerror(errno));
  return WT_OK;
}

/* The cache name: a digest of the whole URL (so equal basenames don't collide) + basename. */
static int s_cache_path(const char *url, const char *dir, char *out, size_t size) {
  char hex[65];
  WT_CHECK(s_sha256_bytes(url, strlen(url), hex));
  const char *base = strrchr(url, '/');
  base = base && base[1] ? base + 1 : "data";
  char clean[128];
  size_t n = 0;
  for (; *base && *base != '?' && n < sizeof clean - 1; base++)
    clean[n++] = (isalnum((unsigned char)*base) || strchr("._-", *base)) ? *base : '_';
  clean[n] = 0;
  snprintf(out, size, "%s/%.16s-%s", dir, hex, clean);
  return WT_OK;
}

/* Process-wide download settings (data_fetch_configure). */
static long s_stall_s = 60;
static const volatile sig_atomic_t *s_abort_flag;

void data_fetch_configure(long stall_s, const volatile sig_atomic_t *abort_flag) {
  s_stall_s = stall_s > 0 ? stall_s : 60;
  s_abort_flag = abort_flag;
}

/* libcurl calls this about once a second even while no byte arrives; nonzero aborts. */
static int s_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                      curl_off_t ulnow) {
  (void)user, (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  return s_abort_flag && *s_abort_flag;
}

static size_t s_write(void *ptr, size_t size, size_t nmemb, void *user) {
  return fwrite(ptr, size, nmemb, (FILE *)user);
}

/* Downloads url into the open file f. */
static int s_curl_get(const char *url, FILE *f) {
  static int inited = 0;
  if (!inited) curl_global_init(CURL_GLOBAL_DEFAULT), inited = 1;
  CURL *c = curl_easy_init();
  if (!c) return wt_fail(WT_EIO, "libcurl could not start");
  char err[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L); /* HTTP 404 etc. is an error, not a file */
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  /* A server that stops sending would otherwise hold the download open forever. */
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, s_stall_s);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, s_progress);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_cleanup(c);
  if (rc == CURLE_ABORTED_BY_CALLBACK)
    return wt_fail(WT_EIO, "download of %s interrupted by a signal; nothing was kept", url);
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return wt_fail(WT_ETIMEOUT,
                   "download of %s stalled: nothing arrived for %ld s; nothing was kept — "
                   "check the server, or download the file yourself and pass its path",
                   url, s_stall_s);
  if (rc != CURLE_OK)
    return wt_fail(WT_EIO, "cannot fetch %s: %s; check the URL and the network", url,
                   *err ? err : curl_easy_strerror(rc));
  return WT_OK;
}

/* Fetches into a temp file in dir, verifies, renames onto final. */
static int s_download(const char *url, const char *dir, const char *final, const char *sha) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s/.fetch-XXXXXX", dir);
  int fd = mkstemp(tmp);
  if (fd < 0) return wt_fail(WT_EIO, "cannot create a file in %s: %s", dir, strerror(errno));
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    close(fd);
    unlink(tmp);
    return wt_fail(WT_EIO, "cannot open %s: %s", tmp, strerror(errno));
  }
  int rc = s_curl_get(url, f);
  if (fflush(f) != 0 || fsync(fd) != 0)
    if (rc == WT_OK) rc = wt_fail(WT_EIO, "cannot write %s: %s", tmp, strerror(errno));
  fclose(f);
  if (rc == WT_OK && sha && *sha) {
    rc = data_fetch_verify(tmp, sha);
    if (rc != WT_OK) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", wt_last_error());
      wt_fail(rc, "download of %s: %s (the download was discarded)", url, msg);
    }
  }
  if (rc == WT_OK && rename(tmp, final) != 0)
    rc = wt_fail(WT_EIO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
  if (rc != WT_OK) unlink(tmp);
  return rc;
}

/* Removes temporary files of downloads that a kill cut short: a live download would have been
 * abandoned by the stall timeout long before its file got this old. */
static void s_remove_stale(const char *dir) {
  DIR *d = opendir(dir);
  char path[4200];
  struct stat st;
  time_t now = time(NULL);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strncmp(e->d_name, ".fetch-", 7) != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) == 0 && now - st.st_mtime > 2 * s_stall_s + 60) unlink(path);
  }
  if (d) closedir(d);
}

int data_fetch(const char *url, const char *cache_dir, const char *sha256_hex, char *out_path,
               size_t out_size) {
  int has_sha = sha256_hex && *sha256_hex;
  if (has_sha) WT_CHECK(data_sha256_check(sha256_hex));
  if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8) && strncmp(url, "file://", 7))
    return wt_fail(WT_EINVAL, "'%s' is not an http://, https:// or file:// URL", url);
  WT_CHECK(s_mkdirs(cache_dir));
  s_remove_stale(cache_dir);
  WT_CHECK(s_cache_path(url, cache_dir, out_path, out_size));
  /* Only a digest makes a cached copy trustworthy; without one, fetch afresh every time. */
  if (has_sha && access(out_path, R_OK) == 0) {
    if (data_fetch_verify(out_path, sha256_hex) == WT_OK) return WT_OK;
    WT_WARN("cached %s does not match --data-sha256; removing it and fetching again", out_path);
    unlink(out_path);
  }
  return s_download(url, cache_dir, out_path, sha256_hex);
}
