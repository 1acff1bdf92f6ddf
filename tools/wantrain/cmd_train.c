/* cmd_train — `wantrain train`: the training loop around trainer_step, with progress on the
 * terminal, a JSON-lines log, periodic validation, checkpoints, resume and a time limit. */
#include "tools/wantrain/cli.h"

#include "common/common.h"
#include "model/checkpoint.h"
#include "model/data.h"
#include "kernels/kernels.h"
#include "model/trainer.h"
#include "parallel/runtime/tasklet.h" /* defines: parallel_run_trainer_config */

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
  parallel_run_config run; /* the rows of one process: no stages, replicas, sync or sites */
  char config[WT_CONFIG_STR_MAX];
  char cache_dir[WT_CONFIG_STR_MAX];
  int log_every, resume;
  char json_log[WT_CONFIG_STR_MAX];
} train_args;

#define F(x) offsetof(train_args, x)
static const wt_option s_options[] = {
    {"config", WT_OPT_STRING, F(config), 0, 0, "", "JSON file of options (flags override it)", 0},
    CLI_DATA_OPTIONS(train_args, run.),
    {"steps", WT_OPT_INT, F(run.steps), 1, 1e9, "300", "optimizer steps in total", 0},
    {"batch", WT_OPT_INT, F(run.batch), 1, 65536, "16", "global batch: sequences per step", 0},
    {"micro-batches", WT_OPT_INT, F(run.micro_batches), 1, 65536, "1",
     "split each batch into this many accumulated micro-batches", 0},
    CLI_MODEL_OPTIONS(train_args, run),
    GPT_MOE_OPTIONS(train_args, run.moe),
    {"val-every", WT_OPT_INT, F(run.val_every), 0, 1e9, "50",
     "validate every N steps (0 = at the end)", 0},
    {"val-batches", WT_OPT_INT, F(run.val_batches), 1, 1e6, "8", "micro-batches per validation", 0},
    {"log-every", WT_OPT_INT, F(log_every), 1, 1e9, "10", "print progress every N steps", 0},
    {"checkpoint-dir", WT_OPT_STRING, F(run.checkpoint_dir), 0, 0, "",
     "run directory for checkpoints (none if empty)", 0},
    {"checkpoint-every", WT_OPT_INT, F(run.checkpoint_every), 0, 1e9, "0",
     "save every N steps (0 = only at the end)", 0},
    {"keep", WT_OPT_INT, F(run.keep), 1, 1000, "2", "checkpoints kept in --checkpoint-dir", 0},
    {"resume", WT_OPT_FLAG, F(resume), 0, 1, "0", "continue from the latest checkpoint", 0},
    {"json-log", WT_OPT_STRING, F(json_log), 0, 0, "",
     "write one JSON object per step here (a new file; --resume appends)", 0},
    {"time-limit", WT_OPT_FLOAT, F(run.time_limit), 0, 1e9, "0",
     "stop (and checkpoint) after this many seconds (0 = none)", 0},
    CLI_DEVICE_OPTIONS(train_args, run.),
    {0}};
#undef F

static const char *s_usage = "usage: wantrain train [options]\n\n"
                             "Trains a GPT on one machine. Progress goes to the terminal, one JSON "
                             "object per step to --json-log.";

/* Set by SIGINT/SIGTERM: the loop finishes its step, checkpoints and stops. */
static volatile sig_atomic_t s_stop_signal = 0;

static void s_on_signal(int sig) {
  s_stop_signal = sig;
  signal(sig, SIG_DFL); /* a second signal ends the process at once */
}

/* The MoE blocks' routing in the step just taken (before any validation forward). */
typedef struct {
  int blocks;   /* 0 for a dense model */
  long *kept;   /* (E) (token, choice) pairs each expert took, over blocks and micro-batches */
  long dropped; /* pairs dropped by the capacity */
  double aux;   /* mean load-balancing loss per block (1 = balanced) */
} moe_step;

