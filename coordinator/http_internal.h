/* http_internal — what the status server's files share: the dashboard page, generated at build
 * time from coordinator/dashboard.html by cmake/embed.cmake. */
#ifndef WT_COORDINATOR_HTTP_INTERNAL_H
#define WT_COORDINATOR_HTTP_INTERNAL_H

/* The page served at `/`, NUL-terminated. */
extern const char coordinator_http_page[];

#endif
