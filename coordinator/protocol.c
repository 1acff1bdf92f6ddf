/* protocol — the control message envelope: decode with every check, encode, the replay rule,
 * and the rule for the labels a peer registers with. */
#include "coordinator/protocol.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_names[COORD_CMD_COUNT] = {
    "register", "heartbeat", "bound", "result", "checkpoint", "leave",   "welcome",
    "refused",  "ack",       "epoch", "start",  "abort",      "standby", "finish",
    "shards",   "replicate", "shard_allow"};

const char *coordinator_cmd_name(coordinator_cmd cmd) {
  return (unsigned)cmd < COORD_CMD_COUNT ? s_names[cmd] : "?";
}

static int s_is_hex(const char *s, size_t n) {
  if (strlen(s) != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

static int s_check(const cJSON *root, coordinator_msg *out) {
  if (!cJSON_IsObject(root)) return wt_fail(WT_EINVAL, "control message is not a JSON object");
  /* A repeated envelope field would let two readers see two different messages. */
  static const char *const envelope[] = {"v", "cmd", "sid", "seq"};
  int seen[4] = {0};
  for (const cJSON *it = root->child; it; it = it->next)
    for (int k = 0; k < 4; k++)
      if (it->string && !strcmp(it->string, envelope[k]) && ++seen[k] > 1)
        return wt_fail(WT_EINVAL, "control message repeats the field \"%s\"", envelope[k]);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "v");
  if (!cJSON_IsNumber(v)) return wt_fail(WT_EINVAL, "control message has no version field \"v\"");
  if (v->valuedouble != COORD_PROTOCOL_VERSION)
    return wt_fail(WT_EMISMATCH,
                   "control message speaks protocol version %g; this build speaks %d "
                   "— run the same wantrain release on both ends",
                   v->valuedouble, COORD_PROTOCOL_VERSION);
  const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(root, "cmd");
  if (!cJSON_IsString(cmd)) return wt_fail(WT_EINVAL, "control message has no command \"cmd\"");
  int found = -1;
  for (int i = 0; i < COORD_CMD_COUNT; i++)
    if (!strcmp(cmd->valuestring, s_names[i])) found = i;
  if (found < 0)
    return wt_fail(WT_EINVAL, "control message has an unknown command \"%.40s\"", cmd->valuestring);
  const cJSON *sid = cJSON_GetObjectItemCaseSensitive(root, "sid");
  if (!cJSON_IsString(sid) || !s_is_hex(sid->valuestring, COORD_SID_CHARS))
    return wt_fail(WT_EINVAL, "control message \"%s\" has no session id of %d hex digits",
                   s_names[found], COORD_SID_CHARS);
  const cJSON *seq = cJSON_GetObjectItemCaseSensitive(root, "seq");
  if (!cJSON_IsNumber(seq) || !(seq->valuedouble >= 1) || seq->valuedouble > COORD_SEQ_MAX ||
      seq->valuedouble != floor(seq->valuedouble))
    return wt_fail(WT_EINVAL, "control message \"%s\" has no sequence number in [1, 10^15)",
                   s_names[found]);
  out->cmd = (coordinator_cmd)found;
  memcpy(out->sid, sid->valuestring, COORD_SID_CHARS + 1);
  out->seq = (uint64_t)seq->valuedouble;
  return WT_OK;
}

int coordinator_msg_decode(const void *data, size_t n, coordinator_msg *out) {
  memset(out, 0, sizeof *out);
  if (!data || n == 0) return wt_fail(WT_EINVAL, "empty control message");
  if (n > COORD_MSG_MAX)
    return wt_fail(WT_EINVAL, "control message of %zu bytes is over the %d-byte limit", n,
                   COORD_MSG_MAX);
  if (memchr(data, 0, n)) return wt_fail(WT_EINVAL, "control message holds a NUL byte: not text");
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(data, n, &end, 0);
  if (!root) return wt_fail(WT_EINVAL, "control message is not JSON (truncated or garbage)");
  while (end && end < (const char *)data + n && (*end == ' ' || *end == '\n' || *end == '\t'))
    end++;
  int rc = end == (const char *)data + n
               ? s_check(root, out)
               : wt_fail(WT_EINVAL, "control message has bytes after its JSON object");
  if (rc != WT_OK) {
    cJSON_Delete(root);
    memset(out, 0, sizeof *out);
    return rc;
  }
  out->body = root;
  return WT_OK;
}

void coordinator_msg_clear(coordinator_msg *m) {
  cJSON_Delete(m->body);
  memset(m, 0, sizeof *m);
}

char *coordinator_msg_encode(coordinator_cmd cmd, const char *sid, uint64_t seq,
                             const cJSON *body) {
  cJSON *o = body ? cJSON_Duplicate(body, 1) : cJSON_CreateObject();
  if (!o) {
    wt_fail(WT_ENOMEM, "cannot copy a control message body");
    return NULL;
  }
  cJSON_DeleteItemFromObjectCaseSensitive(o, "v");
  cJSON_DeleteItemFromObjectCaseSensitive(o, "cmd");
  cJSON_DeleteItemFromObjectCaseSensitive(o, "sid");
  cJSON_DeleteItemFromObjectCaseSensitive(o, "seq");
  cJSON_AddNumberToObject(o, "v", COORD_PROTOCOL_VERSION);
  cJSON_AddStringToObject(o, "cmd", coordinator_cmd_name(cmd));
  cJSON_AddStringToObject(o, "sid", sid);
  cJSON_AddNumberToObject(o, "seq", (double)seq);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text && strlen(text) > COORD_MSG_MAX) {
    wt_fail(WT_EINVAL, "control message \"%s\" of %zu bytes is over the %d-byte limit",
            coordinator_cmd_name(cmd), strlen(text), COORD_MSG_MAX);
    free(text);
    return NULL;
  }
  if (!text) wt_fail(WT_ENOMEM, "cannot serialise a control message");
  return text;
}

