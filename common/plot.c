/* plot — gnuplot as a child process with a deadline, and the loss-curve script. */
#include "common/plot.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The child's exit status when gnuplot could not be started at all. */
#define S_EXEC_FAILED 127

static void s_child(const char *dir, const char *script) {
  int null = open("/dev/null", O_RDONLY);
  if (null >= 0) dup2(null, STDIN_FILENO);
  if (dir && chdir(dir) != 0) _exit(S_EXEC_FAILED - 1);
  execlp("gnuplot", "gnuplot", script, (char *)NULL);
  _exit(S_EXEC_FAILED);
}

int wt_plot_gnuplot(const char *dir, const char *script, double timeout_s) {
  pid_t pid = fork();
  if (pid < 0) return wt_fail(WT_EIO, "cannot start gnuplot: fork: %s", strerror(errno));
  if (pid == 0) s_child(dir, script);
  double deadline = wt_now_s() + timeout_s;
  int status = 0;
  struct timespec nap = {0, 10 * 1000 * 1000};
  for (;;) {
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0 && errno != EINTR)
      return wt_fail(WT_EIO, "waiting for gnuplot: %s", strerror(errno));
    if (wt_now_s() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return wt_fail(WT_ETIMEOUT,
                     "gnuplot %s ran past %.0f s and was stopped; run it by hand "
                     "to see why",
                     script, timeout_s);
    }
    nanosleep(&nap, NULL);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == S_EXEC_FAILED)
    return wt_fail(WT_ENOTSUP,
                   "gnuplot is not installed (apt-get install gnuplot-nox); the "
                   "chart script is %s%s%s — run `gnuplot %s`%s%s to draw it",
                   dir ? dir : "", dir ? "/" : "", script, script, dir ? " in " : "",
                   dir ? dir : "");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return wt_fail(WT_EIO, "gnuplot %s failed (status %d); its messages are above", script, status);
  return WT_OK;
}

/* A gnuplot single-quoted string: a quote inside is written twice. */
static void s_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

static int s_write_script(const char *gp, const char *png, const double *step, const double *loss,
                          size_t n, const char *title) {
  FILE *f = fopen(gp, "w");
  if (!f) return wt_fail(WT_EIO, "cannot write %s: %s", gp, strerror(errno));
  fprintf(f, "# loss curve: run `gnuplot FILE` to redraw the PNG named below.\n"
             "# pngcairo draws nicer text; builds without cairo still have the png terminal.\n"
             "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
             "  set terminal pngcairo size 800,500 font 'sans,10'\n"
             "} else {\n"
             "  set terminal png size 800,500\n"
             "}\n"
             "set output ");
  s_quoted(f, png);
  fprintf(f, "\nset termoption noenhanced\nset title ");
  s_quoted(f, title);
  fprintf(f, "\nset xlabel 'step'\nset ylabel 'loss'\nset grid\nset key off\n$loss << EOD\n");
  for (size_t i = 0; i < n; i++)
    if (isfinite(step[i]) && isfinite(loss[i])) fprintf(f, "%.17g %.9g\n", step[i], loss[i]);
  fprintf(f, "EOD\nplot $loss using 1:2 with linespoints pt 7 ps 0.4 lw 2\n");
  if (fclose(f) != 0) return wt_fail(WT_EIO, "cannot write %s: %s", gp, strerror(errno));
  return WT_OK;
}

int wt_plot_loss_png(const char *png_path, const double *step, const double *loss, size_t n,
                     const char *title) {
  size_t finite = 0;
  for (size_t i = 0; i < n; i++) finite += isfinite(step[i]) && isfinite(loss[i]);
  if (finite == 0)
    return wt_fail(WT_EINVAL, "loss curve %s: no finite (step, loss) point to draw", png_path);
  /* gnuplot strings cannot hold a newline, and the data block would end at one. */
  if (strchr(png_path, '\n') || (title && strchr(title, '\n')))
    return wt_fail(WT_EINVAL, "loss curve: the path or title holds a newline; give one without");
  size_t len = strlen(png_path) + 4;
  char *gp = wt_xmalloc(len);
  snprintf(gp, len, "%s.gp", png_path);
  int rc = s_write_script(gp, png_path, step, loss, n, title ? title : "training loss");
  if (rc == WT_OK) rc = wt_plot_gnuplot(NULL, gp, WT_PLOT_TIMEOUT_S);
  free(gp);
  return rc;
}
