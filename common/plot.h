/* plot — charts drawn by gnuplot (Debian's gnuplot-nox): running a gnuplot script with a
 * deadline, and the training loss curve as a PNG.
 *
 * gnuplot is an optional run-time tool, not a build dependency: without it these functions
 * return WT_ENOTSUP with a message that says so and where the script is, and the script stays
 * on disk so the chart can be drawn later with `gnuplot FILE.gp`.
 *
 *   double step[] = {0, 10, 20}, loss[] = {5.5, 4.1, 3.7};
 *   if (wt_plot_loss_png("out/loss.png", step, loss, 3, "demo run") != WT_OK)
 *     printf("no chart: %s\n", wt_last_error());
 */
#ifndef WT_PLOT_H
#define WT_PLOT_H

#include <stddef.h>

/* The longest a chart may take before gnuplot is killed. */
#define WT_PLOT_TIMEOUT_S 60.0

/* Runs `gnuplot SCRIPT` with `dir` as its working folder (NULL = the current one), standard
 * input from /dev/null, and kills it after timeout_s seconds. Returns WT_OK when gnuplot exited
 * 0; WT_ENOTSUP when gnuplot is not on PATH; WT_ETIMEOUT when it ran past the deadline; WT_EIO
 * when it failed (its own messages went to stderr). wt_last_error() says which. */
int wt_plot_gnuplot(const char *dir, const char *script, double timeout_s);

/* Draws the loss curve of `n` (step, loss) pairs into a PNG at `png_path` (800 x 500 pixels),
 * titled `title` (NULL = "training loss"). Points whose step or loss is not finite are left
 * out (a diverged step). The gnuplot script, with the data inline, is written to `png_path`
 * with ".gp" appended, and kept. Returns WT_OK; WT_EINVAL when no finite point remains or the
 * path holds a newline; WT_EIO when the script cannot be written; otherwise what
 * wt_plot_gnuplot returns. */
int wt_plot_loss_png(const char *png_path, const double *step, const double *loss, size_t n,
                     const char *title);

#endif
