/* test_plot — the loss curve PNG through gnuplot: a valid PNG of the stated size is written (the
 * PNG signature, IHDR 800 x 500, IEND last), non-finite points are left out, awkward paths are
 * quoted, and without gnuplot, with bad input, a failing script or one past its deadline the
 * caller gets a status and a message. Skips (77) when gnuplot is not installed. */
#include "common/plot.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>
#include <sys/stat.h>

static int s_gnuplot_on_path(void) {
  const char *path = getenv("PATH");
  char *copy = wt_xstrdup(path ? path : ""), *save = NULL;
  int found = 0;
  for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
    char exe[1024];
    snprintf(exe, sizeof exe, "%s/gnuplot", d);
    found = access(exe, X_OK) == 0;
  }
  free(copy);
  return found;
}

static uint32_t s_be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Checks the PNG's signature, its IHDR size and that the last chunk is IEND. */
static void s_check_png(const char *path, uint32_t want_w, uint32_t want_h) {
  FILE *f = fopen(path, "rb");
  WT_TEST_ASSERT(f != NULL, "no PNG at %s", path);
  if (!f) return;
  unsigned char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  WT_TEST_ASSERT(n > 1000 && n < sizeof buf, "PNG of %zu bytes", n);
  if (n < 33) return;
  WT_TEST_ASSERT(memcmp(buf, sig, 8) == 0, "no PNG signature");
  WT_TEST_ASSERT(s_be32(buf + 8) == 13 && memcmp(buf + 12, "IHDR", 4) == 0, "first chunk");
  WT_TEST_ASSERT(s_be32(buf + 16) == want_w && s_be32(buf + 20) == want_h, "size %ux%u",
                 s_be32(buf + 16), s_be32(buf + 20));
  WT_TEST_ASSERT(memcmp(buf + n - 8, "IEND", 4) == 0, "IEND is not the last chunk");
}

static int s_count_data_rows(const char *gp) {
  FILE *f = fopen(gp, "r");
  if (!f) return -1;
  char line[256];
  int rows = 0, in_data = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "EOD", 3) == 0) in_data = 0;
    if (in_data) rows++;
    if (strstr(line, "<< EOD")) in_data = 1;
  }
  fclose(f);
  return rows;
}

static int s_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int main(void) {
  if (!s_gnuplot_on_path()) {
    printf("test_plot: skipped, gnuplot is not installed (apt-get install gnuplot-nox)\n");
    return WT_TEST_SKIP;
  }
  char dir[256], png[640], gp[700];
  wt_test_tmpdir(dir, sizeof dir);
  double step[50], loss[50];
  for (int i = 0; i < 50; i++) step[i] = 10.0 * i, loss[i] = 5.0 * exp(-0.05 * i) + 1.0;
  loss[17] = NAN; /* a diverged step is left out, not drawn as a spike */

  snprintf(png, sizeof png, "%s/loss.png", dir);
  int rc = wt_plot_loss_png(png, step, loss, 50, "test run");
  WT_TEST_ASSERT(rc == WT_OK, "loss png: %s", wt_last_error());
  s_check_png(png, 800, 500);
  snprintf(gp, sizeof gp, "%s.gp", png);
  WT_TEST_ASSERT(s_count_data_rows(gp) == 49, "script holds %d points, want 49",
                 s_count_data_rows(gp));

  /* A folder name with a quote and spaces is quoted for gnuplot, not broken by it. */
  char odd[512];
  snprintf(odd, sizeof odd, "%s/it's a dir", dir);
  WT_TEST_REQUIRE(mkdir(odd, 0700) == 0, "mkdir");
  snprintf(png, sizeof png, "%s/loss.png", odd);
  rc = wt_plot_loss_png(png, step, loss, 50, "quote ' in title");
  WT_TEST_ASSERT(rc == WT_OK, "odd path: %s", wt_last_error());
  s_check_png(png, 800, 500);

  /* Bad input: nothing finite, a newline, a folder that does not exist. */
  double nan2[2] = {NAN, NAN};
  snprintf(png, sizeof png, "%s/none.png", dir);
  rc = wt_plot_loss_png(png, step, nan2, 2, NULL);
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "no finite"), "all NaN: %s",
                 wt_last_error());
  WT_TEST_ASSERT(!s_exists(png), "a PNG from no data");
  rc = wt_plot_loss_png(png, step, loss, 50, "two\nlines");
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "newline"), "newline: %s",
                 wt_last_error());
  rc = wt_plot_loss_png("/nonexistent-dir/loss.png", step, loss, 50, NULL);
  WT_TEST_ASSERT(rc == WT_EIO && strstr(wt_last_error(), "/nonexistent-dir/loss.png.gp"),
                 "bad folder: %s", wt_last_error());

  /* A script gnuplot rejects, and one that runs past its deadline. */
  snprintf(gp, sizeof gp, "%s/bad.gp", dir);
  FILE *f = fopen(gp, "w");
  fputs("this is not gnuplot\n", f);
  fclose(f);
  rc = wt_plot_gnuplot(dir, "bad.gp", 30);
  WT_TEST_ASSERT(rc == WT_EIO && strstr(wt_last_error(), "failed"), "bad script: %d %s", rc,
                 wt_last_error());
  snprintf(gp, sizeof gp, "%s/slow.gp", dir);
  f = fopen(gp, "w");
  fputs("pause 20\n", f);
  fclose(f);
  double t0 = wt_now_s();
  rc = wt_plot_gnuplot(dir, "slow.gp", 0.5);
  WT_TEST_ASSERT(rc == WT_ETIMEOUT && wt_now_s() - t0 < 10, "deadline: %d %s", rc, wt_last_error());

  /* Without gnuplot on PATH: ENOTSUP, no PNG, the script kept and named. */
  char *path = wt_xstrdup(getenv("PATH"));
  setenv("PATH", "/nonexistent", 1);
  snprintf(png, sizeof png, "%s/nognuplot.png", dir);
  rc = wt_plot_loss_png(png, step, loss, 50, NULL);
  setenv("PATH", path, 1);
  free(path);
  WT_TEST_ASSERT(rc == WT_ENOTSUP && strstr(wt_last_error(), "gnuplot-nox") &&
                     strstr(wt_last_error(), "nognuplot.png.gp"),
                 "no gnuplot: %d %s", rc, wt_last_error());
  WT_TEST_ASSERT(!s_exists(png), "a PNG without gnuplot");
  snprintf(gp, sizeof gp, "%s.gp", png);
  WT_TEST_ASSERT(s_exists(gp), "the script was not kept");

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return wt_test_finish("test_plot");
}
