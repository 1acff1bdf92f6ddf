/* test_netsim_scenario — the shipped scenario file loads with the paper's numbers, every kind of
 * bad file is refused with a message naming file, scenario and field, and random worlds are
 * reproducible and survive a save/load round trip. */
#include "common/common.h"
#include "netsim/netsim.h"
#include "common/rng.h"
#include "common/testing.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#include <math.h>

static netsim_scenario_set *s_load_shipped(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/netsim/scenarios/dtfm-2022.json", wt_test_source_dir());
  netsim_scenario_set *set = NULL;
  set = netsim_scenario_set_load(path);
  int rc = set ? WT_OK : wt_last_status();
  WT_TEST_REQUIRE(rc == WT_OK, "%s", wt_last_error());
  return set;
}

static const netsim_scenario *s_find(const netsim_scenario_set *set, const char *name) {
  const netsim_scenario *s = NULL;
  int rc = netsim_scenario_set_find(set, name, &s);
  WT_TEST_REQUIRE(rc == WT_OK, "%s", wt_last_error());
  return s;
}

static double s_lat(const netsim_scenario *s, int a, int b) {
  const assign_network *net = netsim_scenario_network(s);
  return net->latency_s[a * net->n + b];
}

static double s_gbps(const netsim_scenario *s, int a, int b) {
  const assign_network *net = netsim_scenario_network(s);
  return net->bandwidth_Bps[a * net->n + b] * 8e-9;
}

static void test_shipped(void) {
  netsim_scenario_set *set = s_load_shipped();
  WT_TEST_ASSERT(netsim_scenario_set_count(set) == 5, "count %d", netsim_scenario_set_count(set));
  for (int i = 0; i < netsim_scenario_set_count(set); i++) {
    const netsim_scenario *s = netsim_scenario_set_get(set, i);
    assign_problem p;
    netsim_scenario_problem(s, &p);
    WT_TEST_ASSERT(p.net->n == 64 && p.d_pp == 8 && p.d_dp == 8, "%s: n=%d",
                   netsim_scenario_name(s), p.net->n);
    WT_TEST_CLOSE(p.c_dp_bytes, 650e6, 0, 1e-12, "c_dp");
    WT_TEST_ASSERT(assign_problem_validate(&p) == WT_OK, "%s", wt_last_error());
  }
  /* World-wide: devices 0-7 Oregon, 8-15 Virginia, 24-31 Tokyo, 32-39 Seoul. */
  const netsim_scenario *w = s_find(set, "worldwide_geo_distributed");
  WT_TEST_CLOSE(s_lat(w, 0, 8), 0.067, 1e-12, 0, "Oregon-Virginia latency");
  WT_TEST_CLOSE(s_gbps(w, 0, 8), 0.79, 1e-9, 0, "Oregon-Virginia bandwidth");
  WT_TEST_CLOSE(s_lat(w, 33, 25), 0.034, 1e-12, 0, "Seoul-Tokyo latency");
  WT_TEST_CLOSE(s_lat(w, 0, 1), 0.005, 1e-12, 0, "within Oregon latency");
  WT_TEST_CLOSE(s_gbps(w, 0, 1), 2.0, 1e-9, 0, "within Oregon bandwidth");
  WT_TEST_ASSERT(netsim_scenario_region_of(w, 63) == 7, "device 63 in Ireland");
  WT_TEST_ASSERT(!strcmp(netsim_scenario_region_name(w, 3), "Tokyo"), "region 3 name");
  const netsim_scenario *dc = s_find(set, "datacenter_on_demand");
  WT_TEST_CLOSE(s_gbps(dc, 0, 7), 100, 1e-9, 0, "same node");
  WT_TEST_CLOSE(s_gbps(dc, 7, 8), 3.125, 1e-9, 0, "across nodes");
  WT_TEST_ASSERT(s_lat(dc, 7, 8) == 0, "datacenter latency");
  const netsim_scenario *spot = s_find(set, "datacenter_spot");
  WT_TEST_ASSERT(netsim_scenario_region_count(spot) == 40, "spot groups");
  WT_TEST_CLOSE(s_gbps(spot, 32, 33), 1.25, 1e-9, 0, "single-GPU instances");
  WT_TEST_CLOSE(s_gbps(spot, 0, 3), 100, 1e-9, 0, "inside a 4-GPU instance");
  const netsim_scenario *md = s_find(set, "multiple_datacenters");
  WT_TEST_CLOSE(s_lat(md, 0, 63), 0.011, 1e-12, 0, "Ohio-Virginia");
  const netsim_scenario *missing = NULL;
  WT_TEST_ASSERT(netsim_scenario_set_find(set, "mars", &missing) == WT_ENOTFOUND, "unknown name");
  WT_TEST_ASSERT(strstr(wt_last_error(), "worldwide_geo_distributed"), "lists names: %s",
                 wt_last_error());
  WT_TEST_ASSERT(netsim_scenario_set_find(set, NULL, &missing) == WT_EINVAL, "several, no name");
  netsim_scenario_set_destroy(&set);
  WT_TEST_ASSERT(set == NULL, "destroy clears the pointer");
}

