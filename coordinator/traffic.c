/* traffic — what a train epoch moves over which link, as placement and the deadlines price it:
 * the links between two peers (probed, estimated, or the emulated scenario's own), the model's
 * parameters, and the bytes of a pipeline cut, a stage's gradient and a stage's state. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"
#include "model/gpt.h" /* defines: gpt_config_set_moe_layers for the MoE blocks' size */

#include <string.h>

/* --links scenario: placement prices the emulated scenario's own links, and nothing is probed. */
int coord_traffic_scenario_links(const coordinator *c) {
  return c->scenario && !strcmp(c->cfg.links, "scenario");
}

/* The link from peer index a to b the placement prices: the emulated scenario's own with
 * --links scenario, else the probed one (coord_probe_link). */
int coord_traffic_link(coordinator *c, int a, int b, double *lat, double *bw) {
  if (coord_traffic_scenario_links(c)) {
    const assign_network *net = netsim_scenario_network(c->scenario);
    int da = c->peers[a].device_index, db = c->peers[b].device_index;
    if (da < 0 || db < 0) return 0;
    if (da == db) db = da == 0 && net->n > 1 ? 1 : 0; /* sharing a device: a stand-in link */
    *lat = net->latency_s[da * net->n + db], *bw = net->bandwidth_Bps[da * net->n + db];
    return *bw > 0;
  }
  return coord_swarm_link(c, a, b, lat, bw);
}

int coord_traffic_link_wall(coordinator *c, int a, int b, double *lat, double *bw) {
  if (!coord_traffic_link(c, a, b, lat, bw)) return 0;
  if (coord_traffic_scenario_links(
          c)) /* emulated seconds: the transport slows them by --time-scale */
    *lat *= c->cfg.time_scale, *bw /= c->cfg.time_scale;
  return 1;
}

/* Parameters of the model for the cost model: the blocks and embeddings (vocabulary not known
 * here, so a nominal 64 rows) and each MoE block's router and extra experts — all of them
 * (what a replica's reduce moves), or only the top-k a token uses (active: its compute). */
double coord_traffic_model_params(const coordinator_config *g, int active) {
  const double C = g->run.channels;
  double params = 12.0 * g->run.layers * C * C + 64.0 * C;
  gpt_config m = {.n_layer = g->run.layers};
  if (g->run.moe.experts > 0 && gpt_config_set_moe_layers(&m, g->run.moe.layers) == WT_OK)
    for (int l = 0; l < g->run.layers && l < GPT_MOE_MAX_LAYERS; l++)
      if (m.moe_layer[l])
        params += ((active ? g->run.moe.top_k : g->run.moe.experts) - 1) * 8.0 * C * C +
                  C * g->run.moe.experts;
  return params;
}

/* The wire size of a value as a fraction of float32 under a codec (compress/codec.h's and
 * compress/acsgd.h's layouts, block scales left out): the cost model prices the bytes the run
 * sends, so that the placement follows its traffic. topk and randk are priced dense (their k is
 * not in the run description). */
static double s_codec_fraction(const char *codec) {
  static const struct {
    const char *name;
    double fraction;
  } table[] = {{"fp16", 0.5},    {"bf16", 0.5},      {"int8", 0.25},
               {"int4", 0.125},  {"sign", 1.0 / 32}, {"direct8", 0.25},
               {"delta8", 0.25}, {"delta4", 0.125},  {"delta2", 1.0 / 16}};
  for (size_t i = 0; i < WT_ARRAY_LEN(table); i++)
    if (!strcmp(codec, table[i].name)) return table[i].fraction;
  return 1;
}

void coord_traffic_step_bytes(const coordinator *c, double *cut_bytes, double *grad_bytes,
                              double *state_bytes) {
  const parallel_run_config *r = &c->cfg.run;
  const double stage_params = coord_traffic_model_params(&c->cfg, 0) / r->stages;
  /* a pipeline's own rows cross its cuts (batch / R sequences), forward and back, in the
   * activation codec; and its first and last stage exchange their tied embedding's gradient (a
   * nominal 64 rows, as above) each step, both ways: with two stages over the cut's own pair, so
   * it is more bytes on the cut. With more stages that exchange skips the stages between, and
   * the model leaves it out. */
  *cut_bytes = 4.0 * r->batch / r->replicas * r->seq * r->channels * s_codec_fraction(r->act_codec);
  if (r->stages == 2) *cut_bytes += 4.0 * 64 * r->channels;
  *grad_bytes = 4.0 * stage_params * s_codec_fraction(r->sync.grad_codec);
  /* float32 weights and both AdamW moments; DiLoCo adds its outer weights and momentum */
  *state_bytes = 4.0 * stage_params * (r->sync.diloco > 0 ? 5 : 3);
}
