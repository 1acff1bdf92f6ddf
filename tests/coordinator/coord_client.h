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

#endif