/* A bad document, the field its error must name, and whether a scenario name is expected. */
typedef struct {
  const char *json;
  const char *field;
  int names_scenario;
} s_bad_case;

#define K                                                                                          \
  "\"cost_model_constants\":{\"c_dp_bytes_per_stage\":1e6,\"c_pp_bytes_per_cut\":1e6,"             \
  "\"d_pp\":2,\"d_dp\":2},"

static const s_bad_case s_bad[] = {
    {"{\"scenarios\":[]}", "cost_model_constants", 0},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[2,2],"
     "\"bandwidth_gbps\":[[1,1],[1,1]]}]}",
     "latency_ms", 1},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[2,2],\"latency_ms\":[[1,1],[1,1]],"
     "\"bandwidth_gbps\":[[1,1],[1]]}]}",
     "bandwidth_gbps[1]", 1},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[2,2],\"latency_ms\":[[1,1],[1,1],"
     "[1,1]],\"bandwidth_gbps\":[[1,1],[1,1]]}]}",
     "latency_ms", 1},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[2,2],\"latency_ms\":[[1,1],[1,1]],"
     "\"bandwidth_gbps\":[[1,-1],[1,1]]}]}",
     "bandwidth_gbps[0]", 1},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[2,3],\"latency_ms\":[[1,1],[1,1]],"
     "\"bandwidth_gbps\":[[1,1],[1,1]]}]}",
     "d_pp", 1},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":\"4\",\"latency_ms\":[[1]],"
     "\"bandwidth_gbps\":[[1]]}]}",
     "gpus_per_region", 1},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[2,2],\"latency_ms\":[[1,\"a\"],"
     "[1,1]],\"bandwidth_gbps\":[[1,1],[1,1]]}]}",
     "latency_ms[0]", 1},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"groups\":[2,2],\"intra_gbps\":10,\"latency_ms\":0}]}",
     "inter_gbps", 1},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"groups\":[2,2],\"intra_gbps\":10,\"inter_gbps\":-1,"
     "\"latency_ms\":0}]}",
     "inter_gbps", 1},
    {"{" K "\"scenarios\":[{\"gpus_per_region\":[4],\"latency_ms\":[[1]],"
     "\"bandwidth_gbps\":[[1]]}]}",
     "name", 0},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus\":5,\"gpus_per_region\":[4],\"latency_ms\":[[1]],"
     "\"bandwidth_gbps\":[[1]]}]}",
     "gpus", 1},
    {"{\"cost_model_constants\":{\"c_dp_bytes_per_stage\":\"big\",\"c_pp_bytes_per_cut\":1,"
     "\"d_pp\":1,\"d_dp\":1},\"scenarios\":[]}",
     "c_dp_bytes_per_stage", 0},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[4],\"latency_ms\":[[1]],"
     "\"bandwidth_gbps\":[[1]],\"device_tflops\":[1,2]}]}",
     "device_tflops", 1},
    {"{" K "\"scenarios\":{}}", "scenarios", 0},
    {"{" K "\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[4],\"latency_ms\":[[1]],"
     "\"bandwidth_gbps\":[[1]]},{\"name\":\"x\",\"gpus_per_region\":[4],\"latency_ms\":[[2]],"
     "\"bandwidth_gbps\":[[1]]}]}",
     "name", 1},
};

