/* coord_client — the raw CURVE client of the coordinator tests: a DEALER socket that speaks
 * the control protocol (coordinator/protocol.h) with a key pair of its own, as peerd would,
 * but message by message, so that a test can play honest, hostile or lying peers.
 *
 * Contract: the socket never lingers (a test's exit never waits on unsent messages); sends
 * and receives never block past the deadline given. Sockets are the caller's to zmq_close.
 *
 *   void *sock = coord_client_socket(zctx, coordinator_public_key(c), coordinator_endpoint(c),
 *                                    pub, sec);
 *   coord_client_send(sock, sid, ++seq, COORD_CMD_REGISTER, body);
 *   coordinator_msg m;
 *   if (coord_client_recv(sock, 3000, &m)) { ...; coordinator_msg_clear(&m); }
 *
 * A test that plays several peers keeps each one's session in a coord_client_peer:
 *
 *   coord_client_peer p;
 *   coord_client_peer_open(&p, zctx, coordinator_public_key(c), coordinator_endpoint(c), 1);
 *   coord_client_peer_sendf(&p, COORD_CMD_HEARTBEAT, "{\"epoch\":%d,\"step\":0}", epoch);
 *   cJSON *ack = coord_client_peer_expect(&p, COORD_CMD_ACK, 10000);
 */
#ifndef WT_TESTS_COORD_CLIENT_H
#define WT_TESTS_COORD_CLIENT_H

#include "coordinator/protocol.h"

#include <cjson/cJSON.h>
#include <stdint.h>

/* A DEALER in zctx with the key pair pub / sec (40-character Z85 each), connected over CURVE to
 * the server key at endpoint (a ZeroMQ endpoint, "tcp://src:0;host:port" binds the source).
 * Returns the socket, or NULL when it cannot be made or connected (nothing left open). */
void *coord_client_socket(void *zctx, const char *server_key, const char *endpoint, const char *pub,
                          const char *sec);

/* Sends one message of session sid, sequence seq, with body (not taken; NULL: none), without
 * blocking. Returns 0, or -1 when it could not be encoded or queued. */
int coord_client_send(void *sock, const char *sid, uint64_t seq, coordinator_cmd cmd,
                      const cJSON *body);

/* The same with the body as JSON text; text that does not parse fails the test. */
int coord_client_send_json(void *sock, const char *sid, uint64_t seq, coordinator_cmd cmd,
                           const char *json);

/* The next message within ms milliseconds, decoded into *m (the caller clears it). Returns 1,
 * or 0 when none came or it did not decode. */
int coord_client_recv(void *sock, long ms, coordinator_msg *m);

/* One raw peer: its key pair, its socket and its session (id and the last sequence number
 * sent). The socket is the caller's to zmq_close. */
typedef struct {
  char pub[41], sec[41]; /* Z85 */
  void *sock;
  char sid[COORD_SID_CHARS + 1];
  uint64_t seq;
} coord_client_peer;

/* Opens p's socket to server_key at endpoint in a new session (seq 0). With new_key, p gets a
 * new key pair first; without, it keeps its own (the same peer coming back). A socket that
 * cannot be made fails the test. */
void coord_client_peer_open(coord_client_peer *p, void *zctx, const char *server_key,
                            const char *endpoint, int new_key);

/* Sends cmd with body (not taken; NULL: none) as p's next sequence number. Returns 0, or -1 as
 * coord_client_send. */
int coord_client_peer_send(coord_client_peer *p, coordinator_cmd cmd, const cJSON *body);

/* The same with the body printed from fmt (JSON text, at most 4 KiB; text that does not parse
 * fails the test). */
int coord_client_peer_sendf(coord_client_peer *p, coordinator_cmd cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The body of the next message of command want within ms milliseconds, other commands skipped.
 * Returns it (the caller's to cJSON_Delete), or NULL when none came or it had no body. */
cJSON *coord_client_peer_expect(coord_client_peer *p, coordinator_cmd want, long ms);

#endif
