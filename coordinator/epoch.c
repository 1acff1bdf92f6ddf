/* epoch — numbered groups of peers: a probe epoch measures the links among the live peers
 * (every pair among a few, a bounded set among many: swarm.c), a train epoch runs the
 * assignment. Forming one: choose members, place them (assign: ga for the
 * first, assign_resolve from the current plan after churn, standbys first), send EPOCH, wait for
 * every member to bind (deadline), send START with everyone's endpoint. A lost member aborts
 * the epoch; once the survivors have reported, the next epoch is formed. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"
#include "common/rng.h"

#include <errno.h>
#include <math.h>
#include <sodium.h> /* defines: crypto_hash_sha256 for a reported shard's SHA256SUMS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


static void s_abort(coordinator *c, const char *why);

static void s_send_all(coordinator *c, coordinator_cmd cmd, const cJSON *body) {
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *p = &c->peers[c->members[r]];
    if (p->status == PEER_LIVE) coord_send(c, p, cmd, body);
  }
}

/* A train epoch's "tasklet" object: member `rank`'s seat in the run ("train" is the run itself,
 * parallel_run_config's JSON as the operator set it), where it starts from, and its data
 * shard. */
static cJSON *s_tasklet_json(coordinator *c, int rank) {
  const parallel_run_config *run = &c->cfg.run;
  cJSON *t = cJSON_CreateObject();
  cJSON_AddNumberToObject(t, "stage", rank / run->replicas);
  cJSON_AddNumberToObject(t, "replica", rank % run->replicas);
  /* --resume: the run directory's manifest, until this coordinator commits a step of its own */
  const int resume = c->from_peers ? 0 : c->committed_step > 0 || c->cfg.resume;
  cJSON_AddNumberToObject(t, "resume", resume);
  cJSON_AddNumberToObject(t, "resume_step", (double)c->start_step);
  if (c->from_peers) {
    cJSON *from = cJSON_AddArrayToObject(t, "state_from");
    for (int r = 0; r < c->n_members; r++)
      cJSON_AddItemToArray(from, cJSON_CreateNumber(c->state_from[r]));
  }
  /* the stage's data-parallel ring, as the placement priced it */
  const int R = run->replicas, stage = rank / R;
  cJSON *ring = cJSON_AddArrayToObject(t, "dp_ring");
  for (int i = 0; i < R; i++)
    cJSON_AddItemToArray(ring, cJSON_CreateNumber(c->n_rings ? c->rings[stage * R + i] : i));
  /* the data shard: this replica's rows of every global batch */
  cJSON_AddNumberToObject(t, "shard_first_row",
                          (rank % run->replicas) * run->batch / run->replicas);
  cJSON_AddNumberToObject(t, "shard_rows", run->batch / run->replicas);
  coord_holders_seat_json(c, rank, t);
  return t;
}

/* Member r's emulated links (netsim_emulation_row): latency and path bandwidth to each member,
 * and its access link: uplink and downlink (0 = unlimited) and which members share it. */
static void s_emulation_json(coordinator *c, int r, cJSON *b) {
  const int n = c->n_members;
  double lat[COORD_MAX_MEMBERS], bw[COORD_MAX_MEMBERS];
  int same[COORD_MAX_MEMBERS];
  netsim_emulation e = {.latency_s = lat, .bandwidth_Bps = bw, .same_access = same};
  if (coord_scenario_row(c, r, &e) != WT_OK) return; /* every member has a device: cannot fail */
  cJSON *la = cJSON_AddArrayToObject(b, "latency_s"),
        *bwj = cJSON_AddArrayToObject(b, "bandwidth_Bps");
  cJSON *sa = cJSON_AddArrayToObject(b, "same_access");
  for (int j = 0; j < n; j++) {
    cJSON_AddItemToArray(la, cJSON_CreateNumber(lat[j]));
    cJSON_AddItemToArray(bwj, cJSON_CreateNumber(bw[j]));
    cJSON_AddItemToArray(sa, cJSON_CreateNumber(same[j]));
  }
  cJSON_AddNumberToObject(b, "uplink_Bps", e.up_Bps);
  cJSON_AddNumberToObject(b, "downlink_Bps", e.down_Bps);
}

static void s_publish(coordinator *c) {
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *p = &c->peers[c->members[r]];
    p->epoch_rank = r, p->endpoint[0] = 0, p->result = 0, p->steps_done = 0;
  }
  coord_routes_open(c);
  coord_deadline_links(c);
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *p = &c->peers[c->members[r]];
    cJSON *b = cJSON_CreateObject();
    cJSON_AddNumberToObject(b, "epoch", c->epoch);
    cJSON_AddStringToObject(b, "kind", c->epoch_kind);
    cJSON_AddNumberToObject(b, "rank", r);
    cJSON_AddNumberToObject(b, "size", c->n_members);
    cJSON_AddNumberToObject(b, "run_id", (double)(c->run_id & 0xFFFFFFFFFFFFull));
    cJSON_AddNumberToObject(b, "timeout_s", c->cfg.peer_timeout_s);
    coord_deadline_epoch_json(c, r, b);
    cJSON_AddNumberToObject(b, "time_scale", c->cfg.time_scale);
    cJSON_AddNumberToObject(b, "probe_bytes", c->cfg.probe_kib * 1024.0);
    cJSON *keys = cJSON_AddArrayToObject(b, "keys");
    cJSON *ids = cJSON_AddArrayToObject(b, "peer_ids");
    cJSON *regions = cJSON_AddArrayToObject(b, "regions"); /* to count bytes per link class */
    for (int j = 0; j < c->n_members; j++) {
      cJSON_AddItemToArray(regions, cJSON_CreateString(c->peers[c->members[j]].region));
      cJSON_AddItemToArray(keys, cJSON_CreateString(c->peers[c->members[j]].key));
      cJSON_AddItemToArray(ids, cJSON_CreateNumber(c->peers[c->members[j]].id));
    }
    if (c->scenario) s_emulation_json(c, r, b);
    coord_routes_epoch_json(c, r, b);
    if (!strcmp(c->epoch_kind, "probe"))
      cJSON_AddItemToObject(b, "probe_pairs", coord_probe_pairs(c));
    if (!strcmp(c->epoch_kind, "train")) {
      /* as raw text: cJSON would print its numbers again, to 15 digits, and the peer must
       * receive every bit the operator set */
      char *run = parallel_run_config_to_json(&c->cfg.run);
      cJSON_AddRawToObject(b, "train", run);
      cJSON_AddItemToObject(b, "tasklet", s_tasklet_json(c, r));
      free(run);
    }
    coord_send(c, p, COORD_CMD_EPOCH, b);
    cJSON_Delete(b);
  }
  c->phase = EPOCH_BINDING;
  c->bind_began = wt_now_s();
  c->phase_deadline = c->bind_began + coord_deadline_bind_s(c);
  c->start_deadline = 0;
  c->start_began = 0;
}

