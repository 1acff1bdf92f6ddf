/* solve — the solver entry points (stubs until the solvers land). */
#include "assign_internal.h"

int assign_solve(const assign_problem *p, assign_solver kind, const assign_budget *budget,
                 uint64_t seed, assign_plan **out, assign_stats *stats) {
  (void)p, (void)kind, (void)budget, (void)seed, (void)stats;
  *out = NULL;
  return wt_fail(WT_ENOTSUP, "assign: solvers are not implemented yet");
}

int assign_resolve(const assign_problem *p, const assign_plan *prev, const int *changed,
                   int n_changed, const assign_budget *budget, uint64_t seed, assign_plan **out,
                   assign_stats *stats) {
  (void)p, (void)prev, (void)changed, (void)n_changed, (void)budget, (void)seed, (void)stats;
  *out = NULL;
  return wt_fail(WT_ENOTSUP, "assign: resolve is not implemented yet");
}
