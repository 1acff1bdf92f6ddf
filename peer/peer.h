/* peer — peerd, the volunteer's daemon: registers with a coordinator (coordinator/protocol.h),
 * measures its device (with --gpus N a site of N GPUs, reported as one device of their aggregate
 * compute and memory; with --site FILE --site-rank R one process of a declared site, whose rank
 * 0 registers the site and whose other ranks never talk to the coordinator but serve rank 0's
 * sites: parallel/datacenter/site.h), probes links when asked, trains the tasklet each epoch
 * assigns it (parallel/runtime/tasklet.h over a ZeroMQ communicator built from the epoch),
 * heartbeats, reports checkpoint shards, and leaves cleanly on SIGINT/SIGTERM.
 *
 * Contract: nothing the coordinator or another peer sends can crash or hang peerd; a message it
 * cannot decode is logged and dropped; every wait has a deadline (registration: register_timeout_s;
 * the data plane: the epoch's timeout_s). A refused registration ends peerd_run with WT_EINVAL and
 * the coordinator's reason in wt_last_error(). An epoch that fails (a neighbour died, a corrupt
 * checkpoint) is reported to the coordinator with the error text; peerd then waits for the next.
 *
 *   peerd_config cfg; wt_config_defaults(peerd_options(), &cfg); ...set coordinator, key, token...
 *   int rc = peerd_run(&cfg, &stop_flag);   // returns when the run is over, on stop, or refused
 */
#ifndef WT_PEER_H
#define WT_PEER_H

#include "common/config.h"

#include <signal.h>

typedef struct {
  char coordinator[WT_CONFIG_STR_MAX];     /* tcp://HOST:PORT */
  char coordinator_key[WT_CONFIG_STR_MAX]; /* a file holding the Z85 key, or the key itself */
  char token[WT_CONFIG_STR_MAX];
  char device[WT_CONFIG_STR_MAX]; /* cpu | cuda:N */
  char region[WT_CONFIG_STR_MAX];
  char data_dir[WT_CONFIG_STR_MAX]; /* key file, data cache */
  char cache_dir[WT_CONFIG_STR_MAX]; /* where URLs are downloaded; "" = DATA_DIR/cache */
  char key[WT_CONFIG_STR_MAX];      /* key pair file; default DATA_DIR/peer.key */
  char host[WT_CONFIG_STR_MAX];     /* address other peers reach this one at */
  int unreachable; /* 1: accepts no inbound connection (says so; the coordinator tests none) */
  double flops;                     /* one GPU's FLOP/s; 0 = measure (a short sgemm benchmark) */
  int gpus;               /* GPUs of this site: its tasklets run as sites of that many TP ranks */
  double site_efficiency; /* the site's speed is gpus × efficiency × one GPU's; 0: measure it */
  double register_timeout_s;
  char site[WT_CONFIG_STR_MAX]; /* a site file: this process is one rank of a declared site */
  int site_rank;                /* its rank there: 0 registers, >= 1 serve rank 0 (-1: none) */
  double site_timeout_s;        /* every wait inside the site */
  int quiet;
  char precision[WT_CONFIG_STR_MAX]; /* fp32 | bf16: the matmuls' precision on this device */
  int tf32;                          /* fp32 matmuls on TF32 tensor cores */
  /* append one JSON object per training step and per train epoch's start and end here ("" =
   * none): what `wantrain launch` reports from */
  char json_log[WT_CONFIG_STR_MAX];
} peerd_config;

/* The option table of peerd_config. */
const wt_option *peerd_options(void);

/* Checks the flags and their combinations without touching anything: --site and --site-rank
 * together, --device cpu or cuda:N (and cpu for a site), --region and --host as labels the
 * coordinator admits (coordinator_label_check), --coordinator and --coordinator-key unless a
 * site member. Returns WT_OK or WT_EINVAL / WT_ENOTSUP naming the flag: a usage error. */
int peerd_config_check(const peerd_config *cfg);

/* Runs peerd until the coordinator says the run is complete (WT_OK), *stop becomes nonzero
 * (tells the coordinator it leaves; WT_OK), or registration fails (WT_EINVAL refused / WT_ETIMEOUT
 * no answer / WT_EIO, with wt_last_error() saying why and what to do). Checks cfg with
 * peerd_config_check first. */
int peerd_run(const peerd_config *cfg, const volatile sig_atomic_t *stop);

#endif