/* The live peers an epoch may seat: not those sidelined for now (sideline.c). */
static int s_live(coordinator *c, int *out) {
  int n = 0;
  const double now = wt_now_s();
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].status == PEER_LIVE && coord_sideline_available(c, i, now) &&
        coord_reach_settled(&c->peers[i])) /* its links are wired by its reachability */
      out[n++] = i;
  return n;
}

typedef struct {
  double flops;
  int slot;
} s_by_speed;

static int s_cmp_speed(const void *a, const void *b) {
  const s_by_speed *x = a, *y = b;
  if (x->flops != y->flops) return x->flops < y->flops ? 1 : -1;
  return (x->slot > y->slot) - (x->slot < y->slot);
}

/* The n fastest of the live peers into list (ties in slot order). */
static void s_fastest(coordinator *c, const int *live, int n_live, int *list, int n) {
  s_by_speed *order = wt_xmalloc(sizeof *order * (size_t)n_live);
  for (int k = 0; k < n_live; k++)
    order[k] = (s_by_speed){coord_claim_flops(&c->peers[live[k]]), live[k]};
  qsort(order, (size_t)n_live, sizeof *order, s_cmp_speed);
  for (int k = 0; k < n && k < n_live; k++) list[k] = order[k].slot;
  free(order);
}

/* The cost model's problem over the peers `list` (network index = position in list): the
 * measured directed pairs and, once probed, the peers' access links. Free with s_model_free. */
typedef struct {
  assign_network net;
  assign_access access;
  assign_problem prob;
} s_model;

static void s_problem(coordinator *c, const int *list, int n, int with_compute, s_model *m) {
  const coordinator_config *g = &c->cfg;
  assign_network *net = &m->net;
  net->n = n;
  net->latency_s = wt_xcalloc((size_t)n * n, sizeof(double));
  net->bandwidth_Bps = wt_xcalloc((size_t)n * n, sizeof(double));
  net->compute_speed = wt_xcalloc((size_t)n, sizeof(double));
  net->memory_bytes = NULL;
  double ref = 0;
  for (int i = 0; i < n; i++) ref = fmax(ref, coord_claim_flops(&c->peers[list[i]]));
  for (int i = 0; i < n; i++) {
    net->compute_speed[i] = ref > 0 ? coord_claim_flops(&c->peers[list[i]]) / ref : 1;
    for (int j = 0; j < n; j++) {
      double l = 0, b = 1e12;
      if (i != j) coord_traffic_link(c, list[i], list[j], &l, &b);
      net->latency_s[i * n + j] = l;
      net->bandwidth_Bps[i * n + j] = i == j ? 1e12 : b;
    }
  }
  int with_access = coord_probe_access(c, list, n, &m->access);
  double cut, grad, state;
  coord_traffic_step_bytes(c, &cut, &grad, &state);
  m->prob = (assign_problem){
      .net = net,
      .d_pp = g->run.stages,
      .d_dp = g->run.replicas,
      .dp_algo = ASSIGN_DP_RING, /* what the runtime runs, in the plan's rings */
      .c_dp_bytes = grad,
      .dp_every = g->run.sync.diloco, /* DiLoCo syncs every H steps */
      .c_pp_bytes = cut,
      .access = with_access ? &m->access : NULL};
  /* A tasklet's compute on the fastest listed peer: 6 FLOP per parameter and token (forward and
   * backward) for its stage's parameters and its replica's tokens. */
  if (with_compute && ref > 0)
    m->prob.compute_s = 6.0 * coord_traffic_model_params(g, 1) / g->run.stages *
                        ((double)g->run.batch / g->run.replicas * g->run.seq) / ref;
}

static void s_model_free(s_model *m) {
  free(m->net.latency_s);
  free(m->net.bandwidth_Bps);
  free(m->net.compute_speed);
  coord_probe_access_free(&m->access);
}

cJSON *coord_epoch_problem_json(coordinator *c) {
  int live[COORD_PROBE_MAX], n = 0; /* the constants do not depend on how many are priced */
  for (int i = 0; i < c->n_peers && n < COORD_PROBE_MAX; i++)
    if (c->peers[i].status == PEER_LIVE) live[n++] = i;
  cJSON *o = cJSON_CreateObject();
  s_model m;
  s_problem(c, live, n, 1, &m);
  cJSON_AddNumberToObject(o, "c_dp_bytes", m.prob.c_dp_bytes);
  cJSON_AddNumberToObject(o, "c_pp_bytes", m.prob.c_pp_bytes);
  cJSON_AddNumberToObject(o, "compute_s", m.prob.compute_s);
  cJSON_AddBoolToObject(o, "access_links", m.prob.access != NULL);
  s_model_free(&m);
  return o;
}

static int s_in(const int *list, int n, int x) {
  for (int i = 0; i < n; i++)
    if (list[i] == x) return 1;
  return 0;
}

static int s_holds(coordinator *c, int rank, int stage, long step) {
  const coord_peer *p = &c->peers[c->members[rank]];
  return p->held_step == step && p->held_stage == stage;
}

/* Where the placed members start: the newest step that, for every stage, some member holds in
 * memory (every replica of a stage at one step holds the same state), when it is no older than
 * the latest complete checkpoint; a member that does not hold its stage at that step receives it
 * from one that does (spread over them). Otherwise, and after an epoch that made no progress
 * (a hand-over may be what failed), everyone loads the checkpoint. A DiLoCo run starts from the
 * members' states by recovery.c's rule. Any other stateful run (error feedback, delta activation
 * caches, ZeRO-1's sharded optimizer) always loads the checkpoint: the held states carry the
 * weights and optimizer only, while each replica's own sync state lives in its .state file of
 * the checkpoint, and a peer replacing a lost replica must start from that replica's file. The
 * steps since the checkpoint are trained again. */
