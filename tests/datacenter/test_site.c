/* test_site — a site of several GPUs seen by the WAN machinery as one device whose compute and
 * memory are the site's aggregate (assign_site_device, netsim's "site_gpus" and
 * "site_efficiency" scenario fields):
 *   - assign_site_device multiplies speed by gpus × efficiency and memory by gpus, and refuses a
 *     site that cannot exist (0 GPUs, efficiency outside (0, 1], speed <= 0, negative memory)
 *     without writing its outputs;
 *   - a scenario file with site_gpus [8, 4] and efficiency 0.9 loads devices of 7.2× and 3.6×
 *     the reference speed and 8× / 4× the memory; without the fields nothing changes;
 *   - a stage needing 200 GB is infeasible for the solver on 80 GB GPUs and feasible on the
 *     sites, and the simulator's compute time of one plan shrinks by the slowest site's factor;
 *   - a fractional site_gpus or an efficiency above 1 is refused with a message naming the field.
 */
#include "assign/assign.h"
#include "netsim/netsim.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static void test_device(void) {
  double speed = -1, mem = -1;
  WT_TEST_ASSERT(assign_site_device(8, 0.9, 1.5, 80e9, &speed, &mem) == WT_OK, "%s",
                 wt_last_error());
  WT_TEST_ASSERT(fabs(speed - 10.8) < 1e-12 && mem == 640e9, "site of 8: speed %g memory %g", speed,
                 mem);
  WT_TEST_ASSERT(assign_site_device(1, 1, 2, 0, &speed, &mem) == WT_OK && speed == 2 && mem == 0,
                 "one GPU, unlimited memory: speed %g memory %g", speed, mem);
  const struct {
    int gpus;
    double eff, speed, mem;
  } bad[] = {{0, 0.9, 1, 1}, {4, 0, 1, 1},    {4, 1.5, 1, 1},
             {4, 0.9, 0, 1}, {4, 0.9, 1, -1}, {4, NAN, 1, 1}};
  for (size_t i = 0; i < WT_ARRAY_LEN(bad); i++) {
    speed = mem = -7;
    int rc = assign_site_device(bad[i].gpus, bad[i].eff, bad[i].speed, bad[i].mem, &speed, &mem);
    WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "site"), "case %zu: rc %d %s", i, rc,
                   wt_last_error());
    WT_TEST_ASSERT(speed == -7 && mem == -7, "case %zu wrote its outputs", i);
  }
}

static const char *s_doc =
    "{\"cost_model_constants\": {\"c_dp_bytes_per_stage\": 1e9, \"c_pp_bytes_per_cut\": 1e8,"
    " \"d_pp\": 2, \"d_dp\": 2, \"device_tflops\": 30},"
    " \"scenarios\": ["
    "  {\"name\": \"plain\", \"groups\": [2, 2], \"intra_gbps\": 100, \"inter_gbps\": 10,"
    "   \"latency_ms\": 5, \"memory_gb\": 80},"
    "  {\"name\": \"site\", \"groups\": [2, 2], \"intra_gbps\": 100, \"inter_gbps\": 10,"
    "   \"latency_ms\": 5, \"memory_gb\": 80, \"site_gpus\": [8, 4], \"site_efficiency\": 0.9}]}";

