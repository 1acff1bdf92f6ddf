/* scenario_internal — the scenario struct, shared by the loader, the generator and the saver.
 * Not part of the public API: other modules go through netsim.h. */
#ifndef WT_NETSIM_SCENARIO_INTERNAL_H
#define WT_NETSIM_SCENARIO_INTERNAL_H

#include "netsim/netsim.h"

#define NETSIM_DEFAULT_TFLOPS 30.0
#define NETSIM_DEFAULT_HIDDEN 2048.0
#define NETSIM_DEFAULT_ACT_BYTES 2.0

struct netsim_scenario {
  char *name;
  int n_regions;
  char **region_names; /* n_regions; NULL entries get a "region K" label */
  int *region_size;    /* n_regions */
  int *region_of;      /* n devices */
  assign_network net;  /* owns its arrays */
  double *nic_Bps;     /* n */
  /* Access links (access.n_links == 0: none, every access unlimited): */
  assign_access access; /* points at the three arrays below */
  int *link_of;         /* n */
  double *up_Bps, *down_Bps;
  int d_pp, d_dp;
  double c_dp_bytes, c_pp_bytes;
  double hidden, act_value_bytes; /* to turn c_pp into tokens */
  double ref_flops;               /* FLOP/s of a speed-1 device */
  char label[32];                 /* scratch for region_name's fallback */
};

struct netsim_scenario_set {
  int count;
  netsim_scenario **items;
};

/* Allocates a scenario of n devices in k regions with every array zeroed. */
netsim_scenario *netsim_scenario_alloc(const char *name, int n, int k);

/* Copies access links into the scenario (link_of has one entry per device). */
void netsim_scenario_set_access(netsim_scenario *s, int n_links, const int *link_of,
                                const double *up_Bps, const double *down_Bps);

/* Default NIC = the device's fastest link (its own region's bandwidth in the paper's data). */
void netsim_scenario_default_nics(netsim_scenario *s);

#endif