static void s_state_sources(coordinator *c) {
  const int S = c->cfg.run.stages, R = c->cfg.run.replicas, n = c->n_members;
  if (parallel_run_config_live_recovery(&c->cfg.run)) {
    /* a promotion swaps a live member out at a committed checkpoint: from that checkpoint the
     * standby loads the replaced replica's own state, so the run goes on bit for bit */
    const int promoted = c->promoted;
    c->promoted = 0;
    c->from_peers = c->failed_epochs == 0 && !promoted && coord_recovery_live_sources(c);
    /* with checkpoints on the peers the newest committed step may have no live holder yet (its
     * writer lost before the copies landed): the newest step that has one */
    if (!c->from_peers)
      c->start_step = coord_holders_on(c) ? coord_holders_resume_step(c) : c->committed_step;
    return;
  }
  const int handover = c->failed_epochs == 0 && !parallel_run_config_stateful(&c->cfg.run);
  long best = 0;
  for (int q = 0; q < n && handover; q++) {
    long step = c->peers[c->members[q]].held_step;
    /* a held final step whose checkpoint is not committed would start an epoch with nothing
     * to train and nothing saved: the run trains from the checkpoint to the end again */
    int covered = step > best && step >= c->committed_step &&
                  (step < c->cfg.run.steps || c->committed_step >= c->cfg.run.steps);
    for (int st = 0; covered && st < S; st++) {
      int any = 0;
      for (int r = 0; r < n && !any; r++) any = s_holds(c, r, st, step);
      covered = any;
    }
    if (covered) best = step;
  }
  c->from_peers = best > 0;
  c->start_step = best > 0              ? best
                  : coord_holders_on(c) ? coord_holders_resume_step(c)
                                        : c->committed_step;
  int next[COORD_MAX_MEMBERS] = {0}; /* per stage: the holder to hand out next */
  for (int r = 0; best > 0 && r < n; r++) {
    int st = r / R;
    c->state_from[r] = -1;
    if (s_holds(c, r, st, best)) {
      c->state_from[r] = r;
      continue;
    }
    /* a holder that stays in its stage first; one moved to another stage sends it too */
    for (int pass = 0; pass < 2 && c->state_from[r] < 0; pass++)
      for (int k = 0; k < n; k++) {
        int q = (next[st] + k) % n;
        if (s_holds(c, q, st, best) && (pass || q / R == st)) {
          c->state_from[r] = q, next[st] = q + 1;
          break;
        }
      }
  }
}

/* The cost model's iteration cost, compute included, of the world ranks held by list (peer
 * indices by world rank). Links not yet probed count as free: an optimistic estimate. */
static double s_cost_of(coordinator *c, const int *list, int n) {
  s_model m;
  s_problem(c, list, n, 1, &m);
  assign_plan *plan = assign_plan_new(c->cfg.run.stages, c->cfg.run.replicas);
  for (int w = 0; w < n; w++) plan->device[w] = w;
  double cost = assign_plan_cost(&m.prob, plan).comm_s;
  assign_plan_destroy(&plan);
  s_model_free(&m);
  return cost;
}

/* The best single swap of standby `cand` into list: *slot and the cost with it. */
static double s_best_swap(coordinator *c, const int *list, int n, int cand, int *slot) {
  int trial[COORD_MAX_MEMBERS];
  double best = INFINITY;
  *slot = -1;
  for (int i = 0; i < n; i++) {
    memcpy(trial, list, sizeof(int) * n);
    trial[i] = cand;
    double cost = s_cost_of(c, trial, n);
    if (cost < best) best = cost, *slot = i;
  }
  return best;
}

/* Why a standby replaces a member, as the cost model sees it: its device, its links, or both. */
static void s_promotion_reason(const coordinator *c, int who, int member, double now_cost,
                               double cost, char *out, size_t size) {
  const coord_peer *in = &c->peers[who], *out_p = &c->peers[member];
  const char *gain = in->flops > out_p->flops * 1.05   ? "a faster device"
                     : in->flops < out_p->flops * 0.95 ? "better links (its device is slower)"
                                                       : "better links";
  snprintf(out, size,
           "re-placing the run at this checkpoint: standby peer %d (%s) takes the place of peer "
           "%d, predicted cost %.4f s -> %.4f s",
           in->id, gain, out_p->id, now_cost, cost);
}

#define S_PROMOTE_GAIN 0.10 /* a standby replaces a member when the cost drops by 10% or more */

static void s_swarm_choose(coordinator *c, const int *live, int n_live, int *list, int n);

void coord_epoch_on_commit(coordinator *c) {
  if (c->phase != EPOCH_RUNNING || strcmp(c->epoch_kind, "train") || c->promote >= 0) return;
  const int n = c->n_members;
  double now_cost = s_cost_of(c, c->members, n), best = now_cost;
  int who = -1, slot = -1, *cands = c->live, n_cands = 0; /* the loop's scratch: free here */
  for (int k = 0; k < c->n_peers; k++) {
    coord_peer *p = &c->peers[k];
    if (p->status == PEER_LIVE && p->epoch_rank < 0 && !p->promote_refused &&
        coord_sideline_available(c, k, wt_now_s()) && coord_reach_settled(p))
      cands[n_cands++] = k;
  }
  /* each candidate costs n placements priced: among many, only the most promising are */
  if (n_cands > COORD_PROBE_NEWCOMERS) {
    int top[COORD_PROBE_NEWCOMERS];
    s_swarm_choose(c, cands, n_cands, top, COORD_PROBE_NEWCOMERS);
    n_cands = COORD_PROBE_NEWCOMERS;
    memcpy(cands, top, sizeof top);
  }
  for (int j = 0; j < n_cands; j++) {
    int i, k = cands[j];
    double cost = s_best_swap(c, c->members, n, k, &i);
    if (cost < best) best = cost, who = k, slot = i;
  }
  if (who < 0 || best > (1 - S_PROMOTE_GAIN) * now_cost) return;
  coord_event(c, "promote",
              "standby peer %d (%.1f GFLOP/s) would cut the predicted iteration cost from %.4f s "
              "to %.4f s in place of peer %d (%.1f GFLOP/s); re-placing at checkpoint step %ld",
              c->peers[who].id, c->peers[who].flops / 1e9, now_cost, best,
              c->peers[c->members[slot]].id, c->peers[c->members[slot]].flops / 1e9,
              c->committed_step);
  c->promote = who;
  char why[256];
  s_promotion_reason(c, who, c->members[slot], now_cost, best, why, sizeof why);
  s_abort(c, why);
}

/* The step the run must have committed once its tasklets have done `steps`: the latest
 * checkpoint step at or below it (every checkpoint_every steps, and the last step). */
static long s_due_checkpoint(const coordinator *c, long steps) {
  if (steps >= c->cfg.run.steps) return c->cfg.run.steps;
  return c->cfg.run.checkpoint_every > 0
             ? steps / c->cfg.run.checkpoint_every * c->cfg.run.checkpoint_every
             : 0;
}

/* A DiLoCo epoch started from the members' states at the run's last step saves that step's
 * checkpoint at its start (it has nothing left to train; recovery.c). */