static void test_bad_files(void) {
  char dir[256], path[512];
  wt_test_tmpdir(dir, sizeof dir);
  for (size_t i = 0; i < WT_ARRAY_LEN(s_bad); i++) {
    snprintf(path, sizeof path, "%s/bad%zu.json", dir, i);
    FILE *f = fopen(path, "w");
    WT_TEST_REQUIRE(f, "cannot write %s", path);
    fputs(s_bad[i].json, f);
    fclose(f);
    netsim_scenario_set *set = NULL;
    set = netsim_scenario_set_load(path);
    int rc = set ? WT_OK : wt_last_status();
    const char *msg = wt_last_error();
    WT_TEST_ASSERT(rc != WT_OK && set == NULL, "case %zu accepted", i);
    WT_TEST_ASSERT(strstr(msg, path) != NULL, "case %zu: no file name in: %s", i, msg);
    char field[128];
    snprintf(field, sizeof field, "'%s'", s_bad[i].field);
    WT_TEST_ASSERT(strstr(msg, field) != NULL, "case %zu: no field %s in: %s", i, field, msg);
    if (s_bad[i].names_scenario)
      WT_TEST_ASSERT(strstr(msg, "scenario 'x'") != NULL, "case %zu: no scenario in: %s", i, msg);
    remove(path);
  }
  /* NaN and Infinity (not JSON, but what other tools print) are named as such, with the field. */
  const char *nonfinite[][2] = {{"[[1,NaN],[1,1]]", "NaN"}, {"[[1,1],[-Infinity,1]]", "-Infinity"}};
  for (size_t i = 0; i < WT_ARRAY_LEN(nonfinite); i++) {
    snprintf(path, sizeof path, "%s/nan%zu.json", dir, i);
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{" K "\n\"scenarios\":[{\"name\":\"x\",\"gpus_per_region\":[2,2],\n"
            "\"latency_ms\":[[1,1],[1,1]],\n\"bandwidth_gbps\": %s}]}",
            nonfinite[i][0]);
    fclose(f);
    netsim_scenario_set *set = NULL;
    WT_TEST_ASSERT(!(set = netsim_scenario_set_load(path)) && wt_last_status() == WT_EINVAL && !set,
                   "%s accepted", nonfinite[i][1]);
    char want[64];
    snprintf(want, sizeof want, "%s is not a valid value", nonfinite[i][1]);
    const char *msg = wt_last_error();
    WT_TEST_ASSERT(strstr(msg, path) && strstr(msg, "line 4") && strstr(msg, "'bandwidth_gbps'") &&
                       strstr(msg, want),
                   "message: %s", msg);
    remove(path);
  }
  /* Not JSON at all, and no file. */
  snprintf(path, sizeof path, "%s/garbage.json", dir);
  FILE *f = fopen(path, "w");
  fputs("{\"scenarios\": [", f);
  fclose(f);
  netsim_scenario_set *set = NULL;
  WT_TEST_ASSERT(!(set = netsim_scenario_set_load(path)) && wt_last_status() == WT_EINVAL,
                 "truncated JSON accepted");
  WT_TEST_ASSERT(strstr(wt_last_error(), path), "names the file: %s", wt_last_error());
  remove(path);
  WT_TEST_ASSERT(!(set = netsim_scenario_set_load(path)) && wt_last_status() == WT_ENOTFOUND,
                 "missing file");
  rmdir(dir);
}

