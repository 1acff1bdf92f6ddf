/* send — the one path by which the coordinator sends a message to a peer: encoded with the
 * next sequence number, on the ROUTER, never blocking (a peer that cannot take it loses it and
 * is left to its deadlines). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

void coord_send(coordinator *c, coord_peer *p, coordinator_cmd cmd, const cJSON *body) {
  if (!p->route_len) return;
  char *text = coordinator_msg_encode(cmd, c->sid, ++c->out_seq, body);
  if (!text) {
    WT_ERROR("coordinator: cannot send %s to peer %d: %s", coordinator_cmd_name(cmd), p->id,
             wt_last_error());
    return;
  }
  if (zmq_send(c->router, p->route, p->route_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
      zmq_send(c->router, text, strlen(text), ZMQ_DONTWAIT) < 0)
    WT_DEBUG("coordinator: %s to peer %d not sent: %s", coordinator_cmd_name(cmd), p->id,
             zmq_strerror(errno));
  free(text);
}