typedef struct {
  const train_args *a;
  cli_json_log log;
  double t0;       /* start of this process's training */
  long first_step; /* steps already done when this process started */
  char *config_json;
  const kernels_ops *ops; /* --device */
  moe_step moe;           /* kept: --moe-experts longs (at least one) */
} run_state;

static void s_fmt_duration(double s, char *buf, size_t size) {
  long t = (long)(s + 0.5);
  snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

static void s_moe_read(trainer *t, moe_step *m) {
  m->blocks = gpt_stage_moe_stats(trainer_model(t), m->kept, &m->dropped, &m->aux, NULL);
}

/* " | moe load 0.91-1.12 drop 0.4% aux 1.004": each expert's share of the kept pairs over the
 * fair share (min-max), the dropped share of all pairs, the aux loss. */
static void s_moe_progress(const run_state *r, const moe_step *m, char *buf, size_t size) {
  buf[0] = 0;
  if (!m->blocks) return;
  int E = r->a->run.moe.experts;
  long kept = 0, lo = m->kept[0], hi = m->kept[0];
  for (int e = 0; e < E; e++)
    kept += m->kept[e], lo = WT_MIN(lo, m->kept[e]), hi = WT_MAX(hi, m->kept[e]);
  double fair = kept > 0 ? (double)kept / E : 1, all = (double)(kept + m->dropped);
  snprintf(buf, size, " | moe load %.2f-%.2f drop %.1f%% aux %.3f", (double)lo / fair,
           (double)hi / fair, all > 0 ? 100.0 * (double)m->dropped / all : 0.0, m->aux);
}

static void s_progress(const run_state *r, const trainer_step_info *info, float val, double tok_s,
                       const moe_step *moe) {
  char eta[32], vbuf[32] = "", mbuf[96];
  double per_step = (wt_now_s() - r->t0) / (double)(info->step - r->first_step);
  s_fmt_duration(per_step * (double)(r->a->run.steps - info->step), eta, sizeof eta);
  if (!isnan(val)) snprintf(vbuf, sizeof vbuf, " | val %.4f", val);
  s_moe_progress(r, moe, mbuf, sizeof mbuf);
  printf("step %6ld/%d | loss %.4f%s | lr %.2e | %8.0f tok/s%s | ETA %s\n", info->step,
         r->a->run.steps, info->loss, vbuf, info->lr, tok_s, mbuf, eta);
  fflush(stdout);
}

/* ',"moe":{"load":[...],"dropped":D,"aux":A}' for an MoE model (malloc'd; "" when dense). */
static char *s_moe_json(const run_state *r, const moe_step *m) {
  if (!m->blocks) return wt_xstrdup("");
  int E = r->a->run.moe.experts;
  size_t size = 96 + (size_t)E * 21, len = 0;
  char *buf = wt_xmalloc(size);
  len += (size_t)snprintf(buf, size, ",\"moe\":{\"load\":[");
  for (int e = 0; e < E; e++)
    len += (size_t)snprintf(buf + len, size - len, "%s%ld", e ? "," : "", m->kept[e]);
  snprintf(buf + len, size - len, "],\"dropped\":%ld,\"aux\":%.6g}", m->dropped, m->aux);
  return buf;
}

static void s_log(run_state *r, const trainer_step_info *info, float val, double tok_s,
                  const moe_step *moe) {
  char vbuf[32] = "null", *mbuf = s_moe_json(r, moe);
  if (!isnan(val)) snprintf(vbuf, sizeof vbuf, "%.6f", val);
  cli_json_log_line(&r->log,
             "{\"step\":%ld,\"loss\":%.6f,\"val_loss\":%s,\"lr\":%.6g,\"grad_norm\":%.6g,"
             "\"tokens_per_s\":%.1f%s}\n",
             info->step, info->loss, vbuf, info->lr, info->grad_norm, tok_s, mbuf);
  free(mbuf);
}

static int s_checkpoint(trainer *t, const run_state *r) {
  if (!r->a->run.checkpoint_dir[0]) return WT_OK;
  WT_CHECK(trainer_save(t, r->a->run.checkpoint_dir, r->a->run.keep, r->config_json));
  printf("saved checkpoint step %ld in %s\n", trainer_steps_done(t), r->a->run.checkpoint_dir);
  return WT_OK;
}

static int s_done(trainer *t, run_state *r, float loss) {
  float val = NAN;
  WT_CHECK(trainer_val_loss(t, &val));
  WT_CHECK(s_checkpoint(t, r));
  printf("done: step %ld | loss %.4f | val %.4f | %.1f s\n", trainer_steps_done(t), loss, val,
         wt_now_s() - r->t0);
  char lbuf[32] = "null"; /* no step ran when a resumed run was already complete */
  if (!isnan(loss)) snprintf(lbuf, sizeof lbuf, "%.6f", loss);
  cli_json_log_line(&r->log, "{\"event\":\"done\",\"step\":%ld,\"loss\":%s,\"val_loss\":%.6f}\n",
             trainer_steps_done(t), lbuf, val);
  return WT_OK;
}

/* The loop: steps until --steps or --time-limit, validating and checkpointing on schedule. */
static int s_train(trainer *t, run_state *r) {
  const train_args *a = r->a;
  const double tokens_per_step = (double)a->run.batch * a->run.seq;
  float loss = NAN;
  r->first_step = trainer_steps_done(t);
  r->t0 = wt_now_s();
  while (trainer_steps_done(t) < a->run.steps) {
    trainer_step_info info;
    WT_CHECK(trainer_step(t, &info));
    s_moe_read(t, &r->moe);
    loss = info.loss;
    float val = NAN;
    int last = info.step == a->run.steps;
    if (a->run.val_every > 0 && info.step % a->run.val_every == 0 && !last)
      WT_CHECK(trainer_val_loss(t, &val));
    double tok_s = tokens_per_step / info.seconds;
    s_log(r, &info, val, tok_s, &r->moe);
    if (info.step % a->log_every == 0 || !isnan(val) || info.step == r->first_step + 1)
      s_progress(r, &info, val, tok_s, &r->moe);
    if (a->run.checkpoint_every > 0 && info.step % a->run.checkpoint_every == 0 && !last)
      WT_CHECK(s_checkpoint(t, r));
    if (s_stop_signal && !last) {
      printf("stopped by signal %d at step %ld; --resume continues from the checkpoint\n",
             (int)s_stop_signal, info.step);
      break;
    }
    if (a->run.time_limit > 0 && wt_now_s() - r->t0 >= a->run.time_limit && !last) {
      printf("time limit of %g s reached at step %ld\n", a->run.time_limit, info.step);
      break;
    }
  }
  return s_done(t, r, loss);
}

static int s_run(const train_args *a, run_state *r) {
  data_set *d = data_set_open(a->run.data, a->cache_dir, a->run.data_sha256);
  if (!d) return WT_EINVAL;
  trainer_config tc;
  int rc = parallel_run_trainer_config(&a->run, data_set_vocab_size(d), &tc);
  tc.kernels = r->ops;
  trainer *t = rc == WT_OK ? trainer_new(&tc, d) : NULL;
  if (rc == WT_OK && !t) rc = WT_EINVAL;
  if (rc == WT_OK && a->resume) {
    rc = trainer_resume(t, a->run.checkpoint_dir);
    if (rc == WT_OK)
      printf("resumed from step %ld in %s\n", trainer_steps_done(t), a->run.checkpoint_dir);
    else if (rc == WT_ENOTFOUND) {
      char msg[1200];
      snprintf(msg, sizeof msg, "%s", wt_last_error());
      wt_fail(rc, "%s; or train without --resume to start a new run", msg);
    }
  }
  if (rc == WT_OK) {
    size_t np = gpt_config_num_params(&tc.model);
    if (tc.model.moe_experts > 0)
      printf("moe: %d experts, top-%d, capacity factor %g, aux weight %g, in blocks %s: %.3f M "
             "parameters active per token\n",
             a->run.moe.experts, a->run.moe.top_k, a->run.moe.capacity, a->run.moe.aux_weight,
             a->run.moe.layers, (double)gpt_config_num_active_params(&tc.model) / 1e6);
    printf("model: %d layers, %d channels, %d heads, vocab %d, context %d: %.3f M parameters\n"
           "data: %s (%zu tokens; %zu train, %zu validation)\n",
           a->run.layers, a->run.channels, a->run.heads, tc.model.vocab_size, a->run.seq,
           (double)np / 1e6, a->run.data, data_set_num_tokens(d), data_set_num_train(d),
           data_set_num_val(d));
    if (data_set_tokenizer(d) == DATA_TOKENIZER_SYNTHETIC)
      printf("synthetic corpus: entropy rate %.4f nats/token (the best loss possible)\n",
             data_synthetic_entropy(data_synth_default().successors));
    rc = s_train(t, r);
  }
  trainer_destroy(&t);
  data_set_destroy(&d);
  return rc;
}

/* Checks of flag values and combinations that need no file: a failure is a usage error. */
static int s_check_flags(const train_args *a) {
  if (a->run.data_sha256[0]) WT_CHECK(data_sha256_check(a->run.data_sha256));
  return cli_check_model(&a->run);
}

/* A fresh run starts a new log; appending to another run's lines would mix the two. */
static int s_check_log_fresh(const train_args *a) {
  struct stat st;
  if (!a->json_log[0] || a->resume) return WT_OK;
  if (stat(a->json_log, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    return wt_fail(WT_EINVAL,
                   "--json-log %s already holds a log; remove it or choose another file for a "
                   "new run (--resume appends to it)",
                   a->json_log);
  return WT_OK;
}

static int s_open_log(const train_args *a, run_state *r) {
  WT_CHECK(cli_json_log_open(&r->log, "train", a->json_log));
  cli_json_log_line(&r->log, "{\"event\":\"start\",\"config\":%s}\n", r->config_json);
  return WT_OK;
}

int cmd_train(int argc, char **argv) {
  train_args a;
  int rc = cli_parse("train", s_usage, s_options, &a, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (s_check_flags(&a) != WT_OK) {
    fprintf(stderr, "wantrain train: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  const kernels_ops *ops = NULL;
  if ((rc = cli_device("train", a.run.device, a.run.precision, a.run.tf32, &ops)) != CLI_OK)
    return rc;
  if (a.resume && !a.run.checkpoint_dir[0]) {
    wt_fail(WT_EINVAL, "--resume needs --checkpoint-dir (the run directory to resume)");
    return cli_fail("train");
  }
  if (s_check_log_fresh(&a) != WT_OK) return cli_fail("train");
  /* The checkpoint directory is checked and locked before anything else runs, so that a
     directory the run cannot use fails now, not at the first save. */
  checkpoint_run *held = NULL;
  if (a.run.checkpoint_dir[0] && !(held = checkpoint_run_open(a.run.checkpoint_dir, !a.resume)))
    return cli_fail("train");
  run_state r = {.a = &a, .config_json = wt_config_to_json(s_options, &a), .ops = ops};
  r.moe.kept = wt_xcalloc((size_t)WT_MAX(a.run.moe.experts, 1), sizeof(long));
  rc = s_open_log(&a, &r);
  signal(SIGINT, s_on_signal);
  signal(SIGTERM, s_on_signal);
  data_fetch_configure(0, &s_stop_signal); /* a signal also ends a download */
  if (rc == WT_OK) rc = s_run(&a, &r);
  rc = cli_json_log_close(&r.log, rc);
  free(r.config_json);
  free(r.moe.kept);
  checkpoint_run_close(&held);
  if (rc != WT_OK) {
    cli_fail("train");
    /* A signal that interrupted a download is still the reason the run ended. */
    return s_stop_signal && !r.log.error ? 128 + (int)s_stop_signal : CLI_FAIL;
  }
  return s_stop_signal ? 128 + (int)s_stop_signal : CLI_OK; /* the shell's "killed by" status */
}
