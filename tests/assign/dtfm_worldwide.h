/* dtfm_worldwide — the world-wide scenario of Yuan et al. 2022 as fixed tables, from
 * shared/scenarios/dtfm-2022.json (8 regions × 8 V100s: Oregon, Virginia, Ohio, Tokyo, Seoul,
 * London, Frankfurt, Ireland), so the assign test and benchmark need no file at run time.
 * Within a region latency and bandwidth are the diagonal entries.
 */
#ifndef WT_DTFM_WORLDWIDE_H
#define WT_DTFM_WORLDWIDE_H

/* latency ms one way, bandwidth Gbit/s per GPU; region r holds devices 8r..8r+7 */
static const double dtfm_ww_latency_ms[8][8] = {
    {5, 67, 49, 96, 124, 136, 143, 124},   {67, 5, 11, 143, 172, 76, 90, 67},
    {49, 11, 5, 130, 159, 86, 99, 77},     {96, 143, 130, 5, 34, 210, 223, 199},
    {124, 172, 159, 34, 5, 238, 235, 228}, {136, 76, 86, 210, 238, 5, 14, 12},
    {143, 90, 99, 223, 235, 14, 5, 24},    {124, 67, 77, 199, 228, 12, 24, 5}};
static const double dtfm_ww_bandwidth_gbps[8][8] = {
    {2, 0.79, 1.1, 0.523, 0.46, 0.42, 0.404, 0.482},
    {0.79, 2, 1.12, 0.524, 0.5, 1.16, 1.02, 1.05},
    {1.1, 1.12, 2, 0.694, 0.529, 1.05, 0.799, 1.14},
    {0.523, 0.524, 0.694, 2, 1.1, 0.366, 0.36, 0.465},
    {0.46, 0.5, 0.529, 1.1, 2, 0.342, 0.358, 0.335},
    {0.42, 1.16, 1.05, 0.366, 0.342, 2, 1.14, 1.09},
    {0.404, 1.02, 0.799, 0.36, 0.358, 1.14, 2, 1.08},
    {0.482, 1.05, 1.14, 0.465, 0.335, 1.09, 1.08, 2}};
#define DTFM_WW_C_DP 650000000.0
#define DTFM_WW_C_PP 471247000.0

/* Fills 64×64 latency (s) and bandwidth (bytes/s) matrices: Gbit/s → bytes/s is ·1e9/8. */
static inline void dtfm_ww_fill(double *latency_s, double *bandwidth_Bps) {
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 64; j++) {
      latency_s[i * 64 + j] = dtfm_ww_latency_ms[i / 8][j / 8] / 1000.0;
      bandwidth_Bps[i * 64 + j] = dtfm_ww_bandwidth_gbps[i / 8][j / 8] * 1e9 / 8;
    }
}

#endif