int coordinator_seq_accept(const char *current_sid, uint64_t *last, const char *sid, uint64_t seq) {
  if (!current_sid || strcmp(current_sid, sid))
    return wt_fail(WT_EINVAL,
                   "message of session %.8s… which is not the peer's current session "
                   "(stale or replayed from an earlier registration)",
                   sid);
  if (seq <= *last)
    return wt_fail(WT_EINVAL, "replayed or reordered message: sequence %llu, last accepted %llu",
                   (unsigned long long)seq, (unsigned long long)*last);
  *last = seq;
  return WT_OK;
}

void coordinator_sid_new(char sid[COORD_SID_CHARS + 1]) {
  unsigned char raw[COORD_SID_CHARS / 2];
  randombytes_buf(raw, sizeof raw);
  sodium_bin2hex(sid, COORD_SID_CHARS + 1, raw, sizeof raw);
}

double coordinator_field_num(const cJSON *o, const char *name, double def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : def;
}

int coordinator_field_int(const cJSON *o, const char *name, int def) {
  double v = coordinator_field_num(o, name, def);
  return (int)fmin(fmax(v, -1e9), 1e9);
}

const char *coordinator_field_str(const cJSON *o, const char *name) {
  const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
  return s ? s : "";
}

int coordinator_label_check(const char *name, const char *value, size_t max) {
  /* The value is quoted escaped and cut, so that the message itself is a safe label. */
  char head[33], quoted[4 * sizeof head];
  size_t n = strlen(value);
  snprintf(head, sizeof head, "%s", value);
  wt_text_escape(quoted, sizeof quoted, head);
  const char *more = n >= sizeof head ? "…" : "";
  if (n > max)
    return wt_fail(WT_EINVAL,
                   "%s \"%s%s\" is %zu bytes long; a %s is at most %zu bytes of printable UTF-8",
                   name, quoted, more, n, name, max);
  for (size_t i = 0; i < n;) {
    size_t len = wt_utf8_printable(value + i, n - i);
    if (!len)
      return wt_fail(WT_EINVAL,
                     "%s \"%s%s\" holds %s at byte %zu; a %s is printable UTF-8 text (no control "
                     "characters)",
                     name, quoted, more,
                     wt_utf8_seq(value + i, n - i) ? "a control character"
                                                   : "bytes that are not UTF-8",
                     i, name);
    i += len;
  }
  return WT_OK;
}

int coordinator_register_labels_check(const cJSON *body) {
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(body, "device");
  WT_CHECK(
      coordinator_label_check("region", coordinator_field_str(body, "region"), COORD_REGION_MAX));
  WT_CHECK(coordinator_label_check("host", coordinator_field_str(body, "host"), COORD_HOST_MAX));
  return coordinator_label_check("device kind", coordinator_field_str(dev, "kind"), COORD_KIND_MAX);
}