static void test_optional_fields(void) {
  char dir[256], path[512];
  wt_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/opt.json", dir);
  FILE *f = fopen(path, "w");
  fputs("{" K "\"scenarios\":[{\"name\":\"only\",\"gpus_per_region\":[2,2],\"latency_ms\":"
        "[[1,10],[12,1]],\"bandwidth_gbps\":[[8,1],[3,8]],\"device_tflops\":[30,60],"
        "\"nic_gbps\":4,\"memory_gb\":[16,32]}]}",
        f);
  fclose(f);
  netsim_scenario_set *set = NULL;
  WT_TEST_REQUIRE((set = netsim_scenario_set_load(path)) != NULL, "%s", wt_last_error());
  const netsim_scenario *s = NULL;
  WT_TEST_ASSERT(netsim_scenario_set_find(set, "", &s) == WT_OK, "single scenario without name");
  const assign_network *net = netsim_scenario_network(s);
  WT_TEST_CLOSE(net->compute_speed[3], 2.0, 0, 1e-12, "speed of the 60 TFLOP/s region");
  WT_TEST_CLOSE(net->memory_bytes[0], 16e9, 0, 1e-12, "memory");
  WT_TEST_CLOSE(netsim_scenario_nic(s)[1], 4e9 / 8, 0, 1e-12, "nic");
  /* An asymmetric matrix keeps its directions: row = from, column = to. */
  WT_TEST_CLOSE(s_lat(s, 0, 2), 0.010, 1e-12, 0, "latency region 0 → 1");
  WT_TEST_CLOSE(s_lat(s, 2, 0), 0.012, 1e-12, 0, "latency region 1 → 0");
  WT_TEST_CLOSE(s_gbps(s, 0, 2), 1.0, 1e-9, 0, "bandwidth region 0 → 1");
  WT_TEST_CLOSE(s_gbps(s, 2, 0), 3.0, 1e-9, 0, "bandwidth region 1 → 0");
  WT_TEST_ASSERT(netsim_scenario_directed(s), "directed");
  WT_TEST_ASSERT(netsim_scenario_access(s) == NULL, "no access links given: unlimited");
  WT_TEST_ASSERT(netsim_scenario_default_dp_algo(s) == ASSIGN_DP_RING, "directed: ring by default");
  assign_problem p;
  netsim_scenario_problem(s, &p);
  WT_TEST_ASSERT(assign_problem_validate(&p) == WT_OK, "a directed problem: %s", wt_last_error());
  netsim_scenario_set_destroy(&set);
  remove(path);
  rmdir(dir);
}

/* Old files load as before: symmetric, no access links, the paper's reduce by default. */
static void test_back_compat(void) {
  netsim_scenario_set *set = s_load_shipped();
  for (int i = 0; i < netsim_scenario_set_count(set); i++) {
    const netsim_scenario *s = netsim_scenario_set_get(set, i);
    assign_problem p;
    netsim_scenario_problem(s, &p);
    WT_TEST_ASSERT(!netsim_scenario_directed(s) && !netsim_scenario_access(s) && !p.access &&
                       netsim_scenario_default_dp_algo(s) == ASSIGN_DP_SHARDED_PS,
                   "%s loads as the paper's model", netsim_scenario_name(s));
  }
  netsim_scenario_set_destroy(&set);
}

static netsim_scenario_set *s_load_text(const char *dir, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/access.json", dir);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  netsim_scenario_set *set = netsim_scenario_set_load(path);
  remove(path);
  return set;
}

/* What the WAN emulation reads for a group placed on the homes scenario's devices (two homes of
 * two devices, one access link each): the pairs' latency and bandwidth, the member's uplink and
 * downlink (0 for unlimited) and who is behind its access link; two members on one device talk
 * over their region's link. */