static int s_finishes_at_start(const coordinator *c, long step) {
  return c->from_peers && parallel_run_config_live_recovery(&c->cfg.run) &&
         step == c->start_step && step == c->cfg.run.steps;
}

/* Whether the owner of a stage's checkpoint in the running train epoch can have saved `step`:
 * past the step the epoch started from, on the checkpoint grid, not past the run's end. */
static int s_report_from_owner(coordinator *c, const coord_peer *p, int epoch, long step, int stage,
                               char *why, size_t size) {
  const int owner = stage * c->cfg.run.replicas; /* replica 0 saves the stage */
  if (epoch != c->epoch || strcmp(c->epoch_kind, "train") ||
      (c->phase != EPOCH_RUNNING && c->phase != EPOCH_DRAINING))
    snprintf(why, size, "epoch %d is not the running train epoch (%d)", epoch, c->epoch);
  else if (p->epoch_rank != owner)
    snprintf(why, size, "peer %d is %s, and world rank %d saves stage %d's shard", p->id,
             p->epoch_rank < 0 ? "not a member of this epoch" : "not that stage's replica 0", owner,
             stage);
  else if ((step <= c->start_step && !s_finishes_at_start(c, step)) || step > c->cfg.run.steps ||
           s_due_checkpoint(c, step) != step)
    snprintf(why, size,
             "the epoch started at step %ld and saves every %d steps up to step %d, so it "
             "cannot have saved this step",
             c->start_step, c->cfg.run.checkpoint_every, c->cfg.run.steps);
  else
    return 1;
  return 0;
}

/* The SHA-256 of a shard's SHA256SUMS, in lowercase hex. A file over 64 KiB is refused: no
 * SHA256SUMS is, and the daemon's loop should not hash whatever a path holds. */
static int s_sums_sha256(const char *path, char hex[65]) {
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(WT_ENOTFOUND, "cannot read %s: %s", path, strerror(errno));
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  unsigned char buf[4096], digest[32];
  size_t n, total = 0;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0 && (total += n) <= 65536)
    crypto_hash_sha256_update(&st, buf, n);
  int bad = ferror(f) || total > 65536;
  fclose(f);
  if (bad) return wt_fail(WT_EIO, "%s is unreadable or larger than 64 KiB", path);
  crypto_hash_sha256_final(&st, digest);
  sodium_bin2hex(hex, 65, digest, sizeof digest);
  return WT_OK;
}

/* Checks the report against the shard on disk when the coordinator sees the checkpoint
 * directory: SHA256SUMS must hash to the reported digest and every file it lists must exist
 * (their contents are checked against it by every load). Without the directory the digest is
 * kept unchecked, as the owner sent it; that is said once. */
static int s_report_matches_disk(coordinator *c, long step, int stage, const char *digest,
                                 char *why, size_t size) {
  struct stat st;
  if (coord_holders_on(c)) return 1; /* on the peers: each copy is checked by its digest */
  if (stat(c->cfg.run.checkpoint_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    if (!c->ckpt_unchecked)
      coord_event(c, "checkpoint",
                  "%s is not visible here: the checkpoint digests the peers report are recorded "
                  "unchecked (each load still checks its shard)",
                  c->cfg.run.checkpoint_dir);
    c->ckpt_unchecked = 1;
    return 1;
  }
  char dir[1400], path[1700], hex[65], line[512];
  snprintf(dir, sizeof dir, "%s/stage-%d/step-%08ld", c->cfg.run.checkpoint_dir, stage, step);
  snprintf(path, sizeof path, "%s/SHA256SUMS", dir);
  if (s_sums_sha256(path, hex) != WT_OK) {
    snprintf(why, size, "%s cannot be read (%s)", path, wt_last_error());
    return 0;
  }
  if (strcmp(hex, digest)) {
    snprintf(why, size, "its digest %.16s… is not the SHA-256 of %s (%.16s…)", digest, path, hex);
    return 0;
  }
  FILE *f = fopen(path, "r");
  int ok = f != NULL;
  if (!f) snprintf(why, size, "%s cannot be opened", path);
  while (ok && fgets(line, sizeof line, f)) {
    char sum[128], name[256];
    if (sscanf(line, "%127s %255s", sum, name) != 2) continue;
    snprintf(path, sizeof path, "%s/%s", dir, name[0] == '*' ? name + 1 : name);
    ok = !strchr(name, '/') && stat(path, &st) == 0 && S_ISREG(st.st_mode);
    if (!ok) snprintf(why, size, "%s lists %s, which is not a file there", dir, name);
  }
  if (f) fclose(f);
  return ok;
}

/* Whether a stage's shard of `step` is gone because the stage saved a newer one since: its
 * directory is missing and the stage's `latest` names a later step. An honest report that
 * arrives late (queued while the coordinator restarted) finds it so. */
static int s_pruned(coordinator *c, int stage, long step) {
  char path[1400], name[64] = "";
  struct stat st;
  snprintf(path, sizeof path, "%s/stage-%d/step-%08ld", c->cfg.run.checkpoint_dir, stage, step);
  if (stat(path, &st) == 0) return 0;
  snprintf(path, sizeof path, "%s/stage-%d/latest", c->cfg.run.checkpoint_dir, stage);
  FILE *f = fopen(path, "r");
  long latest = -1;
  if (f && fgets(name, sizeof name, f) && sscanf(name, "step-%ld", &latest) != 1) latest = -1;
  if (f) fclose(f);
  return latest > step;
}

void coord_epoch_on_checkpoint(coordinator *c, coord_peer *p, const cJSON *body) {
  long step = coordinator_field_int(body, "step", -1);
  int stage = coordinator_field_int(body, "stage", -1);
  int epoch = coordinator_field_int(body, "epoch", -1);
  const char *digest = coordinator_field_str(body, "digest");
  char why[2048] = "";
  int hex = strlen(digest) == 64 && strspn(digest, "0123456789abcdef") == 64;
  if (step < 1 || stage < 0 || stage >= c->cfg.run.stages || !hex)
    snprintf(why, sizeof why, "an impossible step, stage or digest");
  if (!why[0] && s_report_from_owner(c, p, epoch, step, stage, why, sizeof why) &&
      !s_report_matches_disk(c, step, stage, digest, why, sizeof why) && s_pruned(c, stage, step)) {
    WT_INFO("coordinator: ignored peer %d's report of step %ld, stage %d: its shard was pruned "
            "before the report arrived (a newer step is saved)",
            p->id, step, stage);
    return;
  }
  if (why[0]) {
    c->refused++;
    WT_WARN("coordinator: dropped a checkpoint report from peer %d (epoch %d, step %ld, stage "
            "%d): %s",
            p->id, epoch, step, stage, why);
    return;
  }
  int complete = 0;
  coord_state_checkpoint(c, step, stage, digest, &complete);
  if (complete && step > c->committed_step) {
    c->committed_step = step;
    c->missed_checkpoints = 0;
    coord_state_save_run(c);
    coord_event(c, "checkpoint", "step %ld complete: all %d stages reported their shards", step,
                c->cfg.run.stages);
    coord_epoch_on_commit(c);
  }
}

/* After probing: promotes c->promote into the plan when its measured links keep the gain. */
static void s_promote(coordinator *c, int *list, int n, int *changed, int *n_changed) {
  int who = c->promote, slot;
  c->promote = -1;
  if (who < 0 || c->peers[who].status != PEER_LIVE || s_in(list, n, who) ||
      !coord_sideline_available(c, who, wt_now_s()) || !coord_reach_settled(&c->peers[who]))
    return;
  double now_cost = s_cost_of(c, list, n), cost = s_best_swap(c, list, n, who, &slot);
  if (slot < 0 || cost > (1 - S_PROMOTE_GAIN) * now_cost) {
    c->peers[who].promote_refused = 1;
    coord_event(c, "promote",
                "peer %d stays a standby: with its measured links the cost would be %.4f s "
                "against %.4f s",
                c->peers[who].id, cost, now_cost);
    return;
  }
  coord_event(c, "promote", "peer %d takes world rank %d from peer %d (predicted %.4f s -> %.4f s)",
              c->peers[who].id, slot, c->peers[list[slot]].id, now_cost, cost);
  list[slot] = who;
  changed[(*n_changed)++] = slot;
  c->promoted = 1;
}

/* A placement the operator fixed: --assignment, or --solver none. */
static int s_fixed(const coordinator *c) {
  return c->fixed_plan || !strcmp(c->cfg.solver, "none");
}

static int s_on_device(coordinator *c, const int *live, int n_live, int d) {
  for (int k = 0; k < n_live; k++)
    if (c->peers[live[k]].device_index == d) return live[k];
  return -1;
}

/* The fixed placement's peers by world rank: on the scenario device --assignment (or, with
 * --solver none, the rank itself) names; without a scenario the first peers in the order they
 * joined. Returns 0 while a device has no live peer. */
static int s_fixed_list(coordinator *c, const int *live, int n_live, int n, int *list) {
  for (int w = 0; w < n; w++) {
    if (!c->scenario) {
      if (w >= n_live) return 0;
      list[w] = live[w];
      continue;
    }
    list[w] = s_on_device(c, live, n_live, c->fixed_plan ? c->fixed_plan->device[w] : w);
    if (list[w] < 0) return 0;
  }
  return 1;
}

/* The mean cost of placing the listed peers at random (100 draws from the run's seed): the
 * baseline a solver's placement is compared with. */
static double s_random_cost(coordinator *c, const assign_problem *prob, int n) {
  assign_plan *rnd = assign_plan_new(c->cfg.run.stages, c->cfg.run.replicas);
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)c->cfg.run.seed);
  double sum = 0;
  for (int k = 0; k < 100; k++) {
    for (int w = 0; w < n; w++) rnd->device[w] = w;
    wt_rng_shuffle_int(&rng, rnd->device, n);
    sum += assign_plan_cost(prob, rnd).comm_s;
  }
  assign_plan_destroy(&rnd);
  return sum / 100;
}

