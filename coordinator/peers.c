/* peers — the coordinator's peer table: cfg.max_peers slots allocated at start, an index of
 * the slots sorted by key (every message is looked up by its sender's key, so a lookup must not
 * cost O(n)), reaping of the slots of peers gone for good, and each peer's probed links, kept
 * with the peer and keyed by the other end's id (ids are never reused, so a link survives the
 * compaction of the table and no n² matrix is needed). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct coord_key_slot {
  char key[COORD_KEY_LEN + 1];
  int slot;
};

int coord_peers_init(coordinator *c) {
  const size_t n = (size_t)c->cfg.max_peers;
  c->peers = calloc(n, sizeof *c->peers);
  c->by_key = calloc(n, sizeof *c->by_key);
  c->live = calloc(n, sizeof *c->live);
  c->dirty = calloc(n, sizeof *c->dirty);
  if (!c->peers || !c->by_key || !c->live || !c->dirty)
    return wt_fail(WT_ENOMEM, "cannot allocate a peer table of %d slots; lower --max-peers",
                   c->cfg.max_peers);
  return WT_OK;
}

void coord_peers_free(coordinator *c) {
  for (int i = 0; c->peers && i < c->n_peers; i++) free(c->peers[i].links);
  free(c->peers);
  free(c->by_key);
  free(c->live);
  free(c->dirty);
  c->peers = NULL, c->by_key = NULL, c->live = NULL, c->dirty = NULL;
}

/* The first index entry whose key is not below key (n_peers when none). */
static int s_lower_bound(const coordinator *c, const char *key) {
  int lo = 0, hi = c->n_peers;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (strcmp(c->by_key[mid].key, key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int coord_peer_find(const coordinator *c, const char *key) {
  int k = s_lower_bound(c, key);
  return k < c->n_peers && !strcmp(c->by_key[k].key, key) ? c->by_key[k].slot : -1;
}

static int s_cmp_key(const void *a, const void *b) {
  return strcmp(((const struct coord_key_slot *)a)->key, ((const struct coord_key_slot *)b)->key);
}

void coord_peers_reindex(coordinator *c) {
  for (int i = 0; i < c->n_peers; i++) {
    memcpy(c->by_key[i].key, c->peers[i].key, sizeof c->by_key[i].key);
    c->by_key[i].slot = i;
  }
  qsort(c->by_key, (size_t)c->n_peers, sizeof *c->by_key, s_cmp_key);
}

/* Whether slot i is in use: a live peer, a member of the epoch, a world rank of the last plan
 * (a standby takes it over by that slot) or the standby chosen for promotion. A peer gone for
 * good (it left, or was lost and holds none of these) is only history, kept in the database. */
static int s_slot_needed(const coordinator *c, int i) {
  if (c->peers[i].status == PEER_LIVE || c->peers[i].epoch_rank >= 0 || c->promote == i) return 1;
  for (int r = 0; r < c->n_members; r++)
    if (c->members[r] == i) return 1;
  for (int r = 0; r < c->n_plan; r++)
    if (c->plan_members[r] == i) return 1;
  return 0;
}

static void s_remap(const int *map, int *list, int n) {
  for (int k = 0; k < n; k++) list[k] = map[list[k]];
}

static int s_cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Drops the links to peers no longer in the table: a peer that comes back loads its own from
 * the database (coord_state_load_links). ids: the table's ids, sorted. */
static void s_prune_links(coordinator *c, const int *ids) {
  for (int i = 0; i < c->n_peers; i++) {
    coord_peer *p = &c->peers[i];
    int kept = 0;
    for (int k = 0; k < p->n_links; k++)
      if (bsearch(&p->links[k].peer_id, ids, (size_t)c->n_peers, sizeof *ids, s_cmp_int))
        p->links[kept++] = p->links[k];
    p->n_links = kept;
  }
}

/* Frees the slots of peers gone for good: the table is compacted in order and every slot index
 * the daemon keeps (members, plan, promotion, the key index) follows its peer. */
static void s_reap(coordinator *c) {
  const int n_old = c->n_peers;
  int *map = wt_xmalloc(sizeof(int) * (size_t)n_old), n = 0;
  for (int i = 0; i < n_old; i++) map[i] = s_slot_needed(c, i) ? n++ : -1;
  if (n < n_old) {
    for (int i = 0; i < n_old; i++) {
      if (map[i] < 0) free(c->peers[i].links);
      /* map[i] <= i: moving forward in order never overwrites what is still to be read */
      else if (map[i] != i)
        c->peers[map[i]] = c->peers[i];
    }
    s_remap(map, c->members, c->n_members);
    s_remap(map, c->plan_members, c->n_plan);
    if (c->promote >= 0) c->promote = map[c->promote];
    c->n_peers = n;
    coord_peers_reindex(c);
    int *ids = wt_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) ids[i] = c->peers[i].id;
    qsort(ids, (size_t)n, sizeof *ids, s_cmp_int);
    s_prune_links(c, ids);
    free(ids);
    WT_INFO("coordinator: freed the slots of %d peers gone for good (%d in use)", n_old - n, n);
  }
  free(map);
}

int coord_peers_make_room(coordinator *c) {
  if (c->n_peers == c->cfg.max_peers) s_reap(c);
  return c->n_peers < c->cfg.max_peers;
}

int coord_peer_add(coordinator *c, const char *key, int id) {
  assert(c->n_peers < c->cfg.max_peers);
  int i = c->n_peers, k = s_lower_bound(c, key);
  memmove(&c->by_key[k + 1], &c->by_key[k], sizeof *c->by_key * (size_t)(c->n_peers - k));
  snprintf(c->by_key[k].key, sizeof c->by_key[k].key, "%s", key);
  c->by_key[k].slot = i;
  c->n_peers++;
  coord_peer *p = &c->peers[i];
  memset(p, 0, sizeof *p);
  p->id = id;
  snprintf(p->key, sizeof p->key, "%s", key);
  p->epoch_rank = -1;
  return i;
}

/* The position of the link to peer id in p's sorted list (where it would go when absent). */
static int s_link_at(const coord_peer *p, int id) {
  int lo = 0, hi = p->n_links;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (p->links[mid].peer_id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int coord_link_get(const coordinator *c, int a, int b, double *lat, double *bw) {
  const coord_peer *p = &c->peers[a];
  int id = c->peers[b].id, k = s_link_at(p, id);
  if (k == p->n_links || p->links[k].peer_id != id) return 0;
  *lat = p->links[k].latency_s, *bw = p->links[k].bandwidth_Bps;
  return 1;
}

void coord_link_set(coordinator *c, int a, int b, double lat, double bw) {
  coord_peer *p = &c->peers[a];
  int id = c->peers[b].id, k = s_link_at(p, id);
  if (k == p->n_links || p->links[k].peer_id != id) {
    if (p->n_links == p->cap_links) {
      p->cap_links = p->cap_links ? 2 * p->cap_links : 8;
      p->links = wt_xrealloc(p->links, (size_t)p->cap_links, sizeof *p->links);
    }
    memmove(&p->links[k + 1], &p->links[k], sizeof *p->links * (size_t)(p->n_links - k));
    p->n_links++;
  }
  p->links[k] = (coord_link){.peer_id = id, .latency_s = lat, .bandwidth_Bps = bw};
}