static void s_write(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  WT_TEST_REQUIRE(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static void test_scenario(const char *dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/sites.json", dir);
  s_write(path, s_doc);
  netsim_scenario_set *set = NULL;
  WT_TEST_REQUIRE((set = netsim_scenario_set_load(path)) != NULL, "%s", wt_last_error());
  const netsim_scenario *plain = netsim_scenario_set_get(set, 0);
  const netsim_scenario *site = netsim_scenario_set_get(set, 1);
  const assign_network *np = netsim_scenario_network(plain), *ns = netsim_scenario_network(site);
  WT_TEST_REQUIRE(np->n == 4 && ns->n == 4 && np->memory_bytes && ns->memory_bytes, "4 devices");
  for (int d = 0; d < 4; d++) {
    int r = netsim_scenario_region_of(site, d);
    double want_speed = r == 0 ? 7.2 : 3.6, want_mem = r == 0 ? 640e9 : 320e9;
    WT_TEST_ASSERT(fabs(np->compute_speed[d] - 1) < 1e-12 && np->memory_bytes[d] == 80e9,
                   "plain device %d: speed %g memory %g", d, np->compute_speed[d],
                   np->memory_bytes[d]);
    WT_TEST_ASSERT(fabs(ns->compute_speed[d] - want_speed) < 1e-12 &&
                       fabs(ns->memory_bytes[d] - want_mem) < 1,
                   "site device %d: speed %g memory %g, want %g %g", d, ns->compute_speed[d],
                   ns->memory_bytes[d], want_speed, want_mem);
  }

  /* The solver: a 200 GB stage fits only on the sites. */
  assign_problem pp, ps;
  netsim_scenario_problem(plain, &pp);
  netsim_scenario_problem(site, &ps);
  pp.stage_memory_bytes = ps.stage_memory_bytes = 200e9;
  assign_budget budget = {.max_evals = 200};
  assign_plan *plan = NULL;
  WT_TEST_ASSERT(assign_solve(&pp, ASSIGN_SOLVER_GREEDY, &budget, 1, &plan, NULL) == WT_EINVAL &&
                     !plan,
                 "a 200 GB stage placed on 80 GB GPUs");
  WT_TEST_REQUIRE(assign_solve(&ps, ASSIGN_SOLVER_GREEDY, &budget, 1, &plan, NULL) == WT_OK,
                  "sites of 320 and 640 GB refused a 200 GB stage: %s", wt_last_error());

  /* The simulator: the same plan computes 3.6× faster (the slowest site sets the pace). */
  netsim_sim_config cfg_p, cfg_s;
  netsim_sim_config_from_scenario(plain, NETSIM_1F1B, 4, &cfg_p);
  netsim_sim_config_from_scenario(site, NETSIM_1F1B, 4, &cfg_s);
  netsim_sim_result rp, rs;
  WT_TEST_REQUIRE(netsim_simulate(np, plan, &cfg_p, &rp, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(netsim_simulate(ns, plan, &cfg_s, &rs, NULL) == WT_OK, "%s", wt_last_error());
  printf("compute per iteration: 80 GB GPUs %.4g s, sites of 8 and 4 GPUs at 0.9: %.4g s\n",
         rp.compute_s, rs.compute_s);
  WT_TEST_ASSERT(fabs(rp.compute_s / rs.compute_s - 3.6) < 1e-9, "compute ratio %g, want 3.6",
                 rp.compute_s / rs.compute_s);
  assign_plan_destroy(&plan);
  netsim_scenario_set_destroy(&set);
}

static void test_refuse(const char *dir) {
  const struct {
    const char *from, *to, *field;
  } cases[] = {{"[8, 4]", "[8, 2.5]", "site_gpus"},
               {"\"site_efficiency\": 0.9", "\"site_efficiency\": 1.5", "site_efficiency"},
               {"[8, 4]", "[0, 4]", "site_gpus"}};
  for (size_t i = 0; i < WT_ARRAY_LEN(cases); i++) {
    char doc[2048], path[512];
    const char *at = strstr(s_doc, cases[i].from);
    WT_TEST_REQUIRE(at, "case %zu", i);
    snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - s_doc), s_doc, cases[i].to,
             at + strlen(cases[i].from));
    snprintf(path, sizeof path, "%s/bad%zu.json", dir, i);
    s_write(path, doc);
    netsim_scenario_set *set = NULL;
    set = netsim_scenario_set_load(path);
    int rc = set ? WT_OK : wt_last_status();
    WT_TEST_ASSERT(rc == WT_EINVAL && !set && strstr(wt_last_error(), cases[i].field),
                   "case %zu: rc %d: %s", i, rc, wt_last_error());
  }
}

int main(void) {
  char dir[256];
  wt_test_tmpdir(dir, sizeof dir);
  test_device();
  test_scenario(dir);
  test_refuse(dir);
  const char *files[] = {"sites.json", "bad0.json", "bad1.json", "bad2.json"};
  for (size_t i = 0; i < WT_ARRAY_LEN(files); i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
  return wt_test_failures ? 1 : 0;
}