/* The fixed placement as a plan over its list (world rank w on list[w]): the assignment's rings
 * when it has them, else each stage's ring chosen on the emulated network, else (no scenario)
 * replica order. */
static int s_fixed_plan(coordinator *c, const assign_problem *prob, assign_plan **out) {
  const int S = c->cfg.run.stages, R = c->cfg.run.replicas;
  assign_plan *plan = assign_plan_new(S, R);
  for (int w = 0; w < S * R; w++) plan->device[w] = w;
  int rc = WT_OK;
  if (c->fixed_plan && c->fixed_plan->ring) {
    plan->ring = wt_xmalloc(sizeof(int) * (size_t)(S * R));
    memcpy(plan->ring, c->fixed_plan->ring, sizeof(int) * (size_t)(S * R));
  } else if (c->scenario) {
    rc = assign_plan_choose_rings(prob, plan);
  }
  if (rc != WT_OK) assign_plan_destroy(&plan);
  *out = plan;
  return rc;
}

/* --solver shuffle: the peers in one random order (seeded by the run and the epoch), rings in
 * replica order: the placement the GA's is measured against. */
static assign_plan *s_shuffled_plan(const coordinator *c) {
  const int n = c->cfg.run.stages * c->cfg.run.replicas;
  assign_plan *plan = assign_plan_new(c->cfg.run.stages, c->cfg.run.replicas);
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)c->cfg.run.seed * 7919 + (uint64_t)c->epoch);
  for (int w = 0; w < n; w++) plan->device[w] = w;
  wt_rng_shuffle_int(&rng, plan->device, n);
  return plan;
}

/* The n of many live peers whose tasklet alone costs least (coord_swarm_choose), priced with
 * the cost model's constants: a tasklet's FLOP and its gradient ring's and cuts' bytes. */
static void s_swarm_choose(coordinator *c, const int *live, int n_live, int *list, int n) {
  s_model m;
  s_problem(c, live, 1, 1, &m); /* one peer: only the constants are read */
  double flop = m.prob.compute_s * coord_claim_flops(&c->peers[live[0]]);
  coord_swarm_choose(c, live, n_live, list, n, flop, 2 * m.prob.c_dp_bytes + m.prob.c_pp_bytes);
  s_model_free(&m);
}

