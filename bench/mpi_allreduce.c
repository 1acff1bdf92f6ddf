/* mpi_allreduce — the reference for bench-collectives: MPI_Allreduce (float32 sum) at 1, 4, 16
 * and 64 MiB (up to argv[1]), timed as bench-collectives times its ring: from a barrier to the
 * barrier after the call, a warm-up and then argv[2] runs per size, median. Prints one JSON line:
 *   {"bench":"mpi_allreduce","procs":..,"runs":..,"allreduce":[{"mib":..,"s":..,"bus_GBps":..,
 *    "cpu_s":..}]}
 * cpu_s: all ranks' CPU seconds in the same interval (median), as bench-collectives reports its
 * own; Open MPI polls while it waits, so its ranks use CPU for as long as they run. 
 * Not part of the build (it needs an MPI): scripts/bench-collectives.sh compiles it with mpicc
 * and runs it with `mpirun --mca btl tcp,self`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int s_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double s_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double s_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, s_cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, p, max_mib = argc > 1 ? atoi(argv[1]) : 64, runs = argc > 2 ? atoi(argv[2]) : 5;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (runs < 1 || runs > 50) runs = 5;
  int sizes[5], nsizes = 0;
  for (int m = 1; m < max_mib && nsizes < 4; m *= 4) sizes[nsizes++] = m;
  sizes[nsizes++] = max_mib;
  if (me == 0)
    printf("{\"bench\":\"mpi_allreduce\",\"procs\":%d,\"runs\":%d,\"allreduce\":[", p, runs);
  for (int k = 0; k < nsizes; k++) {
    size_t n = (size_t)sizes[k] << 18;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000) * 1e-3f;
    double t[51], cpu[51];
    for (int r = 0; r <= runs; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime(), c0 = s_cpu_now();
      MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      t[r] = MPI_Wtime() - t0; /* t[0] is the warm-up */
      double mine = s_cpu_now() - c0;
      MPI_Reduce(&mine, &cpu[r], 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    double med = s_median(t + 1, runs), med_cpu = s_median(cpu + 1, runs);
    double bus = 2.0 * (p - 1) / p * (double)(n * sizeof(float)) / med / 1e9;
    if (me == 0)
      printf("%s{\"mib\":%d,\"s\":%.5f,\"bus_GBps\":%.4f,\"cpu_s\":%.5f}", k ? "," : "",
             sizes[k], med, bus, med_cpu);
    free(x);
    free(y);
  }
  if (me == 0) printf("]}\n");
  MPI_Finalize();
  return 0;
}