static void s_emulation_rows(const netsim_scenario *s) {
  const int device[4] = {2, 0, 1, 0}; /* member 3 shares device 0 with member 1 */
  double lat[4], bw[4];
  int same[4];
  netsim_emulation e = {.latency_s = lat, .bandwidth_Bps = bw, .same_access = same};
  WT_TEST_REQUIRE(netsim_emulation_row(s, device, 4, 1, &e) == WT_OK, "%s", wt_last_error());
  WT_TEST_CLOSE(lat[0], 0.020, 0, 1e-12, "home 0 to home 1: 20 ms");
  WT_TEST_CLOSE(bw[0], 1e9 / 8, 0, 1e-12, "home 0 to home 1: 1 Gbit/s");
  WT_TEST_CLOSE(lat[2], 0.001, 0, 1e-12, "inside home 0: 1 ms");
  WT_TEST_CLOSE(bw[3], 10e9 / 8, 0, 1e-12, "one device, two members: home 0's own link");
  WT_TEST_ASSERT(lat[1] == 0 && bw[1] == 0, "nothing to itself");
  WT_TEST_ASSERT(!same[0] && same[1] && same[2] && same[3], "home 0's members share its link");
  WT_TEST_CLOSE(e.up_Bps, 0.1e9 / 8, 0, 1e-12, "home 0's uplink");
  WT_TEST_CLOSE(e.down_Bps, 0.5e9 / 8, 0, 1e-12, "home 0's downlink");
  WT_TEST_REQUIRE(netsim_emulation_row(s, device, 4, 0, &e) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(e.up_Bps == 0 && e.down_Bps > 0, "home 1: unlimited uplink (0), a downlink");
  const int bad[2] = {0, 7};
  WT_TEST_ASSERT(netsim_emulation_row(s, bad, 2, 0, &e) == WT_EINVAL &&
                     strstr(wt_last_error(), "device 7"),
                 "a device outside the scenario is refused: %s", wt_last_error());
}

/* Access links: per device (the default) or shared per region, capacities per region, 0 =
 * unlimited; bad values refused naming the field; a save/load round trip keeps them. */
static void test_access_links(void) {
  char dir[256];
  wt_test_tmpdir(dir, sizeof dir);
  netsim_scenario_set *set = s_load_text(
      dir, "{" K "\"scenarios\":[{\"name\":\"homes\",\"gpus_per_region\":[2,2],\"latency_ms\":"
           "[[1,20],[20,1]],\"bandwidth_gbps\":[[10,1],[1,10]],\"access\":\"region\","
           "\"uplink_gbps\":[0.1,0],\"downlink_gbps\":0.5}]}");
  WT_TEST_REQUIRE(set != NULL, "%s", wt_last_error());
  const netsim_scenario *s = netsim_scenario_set_get(set, 0);
  const assign_access *a = netsim_scenario_access(s);
  WT_TEST_REQUIRE(a && a->n_links == 2, "one link per region");
  WT_TEST_ASSERT(a->link_of[0] == 0 && a->link_of[1] == 0 && a->link_of[2] == 1 &&
                     a->link_of[3] == 1,
                 "a region's devices share its link");
  WT_TEST_CLOSE(a->up_Bps[0], 0.1e9 / 8, 0, 1e-12, "uplink of region 0");
  WT_TEST_ASSERT(isinf(a->up_Bps[1]), "0 = unlimited");
  WT_TEST_CLOSE(a->down_Bps[1], 0.5e9 / 8, 0, 1e-12, "one downlink for all");
  WT_TEST_ASSERT(netsim_scenario_default_dp_algo(s) == ASSIGN_DP_RING, "access links: ring");
  assign_problem p;
  netsim_scenario_problem(s, &p);
  WT_TEST_ASSERT(p.access == a && assign_problem_validate(&p) == WT_OK, "in the problem: %s",
                 wt_last_error());
  s_emulation_rows(s);
  char path[512];
  snprintf(path, sizeof path, "%s/saved.json", dir);
  WT_TEST_REQUIRE(netsim_scenario_save(s, path) == WT_OK, "%s", wt_last_error());
  netsim_scenario_set *back = netsim_scenario_set_load(path);
  WT_TEST_REQUIRE(back != NULL, "%s", wt_last_error());
  const assign_access *b = netsim_scenario_access(netsim_scenario_set_get(back, 0));
  WT_TEST_ASSERT(b && b->n_links == 2 && b->link_of[3] == 1 && b->up_Bps[0] == a->up_Bps[0] &&
                     isinf(b->up_Bps[1]) && b->down_Bps[1] == a->down_Bps[1],
                 "saved and loaded back");
  netsim_scenario_set_destroy(&back);
  remove(path);
  netsim_scenario_set_destroy(&set);
  set = s_load_text(dir, "{" K "\"scenarios\":[{\"name\":\"own\",\"gpus_per_region\":[2,2],"
                         "\"latency_ms\":[[1,20],[20,1]],\"bandwidth_gbps\":[[10,1],[1,10]],"
                         "\"uplink_gbps\":[0.1,0.2]}]}");
  WT_TEST_REQUIRE(set != NULL, "%s", wt_last_error());
  a = netsim_scenario_access(netsim_scenario_set_get(set, 0));
  WT_TEST_ASSERT(a && a->n_links == 4 && a->link_of[3] == 3 && a->up_Bps[3] == 0.2e9 / 8 &&
                     isinf(a->down_Bps[0]),
                 "by default each device has its own access link");
  netsim_scenario_set_destroy(&set);
  set = s_load_text(dir, "{" K "\"scenarios\":[{\"name\":\"bad\",\"gpus_per_region\":[2,2],"
                         "\"latency_ms\":[[1,20],[20,1]],\"bandwidth_gbps\":[[10,1],[1,10]],"
                         "\"uplink_gbps\":[0.1,-1]}]}");
  WT_TEST_ASSERT(!set && strstr(wt_last_error(), "'uplink_gbps': entry 1 is -1"), "%s",
                 wt_last_error());
  set = s_load_text(dir, "{" K "\"scenarios\":[{\"name\":\"bad\",\"gpus_per_region\":[2,2],"
                         "\"latency_ms\":[[1,20],[20,1]],\"bandwidth_gbps\":[[10,1],[1,10]],"
                         "\"access\":\"site\"}]}");
  WT_TEST_ASSERT(!set && strstr(wt_last_error(), "'access'"), "%s", wt_last_error());
  rmdir(dir);
}

static void test_random(void) {
  netsim_scenario *a = netsim_scenario_random(6, 4, 42), *b = netsim_scenario_random(6, 4, 42);
  netsim_scenario *c = netsim_scenario_random(6, 4, 43);
  const assign_network *na = netsim_scenario_network(a), *nb = netsim_scenario_network(b),
                       *nc = netsim_scenario_network(c);
  WT_TEST_REQUIRE(na->n == 24, "n=%d", na->n);
  int n = na->n, same = 1, differs = 0;
  for (int i = 0; i < n * n; i++) {
    same &= na->latency_s[i] == nb->latency_s[i] && na->bandwidth_Bps[i] == nb->bandwidth_Bps[i];
    differs |= na->latency_s[i] != nc->latency_s[i];
  }
  WT_TEST_ASSERT(same, "same seed, same world");
  WT_TEST_ASSERT(differs, "another seed, another world");
  for (int x = 0; x < n; x++)
    for (int y = 0; y < n; y++) {
      double lat = na->latency_s[x * n + y], gbps = na->bandwidth_Bps[x * n + y] * 8e-9;
      WT_TEST_ASSERT(lat == na->latency_s[y * n + x], "symmetric %d %d", x, y);
      if (x == y) continue;
      /* Half the Earth's circumference in fibre is ~100 ms; plus 2 ms overhead. */
      WT_TEST_ASSERT(lat >= 0.002 && lat <= 0.103, "latency %g s", lat);
      WT_TEST_ASSERT(gbps >= 0.25 && gbps <= 2.0, "bandwidth %g Gbit/s", gbps);
    }
  /* Saving and loading gives back the same matrices (to the printed precision). */
  char dir[256], path[512];
  wt_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/random.json", dir);
  WT_TEST_REQUIRE(netsim_scenario_save(a, path) == WT_OK, "%s", wt_last_error());
  netsim_scenario_set *set = NULL;
  WT_TEST_REQUIRE((set = netsim_scenario_set_load(path)) != NULL, "%s", wt_last_error());
  const assign_network *nl = netsim_scenario_network(netsim_scenario_set_get(set, 0));
  WT_TEST_ASSERT(nl->n == n, "reloaded n");
  for (int i = 0; i < n * n; i++) {
    WT_TEST_CLOSE(nl->latency_s[i], na->latency_s[i], 1e-12, 1e-9, "reloaded latency");
    WT_TEST_CLOSE(nl->bandwidth_Bps[i], na->bandwidth_Bps[i], 0, 1e-9, "reloaded bandwidth");
  }
  netsim_scenario_set_destroy(&set);
  remove(path);
  rmdir(dir);
  netsim_scenario_destroy(&a);
  netsim_scenario_destroy(&b);
  netsim_scenario_destroy(&c);
}

/* A jittered, shuffled copy: each pair's link within ±jitter of the base pair it came from (plus
 * the 4-digit rounding), symmetric, ids a permutation, reproducible; saved and loaded back it
 * keeps its per-pair links. */
static void test_jitter(void) {
  netsim_scenario *base = netsim_scenario_random(4, 3, 5);
  netsim_scenario *j = netsim_scenario_jitter(base, 0.2, 1, 9),
                  *again = netsim_scenario_jitter(base, 0.2, 1, 9);
  WT_TEST_REQUIRE(j && again, "jitter");
  WT_TEST_ASSERT(netsim_scenario_jitter(base, 1.0, 0, 1) == NULL, "jitter 1 refused");
  const assign_network *nb = netsim_scenario_network(base), *nj = netsim_scenario_network(j);
  int n = nb->n;
  WT_TEST_REQUIRE(nj->n == n && netsim_scenario_region_count(j) == n, "one region per device");
  /* Recover the permutation from the region each device came from: the base's per-region links
   * are identical, so check each pair against its regions' link. */
  int not_one = 0, distinct = 0;
  for (int x = 0; x < n; x++)
    for (int y = 0; y < n; y++) {
      if (x == y) continue;
      WT_TEST_ASSERT(nj->latency_s[x * n + y] == nj->latency_s[y * n + x] &&
                         nj->bandwidth_Bps[x * n + y] == nj->bandwidth_Bps[y * n + x],
                     "symmetric");
      WT_TEST_ASSERT(nj->latency_s[x * n + y] ==
                         netsim_scenario_network(again)->latency_s[x * n + y],
                     "reproducible");
      distinct += nj->bandwidth_Bps[x * n + y] != nj->bandwidth_Bps[(x * n + y + 1) % (n * n)];
    }
  /* Every base pair's latency, jittered, lies in [0.8, 1.2]·base (4 digits: ±5e-4 relative);
   * some pair of the copy matches each base pair, so check the bounds over all candidates. */
  for (int u = 0; u < n; u++)
    for (int v = u + 1; v < n; v++) {
      double want = nb->latency_s[u * n + v];
      int found = 0;
      for (int i = 0; i < n * n && !found; i++)
        found = i % (n + 1) != 0 && nj->latency_s[i] >= want * 0.8 * (1 - 5e-4) &&
                nj->latency_s[i] <= want * 1.2 * (1 + 5e-4);
      WT_TEST_ASSERT(found, "a pair within ±20%% of base pair %d-%d", u, v);
    }
  for (int x = 0; x < n; x++) not_one += netsim_scenario_network(j)->compute_speed[x] != 1.0;
  WT_TEST_ASSERT(not_one == 0, "speeds carried over");
  WT_TEST_ASSERT(distinct > n, "per-pair values differ (%d)", distinct);
  char dir[256], path[512];
  wt_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/jitter.json", dir);
  WT_TEST_REQUIRE(netsim_scenario_save(j, path) == WT_OK, "%s", wt_last_error());
  netsim_scenario_set *set = NULL;
  WT_TEST_REQUIRE((set = netsim_scenario_set_load(path)) != NULL, "%s", wt_last_error());
  const assign_network *nl = netsim_scenario_network(netsim_scenario_set_get(set, 0));
  for (int i = 0; i < n * n; i++) {
    WT_TEST_CLOSE(nl->latency_s[i], nj->latency_s[i], 1e-12, 1e-9, "reloaded latency");
    WT_TEST_CLOSE(nl->bandwidth_Bps[i], nj->bandwidth_Bps[i], 0, 1e-9, "reloaded bandwidth");
  }
  netsim_scenario_set_destroy(&set);
  remove(path);
  rmdir(dir);
  netsim_scenario_destroy(&j);
  netsim_scenario_destroy(&again);
  netsim_scenario_destroy(&base);
}

/* Collects every node of a cJSON tree (depth first) with its parent, at most max. */
static int s_collect(cJSON *node, cJSON **nodes, cJSON **parents, int n, int max) {
  for (cJSON *c = node->child; c && n < max; c = c->next) {
    nodes[n] = c;
    parents[n++] = node;
    n = s_collect(c, nodes, parents, n, max);
  }
  return n;
}

/* One random edit of one node: a number set to an awkward value, the node replaced by a
 * string, null or an empty array, or removed. */
static void s_mutate(wt_rng *rng, cJSON *parent, cJSON *node) {
  static const double awkward[] = {-1, 0, 0.5, 3, 1e300, -1e-300, 4097, 7};
  int kind = (int)wt_rng_below(rng, 4);
  if (kind == 0 && cJSON_IsNumber(node)) {
    cJSON_SetNumberValue(node, awkward[wt_rng_below(rng, WT_ARRAY_LEN(awkward))]);
  } else if (kind == 3) {
    cJSON_Delete(cJSON_DetachItemViaPointer(parent, node));
  } else {
    cJSON *with = kind == 1              ? cJSON_CreateString("x")
                  : wt_rng_below(rng, 2) ? cJSON_CreateNull()
                                         : cJSON_CreateArray();
    cJSON_ReplaceItemViaPointer(parent, node, with);
  }
}

/* A few hundred seeded random edits of the shipped file: each is either accepted (and then
 * valid for the cost model) or refused with a message naming the file; never a crash. */
static void test_mutations(void) {
  char src[1024], dir[256], path[512];
  snprintf(src, sizeof src, "%s/netsim/scenarios/dtfm-2022.json", wt_test_source_dir());
  FILE *f = fopen(src, "rb");
  WT_TEST_REQUIRE(f, "no %s", src);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = calloc(1, (size_t)len + 1);
  WT_TEST_REQUIRE(fread(text, 1, (size_t)len, f) == (size_t)len, "read");
  fclose(f);
  wt_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/mutant.json", dir);
  wt_rng rng;
  wt_rng_seed(&rng, 2022);
  int accepted = 0, refused = 0;
  static cJSON *nodes[4096], *parents[4096];
  for (int iter = 0; iter < 300; iter++) {
    cJSON *root = cJSON_Parse(text);
    int n = s_collect(root, nodes, parents, 0, (int)WT_ARRAY_LEN(nodes));
    int pick = (int)wt_rng_below(&rng, (uint64_t)n);
    s_mutate(&rng, parents[pick], nodes[pick]);
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    FILE *m = fopen(path, "w");
    fputs(out ? out : "", m);
    fclose(m);
    free(out);
    netsim_scenario_set *set = NULL;
    set = netsim_scenario_set_load(path);
    int rc = set ? WT_OK : wt_last_status();
    if (rc == WT_OK) {
      accepted++;
      for (int i = 0; i < netsim_scenario_set_count(set); i++) {
        assign_problem p;
        netsim_scenario_problem(netsim_scenario_set_get(set, i), &p);
        WT_TEST_ASSERT(assign_problem_validate(&p) == WT_OK, "iter %d: accepted but invalid: %s",
                       iter, wt_last_error());
      }
    } else {
      refused++;
      WT_TEST_ASSERT(strstr(wt_last_error(), path), "iter %d: message: %s", iter, wt_last_error());
    }
    netsim_scenario_set_destroy(&set);
  }
  WT_TEST_ASSERT(accepted > 0 && refused > 0, "mutations: %d accepted, %d refused", accepted,
                 refused);
  printf("mutations: %d accepted, %d refused\n", accepted, refused);
  remove(path);
  rmdir(dir);
  free(text);
}

int main(void) {
  test_back_compat();
  test_access_links();
  test_shipped();
  test_bad_files();
  test_optional_fields();
  test_random();
  test_jitter();
  test_mutations();
  return wt_test_finish("test_netsim_scenario");
}