/* Chooses the train epoch's peers and places them. Returns 1 when members[] is set. */
static int s_place(coordinator *c, const int *live, int n_live) {
  int n = c->cfg.run.stages * c->cfg.run.replicas, list[COORD_MAX_MEMBERS],
      changed[COORD_MAX_MEMBERS];
  int n_changed = 0, resolve = c->n_plan == n;
  if (resolve) {
    memcpy(list, c->plan_members, sizeof(int) * n);
    for (int i = 0; i < n; i++) {
      if (c->peers[list[i]].status == PEER_LIVE && coord_sideline_available(c, list[i], wt_now_s()))
        continue;
      int best = -1; /* standbys first: the fastest live peer outside the plan */
      for (int k = 0; k < n_live; k++)
        if (!s_in(list, n, live[k]) && (best < 0 || coord_claim_flops(&c->peers[live[k]]) >
                                                        coord_claim_flops(&c->peers[best])))
          best = live[k];
      if (best < 0) return 0;
      coord_event(c, "standby", "peer %d takes over world rank %d from peer %d", c->peers[best].id,
                  i, c->peers[list[i]].id);
      list[i] = best;
      changed[n_changed++] = i;
    }
    s_promote(c, list, n, changed, &n_changed);
  } else if (s_fixed(c)) {
    if (!s_fixed_list(c, live, n_live, n, list)) return 0;
  } else if (n_live > COORD_PROBE_ALL_PAIRS) {
    s_swarm_choose(c, live, n_live, list, n); /* the rest wait as standbys */
  } else {
    s_fastest(c, live, n_live, list, n); /* the rest wait as standbys */
  }
  s_model m; /* compute included: the same for every plan (one tasklet per peer), it makes the
              * predicted cost an iteration's time */
  s_problem(c, list, n, 1, &m);
  const assign_problem *prob = &m.prob;
  assign_plan *plan = NULL;
  assign_stats st;
  int rc;
  if (resolve) {
    assign_plan *prev = assign_plan_new(c->cfg.run.stages, c->cfg.run.replicas);
    for (int w = 0; w < n; w++) prev->device[w] = w;
    assign_budget b = {.max_evals = 400};
    rc = assign_resolve(prob, prev, changed, n_changed, &b, (uint64_t)c->epoch, &plan, &st);
    assign_plan_destroy(&prev);
  } else if (s_fixed(c)) {
    rc = s_fixed_plan(c, prob, &plan);
    if (rc == WT_OK) c->cost_random = s_random_cost(c, prob, n);
  } else if (!strcmp(c->cfg.solver, "shuffle")) {
    plan = s_shuffled_plan(c);
    rc = assign_plan_choose_rings(prob, plan); /* its rings, as any placement's */
    c->cost_random = s_random_cost(c, prob, n);
  } else {
    assign_solver kind = ASSIGN_SOLVER_GA;
    assign_solver_parse(c->cfg.solver, &kind);
    assign_budget b = {.max_evals = 4000, .max_seconds = 2};
    rc = assign_solve(prob, kind, &b, (uint64_t)c->cfg.run.seed, &plan, &st);
  }
  if (!resolve) {
    /* the baseline: the mean cost of placing the peers at random (as laid out, 100 draws) */
    if (rc == WT_OK) c->cost_random = s_random_cost(c, prob, n);
  }
  if (rc == WT_OK) {
    c->cost_ga = assign_plan_cost(prob, plan).comm_s;
    for (int w = 0; w < n; w++) c->members[w] = list[plan->device[w]];
    c->n_members = n;
    memcpy(c->plan_members, c->members, sizeof(int) * n);
    c->n_plan = n;
    c->n_rings = plan->ring ? n : 0;
    if (plan->ring) memcpy(c->rings, plan->ring, sizeof(int) * n);
    s_state_sources(c);
  } else {
    coord_event(c, "error", "placement failed: %s", wt_last_error());
  }
  assign_plan_destroy(&plan);
  s_model_free(&m);
  return rc == WT_OK;
}

static void s_start_epoch(coordinator *c, const char *kind, const int *who, int n) {
  c->epoch++;
  snprintf(c->epoch_kind, sizeof c->epoch_kind, "%s", kind);
  if (who) {
    memcpy(c->members, who, sizeof(int) * n);
    c->n_members = n;
  }
  cJSON *plan = cJSON_CreateArray();
  char ids[1024] = "";
  for (int r = 0; r < c->n_members; r++) {
    cJSON_AddItemToArray(plan, cJSON_CreateNumber(c->peers[c->members[r]].id));
    snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", r ? " " : "",
             c->peers[c->members[r]].id);
  }
  char *text = cJSON_PrintUnformatted(plan);
  cJSON_Delete(plan);
  coord_state_save_epoch(c, text);
  free(text);
  if (!strcmp(kind, "train"))
    coord_event(c, "epoch",
                "epoch %d: train %d stages x %d replicas, peers by world rank [%s], "
                "predicted cost %.4f s (random placement %.4f s), from step %ld (%s)",
                c->epoch, c->cfg.run.stages, c->cfg.run.replicas, ids, c->cost_ga, c->cost_random,
                c->start_step,
                c->from_peers           ? "the members' own state, handed over to the others"
                : c->committed_step > 0 ? "the latest complete checkpoint"
                : c->cfg.resume         ? "the run directory's manifest"
                                        : "fresh weights");
  else
    coord_event(c, "epoch", "epoch %d: probe the links among peers [%s]", c->epoch, ids);
  s_publish(c);
}

static void s_abort(coordinator *c, const char *why) {
  coord_event(c, "abort", "epoch %d (%s): %s", c->epoch, c->epoch_kind, why);
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", c->epoch);
  cJSON_AddStringToObject(b, "reason", why);
  s_send_all(c, COORD_CMD_ABORT, b);
  cJSON_Delete(b);
  /* before START no member works, and one told to stop before it starts reports nothing: none
   * is waited for */
  if (c->phase == EPOCH_BINDING)
    for (int r = 0; r < c->n_members; r++)
      if (c->peers[c->members[r]].result == 0) c->peers[c->members[r]].result = -1;
  c->phase = EPOCH_DRAINING;
  c->phase_deadline = wt_now_s() + c->cfg.peer_timeout_s + 10;
  c->start_deadline = 0;
  coord_state_save_run(c);
}

static int s_all_reported(coordinator *c) {
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *p = &c->peers[c->members[r]];
    if (p->status == PEER_LIVE && p->result == 0) return 0;
  }
  return 1;
}

/* A train epoch that ended short of the run's end and trained past a checkpoint step it did
 * not commit: its steps live only in the members' memory. Counted until the next commit. */
static void s_count_missed(coordinator *c) {
  long reached = 0;
  for (int r = 0; r < c->n_members; r++)
    reached = WT_MAX(reached, c->peers[c->members[r]].steps_done);
  long due = s_due_checkpoint(c, reached);
  if (due <= c->committed_step) return;
  c->missed_checkpoints++;
  coord_event(c, "checkpoint",
              "epoch %d trained to step %ld but the checkpoint of step %ld was not committed "
              "(%d such epoch%s since the latest complete checkpoint, step %ld)",
              c->epoch, reached, due, c->missed_checkpoints, c->missed_checkpoints > 1 ? "s" : "",
              c->committed_step);
}

static void s_epoch_over(coordinator *c) {
  if (!strcmp(c->epoch_kind, "train") && !c->run_complete) s_count_missed(c);
  coord_sideline_on_epoch_over(c);
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *p = &c->peers[c->members[r]];
    p->epoch_rank = -1;
    p->done_intra += p->bytes_intra, p->done_inter += p->bytes_inter;
    p->done_inter_raw += p->bytes_inter_raw;
    p->bytes_intra = p->bytes_inter = p->bytes_inter_raw = 0;
  }
  c->n_members = 0;
  c->phase = EPOCH_NONE;
  coord_routes_close(c);
  coord_state_save_run(c);
}

