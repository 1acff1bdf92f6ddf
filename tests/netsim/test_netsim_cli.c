/* test_netsim_cli — the netsim program end to end: compare --json has every requested solver
 * with a valid assignment, simulate reproduces compare's number from the printed assignment and
 * writes a parseable trace, bad requests exit 2 with a message, and sweep writes its CSV. */
#include "common/common.h"
#include "common/testing.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <sys/wait.h>

static char s_dir[256];
static const char *s_env = ""; /* shell environment assignments before the program */

/* Runs `netsim ARGS` with stdout and stderr into files of the scratch folder; returns the exit
 * status and the captured stdout (caller frees). */
static int s_netsim(const char *args, char **out, char **err) {
  const char *bin = getenv("WT_BIN_DIR");
  char cmd[4096], out_path[512], err_path[512];
  snprintf(out_path, sizeof out_path, "%s/stdout", s_dir);
  snprintf(err_path, sizeof err_path, "%s/stderr", s_dir);
  snprintf(cmd, sizeof cmd, "%s'%s/netsim' %s > '%s' 2> '%s'", s_env, bin ? bin : "bin", args,
           out_path, err_path);
  int status = system(cmd);
  const char *paths[2] = {out_path, err_path};
  char **dst[2] = {out, err};
  for (int i = 0; i < 2; i++) {
    if (!dst[i]) continue;
    FILE *f = fopen(paths[i], "rb");
    WT_TEST_REQUIRE(f, "no %s", paths[i]);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    *dst[i] = calloc(1, (size_t)len + 1);
    size_t got = fread(*dst[i], 1, (size_t)len, f);
    (*dst[i])[got] = 0;
    fclose(f);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Checks an assignment object is 8 groups of 8 with every device once, pipelines its transpose. */
static void s_check_assignment(const cJSON *a, const char *solver) {
  const cJSON *groups = cJSON_GetObjectItem(a, "groups"),
              *pipes = cJSON_GetObjectItem(a, "pipelines");
  WT_TEST_REQUIRE(cJSON_GetArraySize(groups) == 8 && cJSON_GetArraySize(pipes) == 8, "%s shape",
                  solver);
  int seen[64] = {0};
  for (int s = 0; s < 8; s++)
    for (int r = 0; r < 8; r++) {
      int d = cJSON_GetArrayItem(cJSON_GetArrayItem(groups, s), r)->valueint;
      int e = cJSON_GetArrayItem(cJSON_GetArrayItem(pipes, r), s)->valueint;
      WT_TEST_ASSERT(d == e, "%s: groups[%d][%d] != pipelines[%d][%d]", solver, s, r, r, s);
      if (d >= 0 && d < 64) seen[d]++;
    }
  for (int d = 0; d < 64; d++)
    WT_TEST_ASSERT(seen[d] == 1, "%s: device %d x%d", solver, d, seen[d]);
}

static void s_write(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  WT_TEST_REQUIRE(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static void test_compare_and_simulate(void) {
  char *out = NULL, *err = NULL;
  int rc = s_netsim("compare --scenario worldwide_geo_distributed --solvers megatron,ga,random "
                    "--max-evals 300 --seed 3 --json",
                    &out, &err);
  WT_TEST_REQUIRE(rc == 0, "compare exit %d: %s", rc, err);
  cJSON *root = cJSON_Parse(out);
  WT_TEST_REQUIRE(root, "compare --json output is not JSON: %.200s", out);
  WT_TEST_ASSERT(
      !strcmp(cJSON_GetObjectItem(root, "scenario")->valuestring, "worldwide_geo_distributed"),
      "scenario name");
  const cJSON *results = cJSON_GetObjectItem(root, "results");
  const char *want[] = {"megatron", "ga", "random"};
  WT_TEST_REQUIRE(cJSON_GetArraySize(results) == 3, "3 results");
  const cJSON *ga = NULL;
  for (int i = 0; i < 3; i++) {
    const cJSON *r = cJSON_GetArrayItem(results, i);
    WT_TEST_ASSERT(!strcmp(cJSON_GetObjectItem(r, "solver")->valuestring, want[i]), "solver %d", i);
    const char *fields[] = {"comm_cost_s", "dp_s", "pp_s", "simulated_iteration_s", "solve_s"};
    for (size_t k = 0; k < WT_ARRAY_LEN(fields); k++)
      WT_TEST_ASSERT(cJSON_IsNumber(cJSON_GetObjectItem(r, fields[k])), "%s.%s", want[i],
                     fields[k]);
    WT_TEST_CLOSE(cJSON_GetObjectItem(r, "comm_cost_s")->valuedouble,
                  cJSON_GetObjectItem(r, "dp_s")->valuedouble +
                      cJSON_GetObjectItem(r, "pp_s")->valuedouble,
                  1e-6, 1e-9, "COMM = DATAP + 2 PIPELINEP");
    s_check_assignment(cJSON_GetObjectItem(r, "assignment"), want[i]);
    if (i == 1) ga = r;
  }
  /* The ga plan printed by compare, simulated alone, gives the same iteration time. */
  char path[512], trace[512], args[2048];
  snprintf(path, sizeof path, "%s/ga.json", s_dir);
  snprintf(trace, sizeof trace, "%s/trace.json", s_dir);
  char *text = cJSON_Print(cJSON_GetObjectItem(ga, "assignment"));
  s_write(path, text);
  free(text);
  snprintf(args, sizeof args,
           "simulate --scenario worldwide_geo_distributed --assignment '%s' "
           "--schedule 1f1b --micro-batches 8 --trace '%s' --json",
           path, trace);
  free(out);
  free(err);
  rc = s_netsim(args, &out, &err);
  WT_TEST_REQUIRE(rc == 0, "simulate exit %d: %s", rc, err);
  cJSON *sim = cJSON_Parse(out);
  WT_TEST_REQUIRE(sim, "simulate --json is not JSON");
  WT_TEST_CLOSE(cJSON_GetObjectItem(sim, "simulated_iteration_s")->valuedouble,
                cJSON_GetObjectItem(ga, "simulated_iteration_s")->valuedouble, 1e-9, 1e-9,
                "simulate agrees with compare");
  FILE *f = fopen(trace, "rb");
  WT_TEST_REQUIRE(f, "no trace written");
  fclose(f);
  cJSON_Delete(sim);
  cJSON_Delete(root);
  free(out);
  free(err);
}

/* --no-simulate prices the same plans without simulating them; --sim-limit-s stops a simulation
 * that runs past it with exit 1 and a message naming the flag. */
static void test_no_simulate_and_limit(void) {
  char *out = NULL, *err = NULL, *out2 = NULL;
  const char *args = "compare --scenario worldwide_geo_distributed --solvers greedy,ga "
                     "--max-evals 300 --seed 3 --json";
  int rc = s_netsim(args, &out, &err);
  WT_TEST_REQUIRE(rc == 0, "compare exit %d: %s", rc, err);
  free(err);
  char no_sim[512];
  snprintf(no_sim, sizeof no_sim, "%s --no-simulate", args);
  rc = s_netsim(no_sim, &out2, &err);
  WT_TEST_REQUIRE(rc == 0, "compare --no-simulate exit %d: %s", rc, err);
  cJSON *a = cJSON_Parse(out), *b = cJSON_Parse(out2);
  WT_TEST_REQUIRE(a && b, "not JSON");
  for (int i = 0; i < 2; i++) {
    const cJSON *ra = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "results"), i),
                *rb = cJSON_GetArrayItem(cJSON_GetObjectItem(b, "results"), i);
    WT_TEST_REQUIRE(ra && rb, "result %d", i);
    WT_TEST_ASSERT(cJSON_GetObjectItem(rb, "simulated_iteration_s") == NULL, "not simulated");
    WT_TEST_CLOSE(cJSON_GetObjectItem(rb, "comm_cost_s")->valuedouble,
                  cJSON_GetObjectItem(ra, "comm_cost_s")->valuedouble, 0, 1e-12, "same plan cost");
    WT_TEST_CLOSE(cJSON_GetObjectItem(rb, "pipelinep_s")->valuedouble * 2,
                  cJSON_GetObjectItem(rb, "pp_s")->valuedouble, 0, 1e-12, "pp_s = 2·PIPELINEP");
  }
  cJSON_Delete(a);
  cJSON_Delete(b);
  free(out);
  free(out2);
  free(err);
  rc = s_netsim("compare --scenario worldwide_geo_distributed --solvers megatron "
                "--sim-limit-s 1e-9",
                NULL, &err);
  WT_TEST_ASSERT(rc == 1 && strstr(err, "--sim-limit-s") && strstr(err, "--no-simulate"),
                 "limit: exit %d: %s", rc, err);
  free(err);
}

static void test_refusals(void) {
  char path[512], args[1024], *err = NULL;
  snprintf(path, sizeof path, "%s/bad.json", s_dir);
  s_write(path, "{\"groups\": [[0,1,2,3,4,5,6,7],[0,9,10,11,12,13,14,15],[16,17,18,19,20,21,22,23],"
                "[24,25,26,27,28,29,30,31],[32,33,34,35,36,37,38,39],[40,41,42,43,44,45,46,47],"
                "[48,49,50,51,52,53,54,55],[56,57,58,59,60,61,62,63]]}");
  snprintf(args, sizeof args, "simulate --scenario worldwide_geo_distributed --assignment '%s'",
           path);
  int rc = s_netsim(args, NULL, &err);
  WT_TEST_ASSERT(rc == 2, "duplicate device: exit %d", rc);
  WT_TEST_ASSERT(strstr(err, "device 0") && strstr(err, path), "message: %s", err);
  free(err);
  rc = s_netsim("compare --scenario worldwide_geo_distributed --solvers exact", NULL, &err);
  WT_TEST_ASSERT(rc == 2 && strstr(err, "12"), "exact on 64 devices: exit %d: %s", rc, err);
  free(err);
  rc = s_netsim("compare --scenario nowhere", NULL, &err);
  WT_TEST_ASSERT(rc == 2 && strstr(err, "nowhere"), "unknown scenario: exit %d: %s", rc, err);
  free(err);
  rc = s_netsim("compare --scenario worldwide_geo_distributed --micro-batches 0", NULL, &err);
  WT_TEST_ASSERT(rc == 2 && strstr(err, "--micro-batches"), "bad value: exit %d: %s", rc, err);
  free(err);
  rc = s_netsim("sweep --colour blue", NULL, &err);
  WT_TEST_ASSERT(rc == 2 && strstr(err, "--colour"), "unknown flag: exit %d: %s", rc, err);
  free(err);
  rc = s_netsim("fly", NULL, &err);
  WT_TEST_ASSERT(rc == 2, "unknown command: exit %d", rc);
  free(err);
}

/* A small sweep: two 8-device scenarios plus one random 2×4 world, three solvers incl. exact. */
static void test_sweep(void) {
  char file[512], out_dir[512], args[2048], *out = NULL, *err = NULL;
  snprintf(file, sizeof file, "%s/small.json", s_dir);
  snprintf(out_dir, sizeof out_dir, "%s/sweep", s_dir);
  s_write(file, "{\"cost_model_constants\":{\"c_dp_bytes_per_stage\":1e8,\"c_pp_bytes_per_cut\":"
                "5e7,\"d_pp\":2,\"d_dp\":4},\"scenarios\":["
                "{\"name\":\"two_sites\",\"gpus_per_region\":[4,4],\"latency_ms\":[[1,40],[40,1]],"
                "\"bandwidth_gbps\":[[10,0.5],[0.5,10]]},"
                "{\"name\":\"dc\",\"groups\":[2,2,2,2],\"intra_gbps\":100,\"inter_gbps\":5,"
                "\"latency_ms\":0}]}");
  snprintf(args, sizeof args,
           "sweep --scenario-file '%s' --random 1 --regions 2 "
           "--gpus-per-region 4 --solvers megatron,ga,exact --max-evals 200 --out '%s'",
           file, out_dir);
  int rc = s_netsim(args, &out, &err);
  WT_TEST_REQUIRE(rc == 0, "sweep exit %d: %s", rc, err);
  WT_TEST_ASSERT(strstr(err, "[9/9]") != NULL, "progress printed: %s", err);
  char csv[600], line[1024];
  snprintf(csv, sizeof csv, "%s/sweep.csv", out_dir);
  FILE *f = fopen(csv, "r");
  WT_TEST_REQUIRE(f, "no %s", csv);
  int rows = 0, exact_le_ga = 1;
  double ga_cost = 0;
  while (fgets(line, sizeof line, f)) {
    rows++;
    char scen[128], solver[32];
    double cost;
    if (sscanf(line, "%127[^,],%31[^,],%*d,%lf", scen, solver, &cost) == 3) {
      if (!strcmp(solver, "ga")) ga_cost = cost;
      /* exact follows ga in each scenario's rows and can only be as good or better */
      if (!strcmp(solver, "exact") && cost > ga_cost + 1e-9) exact_le_ga = 0;
    }
  }
  fclose(f);
  WT_TEST_ASSERT(rows == 1 + 3 * 3, "sweep.csv has %d lines", rows);
  WT_TEST_ASSERT(exact_le_ga, "exact worse than ga somewhere");
  snprintf(csv, sizeof csv, "%s/speedup.csv", out_dir);
  f = fopen(csv, "r");
  WT_TEST_ASSERT(f != NULL, "no speedup.csv");
  if (f) fclose(f);
  free(out);
  free(err);
  /* Without gnuplot on PATH the sweep still succeeds, says so and leaves the script. */
  snprintf(out_dir, sizeof out_dir, "%s/sweep-nognuplot", s_dir);
  snprintf(args, sizeof args,
           "sweep --scenario-file '%s' --solvers megatron,ga --max-evals 100 "
           "--out '%s'",
           file, out_dir);
  s_env = "PATH=/nonexistent ";
  rc = s_netsim(args, &out, &err);
  s_env = "";
  WT_TEST_ASSERT(rc == 0, "sweep without gnuplot: exit %d: %s", rc, err);
  WT_TEST_ASSERT(strstr(out, "gnuplot did not run") && strstr(out, "sweep.gp"), "says so: %s", out);
  snprintf(csv, sizeof csv, "%s/sweep.gp", out_dir);
  f = fopen(csv, "r");
  WT_TEST_ASSERT(f != NULL, "no sweep.gp");
  if (f) fclose(f);
  snprintf(csv, sizeof csv, "%s/sweep.png", out_dir);
  f = fopen(csv, "r");
  WT_TEST_ASSERT(f == NULL, "a chart appeared without gnuplot");
  if (f) fclose(f);
  free(out);
  free(err);
}

/* The shipped access-link worlds through the CLI: --dp-algo auto prices them with the ring, ga
 * beats the megatron-like layout on two_homes, every plan carries its rings, and simulating the
 * printed ga plan (rings included) gives compare's iteration time. */
static void test_access_links(void) {
  char file[1024], args[2048], path[512];
  snprintf(file, sizeof file, "%s/netsim/scenarios/access-links.json", wt_test_source_dir());
  snprintf(args, sizeof args,
           "compare --scenario-file '%s' --scenario two_homes --solvers megatron,ga "
           "--max-evals 2000 --json",
           file);
  char *out = NULL, *err = NULL;
  int rc = s_netsim(args, &out, &err);
  WT_TEST_REQUIRE(rc == 0, "compare exit %d: %s", rc, err);
  cJSON *root = cJSON_Parse(out);
  WT_TEST_REQUIRE(root, "not JSON: %.200s", out);
  const cJSON *res = cJSON_GetObjectItem(root, "results");
  const cJSON *meg = cJSON_GetArrayItem(res, 0), *ga = cJSON_GetArrayItem(res, 1);
  WT_TEST_REQUIRE(meg && ga, "two results");
  double meg_s = cJSON_GetObjectItem(meg, "comm_cost_s")->valuedouble;
  double ga_s = cJSON_GetObjectItem(ga, "comm_cost_s")->valuedouble;
  WT_TEST_ASSERT(ga_s < 0.6 * meg_s, "ga %.3f s vs megatron %.3f s on shared uplinks", ga_s, meg_s);
  const cJSON *rings = cJSON_GetObjectItem(cJSON_GetObjectItem(ga, "assignment"), "rings");
  WT_TEST_ASSERT(cJSON_GetArraySize(rings) == 2 &&
                     cJSON_GetArraySize(cJSON_GetArrayItem(rings, 0)) == 4,
                 "the plan's rings are printed");
  snprintf(path, sizeof path, "%s/ga-access.json", s_dir);
  char *text = cJSON_Print(cJSON_GetObjectItem(ga, "assignment"));
  s_write(path, text);
  free(text);
  snprintf(args, sizeof args,
           "simulate --scenario-file '%s' --scenario two_homes --assignment '%s' --json", file,
           path);
  free(out);
  free(err);
  rc = s_netsim(args, &out, &err);
  WT_TEST_REQUIRE(rc == 0, "simulate exit %d: %s", rc, err);
  cJSON *sim = cJSON_Parse(out);
  WT_TEST_REQUIRE(sim, "simulate --json is not JSON");
  WT_TEST_CLOSE(cJSON_GetObjectItem(sim, "simulated_iteration_s")->valuedouble,
                cJSON_GetObjectItem(ga, "simulated_iteration_s")->valuedouble, 1e-9, 1e-9,
                "simulate agrees with compare");
  cJSON_Delete(sim);
  cJSON_Delete(root);
  free(out);
  free(err);
}

int main(void) {
  wt_test_tmpdir(s_dir, sizeof s_dir);
  test_compare_and_simulate();
  test_access_links();
  test_refusals();
  test_no_simulate_and_limit();
  test_sweep();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_dir);
  if (!wt_test_failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", s_dir);
  return wt_test_finish("test_netsim_cli");
}