/* Stops the run with its cause and tells every live peer, which exits with an error. */
/* Stops the run: logs why, tells every live peer (FINISH with the error) and records it. */
static void s_stop_because(coordinator *c, const char *why) {
  c->run_complete = 2;
  coord_event(c, "stopped", "%s", why);
  coord_state_save_run(c);
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "error", why);
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].status == PEER_LIVE) coord_send(c, &c->peers[i], COORD_CMD_FINISH, b);
  cJSON_Delete(b);
}

static void s_stop(coordinator *c) {
  char why[2600];
  if (c->failed_epochs >= 3)
    snprintf(why, sizeof why, "three epochs in a row failed without progress; last error: %s",
             c->last_error);
  else
    snprintf(why, sizeof why,
             "three epochs failed after training past a checkpoint step that was never "
             "committed; the latest complete checkpoint is step %ld in %s; last error: %s",
             c->committed_step, c->cfg.run.checkpoint_dir, c->last_error);
  s_stop_because(c, why);
}

/* The members that missed the bind deadline (bind) or the start deadline (their heartbeats do
 * not say they work in this epoch) are sidelined and not waited for. Returns how many. */
static int s_sideline_silent(coordinator *c, int bind) {
  int n = 0;
  char why[160];
  snprintf(why, sizeof why, "it did not %s within the %.3g s deadline of epoch %d (%s)",
           bind ? "bind its data socket" : "start its work after START",
           bind ? coord_deadline_bind_s(c) : coord_deadline_start_s(c), c->epoch, c->epoch_kind);
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *p = &c->peers[c->members[r]];
    if (p->status != PEER_LIVE || p->result != 0) continue;
    if (bind ? p->endpoint[0] != 0 : p->started_epoch == c->epoch) continue;
    coord_sideline(c, c->members[r], why);
    p->result = -1;
    n++;
  }
  return n;
}

/* Starts a probe epoch when links are missing: every pair among a few live peers, or the
 * newcomers that swarm.c chooses among many. Returns 1 when it did. */
static int s_probe_due(coordinator *c, const int *live, int n_live) {
  char why[256];
  int who[COORD_PROBE_MAX], n = 0;
  if (n_live <= COORD_PROBE_ALL_PAIRS) {
    if (coord_probe_complete(c, live, n_live, why, sizeof why)) return 0;
    c->probe_planned = 0;
    memcpy(who, live, sizeof(int) * (size_t)n_live);
    n = n_live;
  } else if (!coord_swarm_probe_newcomers(c, live, n_live, who, &n, why, sizeof why)) {
    return 0;
  }
  coord_event(c, "probe", "probing: %s", why);
  s_start_epoch(c, "probe", who, n);
  return 1;
}

/* Among many peers: probes the placement's links that were only estimated before it trains
 * (the placement is kept, and re-solved from the measurements next time). 1 when it did. */
static int s_refine_due(coordinator *c) {
  char why[256];
  int who[COORD_PROBE_MAX], n = 0;
  if (!coord_swarm_probe_plan_links(c, who, &n, why, sizeof why)) return 0;
  coord_event(c, "probe", "probing: %s", why);
  s_start_epoch(c, "probe", who, n);
  return 1;
}

/* Once every member works in the running epoch, how long that took counts for the next start
 * deadline. */
static void s_measure_start(coordinator *c, double now) {
  if (c->phase != EPOCH_RUNNING || c->start_began <= 0) return;
  for (int r = 0; r < c->n_members; r++)
    if (c->peers[c->members[r]].started_epoch != c->epoch) return;
  coord_deadline_started(c, now - c->start_began);
  c->start_began = 0;
}

void coord_epoch_tick(coordinator *c) {
  if (c->run_complete) return;
  double now = wt_now_s();
  s_measure_start(c, now);
  if (now - c->holders_check_t >= 1) /* copies lost with a peer are made again */
    c->holders_check_t = now, coord_holders_check(c);
  if (c->phase == EPOCH_BINDING && now > c->phase_deadline) {
    s_sideline_silent(c, 1);
    s_abort(c, "not every member bound its data socket within the deadline");
  } else if (c->phase == EPOCH_RUNNING && c->start_deadline > 0 && now > c->start_deadline) {
    c->start_deadline = 0;
    if (s_sideline_silent(c, 0)) s_abort(c, "not every member started within the deadline");
  } else if (c->phase == EPOCH_RUNNING && !strcmp(c->epoch_kind, "probe") &&
             now > c->phase_deadline) {
    s_abort(c, "the link probe did not finish within its deadline");
  } else if (c->phase == EPOCH_DRAINING && (s_all_reported(c) || now > c->phase_deadline)) {
    s_epoch_over(c);
  }
  if (c->phase != EPOCH_NONE) return;
  int *live = c->live, n_live = s_live(c, live), need = c->cfg.run.stages * c->cfg.run.replicas;
  if (n_live < need) return;
  const int measured = !coord_traffic_scenario_links(c) && !s_fixed(c);
  if (measured && s_probe_due(c, live, n_live)) return;
  if (c->failed_epochs >= 3 || c->missed_checkpoints >= 3) {
    s_stop(c);
    return;
  }
  char why[1024];
  const int ready = coord_holders_ready(c, why, sizeof why);
  if (ready < 0) { /* no live peer holds a committed step, and none came back in time */
    snprintf(c->last_error, sizeof c->last_error, "%s", why);
    s_stop_because(c, why);
  }
  if (ready <= 0) return;
  if (!s_place(c, live, n_live)) return;
  if (measured && n_live > COORD_PROBE_ALL_PAIRS && s_refine_due(c)) return;
  c->refine_rounds = 0;
  s_start_epoch(c, "train", NULL, 0);
}

void coord_epoch_on_bound(coordinator *c, coord_peer *p, const cJSON *body) {
  const cJSON *ep = cJSON_GetObjectItemCaseSensitive(body, "epoch");
  const char *endpoint = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "endpoint"));
  if (!cJSON_IsNumber(ep) || ep->valueint != c->epoch || c->phase != EPOCH_BINDING ||
      p->epoch_rank < 0)
    return; /* a late answer to an epoch that is over */
  if (!endpoint || strncmp(endpoint, "tcp://", 6) || strlen(endpoint) >= sizeof p->endpoint) {
    c->refused++;
    WT_WARN("coordinator: peer %d bound an impossible endpoint; aborting the epoch", p->id);
    s_abort(c, "a member reported an impossible endpoint");
    return;
  }
  if (coord_routes_on_bound(c, p->epoch_rank, body) != WT_OK) {
    c->refused++;
    WT_WARN("coordinator: peer %d: %s; aborting the epoch", p->id, wt_last_error());
    s_abort(c, "a member reported impossible outboxes");
    return;
  }
  snprintf(p->endpoint, sizeof p->endpoint, "%s", endpoint);
  for (int r = 0; r < c->n_members; r++)
    if (!c->peers[c->members[r]].endpoint[0]) return;
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *m = &c->peers[c->members[r]];
    if (m->status != PEER_LIVE) continue;
    cJSON *b = cJSON_CreateObject();
    cJSON_AddNumberToObject(b, "epoch", c->epoch);
    cJSON *eps = cJSON_AddArrayToObject(b, "endpoints");
    for (int j = 0; j < c->n_members; j++)
      cJSON_AddItemToArray(eps, cJSON_CreateString(c->peers[c->members[j]].endpoint));
    coord_routes_start_json(c, r, b);
    coord_send(c, m, COORD_CMD_START, b);
    cJSON_Delete(b);
  }
  c->phase = EPOCH_RUNNING;
  c->phase_deadline = wt_now_s() + coord_probe_deadline_s(c);
  coord_deadline_bound(c, wt_now_s() - c->bind_began);
  c->start_began = wt_now_s();
  c->start_deadline = c->start_began + coord_deadline_start_s(c);
  coord_state_save_run(c);
}

void coord_epoch_on_result(coordinator *c, coord_peer *p, const cJSON *body) {
  const cJSON *ep = cJSON_GetObjectItemCaseSensitive(body, "epoch");
  if (!cJSON_IsNumber(ep) || ep->valueint != c->epoch || p->epoch_rank < 0 ||
      c->phase == EPOCH_NONE)
    return;
  const cJSON *hs = cJSON_GetObjectItemCaseSensitive(body, "held_step");
  if (cJSON_IsNumber(hs) && hs->valuedouble >= 0 && hs->valuedouble < 1e12) {
    p->held_step = (long)hs->valuedouble;
    p->held_stage = (int)fmin(
        fmax(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(body, "held_stage")), -1), 1e6);
    p->held_outer = (long)fmin(fmax(coordinator_field_num(body, "held_outer", -1), -1), 1e12);
  }
  int ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "ok"));
  const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "error"));
  double steps_v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(body, "steps"));
  long steps = isfinite(steps_v) ? (long)fmin(fmax(steps_v, 0), 1e12) : 0;
  p->result = ok ? 1 : -1;
  p->steps_done = steps;
  if (ok) coord_sideline_on_success(c, (int)(p - c->peers));
  p->bytes_intra = fmax(
      p->bytes_intra, cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(body, "bytes_intra")));
  p->bytes_inter = fmax(
      p->bytes_inter, cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(body, "bytes_inter")));
  p->bytes_inter_raw =
      fmax(p->bytes_inter_raw,
           cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(body, "bytes_inter_raw")));
  if (ok && !strcmp(c->epoch_kind, "probe")) coord_probe_on_result(c, p, body);
  /* a run shorter than a heartbeat shows its first loss only here */
  const double first = coordinator_field_num(body, "first_loss", NAN);
  if (!strcmp(c->epoch_kind, "train") && isnan(c->first_loss) && isfinite(first))
    c->first_loss = first;
  if (!ok) {
    /* The cause, not its echoes: when one tasklet fails, its neighbours fail next with a lost
     * link or a deadline (WT_EIO / WT_ETIMEOUT), and their reports may arrive first. */
    double code_v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(body, "code"));
    int code = isfinite(code_v) ? (int)fmin(fmax(code_v, -100), 100) : WT_EIO;
    int echo = code == WT_EIO || code == WT_ETIMEOUT;
    coord_sideline_note_failure(c, p, code, err);
    if (c->phase != EPOCH_DRAINING || (!echo && c->last_error_echo)) {
      snprintf(c->last_error, sizeof c->last_error, "peer %d: %s", p->id, err ? err : "failed");
      c->last_error_echo = echo;
    }
    if (c->phase != EPOCH_DRAINING) {
      if (!strcmp(c->epoch_kind, "train")) /* three in a row without progress stop the run */
        c->failed_epochs = steps <= c->start_step ? c->failed_epochs + 1 : 0;
      if (!strcmp(c->epoch_kind, "train") && c->lost_at == 0) c->lost_at = wt_now_s();
      s_abort(c, c->last_error);
    }
    return;
  }
  if (!s_all_reported(c) || c->phase == EPOCH_DRAINING) return;
  if (!strcmp(c->epoch_kind, "probe")) coord_probe_estimate(c);
  if (!strcmp(c->epoch_kind, "probe") && c->probe_planned) coord_swarm_on_probed(c);
  if (!strcmp(c->epoch_kind, "train")) {
    c->failed_epochs = 0;
    /* a run that stopped at its time limit is over too: every tasklet stopped after one step */
    const int limited = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(body, "time_limited"));
    if (steps >= c->cfg.run.steps || limited) {
      c->run_complete = 1;
      if (limited)
        coord_event(c, "complete", "the run stopped at its time limit at step %ld", steps);
      c->last_step = steps;
      /* an epoch that trained no step reports no loss: the last one seen stands */
      double loss = coordinator_field_num(body, "loss", NAN);
      if (isfinite(loss)) c->last_loss = loss;
      if (isfinite(c->last_loss))
        coord_event(c, "complete", "the run finished %ld steps (epoch %d); final loss %.4f", steps,
                    c->epoch, c->last_loss);
      else
        coord_event(c, "complete", "the run finished %ld steps (epoch %d); no loss was reported",
                    steps, c->epoch);
      c->finish_due = wt_now_s(); /* daemon.c sends FINISH (once the store has the end) */
    }
  }
  s_epoch_over(c);
}

void coord_epoch_on_lost(coordinator *c, coord_peer *p, const char *why) {
  if (p->epoch_rank < 0 || c->phase == EPOCH_NONE) return;
  p->result = -1;
  /* lost while its epoch drains (a promotion's abort): the next epoch still recovers from it */
  if (!strcmp(c->epoch_kind, "train") && (c->phase != EPOCH_DRAINING || c->lost_at == 0))
    c->lost_at = wt_now_s();
  c->lost_member_epoch = c->epoch;
  if (c->phase == EPOCH_DRAINING) return;
  char msg[512];
  snprintf(msg, sizeof msg, "member peer %d (world rank %d) was lost: %s", p->id, p->epoch_rank,
           why);
  s_abort(c, msg);
}
